"""What docs/testing.md states about the fake that no other test of the kit pins: what
``add_session`` returns, the tokens and cost of a model step (``model_cost``, an attribute),
the session a ``RequestOpened`` names, and :class:`Tasks` children running side by side.
"""

from __future__ import annotations

import httpx
import pytest

from adapter import OpenCodeAdapter
from adapter.testing import EventRecorder
from adapter.testing.fake import FakeOpenCodeServer, Hang, Permission, Task, Tasks, Text
from tests.testing.fake_support import idle, new_session, prompt

#: What every model step of the fake reports (``step-finish`` and the assistant message).
STEP_TOKENS = {
    "total": 15,
    "input": 10,
    "output": 5,
    "reasoning": 0,
    "cache": {"write": 0, "read": 0},
}


async def test_add_session_returns_the_new_sessions_id(fake: FakeOpenCodeServer) -> None:
    root = fake.add_session()
    child = fake.add_session(parent_id=root, busy=True)
    assert isinstance(root, str) and root.startswith("ses_")
    assert fake.sessions[child].parent_id == root and fake.sessions[child].busy
    assert fake.tree(root) == [root, child]


async def test_a_step_reports_10_input_and_5_output_tokens_priced_by_model_cost(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    with pytest.raises(TypeError):
        FakeOpenCodeServer(model_cost={"input": 1.0})  # type: ignore[call-arg]
    fake.script("free", [Text("a")])
    free = str((await new_session(fake_http))["id"])
    await prompt(fake_http, free, "[[script:free]]")
    await idle(fake, free)
    fake.model_cost = {"input": 1000.0, "output": 2000.0}  # per million tokens
    priced = str((await new_session(fake_http))["id"])
    await prompt(fake_http, priced, "[[script:free]]")
    await idle(fake, priced)
    [_, free_answer] = fake.sessions[free].messages
    [_, priced_answer] = fake.sessions[priced].messages
    [finish] = [p for p in priced_answer.parts if p["type"] == "step-finish"]
    assert finish["tokens"] == STEP_TOKENS == priced_answer.info["tokens"]
    assert free_answer.info["cost"] == 0
    assert finish["cost"] == priced_answer.info["cost"] == pytest.approx(0.02)
    await prompt(fake_http, priced, "[[script:free]]")
    await idle(fake, priced)
    info = fake.sessions[priced].info
    assert info["tokens"]["input"] == 20 and info["tokens"]["output"] == 10
    assert info["cost"] == pytest.approx(0.04)


async def test_request_opened_names_the_session_that_asked(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer
) -> None:
    fake.script("child", [Permission("bash", ["ls"])])
    fake.script("root", [Task("explore", "child")])
    async with EventRecorder(oc) as recorder:
        root = (await oc.start_session("t")).session_id
        await oc.send_turn("t", "go [[script:root]]")
        opened = await recorder.wait_for("request.opened")
    [_, child] = fake.tree(root)
    assert opened.session_id == child != root
    [asked] = fake.pending_permissions(session_id=opened.session_id)
    assert asked["id"] == opened.request_id


async def test_tasks_children_run_side_by_side(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    fake.script("alpha", [Hang()])
    fake.script("beta", [Hang()])
    fake.script("root", [Tasks([Task("a", "alpha"), Task("b", "beta")])])
    root = str((await new_session(fake_http))["id"])
    await prompt(fake_http, root, "[[script:root]]")
    [_, alpha, beta] = await fake.wait_for_tree(root, sessions=3)
    await fake.wait_hanging(alpha)
    await fake.wait_hanging(beta)
    await fake_http.post(f"/session/{alpha}/abort")
    cancelled = await fake.wait_for_tool("task", status="error", session_id=root)
    assert cancelled["state"]["error"] == "Task cancelled"
    await fake.wait_hanging(beta, timeout=0.1)  # its sibling goes on
    assert fake.sessions[root].busy
