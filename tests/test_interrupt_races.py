"""Races around a Stop: the server's acknowledgement overtaking its abort request,
Stops and sends pressed while a stop is still cleaning up, and what a failed stop
leaves for the next send. Each test holds one request with the fake's hooks to pin
the moment; see ``docs/interrupt.md``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from adapter import OpenCodeAdapter, Timeouts
from adapter.testing.fake import FakeOpenCodeServer, Hang, Task
from tests.adapter_support import Recorder

T = "thread-1"


@pytest.fixture
async def oc(fake: FakeOpenCodeServer) -> AsyncIterator[OpenCodeAdapter]:
    async with OpenCodeAdapter(
        fake.base_url, transport=fake.transport, timeouts=Timeouts(abort=30.0, tree=30.0)
    ) as adapter:
        yield adapter


def abort_path(sid: str) -> str:
    return f"/session/{sid}/abort"


def aborts(fake: FakeOpenCodeServer, sid: str) -> int:
    return sum(1 for r in fake.requests if r.method == "POST" and r.path == abort_path(sid))


def acknowledge(fake: FakeOpenCodeServer, root: str) -> None:
    """What OpenCode emits when an abort of ``root`` lands: ``session.error`` with
    ``MessageAbortedError`` and no message."""
    fake.emit(
        "session.error",
        {"sessionID": root, "error": {"name": "MessageAbortedError", "data": {"message": "x"}}},
    )


async def hanging_task_tree(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> tuple[str, str, str]:
    """A turn whose root waits on a ``task`` child that hangs: (root, child, turn_id)."""
    fake.script("hang", [Hang()])
    fake.script("root", [Task("explore", "hang")])
    info = await oc.start_session(T)
    turn = await oc.send_turn(T, "go [[script:root]]")
    started = await rec.wait_for("child.started")
    return info.session_id, started.session_id, turn.turn_id


# -- B74: the acknowledgement arrives before the abort request returns ------------------


async def test_the_acknowledgement_ends_the_root_step_before_its_abort_returns(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    root, child, turn_id = await hanging_task_tree(oc, fake, rec)
    hold = fake.hold("POST", abort_path(root))
    stop = asyncio.create_task(oc.interrupt_turn(T))
    await hold.wait_started()
    acknowledge(fake, root)
    async with asyncio.timeout(5):  # the old behaviour: held until the abort timeout
        result = await stop
    assert not hold.released, "the stop finished while the root's abort was still held"
    assert result.turn_id == turn_id and result.stop is not None and result.stop.ok
    assert f"/session/{root}/children" in [r.path for r in fake.requests], "the walk ran"
    assert not fake.sessions[child].busy
    assert fake.in_flight == 0, "the held abort was cancelled, not abandoned"
    await rec.settle()
    assert len(rec.of("turn.aborted", T)) == 1
    assert rec.of("runtime.error", T) == []
    hold.release()


async def test_a_turnless_stops_acknowledgement_ends_its_root_step_before_the_abort_returns(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    info = await oc.start_session(T)
    root = info.session_id
    child = fake.add_session(parent_id=root, busy=True)
    hold = fake.hold("POST", abort_path(root))
    stop = asyncio.create_task(oc.interrupt_turn(T))
    await hold.wait_started()
    acknowledge(fake, root)
    async with asyncio.timeout(5):
        result = await stop
    assert not hold.released
    assert result.turn_id is None and result.stop is not None and result.stop.ok
    assert child in result.stop.session_ids and not fake.sessions[child].busy
    assert fake.in_flight == 0, "the held abort and its second aborts were cancelled"
    await rec.settle()
    assert rec.of("turn.aborted", T) == [] and rec.of("runtime.error", T) == []
    assert oc.list_sessions()[0].status == "ready"
    hold.release()
