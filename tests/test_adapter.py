"""Contract tests of ``OpenCodeAdapter`` against the in-process fake server."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from adapter import (
    AdapterClosedError,
    ConnectTimeoutError,
    InvalidInputError,
    OpenCodeAdapter,
    RequestError,
    Timeouts,
    UnknownRequestError,
    UnknownThreadError,
)
from adapter.testing import FakeOpenCodeServer, caught_up
from adapter.testing.fake import Fail, Hang, Permission, Question, Task, Text, Tool
from tests.adapter_support import Recorder, another_turn_completed, refuse, start_scripted_turn

T = "thread-1"


def prompts(fake: FakeOpenCodeServer, sid: str) -> list[dict[str, object]]:
    return [
        json.loads(r.body) if hasattr(r, "body") else {}
        for r in fake.requests
        if r.method == "POST" and r.path == f"/session/{sid}/prompt_async"
    ]


async def test_start_session_creates_and_announces(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    info = await oc.start_session(T, title="my title")
    assert info.status == "ready"
    assert info.session_id in fake.sessions
    assert fake.sessions[info.session_id].title == "my title"
    assert info.resume == {"schema": 1, "session_id": info.session_id, "directory": None}
    await caught_up(fake, oc)
    assert rec.types(T) == ["session.started", "thread.started"]
    assert oc.has_session(T)
    assert [s.thread_id for s in oc.list_sessions()] == [T]


async def test_session_info_is_one_threads_listing(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer
) -> None:
    with pytest.raises(UnknownThreadError):
        oc.session_info(T)
    await oc.start_session(T)
    await oc.start_session("other")
    fake.script("long", [Hang()])
    turn = await oc.send_turn(T, "go [[script:long]]")
    info = oc.session_info(T)
    assert info == next(s for s in oc.list_sessions() if s.thread_id == T)
    assert (info.status, info.active_turn_id) == ("running", turn.turn_id)
    assert oc.session_info("other").status == "ready"
    await oc.stop_session(T)
    with pytest.raises(UnknownThreadError):
        oc.session_info(T)


async def test_resume_reuses_the_session_and_falls_back_on_404(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    existing = fake.add_session(title="old")
    info = await oc.start_session("a", resume={"schema": 1, "session_id": existing})
    assert info.session_id == existing
    gone = await oc.start_session("b", resume={"schema": 1, "session_id": "ses_doesnotexist"})
    assert gone.session_id != "ses_doesnotexist" and gone.session_id in fake.sessions
    warning = await rec.wait_for("runtime.warning", lambda e: e.thread_id == "b")
    assert "no longer exists" in warning.message
    malformed = await oc.start_session("c", resume={"schema": 99, "session_id": existing})
    assert malformed.session_id != existing


async def test_resume_probe_errors_are_raised_not_replaced(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer
) -> None:
    existing = fake.add_session()
    fake.fail("GET", "/session/{id}", status=400, times=None)
    with pytest.raises(RequestError):
        await oc.start_session(T, resume={"schema": 1, "session_id": existing})
    assert not oc.has_session(T)
    assert len(fake.sessions) == 1


async def test_concurrent_starts_for_one_thread_yield_one_session(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer
) -> None:
    """B8, B9: the later starts join the pending one, so one remote session is created and
    there is no losing session to abort (the reference creates one per start and aborts
    the losers)."""
    infos = await asyncio.gather(*(oc.start_session(T) for _ in range(5)))
    assert len({i.session_id for i in infos}) == 1
    assert len(fake.sessions) == 1
    assert [r.path for r in fake.requests if r.method == "POST"] == ["/session"]


async def test_start_times_out_when_the_event_stream_never_connects(
    fake: FakeOpenCodeServer,
) -> None:
    hold = fake.hold("GET", "/event")
    async with OpenCodeAdapter(
        fake.base_url, transport=fake.transport, timeouts=Timeouts(connect=0.2)
    ) as oc:
        with pytest.raises(ConnectTimeoutError):
            await oc.start_session(T)
        assert not oc.has_session(T)
        [sid] = fake.sessions
        assert fake.sessions[sid].abort_count >= 1, "what the failed start created is aborted"
        hold.release()


async def test_text_turn_streams_and_completes(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("hello", [Text("Hello, world! How are you?", chunks=4)])
    info = await oc.start_session(T)
    turn = await oc.send_turn(T, "say hello [[script:hello]]", model="fake/fake-model")
    done = await rec.wait_for("turn.completed")
    assert done.turn_id == turn.turn_id and done.state == "completed"
    deltas = [e for e in rec.of("content.delta", T) if e.turn_id == turn.turn_id]
    assert "".join(d.delta for d in deltas) == "Hello, world! How are you?"
    assert all(d.stream == "assistant_text" and d.session_id == info.session_id for d in deltas)
    assert rec.types(T).count("turn.started") == 1
    [user] = [m for m in fake.sessions[info.session_id].messages if m.role == "user"]
    assert user.id.startswith("msg_") and len(user.id) == 4 + 12 + 14, "the adapter minted the id"
    assert oc.list_sessions()[0].status == "ready"


async def test_model_and_input_validation(oc: OpenCodeAdapter, fake: FakeOpenCodeServer) -> None:
    await oc.start_session(T)
    for bad in ("no-slash", "/model", "provider/", "a b/c"):
        with pytest.raises(InvalidInputError):
            await oc.send_turn(T, "hi", model=bad)
    for empty in ("", "   \n"):
        with pytest.raises(InvalidInputError):
            await oc.send_turn(T, empty)
    with pytest.raises(UnknownThreadError):
        await oc.send_turn("nope", "hi")
    assert not [r for r in fake.requests if r.path.endswith("/prompt_async")]


async def test_prompt_body_carries_model_agent_and_minted_id(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer
) -> None:
    seen: list[dict[str, object]] = []

    async def capture(request: httpx.Request) -> None:
        seen.append(json.loads(request.content))
        return None

    fake.on("POST", "/session/{id}/prompt_async", capture)
    await oc.start_session(T)
    await oc.send_turn(T, "go", model="openrouter/anthropic/claude", agent="plan")
    assert seen[0]["model"] == {"providerID": "openrouter", "modelID": "anthropic/claude"}
    assert seen[0]["agent"] == "plan"
    assert str(seen[0]["messageID"]).startswith("msg_")


async def test_a_send_during_a_turn_steers_it(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("long", [Text("working"), Hang()])
    await oc.start_session(T)
    first = await oc.send_turn(T, "start [[script:long]]")
    second = await oc.send_turn(T, "also do this")
    assert second.turn_id == first.turn_id
    await caught_up(fake, oc)
    assert rec.types(T).count("turn.started") == 1


async def test_a_failed_steer_leaves_the_running_turn_intact(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    """A steer the server refuses is forgotten: the send raises, but the turn it was
    meant for is not ended (only a prompt that would have *started* a turn ends one)."""
    fake.script("asks", [Permission("bash", ["ls"]), Text("answered")])
    await oc.start_session(T)
    first = await oc.send_turn(T, "start [[script:asks]]")
    opened = await rec.wait_for("request.opened")
    refusal = refuse(fake, "POST", "/session/{id}/prompt_async", "nope")
    with pytest.raises(RequestError) as caught:
        await oc.send_turn(T, "refused steer")
    assert caught.value.operation == "prompt_async"
    assert refusal.call_count == 1
    await caught_up(fake, oc)
    [info] = oc.list_sessions()
    assert info.status == "running" and info.active_turn_id == first.turn_id
    assert rec.of("turn.aborted", T) == [] and rec.of("turn.completed", T) == []
    steer = await oc.send_turn(T, "accepted steer")
    assert steer.turn_id == first.turn_id
    await oc.respond_to_request(T, opened.request_id, "accept")
    done = await rec.wait_for("turn.completed")
    assert done.turn_id == first.turn_id and done.state == "completed"
    assert rec.types(T).count("turn.started") == 1
    assert rec.of("turn.aborted", T) == []


async def test_submission_failure_rolls_back_to_ready(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    await oc.start_session(T)
    refuse(fake, "POST", "/session/{id}/prompt_async", "nope")
    with pytest.raises(RequestError) as caught:
        await oc.send_turn(T, "hi")
    assert caught.value.operation == "prompt_async"
    aborted = await rec.wait_for("turn.aborted")
    assert "not accepted" in aborted.reason
    [info] = oc.list_sessions()
    assert info.status == "ready" and info.active_turn_id is None and info.last_error
    await another_turn_completed(oc, fake, rec, T, "again", "fine")


async def test_tool_items_and_subagents(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("child", [Tool("read", {"filePath": "/x"}, output="content"), Text("child done")])
    fake.script(
        "root",
        [
            Tool("bash", {"command": "echo hi"}, output="hi\n"),
            Task("look around", "child"),
            Text("all done"),
        ],
    )
    info = await oc.start_session(T)
    await oc.send_turn(T, "go [[script:root]]")
    await rec.wait_for("turn.completed")
    child = await rec.wait_for("child.started")
    assert child.parent_id == info.session_id
    assert fake.sessions[child.session_id].parent_id == info.session_id
    completed = rec.of("item.completed", T)
    by_tool = {e.tool: e for e in completed}
    assert by_tool["bash"].item_type == "command" and by_tool["bash"].detail == "hi\n"
    assert by_tool["task"].item_type == "subagent" and by_tool["task"].session_id == info.session_id
    assert by_tool["read"].session_id == child.session_id and by_tool["read"].detail == "content"
    for item in completed:
        starts = [e for e in rec.of("item.started", T) if e.item_id == item.item_id]
        assert len(starts) == 1, f"{item.tool} started once"
    text = "".join(e.delta for e in rec.of("content.delta", T))
    assert text == "all done", "child text is not mixed into the root's answer"


async def test_child_permission_is_routed_to_the_parent_thread(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script(
        "child", [Permission("bash", ["rm *"], tool=Tool("bash", {"command": "rm x"}, output="ok"))]
    )
    fake.script("root", [Task("careful", "child"), Text("done")])
    await oc.start_session(T)
    other = await oc.start_session("other")
    await oc.send_turn(T, "go [[script:root]]")
    opened = await rec.wait_for("request.opened")
    assert opened.thread_id == T and opened.permission == "bash" and opened.patterns == ("rm *",)
    assert opened.session_id != other.session_id
    with pytest.raises(UnknownRequestError):
        await oc.respond_to_request(T, "per_unknown", "accept")
    with pytest.raises(UnknownRequestError):
        await oc.respond_to_request("other", opened.request_id, "accept")
    with pytest.raises(InvalidInputError):
        await oc.respond_to_request(T, opened.request_id, "maybe")
    await oc.respond_to_request(T, opened.request_id, "accept_for_session")
    resolved = await rec.wait_for("request.resolved")
    assert resolved.request_id == opened.request_id and resolved.decision == "accept_for_session"
    await rec.wait_for("turn.completed")


async def test_question_round_trip_keyed_by_question(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    questions = [
        {
            "question": "Which color?",
            "header": "Color",
            "options": [{"label": "red", "description": ""}],
        },
        {
            "question": "How many?",
            "header": "Count",
            "options": [{"label": "2", "description": ""}],
        },
    ]
    await start_scripted_turn(oc, fake, T, "ask", [Question(questions), Text("thanks")])
    asked = await rec.wait_for("user-input.requested")
    assert [q["header"] for q in asked.questions] == ["Color", "Count"]
    await oc.respond_to_user_input(T, asked.request_id, {"How many?": "2", "Which color?": ["red"]})
    resolved = await rec.wait_for("user-input.resolved")
    assert resolved.answers == (("red",), ("2",))
    await rec.wait_for("turn.completed")


async def test_genuine_error_fails_the_turn(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    await start_scripted_turn(
        oc, fake, T, "bad", [Text("trying"), Fail("APIError", "provider exploded")]
    )
    done = await rec.wait_for("turn.completed")
    assert done.state == "failed" and done.error == "provider exploded"
    err = await rec.wait_for("runtime.error")
    assert err.error_name == "APIError"
    await caught_up(fake, oc)
    assert rec.of("turn.completed", T) == [done], "the idle after the error completes nothing"


async def test_placeholder_titles_are_ignored(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    info = await oc.start_session(T)
    sid = info.session_id
    fake.emit(
        "session.updated",
        {"sessionID": sid, "info": {"id": sid, "title": "New session - 2026-11-29T10:00:00.000Z"}},
    )
    fake.emit("session.updated", {"sessionID": sid, "info": {"id": sid, "title": "Fix the build"}})
    fake.emit("session.updated", {"sessionID": sid, "info": {"id": sid, "title": "Fix the build"}})
    await rec.wait_for("thread.metadata.updated")
    await caught_up(fake, oc)
    assert [e.title for e in rec.of("thread.metadata.updated", T)] == ["Fix the build"]


async def test_stale_idle_does_not_complete_a_new_turn(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("long", [Hang()])
    info = await oc.start_session(T)
    hold = fake.hold("POST", "/session/{id}/prompt_async")
    send = asyncio.create_task(oc.send_turn(T, "go [[script:long]]"))
    await hold.wait_started()
    # An idle of an earlier run arrives before our prompt is even accepted.
    fake.emit("session.status", {"sessionID": info.session_id, "status": {"type": "idle"}})
    fake.emit("session.idle", {"sessionID": info.session_id})
    hold.release()
    await send
    await caught_up(fake, oc)
    assert rec.of("turn.completed", T) == []
    assert oc.list_sessions()[0].status == "running"


async def test_bad_events_are_skipped_and_the_pump_survives(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    info = await oc.start_session(T)
    fake.emit_raw(b"data: {not json\n\n")
    fake.emit_raw(b'data: {"type": "session.idle", "properties": "wrong"}\n\n')
    fake.emit("message.part.updated", {"sessionID": info.session_id, "part": "garbage"})
    fake.emit("session.idle", {"sessionID": "ses_someone_else"})
    await another_turn_completed(oc, fake, rec, T, "go", "still fine")


async def test_reconnect_mid_turn(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    await start_scripted_turn(oc, fake, T, "slow", [Text("a b c d e f", chunks=6, delay=0.05)])
    await rec.wait_for("content.delta")
    fake.drop_event_streams()
    warning = await rec.wait_for("runtime.warning")
    assert "reconnecting" in warning.message
    done = await rec.wait_for("turn.completed", timeout=5)
    assert done.state == "completed"
    assert len(rec.of("runtime.warning", T)) == 1


async def test_stop_session_emits_exited_once_and_aborts_the_tree(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("child", [Hang()])
    fake.script("root", [Task("sub", "child")])
    info = await oc.start_session(T)
    api_child = fake.add_session(parent_id=info.session_id, busy=True)
    unrelated = fake.add_session(busy=True)
    await oc.send_turn(T, "go [[script:root]]")
    await rec.wait_for("child.started")
    await asyncio.gather(oc.stop_session(T), oc.stop_session(T))
    await caught_up(fake, oc)
    assert len(rec.of("session.exited", T)) == 1
    assert not oc.has_session(T)
    assert not fake.sessions[api_child].busy
    assert fake.sessions[unrelated].busy
    with pytest.raises(UnknownThreadError):
        await oc.stop_session(T)


async def test_read_and_rollback(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("a", [Text("one")])
    fake.script("b", [Text("two")])
    await oc.start_session(T)
    await oc.send_turn(T, "first [[script:a]]")
    await rec.wait_for("turn.completed")
    await oc.send_turn(T, "second [[script:b]]")
    await rec.wait_for("turn.completed", lambda e: len(rec.of("turn.completed")) == 2)
    history = await oc.read_thread(T)
    assert [m.info.role for m in history.messages] == ["user", "assistant", "user", "assistant"]
    after = await oc.rollback_thread(T, 1)
    assert [m.info.role for m in after.messages] == ["user", "assistant"]
    # OpenCode keeps reverted messages stored until the next prompt; they stay hidden.
    assert len(fake.sessions[after.session_id].messages) == 4
    assert [m.info.role for m in (await oc.read_thread(T)).messages] == ["user", "assistant"]
    with pytest.raises(InvalidInputError):
        await oc.rollback_thread(T, 0)
    await oc.send_turn(T, "third")
    await rec.wait_for("turn.completed", lambda e: len(rec.of("turn.completed")) == 3)
    texts = [m.text for m in fake.sessions[after.session_id].messages]
    assert texts == ["first [[script:a]]", "one", "third", "ok"]
    assert [m.info.id for m in (await oc.read_thread(T)).messages] == [
        m.id for m in fake.sessions[after.session_id].messages
    ]
    assert (await oc.rollback_thread(T, 5)).messages == ()


async def test_events_iterator_ends_on_close_and_no_task_leaks(fake: FakeOpenCodeServer) -> None:
    before = asyncio.all_tasks()
    oc = OpenCodeAdapter(fake.base_url, transport=fake.transport)
    async with oc:
        stream = oc.events()
        await oc.start_session(T)
        fake.script("long", [Hang()])
        await oc.send_turn(T, "go [[script:long]]")
    got = [e.type async for e in stream]
    assert got[-1] == "session.exited"
    await asyncio.sleep(0)
    assert asyncio.all_tasks() - before == set()
    with pytest.raises(AdapterClosedError):
        await oc.start_session("again")
    with pytest.raises(AdapterClosedError):
        await oc.interrupt_turn(T)


async def test_resume_recovers_requests_raised_before_we_connected(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script(
        "child",
        [Permission("bash", ["make *"], tool=Tool("bash", {"command": "make"}, output="ok"))],
    )
    fake.script("root", [Task("build", "child"), Text("built")])
    async with fake.client() as http:  # another client started the work
        root = (await http.post("/session", json={"title": "elsewhere"})).json()["id"]
        body = {"parts": [{"type": "text", "text": "go [[script:root]]"}]}
        await http.post(f"/session/{root}/prompt_async", json=body)
    await fake.wait_until(lambda: any(s.pending_requests for s in fake.sessions.values()))
    await oc.start_session(T, resume={"schema": 1, "session_id": root})
    opened = await rec.wait_for("request.opened")
    assert opened.thread_id == T and opened.patterns == ("make *",)
    assert fake.sessions[opened.session_id].parent_id == root
    await oc.respond_to_request(T, opened.request_id, "accept")
    assert (await rec.wait_for("request.resolved")).decision == "accept"


async def test_requests_raised_during_an_outage_are_recovered(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("ask", [Permission("edit", ["*.py"])])
    await oc.start_session(T)
    hold = fake.hold("GET", "/event")
    fake.drop_event_streams()
    await hold.wait_started()
    await oc.send_turn(T, "go [[script:ask]]")
    await fake.wait_until(lambda: any(s.pending_requests for s in fake.sessions.values()))
    hold.release()
    opened = await rec.wait_for("request.opened")
    assert opened.thread_id == T and opened.permission == "edit"
    await caught_up(fake, oc)
    assert len(rec.of("request.opened", T)) == 1, "recovered once, not again when the event comes"


async def test_resume_does_not_announce_the_ghost_request_of_an_aborted_run(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    """OpenCode lists a request after its run was aborted (a ghost: a reply "succeeds"
    and runs nothing). Resuming must announce live requests only."""
    fake.script("ghost", [Permission("bash", ["rm *"])])
    fake.script("live", [Permission("bash", ["make *"])])
    async with fake.client() as http:  # another client started both, and stopped one
        stopped = (await http.post("/session", json={"title": "stopped"})).json()["id"]
        waiting = (await http.post("/session", json={"title": "waiting"})).json()["id"]
        for sid, script in ((stopped, "ghost"), (waiting, "live")):
            body = {"parts": [{"type": "text", "text": f"go [[script:{script}]]"}]}
            await http.post(f"/session/{sid}/prompt_async", json=body)
        await fake.wait_until(lambda: bool(fake.sessions[stopped].pending_requests))
        await fake.wait_until(lambda: bool(fake.sessions[waiting].pending_requests))
        await http.post(f"/session/{stopped}/abort")
        [ghost_id] = fake.sessions[stopped].pending_requests  # still listed by the server
    await oc.start_session(T, resume={"schema": 1, "session_id": stopped})
    await oc.start_session("other", resume={"schema": 1, "session_id": waiting})
    opened = await rec.wait_for("request.opened")
    assert (opened.thread_id, opened.patterns) == ("other", ("make *",))
    await caught_up(fake, oc)
    assert rec.of("request.opened", T) == []
    with pytest.raises(UnknownRequestError):
        await oc.respond_to_request(T, ghost_id, "accept")


async def test_a_request_whose_run_was_aborted_during_an_outage_is_resolved(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("ask", [Permission("edit", ["*.py"])])
    await oc.start_session(T)
    await oc.send_turn(T, "go [[script:ask]]")
    opened = await rec.wait_for("request.opened")
    hold = fake.hold("GET", "/event")
    fake.drop_event_streams()
    await hold.wait_started()
    async with fake.client() as http:  # stopped elsewhere while we could not hear it
        await http.post(f"/session/{opened.session_id}/abort")
    assert fake.sessions[opened.session_id].pending_requests == [opened.request_id]
    hold.release()
    resolved = await rec.wait_for("request.resolved")
    assert (resolved.request_id, resolved.decision) == (opened.request_id, "cancelled")
    await rec.wait_for("turn.aborted")
    assert len(rec.of("request.opened", T)) == 1
    with pytest.raises(UnknownRequestError):
        await oc.respond_to_request(T, opened.request_id, "accept")


async def test_a_request_answered_while_recovery_reads_is_not_announced_again(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    """The recovery listed the request, then it was answered elsewhere before the
    recovery got to announce it: the answer wins (the tool is still running, so only
    the memory of the ``replied`` event tells)."""
    make = Tool("bash", {"command": "make"}, duration=float("inf"))
    fake.script("work", [Permission("bash", ["make"], tool=make)])
    async with fake.client() as http:
        root = (await http.post("/session", json={"title": "elsewhere"})).json()["id"]
        body = {"parts": [{"type": "text", "text": "go [[script:work]]"}]}
        await http.post(f"/session/{root}/prompt_async", json=body)
        await fake.wait_until(lambda: bool(fake.sessions[root].pending_requests))
        [request_id] = fake.sessions[root].pending_requests
        check = fake.hold("GET", "/session/{id}/message/{mid}")
        await oc.start_session(T, resume={"schema": 1, "session_id": root})
        await check.wait_started()  # the list was read; the liveness check is held
        since = fake.event_count
        await http.post(f"/permission/{request_id}/reply", json={"reply": "once"})
    await fake.wait_for_event("permission.replied", since=since)
    await caught_up(fake, oc)  # the adapter has read the `replied` event
    check.release()
    await fake.wait_until(lambda: check.hook is not None and check.hook.call_count >= 1)
    await caught_up(fake, oc)
    assert rec.of("request.opened", T) == []
    assert fake.sessions[root].busy  # the tool runs: the answer took effect
