"""The ACP agent's host features: stop one subagent (``_opencode/stop_subagent``) and the
``usage_update`` of a prompt, through the SDK's client on the fake OpenCode.

The sibling ``beta`` waits on a permission request the test answers once the stop
returned, so "the sibling still runs" is a fact of the test, not of timing.
"""

from __future__ import annotations

import asyncio
from typing import Any

import acp
import pytest
from acp import RequestError, text_block
from acp.schema import PromptResponse

from adapter.acp import STOP_SUBAGENT
from adapter.testing import FakeOpenCodeServer
from adapter.testing.fake import Hang, Permission, Task, Tasks, Text, Tool
from tests.acp.client_side import Ask, Harness
from tests.adapter_support import Recorder


def aborted(fake: FakeOpenCodeServer) -> list[str]:
    return [r.session_id for r in fake.calls("POST", "/session/{id}/abort") if r.session_id]


async def parallel_prompt(
    h: Harness, fake: FakeOpenCodeServer
) -> tuple[str, asyncio.Task[PromptResponse], dict[str, str], Ask]:
    """A prompt whose root runs tasks ``alpha`` (hangs) and ``beta`` (asks a permission,
    then answers) side by side: the session, the prompt, the children by description
    and beta's permission request (unanswered)."""
    fake.script("alpha", [Hang()])
    fake.script("beta", [Permission("bash", patterns=("ls",)), Text("beta's answer")])
    fake.script(
        "root", [Tasks([Task("alpha", "alpha"), Task("beta", "beta")]), Text("root answer")]
    )
    sid = await h.new_session()
    running = asyncio.create_task(
        h.conn.prompt(session_id=sid, prompt=[text_block("go [[script:root]]")])
    )
    ask = await asyncio.wait_for(h.client.asks.get(), 10)
    children = {
        s.info["title"].split(" (@")[0]: s.id for s in fake.sessions.values() if s.parent_id == sid
    }
    return sid, running, children, ask


def task_call_id(h: Harness, description: str) -> str:
    return next(
        cid for cid, c in h.client.calls().items() if c.get("title") == f"task {description}"
    )


async def test_initialize_advertises_the_stop_subagent_extension(acp_client: Harness) -> None:
    response = await acp_client.conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
    meta = response.field_meta or {}
    assert STOP_SUBAGENT == "_opencode/stop_subagent"
    assert meta["opencode"]["extensions"][STOP_SUBAGENT]["params"] == [
        ["sessionId", "subagentSessionId"],
        ["sessionId", "toolCallId"],
    ]


@pytest.mark.parametrize("by", ["toolCallId", "subagentSessionId"])
async def test_stop_subagent_stops_one_child_and_the_prompt_ends_end_turn(
    acp_client: Harness, fake: FakeOpenCodeServer, by: str
) -> None:
    sid, running, children, ask = await parallel_prompt(acp_client, fake)
    alpha, beta = children["alpha"], children["beta"]
    target = task_call_id(acp_client, "alpha") if by == "toolCallId" else alpha
    answer = await acp_client.conn.ext_method(
        "opencode/stop_subagent", {"sessionId": sid, by: target}
    )
    assert answer["stopped"] == [alpha]
    assert answer["report"]["root_id"] == alpha and answer["report"]["ok"] is True
    assert set(aborted(fake)) == {alpha}, "only the subagent was aborted"
    assert fake.sessions[beta].busy and fake.sessions[sid].busy
    assert not running.done()
    ask.choose("accept")
    response = await asyncio.wait_for(running, 10)
    assert response.stop_reason == "end_turn"
    assert acp_client.client.text() == "root answer"
    calls = acp_client.client.calls()
    assert calls[task_call_id(acp_client, "alpha")]["status"] == "failed"
    assert calls[task_call_id(acp_client, "beta")]["status"] == "completed"


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"sessionId": "ROOT"},
        {"sessionId": "ROOT", "subagentSessionId": "ROOT"},  # the root: session/cancel stops it
        {"sessionId": "ROOT", "subagentSessionId": "ses_unknown"},
        {"sessionId": "ROOT", "toolCallId": "call_unknown"},
        {"sessionId": "ROOT", "toolCallId": "ROOT_CALL"},  # a call that is no task
        {"sessionId": "ROOT", "subagentSessionId": "ALPHA", "toolCallId": "ALPHA_CALL"},
        {"sessionId": "ROOT", "subagentSessionId": 7},
        {"sessionId": ["ROOT"], "subagentSessionId": "ALPHA"},
        {"sessionId": "ses_other", "subagentSessionId": "ALPHA"},
        {"sessionId": "OTHER", "subagentSessionId": "ALPHA"},  # another session's subagent
        {"sessionId": "ROOT", "subagentSessionId": "ALPHA", "extra": {"x": 1}},
    ],
)
async def test_a_refused_stop_subagent_is_invalid_params_and_stops_nothing(
    acp_client: Harness, fake: FakeOpenCodeServer, params: dict[str, Any]
) -> None:
    fake.script("ls", [Tool("bash", {"command": "ls"}, output="x"), Text("other")])
    other = await acp_client.new_session("/tmp/other")
    await acp_client.conn.prompt(session_id=other, prompt=[text_block("[[script:ls]]")])
    sid, running, children, _ask = await parallel_prompt(acp_client, fake)
    names = {
        "ROOT": sid,
        "ALPHA": children["alpha"],
        "OTHER": other,
        "ALPHA_CALL": task_call_id(acp_client, "alpha"),
        "ROOT_CALL": next(iter(acp_client.client.calls())),  # the bash call of "other"
    }
    params = {k: names.get(v, v) if isinstance(v, str) else v for k, v in params.items()}
    with pytest.raises(RequestError) as refused:
        await acp_client.conn.ext_method("opencode/stop_subagent", params)
    assert refused.value.code == -32602, refused.value
    assert aborted(fake) == []
    assert all(fake.sessions[s].busy for s in children.values())
    await acp_client.conn.cancel(session_id=sid)  # alpha hangs until stopped
    assert (await asyncio.wait_for(running, 10)).stop_reason == "cancelled"


async def test_an_unknown_extension_method_is_method_not_found(acp_client: Harness) -> None:
    await acp_client.conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
    with pytest.raises(RequestError) as refused:
        await acp_client.conn.ext_method("opencode/nothing", {})
    assert refused.value.code == -32601


async def test_a_prompt_sends_usage_updates_with_the_context_meter_and_the_tree_cost(
    acp_client: Harness, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.model_cost = {"input": 1000.0, "output": 1000.0}
    fake.script("child", [Tool("read", {"filePath": "/x"}, output="x"), Text("child done")])
    fake.script("root", [Task("look", "child"), Text("done")])
    sid = await acp_client.new_session()
    response = await acp_client.conn.prompt(
        session_id=sid, prompt=[text_block("go [[script:root]]")]
    )
    assert response.stop_reason == "end_turn"
    usages = [u for _, u in acp_client.client.updates if u.session_update == "usage_update"]
    assert usages, acp_client.client.kinds()
    last = usages[-1]
    usage = (await rec.wait_for("turn.completed")).usage
    assert usage is not None and usage.subagents == 1
    assert (last.used, last.size) == (usage.context_tokens, 128000)
    assert last.cost is not None and last.cost.currency == "USD"
    # The whole tree's cost (opencode acp sends the root's only).
    assert last.cost.amount == pytest.approx(usage.cost)
    assert usage.cost > usage.by_session[sid].cost > 0


class TestBackgroundSubagents:
    """OpenCode's background subagents (``background: true``; the fake learned them from
    1.18.34): the root answers at once, the child works on, the root runs again on its
    result. The prompt stays open as the adapter's turn does (phase ``background``)."""

    @pytest.fixture
    def fake_options(self) -> dict[str, Any]:
        return {"background_subagents": True}

    def script(self, fake: FakeOpenCodeServer, *child: Any) -> None:
        fake.script("child", list(child))
        fake.script("after", [Text(" and ran on the result")])
        fake.script(
            "root",
            [Task("bg", "child", background=True, result_script="after"), Text("answered")],
        )

    async def test_the_childs_progress_and_the_roots_run_on_its_result_reach_the_prompt(
        self, acp_client: Harness, fake: FakeOpenCodeServer
    ) -> None:
        self.script(fake, Tool("read", {"filePath": "/x"}, output="x"), Text("child done"))
        sid = await acp_client.new_session()
        response = await acp_client.conn.prompt(
            session_id=sid, prompt=[text_block("go [[script:root]]")]
        )
        assert response.stop_reason == "end_turn"
        assert acp_client.client.text() == "answered and ran on the result"
        calls = {c.get("title"): c for c in acp_client.client.calls().values()}
        assert calls["bg > read /x"]["status"] == "completed"
        assert "- read /x [completed]" in calls["task bg"]["content"][0].content.text

    async def test_stop_subagent_on_a_background_child_ends_the_prompt_end_turn(
        self, acp_client: Harness, fake: FakeOpenCodeServer
    ) -> None:
        self.script(fake, Hang())
        sid = await acp_client.new_session()
        running = asyncio.create_task(
            acp_client.conn.prompt(session_id=sid, prompt=[text_block("go [[script:root]]")])
        )
        await fake.wait_until(
            lambda: any(s.parent_id == sid and s.busy for s in fake.sessions.values())
        )
        async with asyncio.timeout(5):
            await acp_client.client.wait_for_update(sid, "agent_message_chunk")
        [child] = [s.id for s in fake.sessions.values() if s.parent_id == sid]
        assert not running.done(), "the prompt waits for its background child"
        answer = await acp_client.conn.ext_method(
            "opencode/stop_subagent", {"sessionId": sid, "subagentSessionId": child}
        )
        assert answer["stopped"] == [child]
        assert (await asyncio.wait_for(running, 10)).stop_reason == "end_turn"
        assert acp_client.client.text() == "answered"
