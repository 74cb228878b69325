"""The ACP agent driven by the SDK's client side, over the in-process fake OpenCode."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import acp
import pytest
from acp import RequestError, text_block
from acp.schema import PromptResponse

from adapter import OpenCodeAdapter
from adapter.testing import FakeOpenCodeServer, caught_up
from adapter.testing.fake import Fail, Hang, Permission, Question, Task, Text, Tool
from tests.acp.client_side import Harness, all_said, connected
from tests.adapter_support import Recorder, busy_branch


def prompt_task(h: Harness, sid: str, text: str) -> asyncio.Task[PromptResponse]:
    return asyncio.create_task(h.conn.prompt(session_id=sid, prompt=[text_block(text)]))


async def hanging_prompt(
    h: Harness, fake: FakeOpenCodeServer
) -> tuple[str, asyncio.Task[PromptResponse]]:
    """A new session and its prompt, running (its OpenCode session busy) until stopped."""
    fake.script("slow", [Hang()])
    sid = await h.new_session()
    running = prompt_task(h, sid, "[[script:slow]]")
    await fake.wait_until(lambda: fake.sessions[sid].busy)
    return sid, running


async def test_initialize_announces_load_and_the_prompt_content_opencode_takes(
    acp_client: Harness,
) -> None:
    response = await acp_client.conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
    assert response.protocol_version == acp.PROTOCOL_VERSION
    caps = response.agent_capabilities
    assert caps is not None and caps.load_session is True
    prompt = caps.prompt_capabilities
    assert prompt is not None and prompt.image and prompt.embedded_context and not prompt.audio
    assert response.agent_info is not None and response.agent_info.name == "opencode-tree"


async def test_a_turn_streams_its_tool_calls_and_answer_then_ends_end_turn(
    acp_client: Harness, fake: FakeOpenCodeServer
) -> None:
    fake.script(
        "work", [Tool("bash", {"command": "echo hi"}, output="hi\n"), Text("all done here")]
    )
    sid = await acp_client.new_session("/tmp/project")
    assert fake.sessions[sid].directory == "/tmp/project"  # the root runs in cwd
    response = await acp_client.conn.prompt(
        session_id=sid, prompt=[text_block("go [[script:work]]")]
    )
    assert response.stop_reason == "end_turn"
    client = acp_client.client
    assert client.text() == "all done here"
    [call] = client.calls().values()
    assert call["kind"] == "execute" and call["status"] == "completed"
    assert call["raw_output"] == "hi\n"
    assert {s for s, _ in client.updates} == {sid}
    kinds = client.kinds()
    assert kinds.index("tool_call") < kinds.index("agent_message_chunk")


async def test_cancel_of_a_nested_tree_answers_cancelled_after_the_whole_tree_stopped(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, acp_client: Harness
) -> None:
    rec = Recorder(oc)
    fake.script("grandchild", [Tool("read", {"filePath": "/tmp/a"}, output="a"), Hang()])
    fake.script("child", [Task("deeper", "grandchild")])
    fake.script(
        "root",
        [
            Tool("bash", {"command": "echo hi"}, output="hi\n"),
            Text("so far"),
            Task("explore", "child"),
        ],
    )
    sid = await acp_client.new_session()
    running = prompt_task(acp_client, sid, "go [[script:root]]")
    await rec.wait_for("item.completed", lambda e: e.tool == "read")
    await acp_client.conn.cancel(session_id=sid)
    response = await asyncio.wait_for(running, 10)
    assert response.stop_reason == "cancelled"
    # The whole tree was idle when the prompt answered.
    assert len(fake.sessions) == 3 and not any(s.busy for s in fake.sessions.values())
    await all_said(acp_client, fake, oc)
    assert acp_client.updates_after_answer(sid) == []
    calls = acp_client.client.calls()
    # Every call the client saw has ended: the interrupted ones as failed, before the answer.
    assert all(c["status"] in ("completed", "failed") for c in calls.values()), calls
    titles = {c["title"]: c for c in calls.values()}
    assert titles["explore > deeper > read /tmp/a"]["status"] == "completed"
    explore = titles["task explore"]
    assert explore["status"] == "failed"
    progress = explore["content"][0].content.text
    assert "- task deeper [failed]" in progress and "  - read /tmp/a [completed]" in progress
    assert acp_client.client.text() == "so far"
    await rec.close()


async def test_every_cancel_answers_cancelled_even_when_the_turn_had_just_finished(
    oc: OpenCodeAdapter, acp_client: Harness, fake: FakeOpenCodeServer
) -> None:
    fake.script("quick", [Text("done")])
    sid = await acp_client.new_session()
    for _ in range(5):
        running = prompt_task(acp_client, sid, "go [[script:quick]]")
        await asyncio.sleep(0)
        await acp_client.conn.cancel(session_id=sid)
        assert (await asyncio.wait_for(running, 10)).stop_reason == "cancelled"
        await all_said(acp_client, fake, oc)
        assert acp_client.updates_after_answer(sid) == []
    assert not any(s.busy for s in fake.sessions.values())


async def test_a_grandchilds_permission_reaches_the_client_and_allowing_it_finishes_the_turn(
    acp_client: Harness, fake: FakeOpenCodeServer
) -> None:
    fake.script("grandchild", [Permission("bash", patterns=("echo deep",)), Text("deep done")])
    fake.script("child", [Task("deeper", "grandchild"), Text("child done")])
    fake.script("root", [Task("explore", "child"), Text("root done")])
    sid = await acp_client.new_session()
    running = prompt_task(acp_client, sid, "go [[script:root]]")
    ask = await asyncio.wait_for(acp_client.client.asks.get(), 5)
    assert ask.session_id == sid
    assert ask.tool_call.title == "explore > deeper > bash: echo deep"
    assert [o.kind for o in ask.options] == ["allow_once", "allow_always", "reject_once"]
    # The request names the call the client was shown.
    assert ask.tool_call.tool_call_id in acp_client.client.calls()
    ask.choose("accept")
    assert (await asyncio.wait_for(running, 10)).stop_reason == "end_turn"
    calls = acp_client.client.calls()
    bash = calls[ask.tool_call.tool_call_id]
    assert bash["status"] == "completed" and bash["title"].startswith("explore > deeper > ")
    explore = next(c for c in calls.values() if c["title"] == "task explore")
    progress = explore["content"][0].content.text
    assert "- task deeper [completed]" in progress and "  - bash echo deep [completed]" in progress
    assert "child done" in progress  # the subagent's answer, as the task's summary
    assert acp_client.client.text() == "root done"


async def test_cancel_while_a_childs_permission_is_pending_withdraws_it(
    oc: OpenCodeAdapter, acp_client: Harness, fake: FakeOpenCodeServer
) -> None:
    rec = Recorder(oc)
    fake.script("child", [Permission("bash", patterns=("rm -rf build",))])
    fake.script("root", [Task("explore", "child")])
    sid = await acp_client.new_session()
    running = prompt_task(acp_client, sid, "go [[script:root]]")
    ask = await asyncio.wait_for(acp_client.client.asks.get(), 5)
    await acp_client.conn.cancel(session_id=sid)
    assert (await asyncio.wait_for(running, 10)).stop_reason == "cancelled"
    resolved = await rec.wait_for("request.resolved")
    assert resolved.decision == "cancelled"
    # The stop itself rejected the request on the server (the adapter's withdrawal).
    replies = [r for r in fake.requests if r.path.startswith("/permission/")]
    assert len(replies) == 1
    # The client answers late (as a client that missed the cancel would): ignored.
    ask.choose("accept")
    await all_said(acp_client, fake, oc)
    assert [r for r in fake.requests if r.path.startswith("/permission/")] == replies
    assert not any(s.busy for s in fake.sessions.values())
    assert acp_client.updates_after_answer(sid) == []
    await rec.close()


async def test_protocol_errors_are_json_rpc_errors_and_the_agent_goes_on(
    acp_client: Harness, fake: FakeOpenCodeServer
) -> None:
    conn = acp_client.conn
    await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
    with pytest.raises(RequestError, match="unknown session") as unknown:
        await conn.prompt(session_id="ses_nope", prompt=[text_block("hi")])
    assert unknown.value.code == -32602
    with pytest.raises(RequestError, match="absolute path"):
        await conn.new_session(cwd="relative/dir", mcp_servers=[])
    with pytest.raises(RequestError) as malformed:
        await acp_client.raw_request("session/prompt", {"sessionId": 5})
    assert malformed.value.code == -32602
    await conn.cancel(session_id="ses_nope")  # a notification: nothing to answer, no crash
    with pytest.raises(RequestError, match="not found") as missing:
        await conn.load_session(
            cwd="/tmp", session_id="ses_00000000000000000000000000", mcp_servers=[]
        )
    assert missing.value.code == -32002
    fake.script("slow", [Hang()])
    sid = (await conn.new_session(cwd="/tmp", mcp_servers=[])).session_id
    running = prompt_task(acp_client, sid, "go [[script:slow]]")
    await fake.wait_until(lambda: fake.sessions[sid].busy)
    with pytest.raises(RequestError, match="already has a prompt running") as busy:
        await conn.prompt(session_id=sid, prompt=[text_block("more")])
    assert busy.value.code == -32600
    with pytest.raises(RequestError, match="empty"):
        await conn.prompt(session_id=sid, prompt=[])
    await conn.cancel(session_id=sid)
    assert (await asyncio.wait_for(running, 10)).stop_reason == "cancelled"


async def test_a_failed_turn_answers_a_json_rpc_error_with_opencodes_message(
    acp_client: Harness, fake: FakeOpenCodeServer
) -> None:
    fake.script("broken", [Fail(message="model is down")])
    sid = await acp_client.new_session()
    with pytest.raises(RequestError, match=r"the turn failed: .*model is down"):
        await acp_client.conn.prompt(session_id=sid, prompt=[text_block("go [[script:broken]]")])
    fake.script("fine", [Text("back")])
    response = await acp_client.conn.prompt(session_id=sid, prompt=[text_block("[[script:fine]]")])
    assert response.stop_reason == "end_turn"


async def test_load_replays_the_history_and_the_session_goes_on(
    fake: FakeOpenCodeServer, acp_client: Harness
) -> None:
    fake.script("work", [Tool("bash", {"command": "ls"}, output="a\n"), Text("listed")])
    sid = await acp_client.new_session("/tmp/project")
    await acp_client.conn.prompt(session_id=sid, prompt=[text_block("list it [[script:work]]")])
    # Another agent process (its own adapter) loads the session.
    async with (
        OpenCodeAdapter(fake.base_url, transport=fake.transport) as other,
        connected(other) as second,
    ):
        await second.conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        await second.conn.load_session(cwd="/tmp/project", session_id=sid, mcp_servers=[])
        replayed = second.client
        replayed_kinds = [k for k in replayed.kinds() if k != "available_commands_update"]
        assert replayed_kinds == ["user_message_chunk", "tool_call", "agent_message_chunk"]
        assert replayed.updates[0][1].content.text == "list it [[script:work]]"
        [call] = replayed.calls().values()
        assert call["status"] == "completed" and call["kind"] == "execute"
        assert replayed.text() == "listed"
        fake.script("more", [Text("again")])
        response = await second.conn.prompt(session_id=sid, prompt=[text_block("[[script:more]]")])
        assert response.stop_reason == "end_turn" and replayed.text() == "listedagain"


COLOR = {
    "question": "Which colour?",
    "header": "Colour",
    "options": [{"label": "red", "description": ""}, {"label": "blue", "description": ""}],
}


async def test_a_question_is_asked_with_its_options_and_the_choice_is_the_answer(
    oc: OpenCodeAdapter, acp_client: Harness, fake: FakeOpenCodeServer
) -> None:
    rec = Recorder(oc)
    fake.script("child", [Question([COLOR]), Text("painted")])
    fake.script("root", [Task("paint", "child"), Text("done")])
    sid = await acp_client.new_session()
    running = prompt_task(acp_client, sid, "go [[script:root]]")
    ask = await asyncio.wait_for(acp_client.client.asks.get(), 5)
    assert ask.tool_call.title == "paint > Which colour?"
    assert [o.name for o in ask.options] == ["red", "blue", "Dismiss"]
    ask.choose(ask.options[1].option_id)
    assert (await asyncio.wait_for(running, 10)).stop_reason == "end_turn"
    resolved = await rec.wait_for("user-input.resolved")
    assert resolved.decision == "answered" and resolved.answers == (("blue",),)
    await rec.close()


async def test_a_question_acp_cannot_carry_is_declined_and_the_client_told(
    oc: OpenCodeAdapter, acp_client: Harness, fake: FakeOpenCodeServer
) -> None:
    rec = Recorder(oc)
    fake.script("ask", [Question([{"question": "Your name?", "header": "Name", "options": []}])])
    sid = await acp_client.new_session()
    await asyncio.wait_for(
        acp_client.conn.prompt(session_id=sid, prompt=[text_block("[[script:ask]]")]), 10
    )
    assert (await rec.wait_for("user-input.resolved")).decision == "rejected"
    assert "'Your name?'" in acp_client.client.text() and "declined" in acp_client.client.text()
    assert acp_client.client.asks.empty()
    await rec.close()


async def test_a_session_that_ends_mid_prompt_fails_the_prompt_and_later_calls(
    oc: OpenCodeAdapter, acp_client: Harness, fake: FakeOpenCodeServer
) -> None:
    sid, running = await hanging_prompt(acp_client, fake)
    [thread] = oc.list_sessions()
    await oc.stop_session(thread.thread_id)  # as when the server exits
    with pytest.raises(RequestError, match="the OpenCode session ended"):
        await asyncio.wait_for(running, 10)
    with pytest.raises(RequestError, match="has ended"):
        await acp_client.conn.prompt(session_id=sid, prompt=[text_block("again")])


@pytest.mark.parametrize(
    ("error", "reason"),
    [("MessageOutputLengthError", "max_tokens"), ("ContentFilterError", "refusal")],
)
async def test_a_turn_opencode_ended_on_length_or_filter_answers_that_stop_reason(
    acp_client: Harness, fake: FakeOpenCodeServer, error: str, reason: str
) -> None:
    fake.script("cut", [Text("partial"), Fail(name=error, message="stopped by the model")])
    sid = await acp_client.new_session()
    response = await acp_client.conn.prompt(session_id=sid, prompt=[text_block("[[script:cut]]")])
    assert response.stop_reason == reason
    assert acp_client.client.text() == "partial"


async def test_cancel_stops_children_created_through_the_api_too(
    acp_client: Harness, fake: FakeOpenCodeServer
) -> None:
    sid, running = await hanging_prompt(acp_client, fake)
    kid, grandkid = busy_branch(fake, sid)
    await acp_client.conn.cancel(session_id=sid)
    assert (await asyncio.wait_for(running, 10)).stop_reason == "cancelled"
    assert not any(fake.sessions[s].busy for s in (sid, kid, grandkid))


async def test_the_roots_todo_list_is_the_plan(
    acp_client: Harness, fake: FakeOpenCodeServer
) -> None:
    todos = [
        {"content": "read the code", "status": "completed", "priority": "high"},
        {"content": "fix the bug", "status": "in_progress", "priority": "medium"},
        {"content": "gold-plate", "status": "cancelled", "priority": "low"},
    ]
    fake.script("plan", [Tool("todowrite", {"todos": todos}, output="ok"), Text("planned")])
    sid = await acp_client.new_session()
    await acp_client.conn.prompt(session_id=sid, prompt=[text_block("[[script:plan]]")])
    [plan] = [u for _, u in acp_client.client.updates if u.session_update == "plan"]
    assert [(e.content, e.status, e.priority) for e in plan.entries] == [
        ("read the code", "completed", "high"),
        ("fix the bug", "in_progress", "medium"),
    ]


async def test_a_session_whose_thread_ended_can_be_loaded_again(
    oc: OpenCodeAdapter, acp_client: Harness, fake: FakeOpenCodeServer
) -> None:
    fake.script("hello", [Text("hello")])
    sid = await acp_client.new_session()
    await acp_client.conn.prompt(session_id=sid, prompt=[text_block("[[script:hello]]")])
    [thread] = oc.list_sessions()
    await oc.stop_session(thread.thread_id)
    await caught_up(fake, oc)  # the agent has heard the session.exited
    with pytest.raises(RequestError, match="has ended"):
        await acp_client.conn.prompt(session_id=sid, prompt=[text_block("again")])
    await acp_client.conn.load_session(cwd="/tmp/project", session_id=sid, mcp_servers=[])
    fake.script("again", [Text("back")])
    response = await acp_client.conn.prompt(session_id=sid, prompt=[text_block("[[script:again]]")])
    assert response.stop_reason == "end_turn" and acp_client.client.text().endswith("back")


async def test_a_failed_stop_is_told_then_the_prompt_still_answers_cancelled(
    oc: OpenCodeAdapter, acp_client: Harness, fake: FakeOpenCodeServer
) -> None:
    sid, running = await hanging_prompt(acp_client, fake)
    stuck = fake.add_session(parent_id=sid, busy=True)
    fake.fail("POST", f"/session/{stuck}/abort", status=400, times=None)
    await acp_client.conn.cancel(session_id=sid)
    assert (await asyncio.wait_for(running, 10)).stop_reason == "cancelled"
    text = acp_client.client.text()
    assert text.startswith("\n\n[Stop failed: ") and stuck in text
    await all_said(acp_client, fake, oc)
    assert acp_client.updates_after_answer(sid) == []


async def test_resume_binds_the_session_without_replaying_it(
    fake: FakeOpenCodeServer, acp_client: Harness
) -> None:
    fake.script("first", [Text("first answer")])
    sid = await acp_client.new_session("/tmp/project")
    await acp_client.conn.prompt(session_id=sid, prompt=[text_block("[[script:first]]")])
    async with (
        OpenCodeAdapter(fake.base_url, transport=fake.transport) as other,
        connected(other) as second,
    ):
        init = await second.conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        caps = init.agent_capabilities
        assert caps is not None and caps.session_capabilities is not None
        assert caps.session_capabilities.resume is not None
        await second.conn.resume_session(cwd="/tmp/project", session_id=sid, mcp_servers=[])
        assert second.client.updates == []
        fake.script("second", [Text("second answer")])
        response = await second.conn.prompt(
            session_id=sid, prompt=[text_block("[[script:second]]")]
        )
        assert response.stop_reason == "end_turn" and second.client.text() == "second answer"


async def test_images_embedded_resources_and_links_reach_opencode_as_prompt_parts(
    acp_client: Harness, fake: FakeOpenCodeServer
) -> None:
    from acp import embedded_text_resource, image_block, resource_block, resource_link_block

    from tests.test_input import png_bytes

    sid = await acp_client.new_session()
    blocks: list[Any] = [
        text_block("look [[script:default]]"),
        image_block(base64.b64encode(png_bytes()).decode(), "image/png"),
        resource_block(embedded_text_resource("file:///tmp/notes.txt", "remember this")),
        resource_link_block("spec.md", "file:///tmp/spec.md"),
    ]
    response = await acp_client.conn.prompt(session_id=sid, prompt=blocks)
    assert response.stop_reason == "end_turn"
    [user] = [m for m in fake.sessions[sid].messages if m.role == "user"]
    kinds = [
        (p["type"], p.get("mime"), p.get("filename")) for p in user.parts if not p.get("synthetic")
    ]
    assert ("file", "image/png", None) in kinds
    assert ("file", "text/plain", "notes.txt") in kinds
    assert "[spec.md](file:///tmp/spec.md)" in user.text
    with pytest.raises(RequestError, match="not base64") as bad:
        await acp_client.conn.prompt(session_id=sid, prompt=[image_block("%%%", "image/png")])
    assert bad.value.code == -32602
