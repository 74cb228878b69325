"""``turn.plan.updated`` on a real ``opencode serve``: the root's ``todowrite`` reaches the
host as the turn's plan, every time in full, and a subagent's own list does not."""

from __future__ import annotations

import pytest

from adapter import PlanItem
from adapter.testing import RealOpenCodeServer, ScriptedModelServer
from adapter.testing.model import Text, ToolCall, ToolCalls, script_marker, task_call
from tests.adapter_support import Recorder
from tests.real.conftest import adapter_on

pytestmark = pytest.mark.real

T = "thread"
FIRST = [
    {"content": "look around", "status": "in_progress", "priority": "high"},
    {"content": "write it", "status": "pending", "priority": "low"},
]
SECOND = [
    {"content": "look around", "status": "completed", "priority": "high"},
    {"content": "write it", "status": "in_progress", "priority": "low"},
]


async def test_the_roots_todo_lists_are_the_turns_plan_and_a_subagents_is_not(
    real_server: RealOpenCodeServer, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    name = unique_name
    child_todos = [{"content": "child step", "status": "pending", "priority": "medium"}]
    scripted_model.script(
        f"{name}-child",
        [ToolCalls([ToolCall("todowrite", {"todos": child_todos})]), Text("child done")],
    )
    scripted_model.script(
        name,
        [
            ToolCalls([ToolCall("todowrite", {"todos": FIRST})]),
            ToolCalls([task_call("look", f"{name}-child")]),
            ToolCalls([ToolCall("todowrite", {"todos": SECOND})]),
            ToolCalls([ToolCall("todowrite", {"todos": []})]),
            Text("root done"),
        ],
    )
    async with adapter_on(real_server) as oc:
        rec = Recorder(oc)
        await oc.start_session(T, title=name)
        turn = await oc.send_turn(T, "go " + script_marker(name))
        await rec.wait_for("turn.completed", lambda e: e.turn_id == turn.turn_id, timeout=60)
        await rec.close()
    plans = rec.of("turn.plan.updated", T)
    assert [p.todos for p in plans] == [
        tuple(PlanItem(**t) for t in FIRST),
        tuple(PlanItem(**t) for t in SECOND),
        (),
    ]
    assert {p.turn_id for p in plans} == {turn.turn_id}
    assert rec.of("child.started", T), "the subagent ran (its list was sent and dropped)"
