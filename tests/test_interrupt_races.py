"""Races around a Stop: the server's acknowledgement overtaking its abort request,
Stops and sends pressed while a stop is still cleaning up, and what a failed stop
leaves for the next send. Each test holds one request with the fake's hooks to pin
the moment; see ``docs/interrupt.md``."""

from __future__ import annotations

import asyncio

import pytest

from adapter import OpenCodeAdapter, RequestError, Timeouts, TreeStopError
from adapter.testing import caught_up
from adapter.testing.fake import FakeOpenCodeServer, Hang, Permission, Task, Text
from tests.adapter_support import Record, Recorder, emit_session_error, start_scripted_turn

T = "thread-1"


@pytest.fixture
def timeouts() -> Timeouts:
    return Timeouts(abort=30.0, tree=30.0)


# One stop aborts the root three times (adapter/_stop/_stop_tree.py: ``abort_root_twice``).
ROOT_ABORTS_PER_STOP = 3


def abort_path(sid: str) -> str:
    return f"/session/{sid}/abort"


def aborts(fake: FakeOpenCodeServer, sid: str) -> int:
    return sum(1 for r in fake.requests if r.method == "POST" and r.path == abort_path(sid))


def acknowledge(fake: FakeOpenCodeServer, root: str) -> None:
    """What OpenCode emits when an abort of ``root`` lands: ``session.error`` with
    ``MessageAbortedError`` and no message."""
    emit_session_error(fake, root, "MessageAbortedError", "x")


async def hanging_task_tree(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> tuple[str, str, str]:
    """A turn whose root waits on a ``task`` child that hangs: (root, child, turn_id)."""
    fake.script("hang", [Hang()])
    info, turn = await start_scripted_turn(oc, fake, T, "root", [Task("explore", "hang")])
    started = await rec.wait_for("child.started")
    return info.session_id, started.session_id, turn.turn_id


# -- B74: the acknowledgement arrives before the abort request returns ------------------


async def test_the_acknowledgement_ends_the_root_step_before_its_abort_returns(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    """The server acknowledges the root's abort before it answers the request: the walk
    goes on at once (the child is stopped while the root's aborts are held), and the stop
    returns once the server answered every abort it sent, the held ones too. A request
    given up on can still reach the server later and stop the next turn."""
    root, child, turn_id = await hanging_task_tree(oc, fake, rec)
    hold = fake.hold("POST", abort_path(root))
    stop = asyncio.create_task(oc.interrupt_turn(T))
    await hold.wait_started()
    acknowledge(fake, root)
    await fake.wait_until(
        lambda: (
            not fake.sessions[child].busy and bool(fake.calls("GET", f"/session/{root}/children"))
        ),
        description="the walk listed the root's children and stopped the child",
    )
    await caught_up(fake, oc)
    assert not stop.done(), "the stop returned while its root aborts were held"
    hold.release()
    async with asyncio.timeout(5):
        result = await stop
    assert result.turn_id == turn_id and result.stop is not None and result.stop.ok
    aborts = fake.calls("POST", abort_path(root))
    assert aborts and all(r.status == 200 for r in aborts), "every abort was answered"
    assert fake.in_flight == 0
    await caught_up(fake, oc)
    assert len(rec.of("turn.aborted", T)) == 1
    assert rec.of("runtime.error", T) == []


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
    await fake.wait_until(
        lambda: not fake.sessions[child].busy, description="the walk stopped the child"
    )
    await caught_up(fake, oc)
    assert not stop.done(), "the stop returned while its root aborts were held"
    hold.release()
    async with asyncio.timeout(5):
        result = await stop
    assert result.turn_id is None and result.stop is not None and result.stop.ok
    assert child in result.stop.session_ids
    aborts = fake.calls("POST", abort_path(root))
    assert aborts and all(r.status == 200 for r in aborts), "every abort was answered"
    await caught_up(fake, oc)
    assert rec.of("turn.aborted", T) == [] and rec.of("runtime.error", T) == []
    assert oc.list_sessions()[0].status == "ready"


@pytest.mark.opencode_adapter(timeouts=Timeouts(abort=0.5, tree=30.0))
async def test_a_root_abort_acknowledged_but_never_answered_is_given_up_at_the_abort_bound(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    """Waiting for that answer is bounded: a server that acknowledged the root's abort and
    never answers it holds the stop until ``Timeouts.abort`` from its start, not longer;
    the tree is stopped and the stop succeeds (the acknowledgement is the root's outcome)."""
    root, child, turn_id = await hanging_task_tree(oc, fake, rec)
    hold = fake.hold("POST", abort_path(root))
    stop = asyncio.create_task(oc.interrupt_turn(T))
    await hold.wait_started()
    acknowledge(fake, root)
    async with asyncio.timeout(5):  # never released: the bound ends the wait
        result = await stop
    assert result.turn_id == turn_id and result.stop is not None and result.stop.ok
    assert not fake.sessions[child].busy and not hold.released
    assert fake.in_flight == 0, "the unanswered aborts were given up (cancelled)"
    await caught_up(fake, oc)
    assert len(rec.of("turn.aborted", T)) == 1 and rec.of("runtime.error", T) == []
    hold.release()


# -- B81: Stop and send pressed while a stop that outlived its turn cleans up ------------


async def test_stop_and_send_during_the_cleanup_of_a_turn_that_failed_wait_for_it(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    """A genuine provider error ends the turn while the stop still walks the tree: a
    second Stop shares the pending stop, and a send goes out only once it is done."""
    root, _child, turn_id = await hanging_task_tree(oc, fake, rec)
    api_child = fake.add_session(parent_id=root, busy=True)
    hold = fake.hold("POST", abort_path(api_child))
    first = asyncio.create_task(oc.interrupt_turn(T))
    await hold.wait_started()
    emit_session_error(fake, root, "APIError", "quota")
    failed = await rec.wait_for("turn.completed")
    assert failed.turn_id == turn_id and failed.state == "failed"
    fake.script("next", [Text("after the cleanup")])
    second = asyncio.create_task(oc.interrupt_turn(T))
    send = asyncio.create_task(oc.send_turn(T, "next [[script:next]]"))
    await caught_up(fake, oc)
    assert not first.done() and not second.done() and not send.done()
    assert sum(1 for r in fake.requests if r.path.endswith("/prompt_async")) == 1
    assert aborts(fake, api_child) == 1
    [info] = oc.list_sessions()
    assert info.status == "stopping" and info.active_turn_id is None
    hold.release()
    results = await asyncio.gather(first, second)
    assert results[0] is results[1], "one stop, shared"
    assert aborts(fake, root) == ROOT_ABORTS_PER_STOP and aborts(fake, api_child) == 1
    assert len(rec.of("turn.stopping", T)) == 1 and len(rec.of("turn.stopped", T)) == 1
    nxt = await send
    assert nxt.turn_id != turn_id
    done = await rec.wait_for("turn.completed", lambda e: e.turn_id == nxt.turn_id)
    assert done.state == "completed"
    assert rec.of("turn.aborted", T) == []


# -- B76: a failed turnless stop is cleared before the next turn -------------------------


async def test_a_failed_turnless_stop_is_cleared_before_the_next_turn(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    info = await oc.start_session(T)
    child = fake.add_session(parent_id=info.session_id, busy=True)
    refusal = fake.fail("POST", abort_path(child), status=400, times=None)
    with pytest.raises(TreeStopError) as caught:
        await oc.interrupt_turn(T)
    assert caught.value.first_failure is not None
    assert caught.value.first_failure.session_id == child
    # Nothing of the failed stop is left pending: a rollback, refused while a stop is
    # under way, goes through (the thread has no turn: it reverts nothing).
    await oc.rollback_thread(T, 1)
    assert oc.list_sessions()[0].status == "ready"
    refusal.remove()
    fake.script("ok", [Text("fresh turn")])
    async with asyncio.timeout(5):  # a stop left pending would make it wait forever
        started = await oc.send_turn(T, "go [[script:ok]]")
    done = await rec.wait_for("turn.completed")
    assert done.turn_id == started.turn_id and done.state == "completed"
    assert rec.of("turn.aborted", T) == []


# -- B71: after an abort that timed out, the next send works ----------------------------


async def test_a_send_straight_after_an_abort_timeout_steers_the_turn_and_it_finishes(
    fake: FakeOpenCodeServer,
    record: Record,
) -> None:
    """The root's abort hangs past ``Timeouts.abort`` (and its re-abort, the root being
    busy, until ``abort + tree``): the stop fails and claims nothing.
    The turn it could not stop is still running (the walk stopped its subagent, and the
    root went on to ask a permission), so the next send, without another Stop, steers
    that turn; once the permission is answered the steer is answered and the turn
    completes."""
    async with OpenCodeAdapter(
        fake.base_url, transport=fake.transport, timeouts=Timeouts(abort=0.2, tree=0.3)
    ) as oc:
        rec = record(oc)
        fake.script("hang", [Hang()])
        fake.script("root", [Task("explore", "hang"), Permission("bash", ["ls"]), Text("ok")])
        info = await oc.start_session(T)
        root = info.session_id
        turn = await oc.send_turn(T, "go [[script:root]]")
        await rec.wait_for("child.started")
        hold = fake.hold("POST", abort_path(root))
        with pytest.raises(TreeStopError) as caught:
            await oc.interrupt_turn(T)
        failure = caught.value.first_failure
        assert failure is not None and failure.session_id == root
        assert isinstance(failure.error, RequestError)
        assert fake.in_flight == 0 and not hold.released
        root_aborts = aborts(fake, root)
        opened = await rec.wait_for("request.opened")
        [state] = oc.list_sessions()
        assert state.status == "running" and state.active_turn_id == turn.turn_id
        steer = await oc.send_turn(T, "and also this")
        assert steer.turn_id == turn.turn_id
        await oc.respond_to_request(T, opened.request_id, "accept")
        done = await rec.wait_for("turn.completed")
        assert done.turn_id == turn.turn_id and done.state == "completed"
        assert rec.of("turn.aborted", T) == []
        assert aborts(fake, root) == root_aborts, "no second Stop was pressed"
        hold.release()
