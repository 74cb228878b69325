"""``run_command`` on a real ``opencode serve``: a configured slash command runs as a turn.

Measured on 1.18.34 (2026-12-01, scripted model; the same on 1.14.48 to 1.18.3):
``POST /session/{id}/command`` takes the ``messageID`` the adapter mints, writes the
template with ``$ARGUMENTS`` replaced as that user message, runs it like a prompt and
answers only when the run has ended (an abort ends it at once, 200 with the aborted
message). A ``subtask`` command writes a ``subtask`` part instead; the root runs a
``task`` tool whose child session does the work, then answers a synthetic "Summarize
the task tool output above" message: one turn, which the Stop stops whole. The first
command of a fresh server takes 1 to 4 s to be written (0.2 s later on).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import pytest

from adapter import InvalidInputError, OpenCodeAdapter, OpenCodeClient
from adapter.testing import RealOpenCodeServer, ScriptedModelServer
from adapter.testing.model import Hang, Step, Text, ToolCall, ToolCalls, script_marker
from tests.adapter_support import Recorder
from tests.real.conftest import adapter_on

pytestmark = pytest.mark.real

T = "thread"


async def idle_tree(oc: OpenCodeAdapter, server: RealOpenCodeServer, sessions: set[str]) -> bool:
    async with OpenCodeClient(server.base_url, directory=str(server.directory)) as client:
        statuses = await client.status()
    return not any(statuses[s].is_busy for s in sessions if s in statuses)


@asynccontextmanager
async def command_thread(
    server: RealOpenCodeServer, model: ScriptedModelServer, name: str, steps: Sequence[Step]
) -> AsyncIterator[tuple[OpenCodeAdapter, Recorder, str]]:
    """Thread ``T`` on an adapter of ``server``, its session titled ``name``, whose model
    calls play ``steps`` (script ``name``): the adapter, a recorder of it (closed on the
    way out, before the adapter) and the thread's root session."""
    model.script(name, list(steps))
    async with adapter_on(server) as oc:
        rec = Recorder(oc)
        try:
            yield oc, rec, (await oc.start_session(T, title=name)).session_id
        finally:
            await rec.close()


async def test_a_command_turn_runs_the_template_and_completes_with_its_answer(
    command_server: RealOpenCodeServer, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    thread = command_thread(command_server, scripted_model, unique_name, [Text("hello there")])
    async with thread as (oc, rec, _):
        turn = await oc.run_command(T, "hello", f"world {script_marker(unique_name)}")
        completed = await rec.wait_for(
            "turn.completed", lambda e: e.turn_id == turn.turn_id, timeout=60
        )
        history = await oc.read_thread(T)
    assert completed.state == "completed"
    assert completed.usage is not None and completed.usage.output_tokens > 0
    assert "hello there" in "".join(e.delta for e in rec.of("content.delta", T))
    assert [e.turn_id for e in rec.of("turn.started", T)] == [turn.turn_id]
    user = history.messages[0]
    assert user.info.role == "user"
    assert [p.raw.get("text") for p in user.parts] == [
        f"Say hello to world {script_marker(unique_name)}"
    ]


async def test_an_unknown_command_is_refused_naming_the_servers_commands(
    command_server: RealOpenCodeServer,
) -> None:
    async with adapter_on(command_server) as oc:
        await oc.start_session(T)
        with pytest.raises(InvalidInputError) as caught:
            await oc.run_command(T, "nope")
        history = await oc.read_thread(T)
    assert "init, review, hello, sub" in str(caught.value)
    assert history.messages == ()


async def test_a_stop_during_a_command_turn_ends_the_run_and_the_turn(
    command_server: RealOpenCodeServer, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    sleep = ToolCall("bash", {"command": "sleep 30", "description": "wait"})
    thread = command_thread(
        command_server, scripted_model, unique_name, [ToolCalls([sleep]), Text("never")]
    )
    async with thread as (oc, rec, root):
        turn = await oc.run_command(T, "hello", script_marker(unique_name))
        await rec.wait_for("item.started", lambda e: e.turn_id == turn.turn_id, timeout=60)
        result = await oc.interrupt_turn(T)
        aborted = await rec.wait_for("turn.aborted", timeout=30)
        assert await idle_tree(oc, command_server, {root})
    assert aborted.turn_id == turn.turn_id == result.turn_id
    assert result.stop is not None and result.stop[root].outcome == "aborted"
    assert rec.of("turn.completed", T) == []


async def test_a_stop_right_after_a_command_is_sent_leaves_nothing_running(
    command_server: RealOpenCodeServer, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    # A cancelled command request still runs on the server: the stop waits until the
    # server has the command, then aborts its run.
    thread = command_thread(command_server, scripted_model, unique_name, [Hang()])
    async with thread as (oc, rec, root):
        sending = asyncio.create_task(oc.run_command(T, "hello", script_marker(unique_name)))
        await rec.wait_for("turn.started", timeout=30)
        result = await oc.interrupt_turn(T)
        start = await sending
        await rec.wait_for("turn.aborted", timeout=30)
        messages = (await oc.read_thread(T)).messages
        assert await idle_tree(oc, command_server, {root})
    assert start.turn_id == result.turn_id
    # The command's run was started and aborted: none runs behind the stop.
    assert [(m.info.role, m.info.error and m.info.error.name) for m in messages] == [
        ("user", None),
        ("assistant", "MessageAbortedError"),
    ]


async def test_a_subtask_command_runs_as_a_child_that_the_stop_covers(
    command_server: RealOpenCodeServer, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    thread = command_thread(command_server, scripted_model, unique_name, [Hang()])
    async with thread as (oc, rec, root):
        turn = await oc.run_command(T, "sub", script_marker(unique_name))
        child = (await rec.wait_for("child.started", timeout=60)).session_id
        await asyncio.to_thread(
            scripted_model.wait_for,
            lambda requests: any(r.open for r in requests if r.session_id == child),
            30,
        )
        result = await oc.interrupt_turn(T)
        aborted = await rec.wait_for("turn.aborted", timeout=30)
        assert await idle_tree(oc, command_server, {root, child})
    assert aborted.turn_id == turn.turn_id
    assert result.stop is not None
    assert {s.session_id: s.outcome for s in result.stop} == {root: "aborted", child: "aborted"}


async def test_a_subtask_command_completes_once_the_root_has_answered_its_child(
    command_server: RealOpenCodeServer, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    thread = command_thread(command_server, scripted_model, unique_name, [Text("child findings")])
    async with thread as (oc, rec, _):
        turn = await oc.run_command(T, "sub", script_marker(unique_name))
        completed = await rec.wait_for("turn.completed", timeout=60)
    assert completed.turn_id == turn.turn_id and completed.state == "completed"
    assert len(rec.of("child.started", T)) == 1
    assert completed.usage is not None and completed.usage.subagents == 1
    # The root's own answer (to the synthetic summary request) is the turn's output.
    assert "done" in "".join(e.delta for e in rec.of("content.delta", T))
