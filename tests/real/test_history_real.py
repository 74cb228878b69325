"""History by turns on a real ``opencode serve``: the stored shape ``turn_starts`` relies on.

A steer (a prompt sent while a tool step runs) is stored before the running
step completes; a prompt sent after the run went idle is stored after its last
step completed; an automatic compaction writes a ``compaction`` user message
and a ``synthetic`` continue message into the running turn. ``turn_starts``
must find one start per turn in each case, from the stored messages alone.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from adapter import Message, OpenCodeClient
from adapter._base._ids import mint_message_id
from adapter._threads._turn_boundaries import is_server_written, turn_starts
from adapter.testing import RealOpenCodeServer, ScriptedModelServer
from adapter.testing.model import Text, ToolCall, ToolCalls, script_marker

pytestmark = pytest.mark.real


def bash(command: str) -> ToolCalls:
    return ToolCalls([ToolCall("bash", {"command": command, "description": "run"})])


async def wait_idle(client: OpenCodeClient, session_id: str, timeout: float = 60.0) -> None:
    """Until ``/session/status`` has not listed the session for three polls in a row
    (a run can go idle and busy again between steps)."""
    deadline = time.monotonic() + timeout
    idle_polls = 0
    while idle_polls < 3:
        assert time.monotonic() < deadline, f"{session_id} still busy after {timeout} s"
        await asyncio.sleep(0.1)
        idle_polls = 0 if session_id in await client.status() else idle_polls + 1


async def wait_tool_running(client: OpenCodeClient, session_id: str) -> None:
    deadline = time.monotonic() + 30.0
    while time.monotonic() < deadline:
        for message in await client.messages(session_id):
            if any(p.state is not None and p.state.status == "running" for p in message.parts):
                return
        await asyncio.sleep(0.05)
    raise AssertionError("the tool step never ran")


def users(messages: list[Message]) -> list[Message]:
    return [m for m in messages if m.info.role == "user"]


async def test_a_steered_turn_and_a_separate_turn(
    opencode_client: OpenCodeClient, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    scripted_model.script(
        unique_name, [bash("sleep 1.5; echo built"), Text("after the tool"), Text("second turn")]
    )
    session = await opencode_client.create_session(title="history by turns")
    first, steer, second = (mint_message_id() for _ in range(3))
    await opencode_client.prompt_async(
        session.id, "build it " + script_marker(unique_name), message_id=first
    )
    await wait_tool_running(opencode_client, session.id)
    await opencode_client.prompt_async(session.id, "and also lint", message_id=steer)
    await wait_idle(opencode_client, session.id)
    await opencode_client.prompt_async(session.id, "now a new question", message_id=second)
    await wait_idle(opencode_client, session.id)

    messages = await opencode_client.messages(session.id)
    assert [m.info.id for m in users(messages)] == [first, steer, second]
    # the stored shape the rule relies on
    by_id = {m.info.id: m.info for m in messages}
    steered_step = next(m.info for m in messages if m.info.parent_id == first)
    steer_created, second_created = by_id[steer].created, by_id[second].created
    assert steered_step.finish == "tool-calls"
    assert steered_step.completed is not None and steer_created is not None
    assert steer_created < steered_step.completed  # stored while the step ran
    answer_to_steer = [m.info for m in messages if m.info.parent_id == steer]
    run_end = answer_to_steer[-1].completed if answer_to_steer else None
    assert run_end is not None and second_created is not None
    assert second_created >= run_end  # stored after the run's last step

    assert [m.info.id for m in turn_starts(messages)] == [first, second]
    known = {first: "turn-1", steer: "turn-1", second: "turn-2"}
    assert [m.info.id for m in turn_starts(messages, known)] == [first, second]
    # the adapter's record wins: had it sent the steer as a turn of its own...
    known_apart = {first: "turn-1", steer: "turn-2", second: "turn-3"}
    assert [m.info.id for m in turn_starts(messages, known_apart)] == [first, steer, second]


@pytest.fixture(scope="module")
def compacting_server(scripted_model: ScriptedModelServer) -> Iterator[RealOpenCodeServer]:
    """A server that compacts automatically once a step's prompt passes ~12k tokens (the
    scripted model reports the request's size / 4 as its prompt tokens)."""
    with RealOpenCodeServer(
        scripted_model.base_url,
        extra_env={"OPENCODE_DISABLE_AUTOCOMPACT": "0"},
        config_overrides={
            "compaction": {"auto": True},
            "provider": {
                "fake": {"models": {"fake-model": {"limit": {"context": 14000, "output": 2000}}}}
            },
        },
    ) as server:
        yield server


async def test_automatic_compaction_stays_in_its_turn(
    compacting_server: RealOpenCodeServer, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    # The first step's prompt is ~8k tokens; its 40 kB tool output pushes the second past
    # the limit, so the server compacts after the second step and continues the turn.
    scripted_model.script(
        unique_name,
        [bash("head -c 40000 /dev/zero | tr '\\0' a"), bash("echo two"), Text("continued")],
    )
    async with OpenCodeClient(
        compacting_server.base_url, directory=str(compacting_server.directory)
    ) as client:
        session = await client.create_session(title="compaction")
        first, second = mint_message_id(), mint_message_id()
        await client.prompt_async(session.id, "go " + script_marker(unique_name), message_id=first)
        await wait_idle(client, session.id)
        await client.prompt_async(session.id, "next question", message_id=second)
        await wait_idle(client, session.id)
        messages = await client.messages(session.id)

    prompts = users(messages)
    written = [m for m in prompts if is_server_written(m)]
    assert [m.info.id for m in prompts if m not in written] == [first, second]
    assert [[p.type for p in m.parts] for m in written] == [["compaction"], ["text"]]
    assert written[0].parts[0].raw.get("auto") is True
    assert written[1].parts[0].raw.get("synthetic") is True
    summary = next(m.info for m in messages if m.info.parent_id == written[0].info.id)
    assert summary.raw.get("summary") is True
    # by time alone the server's messages look like new turns: each was created after
    # the step before it completed
    created_after_a_completed_step: dict[str, bool] = {}
    last_completed: float | None = None
    for message in messages:
        info = message.info
        if info.role == "assistant":
            last_completed = info.completed
        else:
            created_after_a_completed_step[info.id] = (
                last_completed is not None
                and info.created is not None
                and info.created >= last_completed
            )
    assert all(created_after_a_completed_step[m.info.id] for m in written)
    # the continuation's output belongs to the synthetic continue message
    assert any(m.info.parent_id == written[1].info.id for m in messages)

    assert [m.info.id for m in turn_starts(messages)] == [first, second]
    assert [m.info.id for m in turn_starts(messages, {first: "t1", second: "t2"})] == [
        first,
        second,
    ]
