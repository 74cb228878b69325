"""Subagents as tasks and ``stop_subagent`` on a real ``opencode serve`` (issue 23 items 3, 4).

A root whose one model step calls ``task`` twice (measured on 1.18.34: both children start
at once, each call's ``item_id`` names its child); one child, or a child and its own child,
stopped alone while the sibling and the root go on.
"""

from __future__ import annotations

import pytest

from adapter.testing import RealOpenCodeServer, ScriptedModelServer
from adapter.testing.model import Text, ToolCalls, script_marker, task_call
from tests.adapter_support import Recorder
from tests.real.conftest import adapter_on

pytestmark = pytest.mark.real

T = "thread"


async def test_parallel_subagents_are_tasks_named_by_their_calls(
    real_server: RealOpenCodeServer, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    name = unique_name
    scripted_model.script(f"{name}-a", [Text("answer of alpha")])
    scripted_model.script(f"{name}-b", [Text("answer of beta")])
    scripted_model.script(
        name,
        [
            ToolCalls([task_call("alpha", f"{name}-a"), task_call("beta", f"{name}-b", "explore")]),
            Text("root done"),
        ],
    )
    async with adapter_on(real_server) as oc:
        rec = Recorder(oc)
        root = (await oc.start_session(T, title=name)).session_id
        turn = await oc.send_turn(T, "go " + script_marker(name))
        await rec.wait_for("turn.completed", lambda e: e.turn_id == turn.turn_id, timeout=60)
        await rec.close()
    calls = {
        e.input.get("description"): e.item_id
        for e in rec.of("item.updated", T)
        if e.tool == "task" and e.session_id == root
    }
    started = {e.description: e for e in rec.of("task.started", T)}
    assert {d: (s.item_id, s.agent) for d, s in started.items()} == {
        "alpha": (calls["alpha"], "general"),
        "beta": (calls["beta"], "explore"),
    }
    assert {s.parent_session_id for s in started.values()} == {root}
    done = {e.session_id: e for e in rec.of("task.completed", T)}
    assert {
        d: (done[s.session_id].status, done[s.session_id].result) for d, s in started.items()
    } == {
        "alpha": ("completed", "answer of alpha"),
        "beta": ("completed", "answer of beta"),
    }
    assert all(e.usage is not None and e.usage.output_tokens > 0 for e in done.values())
    types = rec.types(T)
    last = max(i for i, t in enumerate(types) if t == "task.completed")
    assert last < types.index("turn.completed")
