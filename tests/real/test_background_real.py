"""Background subagents on a real ``opencode serve``
(``OPENCODE_EXPERIMENTAL_BACKGROUND_SUBAGENTS``): the turn stays open while a background
child works, the root's run on the child's result reaches the host in that same turn, and
a stop ends it all with nothing run again.

Measured on 1.18.34 (``docs/adapter.md``, "Background subagents"): the root's ``task`` call
completes at once, the root answers and goes idle while the child works; when the child ends
on its own, OpenCode writes ``<task id=… state="completed">`` into the root and runs it again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from adapter import OpenCodeAdapter, TurnStart
from adapter.testing import RealOpenCodeServer, ScriptedModelServer
from adapter.testing.model import Text, ToolCall, ToolCalls, script_marker, task_call
from tests.adapter_support import Recorder
from tests.real.conftest import adapter_on

pytestmark = pytest.mark.real

T = "thread"


def script_background_turn(model: ScriptedModelServer, name: str, *, child_seconds: float) -> None:
    model.script(
        name,
        [
            ToolCalls([task_call("in the background", f"{name}-child", background=True)]),
            Text("root answered at once"),
            Text("root ran on the result"),
        ],
    )
    model.script(
        f"{name}-child",
        [
            ToolCalls(
                [ToolCall("bash", {"command": f"sleep {child_seconds}", "description": "work"})]
            ),
            Text("child done"),
        ],
    )


@asynccontextmanager
async def answered_at_once(
    server: RealOpenCodeServer, model: ScriptedModelServer, name: str, *, child_seconds: float
) -> AsyncIterator[tuple[OpenCodeAdapter, Recorder, TurnStart]]:
    """An adapter of ``server``, a recorder of it (closed on the way out) and the turn of
    script ``name`` (``script_background_turn``), once the root answered (its background
    child is still at work)."""
    script_background_turn(model, name, child_seconds=child_seconds)
    async with adapter_on(server) as oc:
        rec = Recorder(oc)
        try:
            await oc.start_session(T, title=name)
            turn = await oc.send_turn(T, "go " + script_marker(name))
            await rec.wait_for(
                "content.delta",
                lambda e: "root answered at once" in text_of(rec, turn.turn_id),
                timeout=60,
            )
            yield oc, rec, turn
        finally:
            await rec.close()


async def test_a_turn_stays_open_until_its_background_child_ended_and_the_root_answered_it(
    background_server: RealOpenCodeServer, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    name = unique_name
    running = answered_at_once(background_server, scripted_model, name, child_seconds=2)
    async with running as (oc, rec, turn):
        # The root answered and went idle, the child still works: the turn is running.
        assert oc.session_info(T).status == "running"
        done = await rec.wait_for("turn.completed", lambda e: e.turn_id == turn.turn_id, timeout=60)
    text = text_of(rec, turn.turn_id)
    assert "root answered at once" in text and "root ran on the result" in text
    assert text.index("root answered at once") < text.index("root ran on the result")
    assert [e.turn_id for e in rec.of("turn.started", T)] == [turn.turn_id]
    assert done.usage.subagents == 1
    (completed,) = rec.of("task.completed", T)
    assert (completed.status, completed.result) == ("completed", "child done")
    assert rec.types(T).index("task.completed") < rec.types(T).index("turn.completed")


async def test_interrupting_a_turn_whose_background_child_works_stops_it_and_nothing_runs_again(
    background_server: RealOpenCodeServer, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    name = unique_name
    running = answered_at_once(background_server, scripted_model, name, child_seconds=30)
    async with running as (oc, rec, turn):
        started = await rec.wait_for("child.started", timeout=60)
        result = await oc.interrupt_turn(T)
        assert result.stop is not None and result.stop.ok
        assert started.session_id in result.stop.session_ids
        tree = await oc.session_tree(T)
        assert all(node.status == "idle" for node in tree.sessions)
        await _no_rerun(oc, scripted_model, name)
    assert rec.types(T).count("turn.aborted") == 1
    assert "root ran on the result" not in text_of(rec, turn.turn_id)


def text_of(rec: Recorder, turn_id: str) -> str:
    """The root's answer text of ``turn_id`` as the host received it."""
    deltas = rec.of("content.delta", T)
    return "".join(e.delta for e in deltas if e.turn_id == turn_id and e.stream == "assistant_text")


async def _no_rerun(oc: OpenCodeAdapter, model: ScriptedModelServer, name: str) -> None:
    """The root's third step (its run on the child's result) is never asked for."""
    root_steps = [r for r in model.requests if r.script == name and not r.is_title]
    assert len(root_steps) == 2, [r.step for r in root_steps]
