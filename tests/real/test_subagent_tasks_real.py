"""Subagents as tasks and ``stop_subagent`` on a real ``opencode serve``.

A root whose one model step calls ``task`` twice (measured on 1.18.34: both children start
at once, each call's ``item_id`` names its child); one child, or a child and its own child,
stopped alone while the sibling and the root go on.
"""

from __future__ import annotations

import time

import pytest

from adapter.testing import RealOpenCodeServer, ScriptedModelServer
from adapter.testing import model as scripted
from tests.adapter_support import Recorder
from tests.real.conftest import adapter_on

pytestmark = pytest.mark.real

T = "thread"


async def test_parallel_subagents_are_tasks_named_by_their_calls(
    real_server: RealOpenCodeServer, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    name = unique_name
    scripted_model.script(f"{name}-a", [scripted.Text("answer of alpha")])
    scripted_model.script(f"{name}-b", [scripted.Text("answer of beta")])
    scripted_model.script(
        name,
        [
            scripted.ToolCalls(
                [
                    scripted.task_call("alpha", f"{name}-a"),
                    scripted.task_call("beta", f"{name}-b", "explore"),
                ]
            ),
            scripted.Text("root done"),
        ],
    )
    async with adapter_on(real_server) as oc:
        rec = Recorder(oc)
        root = (await oc.start_session(T, title=name)).session_id
        turn = await oc.send_turn(T, "go " + scripted.script_marker(name))
        await rec.wait_for("turn.completed", lambda e: e.turn_id == turn.turn_id, timeout=60)
        await rec.close()
    calls = {
        e.input.get("description"): e.item_id
        for e in rec.of("item.completed", T)
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


@pytest.mark.parametrize("depth", [1, 2])
async def test_one_subagent_stopped_alone_the_sibling_and_the_turn_go_on(
    real_server: RealOpenCodeServer,
    scripted_model: ScriptedModelServer,
    unique_name: str,
    depth: int,
) -> None:
    name = unique_name
    scripted_model.script(f"{name}-hang", [scripted.Hang()])
    if depth == 2:
        scripted_model.script(
            f"{name}-a",
            [
                scripted.ToolCalls([scripted.task_call("deeper", f"{name}-hang")]),
                scripted.Text("never"),
            ],
        )
    else:
        scripted_model.script(f"{name}-a", [scripted.Hang()])
    # The sibling streams its answer for about 4 s: still busy when alpha was stopped.
    scripted_model.script(f"{name}-b", [scripted.Text("beta " * 40, chunk_size=5, delay=0.1)])
    plan = [{"content": "ask both", "status": "in_progress", "priority": "high"}]
    scripted_model.script(
        name,
        [
            scripted.ToolCalls([scripted.ToolCall("todowrite", {"todos": plan})]),
            scripted.ToolCalls(
                [scripted.task_call("alpha", f"{name}-a"), scripted.task_call("beta", f"{name}-b")]
            ),
            scripted.Text("the root's answer"),
        ],
    )
    async with adapter_on(real_server) as oc:
        rec = Recorder(oc)
        root = (await oc.start_session(T, title=name)).session_id
        turn = await oc.send_turn(T, "go " + scripted.script_marker(name))
        await rec.wait_for("task.started", lambda _: len(rec.of("task.started", T)) > depth, 60)
        tasks = {e.description: e.session_id for e in rec.of("task.started", T)}
        alpha, beta = tasks["alpha"], tasks["beta"]
        subtree = {alpha, tasks["deeper"]} if depth == 2 else {alpha}
        await _model_call_open(scripted_model, name, 2)
        started = time.perf_counter()
        report = await oc.stop_subagent(T, alpha)
        elapsed = time.perf_counter() - started
        statuses = await oc.session_tree(T)
        completed = await rec.wait_for(
            "turn.completed", lambda e: e.turn_id == turn.turn_id, timeout=60
        )
        await rec.close()
    aborted_in = max(s.ended or 0.0 for s in report)
    print(f"depth {depth}: aborted in {aborted_in * 1000:.0f} ms, call {elapsed * 1000:.0f} ms")
    assert set(report.session_ids) == subtree and {s.outcome for s in report} == {"aborted"}
    # Every abort of the subtree answered within a second (OpenCode answers once the session
    # is interrupted); the call adds the listing and the status check that confirms it idle.
    assert aborted_in < 1.0, f"the subtree's aborts took {aborted_in:.2f} s"
    assert elapsed < 3.0, f"stop_subagent took {elapsed:.2f} s"
    assert {s: statuses[s].status for s in subtree} == dict.fromkeys(subtree, "idle")
    assert statuses[beta].status == "busy" and statuses[root].status == "busy"
    assert completed.state == "completed"
    # The turn kept its plan and its context meter (the configured model's limit).
    assert [p.todos[0].content for p in rec.of("turn.plan.updated", T)] == ["ask both"]
    assert completed.usage.context_limit == 128000 and completed.usage.context_tokens
    text = "".join(e.delta for e in rec.of("content.delta", T) if e.turn_id == turn.turn_id)
    assert "the root's answer" in text
    ends = {e.session_id: e for e in rec.of("task.completed", T)}
    assert {s: ends[s].status for s in subtree} == dict.fromkeys(subtree, "stopped")
    assert ends[beta].status == "completed" and ends[beta].result.startswith("beta")
    call = next(
        e
        for e in rec.of("item.completed", T)
        if e.session_id == root and e.input.get("description") == "alpha"
    )
    assert (call.status, call.detail) == ("error", "Task cancelled")


async def _model_call_open(model: ScriptedModelServer, name: str, hanging: int) -> None:
    """Until ``hanging`` model requests of the test's children are open (the stopped
    subtree's hanging one and the sibling's streaming one)."""

    def open_ones(requests: list[scripted.ModelRequest]) -> bool:
        mine = [r for r in requests if r.script and r.script.startswith(f"{name}-")]
        return sum(1 for r in mine if r.ended_at is None and not r.is_title) >= hanging

    await model.wait_for_async(open_ones, timeout=30)
