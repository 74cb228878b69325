"""Faults during a stop: hanging and failing aborts, failing listings, a tree that changes
under the walk, a thousand Stop presses, and stop/interrupt/send racing each other."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Coroutine
from typing import Any

import httpx
import pytest

from adapter import (
    InterruptResult,
    OpenCodeClient,
    OpenCodeError,
    SessionClosedError,
    TreeStopError,
    TurnCancelledError,
    TurnStart,
    UnknownThreadError,
    stop_tree,
)
from adapter.testing import caught_up
from adapter.testing.fake import FakeOpenCodeServer, Hang, Task, Text
from tests.adapter_support import busy_branch, held_abort, start_scripted_turn
from tests.faults.harness import ROOT_ABORTS_PER_STOP, Harness, aborts, fast

T = "thread-1"


async def start_hanging_turn(h: Harness, fake: FakeOpenCodeServer) -> tuple[str, str]:
    """A turn that streamed some text and then hangs; returns (root, turn_id)."""
    info, turn = await start_scripted_turn(
        h.oc, fake, T, "hang", [Text("produced before the stop"), Hang()]
    )
    await h.rec.wait_for("content.delta")
    return info.session_id, turn.turn_id


# ------------------------------------------------------------------ abort hangs / fails


async def test_a_hanging_root_abort_times_out_releases_every_waiter_and_keeps_the_turn(
    fake: FakeOpenCodeServer,
) -> None:
    async with Harness(fake, timeouts=fast(abort=0.2, tree=0.3)) as h:
        root, turn_id = await start_hanging_turn(h, fake)
        hold = fake.hold("POST", f"/session/{root}/abort")
        presses = [asyncio.create_task(h.oc.interrupt_turn(T)) for _ in range(3)]
        await hold.wait_started()
        send = asyncio.create_task(h.oc.send_turn(T, "queued behind the stop"))
        started = time.perf_counter()
        outcomes = await asyncio.gather(*presses, send, return_exceptions=True)
        assert time.perf_counter() - started < 1.5, "bounded by abort_timeout + tree_timeout"
        assert all(isinstance(o, TreeStopError) for o in outcomes), outcomes
        error = outcomes[0]
        assert isinstance(error, TreeStopError) and error.first_failure is not None
        assert error.first_failure.session_id == root
        assert fake.in_flight == 0, "the hanging abort was cancelled, not abandoned"
        await h.consistent()
        [info] = h.oc.list_sessions()
        assert info.status == "running" and info.active_turn_id == turn_id
        assert h.rec.of("turn.aborted") == []
        # Stop can be pressed again once the server answers, and the output is still there.
        hold.release()
        result = await h.oc.interrupt_turn(T)
        assert result.turn_id == turn_id
        assert "produced before the stop" in result.partial.text
        assert (await h.rec.wait_for("turn.aborted")).turn_id == turn_id


async def test_one_failing_child_abort_among_many_attempts_all_and_raises_the_first(
    fake: FakeOpenCodeServer, h: Harness
) -> None:
    root, turn_id = await start_hanging_turn(h, fake)
    kids = [fake.add_session(parent_id=root, busy=True) for _ in range(30)]
    failing = {kids[7], kids[19]}
    for kid in failing:
        fake.fail("POST", f"/session/{kid}/abort", status=400, times=None)
    with pytest.raises(TreeStopError) as caught:
        await h.oc.interrupt_turn(T)
    report = caught.value.report
    assert {s.session_id for s in report.failures} == failing
    first = caught.value.first_failure
    assert first is not None
    assert first is next(s for s in report if s.outcome == "failed"), "first in walk order"
    # (the verification pass re-aborts the still-busy ones, and may relabel the step)
    assert first.failed_step in ("abort", "verify") and caught.value.cause is first.error
    assert all(aborts(fake, k) == 1 for k in kids if k not in failing), "each attempted"
    assert all(aborts(fake, k) >= 1 for k in failing)
    assert all(not fake.sessions[k].busy for k in kids if k not in failing)
    assert all(fake.sessions[k].busy for k in failing)
    await h.consistent()
    assert h.oc.list_sessions()[0].active_turn_id == turn_id


async def test_a_failing_children_listing_still_stops_every_other_branch(
    fake: FakeOpenCodeServer, h: Harness
) -> None:
    root, _ = await start_hanging_turn(h, fake)
    a, a1 = busy_branch(fake, root)
    b, b1 = busy_branch(fake, root)
    fake.fail("GET", f"/session/{a}/children", status=400, times=None)
    with pytest.raises(TreeStopError) as caught:
        await h.oc.interrupt_turn(T)
    first = caught.value.first_failure
    assert first is not None and first.session_id == a and first.failed_step == "children"
    assert caught.value.report[a].error is not None
    assert not fake.sessions[a].busy, "its own abort happened before the listing failed"
    assert not fake.sessions[b].busy and not fake.sessions[b1].busy
    assert a1 not in caught.value.report, "a subtree behind a failed listing is unreached"
    assert fake.sessions[a1].busy
    await h.consistent()


async def test_a_transient_children_failure_is_retried_and_reaches_the_whole_tree(
    fake: FakeOpenCodeServer, h: Harness
) -> None:
    root, _ = await start_hanging_turn(h, fake)
    a, a1 = busy_branch(fake, root)
    fake.fail("GET", f"/session/{a}/children", status=503, times=3)
    result = await h.oc.interrupt_turn(T)
    assert result.stop is not None and result.stop.ok and a1 in result.stop
    assert not fake.sessions[a1].busy


# ------------------------------------------------------------------ the tree changes


async def test_a_child_created_during_the_walk_is_stopped(
    fake: FakeOpenCodeServer, h: Harness
) -> None:
    root, _ = await start_hanging_turn(h, fake)
    a = fake.add_session(parent_id=root, busy=True)
    b = fake.add_session(parent_id=root, busy=True)
    late: list[str] = []

    async def spawn_under_b(request: httpx.Request) -> None:
        if not late:  # while a's abort is in flight, b (not yet listed) gets a child
            late.append(fake.add_session(parent_id=b, busy=True, emit=True))

    fake.on("POST", f"/session/{a}/abort", spawn_under_b)
    result = await h.oc.interrupt_turn(T)
    assert result.stop is not None and result.stop.ok
    assert late and late[0] in result.stop and result.stop[late[0]].parent_id == b
    assert not fake.sessions[late[0]].busy
    await h.consistent()


async def test_a_root_busy_again_after_the_walk_is_caught_by_the_verification_pass(
    fake: FakeOpenCodeServer, h: Harness
) -> None:
    root, turn_id = await start_hanging_turn(h, fake)
    spawned: list[str] = []

    async def root_starts_again(request: httpx.Request) -> None:
        if not spawned:  # the walk is done; the root takes one more step and spawns
            fake.set_busy(root, True)
            spawned.append(fake.add_session(parent_id=root, busy=True, emit=True))

    fake.on("GET", "/session/status", root_starts_again)
    result = await h.oc.interrupt_turn(T)
    report = result.stop
    assert report is not None and report.ok
    assert report.verify_rounds >= 2 and report[root].reaborts == 1
    assert spawned[0] in report, "the re-listed root's new child was walked"
    assert not fake.sessions[root].busy and not fake.sessions[spawned[0]].busy
    assert (await h.rec.wait_for("turn.aborted")).turn_id == turn_id
    await caught_up(fake, h.oc)
    assert h.rec.of("runtime.error") == [], "the re-abort's acknowledgement is no error"
    await h.consistent()


async def test_a_tree_that_never_stays_stopped_fails_after_the_last_verify_round(
    fake: FakeOpenCodeServer,
) -> None:
    root = fake.add_session(busy=True)

    async def always_busy_again(request: httpx.Request) -> None:
        fake.set_busy(root, True)

    fake.on("GET", "/session/status", always_busy_again)
    async with OpenCodeClient(fake.base_url, transport=fake.transport) as client:
        started = time.perf_counter()
        with pytest.raises(TreeStopError) as caught:
            await stop_tree(client, root, max_verify_rounds=3, timeout=2.0)
    assert time.perf_counter() - started < 2.0
    assert caught.value.report.still_busy == (root,)
    assert caught.value.report.verify_rounds == 3
    assert fake.sessions[root].abort_count == 4, "the first abort and one per round"


# ------------------------------------------------------------------ many presses


async def test_a_thousand_concurrent_interrupts_share_one_stop(
    fake: FakeOpenCodeServer, h: Harness
) -> None:
    root, turn_id = await start_hanging_turn(h, fake)
    hold = fake.hold("POST", f"/session/{root}/abort")
    presses = [
        asyncio.create_task(h.oc.interrupt_turn(T, turn_id if i % 2 else None)) for i in range(1000)
    ]
    await hold.wait_started()
    await caught_up(fake, h.oc)
    hold.release()
    results = await asyncio.gather(*presses)
    assert all(r is results[0] for r in results)
    assert aborts(fake, root) == ROOT_ABORTS_PER_STOP
    await caught_up(fake, h.oc)
    assert len(h.rec.of("turn.aborted", T)) == 1
    assert results[0].turn_id == turn_id
    await h.consistent()


# ------------------------------------------------------------------ races


ORDERS = list(itertools.permutations(["interrupt", "stop", "send"]))


@pytest.mark.parametrize("held", [False, True], ids=["fast-abort", "held-abort"])
@pytest.mark.parametrize("order", ORDERS, ids=["-".join(o) for o in ORDERS])
async def test_stop_session_racing_interrupt_and_send_ends_in_one_clean_exit(
    fake: FakeOpenCodeServer, order: tuple[str, ...], held: bool, h: Harness
) -> None:
    fake.script("child", [Hang()])
    info, _ = await start_scripted_turn(
        h.oc, fake, T, "work", [Text("working"), Task("sub", "child")]
    )
    await h.rec.wait_for("child.started")
    hold = fake.hold("POST", f"/session/{info.session_id}/abort") if held else None
    calls: dict[str, Callable[[], Coroutine[Any, Any, object]]] = {
        "interrupt": lambda: h.oc.interrupt_turn(T),
        "stop": lambda: h.oc.stop_session(T),
        "send": lambda: h.oc.send_turn(T, "more"),
    }
    tasks = {name: asyncio.create_task(calls[name]()) for name in order}
    if hold is not None:
        await hold.wait_started()
        await caught_up(fake, h.oc)  # the racing calls have run up to the held abort
        hold.release()
    async with asyncio.timeout(5):
        outcomes = dict(
            zip(
                tasks,
                await asyncio.gather(*tasks.values(), return_exceptions=True),
                strict=True,
            )
        )
    assert outcomes["stop"] is None
    closed = (SessionClosedError, TurnCancelledError, UnknownThreadError)
    assert isinstance(outcomes["interrupt"], (InterruptResult, *closed)), outcomes
    assert isinstance(outcomes["send"], (TurnStart, *closed)), outcomes
    await caught_up(fake, h.oc)
    assert not h.oc.has_session(T)
    assert len(h.rec.of("session.exited", T)) == 1
    assert all(not s.busy for s in fake.sessions.values()), "nothing left running"


async def test_a_cancelled_interrupt_caller_does_not_abandon_the_stop(
    fake: FakeOpenCodeServer, h: Harness
) -> None:
    root, turn_id = await start_hanging_turn(h, fake)
    hold, impatient = await held_abort(fake, root, h.oc.interrupt_turn(T))
    impatient.cancel()
    with pytest.raises(asyncio.CancelledError):
        await impatient
    hold.release()
    aborted = await h.rec.wait_for("turn.aborted")
    assert aborted.turn_id == turn_id
    again = await h.oc.interrupt_turn(T, turn_id)
    assert again.stop is not None and aborts(fake, root) == ROOT_ABORTS_PER_STOP
    await h.consistent()


async def test_stop_session_mid_turn_ends_the_turn_with_the_exit_and_stops_the_tree(
    fake: FakeOpenCodeServer, h: Harness
) -> None:
    fake.script("child", [Hang()])
    _, turn = await start_scripted_turn(
        h.oc, fake, T, "work", [Text("working"), Task("sub", "child")]
    )
    child = await h.rec.wait_for("child.started")
    await h.oc.stop_session(T)
    await caught_up(fake, h.oc)
    assert not fake.sessions[child.session_id].busy
    assert not any(s.busy for s in fake.sessions.values())
    log = [e for e in h.rec.events if e.thread_id == T]
    assert log[-1].type == "session.exited" and not h.oc.has_session(T)
    ends = [e for e in log if e.type in ("turn.completed", "turn.aborted", "session.exited")]
    assert [e.turn_id for e in ends if e.turn_id is not None] == [turn.turn_id]


async def test_stop_session_mid_turn_never_reports_its_own_abort_as_external(
    fake: FakeOpenCodeServer, h: Harness
) -> None:
    await start_hanging_turn(h, fake)
    await h.oc.stop_session(T)
    await caught_up(fake, h.oc)
    reasons = [e.reason for e in h.rec.of("turn.aborted", T)]
    assert "Aborted outside this adapter." not in reasons, reasons


async def test_stop_session_waits_for_a_pending_stop_and_cancels_queued_sends(
    fake: FakeOpenCodeServer, h: Harness
) -> None:
    root, turn_id = await start_hanging_turn(h, fake)
    hold, press = await held_abort(fake, root, h.oc.interrupt_turn(T))
    sends = [asyncio.create_task(h.oc.send_turn(T, f"queued {i}")) for i in range(5)]
    await caught_up(fake, h.oc)
    closing = asyncio.create_task(h.oc.stop_session(T))
    for send in sends:
        with pytest.raises(TurnCancelledError):
            await send
    hold.release()
    result = await press
    await closing
    assert result.turn_id == turn_id and result.stop is not None
    types = [e.type for e in h.rec.events if e.thread_id == T]
    assert types.count("session.exited") == 1 and types[-1] == "session.exited"
    assert types.count("turn.aborted") == 1
    prompts = [r for r in fake.requests if r.path.endswith("/prompt_async")]
    assert len(prompts) == 1, "no queued send reached the server"


async def test_interrupt_failure_then_success_emits_one_abort_and_keeps_the_partial(
    fake: FakeOpenCodeServer, h: Harness
) -> None:
    root, turn_id = await start_hanging_turn(h, fake)
    refusal = fake.fail("POST", f"/session/{root}/abort", status=400, times=None)
    for _ in range(3):
        with pytest.raises(OpenCodeError):
            await h.oc.interrupt_turn(T)
        await h.consistent()
    refusal.remove()
    result = await h.oc.interrupt_turn(T)
    assert "produced before the stop" in result.partial.text
    await caught_up(fake, h.oc)
    assert [e.turn_id for e in h.rec.of("turn.aborted")] == [turn_id]
