"""Turns that are never lost or stuck: one regression test per race that lost or stuck a turn.

Each test drives the in-process fake the way the real OpenCode 1.18.34 was measured
to behave (a follow-up accepted as a run ends starts a second run, automatic
compaction, status outages, retries, a vanished run, pending requests that outlive
an abort) and checks what a host sees through the public API: the canonical events
and ``SessionInfo``. Every test also checks the invariant the issue asks for:
every turn that started ends exactly once, after its last output.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest

from adapter import OpenCodeAdapter, Timeouts, TurnStart
from adapter.testing import caught_up
from adapter.testing.fake import (
    Compact,
    Fail,
    FakeOpenCodeServer,
    Hang,
    Permission,
    Text,
    Tool,
)
from adapter.testing.pytest_plugin import AdapterFactory
from tests.adapter_support import Record, Recorder, start_scripted_turn

T = "thread-1"
#: A turn ends with ``turn.completed`` or ``turn.aborted``, or with its thread:
#: ``session.exited`` carries the turn id of the turn it ended (``stop_session``).
_ENDINGS = ("turn.completed", "turn.aborted", "session.exited")


# -- helpers ---------------------------------------------------------------------------


def text_of(rec: Recorder, thread_id: str = T, turn_id: str | None = None) -> str:
    """The assistant text the host was shown, in order."""
    return "".join(
        e.delta
        for e in rec.of("content.delta", thread_id)
        if e.stream == "assistant_text" and (turn_id is None or e.turn_id == turn_id)
    )


def endings(rec: Recorder, turn_id: str) -> list[Any]:
    return [e for e in rec.events if e.type in _ENDINGS and e.turn_id == turn_id]


def assert_every_turn_ended_once_after_its_output(rec: Recorder) -> None:
    """The issue's invariant: each ``turn.started`` has exactly one ending, and no
    output of that turn comes after it."""
    for started in rec.of("turn.started"):
        ends = [
            i
            for i, e in enumerate(rec.events)
            if e.type in _ENDINGS and e.turn_id == started.turn_id
        ]
        assert len(ends) == 1, f"turn {started.turn_id} ended {len(ends)} times"
        late = [
            e
            for e in rec.events[ends[0] + 1 :]
            if e.turn_id == started.turn_id and e.type.startswith(("content.", "item."))
        ]
        assert not late, f"output after the end of {started.turn_id}: {late}"


async def assert_ready_with_every_turn_ended_once(
    fake: FakeOpenCodeServer, oc: OpenCodeAdapter, rec: Recorder
) -> None:
    """How a test here ends: thread ``T`` is ready, and once the adapter has caught up
    with the fake every turn ended once after its output."""
    assert status(oc) == "ready"
    await caught_up(fake, oc)
    assert_every_turn_ended_once_after_its_output(rec)


async def a_turn_whose_prompt_is_swallowed(
    oc: OpenCodeAdapter,
    fake: FakeOpenCodeServer,
    rec: Recorder,
    swallow: Callable[[httpx.Request], Awaitable[httpx.Response]],
    timeout: float,
) -> tuple[TurnStart, Any, float]:
    """Thread ``T`` sends a turn whose prompt ``swallow`` answers (and never runs): the
    turn, its ``turn.completed`` (within ``timeout``) and the seconds from send to end."""
    fake.on("POST", "/session/{id}/prompt_async", swallow)
    await oc.start_session(T)
    started = time.monotonic()
    turn = await oc.send_turn(T, "hello")
    done = await rec.wait_for("turn.completed", timeout=timeout)
    return turn, done, time.monotonic() - started


async def eventually(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not reached")
        await asyncio.sleep(0.01)


def status(oc: OpenCodeAdapter, thread_id: str = T) -> str:
    [info] = [i for i in oc.list_sessions() if i.thread_id == thread_id]
    return info.status


@pytest.fixture
async def tight(fake: FakeOpenCodeServer) -> AsyncIterator[OpenCodeAdapter]:
    """An adapter with small watchdog bounds, to test what happens when they pass."""
    timeouts = Timeouts(
        connect=2.0, echo=0.5, idle_confirm=0.6, idle_confirm_backoff_max=0.1, watchdog=0.05
    )
    async with OpenCodeAdapter(fake.base_url, transport=fake.transport, timeouts=timeouts) as oc:
        yield oc


# -- a follow-up sent as a run ends ---------------------------------------------------------


async def test_a_follow_up_sent_as_the_run_ends_is_part_of_the_turn(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("first", [Text("first answer. ")])
    fake.script("second", [Text("second answer.", chunks=4, delay=0.05)])
    info = await oc.start_session(T)
    hold = fake.hold_run_end(info.session_id)
    turn = await oc.send_turn(T, "go [[script:first]]")
    await hold.wait_started()  # the run's last step finished; its idle is not out yet
    follow_up = await oc.send_turn(T, "and then [[script:second]]")
    assert follow_up.turn_id == turn.turn_id, "a prompt sent while the turn is active joins it"
    hold.release()  # idle, then the follow-up's echo and its second run

    await eventually(lambda: "second" in text_of(rec))
    assert status(oc) == "running", "the server runs the follow-up: the thread is not ready"
    assert not endings(rec, turn.turn_id)

    done = await rec.wait_for("turn.completed")
    assert done.turn_id == turn.turn_id and done.state == "completed"
    assert text_of(rec, turn_id=turn.turn_id) == "first answer. second answer."
    assert not fake.sessions[info.session_id].busy
    assert status(oc) == "ready"
    await caught_up(fake, oc)
    assert len(rec.of("turn.started", T)) == 1
    assert_every_turn_ended_once_after_its_output(rec)


async def test_a_follow_up_reaching_the_server_after_the_idle_is_part_of_the_turn(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    """Sent as the run ends, delivered just after its idle (measured: 6 of 8 such
    follow-ups were lost): the server starts a new run, and the turn waits for it."""
    fake.script("first", [Text("first answer. ")])
    fake.script("second", [Text("second answer.", chunks=4, delay=0.05)])
    info = await oc.start_session(T)
    session = fake.sessions[info.session_id]
    run_end = fake.hold_run_end(info.session_id)
    turn = await oc.send_turn(T, "go [[script:first]]")
    await run_end.wait_started()
    delivery = fake.hold("POST", "/session/{id}/prompt_async")  # the prompt is on its way
    follow_up = asyncio.create_task(oc.send_turn(T, "and then [[script:second]]"))
    await delivery.wait_started()
    run_end.release()
    await eventually(lambda: not session.busy)  # idle, and status says so
    await caught_up(fake, oc)  # the adapter handled the idle
    assert not endings(rec, turn.turn_id), "a prompt of the turn is not echoed yet"
    delivery.release()
    assert (await follow_up).turn_id == turn.turn_id

    done = await rec.wait_for("turn.completed")
    assert done.turn_id == turn.turn_id and done.state == "completed"
    assert text_of(rec, turn_id=turn.turn_id) == "first answer. second answer."
    assert status(oc) == "ready" and not session.busy
    await caught_up(fake, oc)
    assert_every_turn_ended_once_after_its_output(rec)


@pytest.mark.parametrize("by_turn_id", [True, False], ids=["with-turn-id", "without"])
async def test_interrupt_turn_stops_the_run_of_a_follow_up_sent_as_the_run_ended(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder, by_turn_id: bool
) -> None:
    fake.script("first", [Text("first answer")])
    fake.script("hangs", [Text("working"), Hang()])
    info = await oc.start_session(T)
    session = fake.sessions[info.session_id]
    run_end = fake.hold_run_end(info.session_id)
    turn = await oc.send_turn(T, "go [[script:first]]")
    await run_end.wait_started()
    delivery = fake.hold("POST", "/session/{id}/prompt_async")
    follow_up = asyncio.create_task(oc.send_turn(T, "more [[script:hangs]]"))
    await delivery.wait_started()
    run_end.release()
    await eventually(lambda: not session.busy)
    await caught_up(fake, oc)  # the adapter handled the idle before the prompt arrives
    delivery.release()
    assert (await follow_up).turn_id == turn.turn_id
    await rec.wait_for("content.delta", lambda e: e.delta == "working")
    assert session.busy and status(oc) == "running"

    result = await oc.interrupt_turn(T, turn_id=turn.turn_id if by_turn_id else None)
    assert result.stop is not None, "the turn was still active: there was something to stop"
    assert result.turn_id == turn.turn_id
    assert session.abort_count >= 1
    await eventually(lambda: not session.busy)
    aborted = await rec.wait_for("turn.aborted")
    assert aborted.turn_id == turn.turn_id
    await assert_ready_with_every_turn_ended_once(fake, oc, rec)


async def test_follow_ups_before_inside_and_after_the_run_end_window_lose_no_output(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("a", [Text("alpha ", chunks=3, delay=0.05)])
    for name in ("bravo", "charlie", "delta", "echo", "foxtrot", "golf"):
        fake.script(name, [Text(f"{name} ")])
    info = await oc.start_session(T)
    session = fake.sessions[info.session_id]
    first_end = fake.hold_run_end(info.session_id)
    first = await oc.send_turn(T, "go [[script:a]]")
    await rec.wait_for("content.delta")  # the first step streams
    await oc.send_turn(T, "while a step runs [[script:bravo]]")  # before the window
    await first_end.wait_started()
    await oc.send_turn(T, "as it ends [[script:charlie]]")  # inside the window
    second_end = fake.hold_run_end(info.session_id)  # charlie's run ends here
    first_end.release()
    await second_end.wait_started()
    delivery = fake.hold("POST", "/session/{id}/prompt_async")
    late_delivery = asyncio.create_task(oc.send_turn(T, "delivered late [[script:delta]]"))
    await delivery.wait_started()
    second_end.release()
    await eventually(lambda: not session.busy)  # reaches the server after the idle
    await caught_up(fake, oc)  # the adapter handled the idle before the prompt arrives
    delivery.release()
    await late_delivery
    await oc.send_turn(T, "right after [[script:echo]]")  # at or just after an idle
    await caught_up(fake, oc)
    await oc.send_turn(T, "a little later [[script:foxtrot]]")
    await eventually(lambda: not session.busy and bool(endings(rec, first.turn_id)))
    await eventually(lambda: all(endings(rec, s.turn_id) for s in rec.of("turn.started", T)))
    late = await oc.send_turn(T, "after the turn [[script:golf]]")  # a new turn
    await eventually(lambda: bool(endings(rec, late.turn_id)))

    shown = text_of(rec)
    for word in ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf"):
        assert shown.count(word) == 1, f"{word!r} shown {shown.count(word)} times in {shown!r}"
    assert late.turn_id != first.turn_id
    assert all(e.state == "completed" for e in rec.of("turn.completed", T))
    assert not rec.of("turn.aborted", T)
    assert status(oc) == "ready" and not session.busy
    assert_every_turn_ended_once_after_its_output(rec)


async def test_a_turn_ending_while_an_interrupt_runs_ends_exactly_once(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    """The run goes idle on its own while the Stop button's abort is under way: one
    ending (the stop's or the completion), never both, and the thread is ready."""
    fake.script("quick", [Text("done")])
    info = await oc.start_session(T)
    run_end = fake.hold_run_end(info.session_id)
    abort = fake.hold("POST", "/session/{id}/abort")
    turn = await oc.send_turn(T, "go [[script:quick]]")
    await run_end.wait_started()
    stopping = asyncio.create_task(oc.interrupt_turn(T))
    await abort.wait_started()
    assert status(oc) == "stopping"
    run_end.release()  # the run ends by itself: idle while the stop is under way
    await eventually(lambda: not fake.sessions[info.session_id].busy)
    abort.release()
    result = await stopping
    assert result.turn_id == turn.turn_id
    await eventually(lambda: bool(endings(rec, turn.turn_id)))
    await caught_up(fake, oc)
    assert len(endings(rec, turn.turn_id)) == 1
    assert status(oc) == "ready"
    assert_every_turn_ended_once_after_its_output(rec)


# -- automatic compaction -------------------------------------------------------------------


async def test_output_after_an_automatic_compaction_is_emitted_and_ends_the_turn(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script(
        "long",
        [Text("before. "), Compact(summary="SUMMARY OF THE WORK"), Text("after compaction.")],
    )
    await oc.start_session(T)
    turn = await oc.send_turn(T, "work [[script:long]]")
    done = await rec.wait_for("turn.completed")
    assert done.turn_id == turn.turn_id and done.state == "completed"
    shown = text_of(rec, turn_id=turn.turn_id)
    assert "after compaction." in shown
    assert "SUMMARY" not in shown, "the compaction summary is not the agent's answer"
    await assert_ready_with_every_turn_ended_once(fake, oc, rec)


async def test_a_stopped_turn_after_a_compaction_has_no_summary_in_its_partial_text(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script(
        "long",
        [Text("before. "), Compact(summary="SUMMARY OF THE WORK"), Text("continued. "), Hang()],
    )
    await oc.start_session(T)
    turn = await oc.send_turn(T, "work [[script:long]]")
    await rec.wait_for("content.delta", lambda e: "continued" in e.delta)
    result = await oc.interrupt_turn(T)
    assert result.turn_id == turn.turn_id
    assert "continued." in result.partial.text
    assert "SUMMARY" not in result.partial.text
    aborted = await rec.wait_for("turn.aborted")
    assert aborted.partial is not None and "SUMMARY" not in aborted.partial.text
    assert "SUMMARY" not in text_of(rec)
    await caught_up(fake, oc)
    assert_every_turn_ended_once_after_its_output(rec)


# -- the watchdog -----------------------------------------------------------------------------
# (Status that keeps failing at a turn's end: tests/test_status_confirmation.py.)


async def test_a_prompt_the_server_never_starts_fails_the_turn_after_the_echo_timeout(
    tight: OpenCodeAdapter, fake: FakeOpenCodeServer, record: Record
) -> None:
    rec = record(tight)

    async def swallow(request: httpx.Request) -> httpx.Response:
        return httpx.Response(204)  # accepted, then lost: never echoed, never run

    turn, done, took = await a_turn_whose_prompt_is_swallowed(tight, fake, rec, swallow, 3.0)
    assert took >= 0.5, "not before Timeouts.echo"
    assert done.turn_id == turn.turn_id and done.state == "failed"
    assert done.error is not None and "did not start" in done.error
    await assert_ready_with_every_turn_ended_once(fake, tight, rec)


async def test_the_watchdog_looks_as_often_as_timeouts_watchdog_says(
    fake: FakeOpenCodeServer, record: Record
) -> None:
    """An overdue echo is noticed at the watchdog's first look: not before
    ``Timeouts.watchdog`` (1.5 s here, later than the default's 1 s)."""
    timeouts = Timeouts(echo=0.05, watchdog=1.5)
    async with OpenCodeAdapter(fake.base_url, transport=fake.transport, timeouts=timeouts) as oc:

        async def swallow(request: httpx.Request) -> httpx.Response:
            return httpx.Response(204)  # accepted, then lost: never echoed

        rec = record(oc)
        turn, done, took = await a_turn_whose_prompt_is_swallowed(oc, fake, rec, swallow, 10.0)
        assert took >= 1.5, "the first look comes one Timeouts.watchdog after the send"
        assert done.turn_id == turn.turn_id and done.state == "failed"


async def test_a_server_that_stops_answering_before_the_echo_fails_the_turn(
    tight: OpenCodeAdapter, fake: FakeOpenCodeServer, record: Record
) -> None:
    """The server dies between accepting a prompt and echoing it (seen on OpenCode 1.14.48,
    whose stream carries no echo at all): looking the prompt up keeps failing, and the turn
    fails once the server has not answered for ``idle_confirm``, instead of staying
    ``running`` forever."""
    rec = record(tight)

    async def swallow(request: httpx.Request) -> httpx.Response:
        for method, path in (("GET", "/session/{id}/message"), ("GET", "/session/status")):
            fake.fail(method, path, status=503, times=None)
        return httpx.Response(204)

    turn, done, took = await a_turn_whose_prompt_is_swallowed(tight, fake, rec, swallow, 5.0)
    # echo (0.5 s), then retries until the next one would pass idle_confirm (0.6 s)
    assert took >= 0.9, "not before Timeouts.echo + idle_confirm"
    assert done.turn_id == turn.turn_id and done.state == "failed"
    assert done.error is not None and "did not answer for 0.6 s" in done.error
    [error] = rec.of("runtime.error", T)
    assert (error.turn_id, error.error_name) == (turn.turn_id, "ServerUnavailable")
    await assert_ready_with_every_turn_ended_once(fake, tight, rec)


# -- outages and retries ----------------------------------------------------------------------


async def test_a_run_that_vanished_during_a_stream_outage_is_aborted_naming_the_outage(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("long", [Text("partial work"), Hang()])
    info = await oc.start_session(T)
    turn = await oc.send_turn(T, "go [[script:long]]")
    await rec.wait_for("content.delta")
    await fake.restart()  # the streams drop; the run vanishes with nothing said
    assert not fake.sessions[info.session_id].busy
    aborted = await rec.wait_for("turn.aborted", timeout=5.0)
    assert aborted.turn_id == turn.turn_id
    assert aborted.reason is not None and "event stream was down" in aborted.reason
    assert not rec.of("turn.completed", T), "a vanished run is not a clean completion"
    await assert_ready_with_every_turn_ended_once(fake, oc, rec)


async def test_a_request_that_vanished_with_its_run_in_a_restart_is_withdrawn(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    """A restarted server forgets its pending requests (measured on 1.18.34): the host
    must not keep showing an approval nobody waits for."""
    _, turn = await start_scripted_turn(oc, fake, T, "ask", [Permission("bash", ["make *"])])
    opened = await rec.wait_for("request.opened")
    await fake.restart()
    resolved = await rec.wait_for("request.resolved")
    assert (resolved.request_id, resolved.decision) == (opened.request_id, "cancelled")
    aborted = await rec.wait_for("turn.aborted")
    assert aborted.turn_id == turn.turn_id
    await caught_up(fake, oc)
    assert_every_turn_ended_once_after_its_output(rec)


async def test_retry_statuses_become_turn_retrying_events_and_session_info_retry(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("flaky", [Fail(retries=2, retry_delay=0.3)])
    await oc.start_session(T)
    before = time.time()
    turn = await oc.send_turn(T, "go [[script:flaky]]")
    first = await rec.wait_for("turn.retrying")
    assert first.turn_id == turn.turn_id
    assert first.retry.attempt == 1 and first.retry.message
    assert first.retry.next_at is not None and before <= first.retry.next_at < before + 60
    [info] = oc.list_sessions()
    assert info.retry == first.retry and info.status == "running"

    done = await rec.wait_for("turn.completed", timeout=5.0)
    assert done.state == "failed"
    retries = rec.of("turn.retrying", T)
    assert [e.retry.attempt for e in retries] == [1, 2]
    assert all(rec.events.index(e) < rec.events.index(done) for e in retries)
    [info] = oc.list_sessions()
    assert info.retry is None and info.status == "ready"
    await caught_up(fake, oc)
    assert_every_turn_ended_once_after_its_output(rec)


async def test_session_info_retry_is_cleared_when_the_retried_call_goes_on(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    info, _ = await start_scripted_turn(oc, fake, T, "slow", [Text("answer", chunks=4, delay=0.1)])
    await rec.wait_for("content.delta")
    next_ms = int(time.time() * 1000) + 2000
    fake.set_status(
        info.session_id, {"type": "retry", "attempt": 1, "message": "overloaded", "next": next_ms}
    )
    retrying = await rec.wait_for("turn.retrying")
    assert retrying.retry.message == "overloaded"
    assert oc.list_sessions()[0].retry is not None
    fake.set_busy(info.session_id, True)  # the next attempt started
    await eventually(lambda: oc.list_sessions()[0].retry is None)
    done = await rec.wait_for("turn.completed")
    assert done.state == "completed"
    assert_every_turn_ended_once_after_its_output(rec)


# -- requests ---------------------------------------------------------------------------------


async def listed_requests(fake: FakeOpenCodeServer) -> list[str]:
    """What ``GET /permission`` lists: the server's own view of pending requests."""
    async with fake.client() as http:
        return [r["id"] for r in (await http.get("/permission")).json()]


async def test_an_interrupt_rejects_the_stopped_requests_on_the_server(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    _, turn = await start_scripted_turn(oc, fake, T, "ask", [Permission("bash", ["rm *"])])
    opened = await rec.wait_for("request.opened")
    assert await listed_requests(fake) == [opened.request_id]
    result = await oc.interrupt_turn(T)
    assert result.turn_id == turn.turn_id
    resolved = await rec.wait_for("request.resolved")
    assert (resolved.request_id, resolved.decision) == (opened.request_id, "cancelled")
    assert await listed_requests(fake) == [], "the stopped request does not linger as a ghost"
    await caught_up(fake, oc)
    assert_every_turn_ended_once_after_its_output(rec)


async def test_stop_session_withdraws_open_requests_and_rejects_them_on_the_server(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    await start_scripted_turn(oc, fake, T, "ask", [Permission("edit", ["*.py"])])
    opened = await rec.wait_for("request.opened")
    await oc.stop_session(T)
    resolved = await rec.wait_for("request.resolved")
    assert (resolved.request_id, resolved.decision) == (opened.request_id, "cancelled")
    exited = await rec.wait_for("session.exited")
    assert rec.events.index(resolved) < rec.events.index(exited)
    assert await listed_requests(fake) == []
    assert_every_turn_ended_once_after_its_output(rec)


async def test_a_request_of_a_session_aborted_elsewhere_is_not_announced_on_resume(
    oc: OpenCodeAdapter,
    fake: FakeOpenCodeServer,
    rec: Recorder,
    record: Record,
    opencode_adapter_factory: AdapterFactory,
) -> None:
    info, _ = await start_scripted_turn(oc, fake, T, "ask", [Permission("bash", ["rm *"])])
    opened = await rec.wait_for("request.opened")
    async with fake.client() as http:  # the TUI stopped it
        await http.post(f"/session/{info.session_id}/abort")
    await rec.wait_for("turn.aborted")
    assert await listed_requests(fake) == [opened.request_id], "OpenCode keeps it listed"
    later = await opencode_adapter_factory()  # a later process resumes the thread
    later_rec = record(later)
    await later.start_session(T, resume=info.resume)
    await caught_up(fake, later)
    assert not later_rec.of("request.opened"), "a ghost is never announced again"
    await later.aclose()
    assert len(rec.of("request.opened", T)) == 1


async def test_a_request_of_a_session_aborted_elsewhere_is_not_announced_after_a_reconnect(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    info, _ = await start_scripted_turn(oc, fake, T, "ask", [Permission("bash", ["rm *"])])
    opened = await rec.wait_for("request.opened")
    async with fake.client() as http:
        await http.post(f"/session/{info.session_id}/abort")
    await rec.wait_for("turn.aborted")
    resolved = await rec.wait_for("request.resolved")
    assert (resolved.request_id, resolved.decision) == (opened.request_id, "cancelled")
    connects = sum(1 for r in fake.requests if r.method == "GET" and r.path == "/event")
    fake.drop_event_streams()
    await eventually(
        lambda: (
            sum(1 for r in fake.requests if r.method == "GET" and r.path == "/event") > connects
            and fake.stream_count == 1
        )
    )
    await caught_up(fake, oc)  # the recovery re-read /permission, which still lists it
    assert len(rec.of("request.opened", T)) == 1
    assert len(rec.of("request.resolved", T)) == 1
    assert status(oc) == "ready"


async def test_a_request_answered_elsewhere_while_a_reconnect_re_reads_is_not_announced(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    """Raised during an outage, listed by the recovery's ``GET /permission``, answered
    elsewhere before the recovery announces it: its tool runs, so it looks live; only
    the ``replied`` event tells."""
    make = Tool("bash", {"command": "make"}, duration=float("inf"))
    fake.script("work", [Permission("bash", ["make"], tool=make)])
    info = await oc.start_session(T)
    session = fake.sessions[info.session_id]
    reconnect = fake.hold("GET", "/event")
    fake.drop_event_streams()
    await reconnect.wait_started()
    await oc.send_turn(T, "go [[script:work]]")
    await fake.wait_until(lambda: bool(session.pending_requests))
    [request_id] = session.pending_requests
    stale_served = asyncio.Event()
    replied = asyncio.Event()  # answered elsewhere, the snapshot not yet served
    serve = asyncio.Event()  # the adapter read the `replied` event: serve the snapshot

    async def stale_snapshot(request: httpx.Request) -> httpx.Response | None:
        if stale_served.is_set():
            return None
        stale_served.set()
        fresh = await fake.transport.handle_async_request(request)  # lists the request
        body = await fresh.aread()
        since = fake.event_count
        async with fake.client() as http:  # answered elsewhere meanwhile
            await http.post(f"/permission/{request_id}/reply", json={"reply": "once"})
        await fake.wait_for_event("permission.replied", since=since)
        replied.set()
        await serve.wait()
        return httpx.Response(fresh.status_code, content=body, headers=fresh.headers)

    fake.on("GET", "/permission", stale_snapshot)
    reconnect.release()
    async with asyncio.timeout(5):
        await replied.wait()
    await caught_up(fake, oc)  # the adapter read the `replied` event
    serve.set()
    await caught_up(fake, oc)
    assert stale_served.is_set()
    assert not rec.of("request.opened", T)
    assert request_id not in session.pending_requests


async def test_a_late_message_aborted_error_does_not_abort_the_newer_turn(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("slow", [Text("the newer turn's answer", chunks=4, delay=0.05)])
    info = await oc.start_session(T)
    first = await oc.send_turn(T, "hello")
    await rec.wait_for("turn.completed", lambda e: e.turn_id == first.turn_id)
    second = await oc.send_turn(T, "again [[script:slow]]")
    await rec.wait_for("content.delta", lambda e: e.turn_id == second.turn_id)  # echoed
    fake.emit(  # an earlier run's abort acknowledgement, arriving late
        "session.error",
        {
            "sessionID": info.session_id,
            "error": {"name": "MessageAbortedError", "data": {"message": "Aborted"}},
        },
    )
    done = await rec.wait_for("turn.completed", lambda e: e.turn_id == second.turn_id)
    assert done.state == "completed"
    assert not rec.of("turn.aborted", T)
    assert text_of(rec, turn_id=second.turn_id) == "the newer turn's answer"
    assert_every_turn_ended_once_after_its_output(rec)


def descendant_the_adapter_never_saw(fake: FakeOpenCodeServer, root_id: str) -> str:
    """A grandchild of the root whose parent was created with no event (through the
    API, or during an outage): its own events name a parent no thread owns, so only
    the ancestry lookup (``GET /session/{parent}``) tells whose request it raises."""
    middle = fake.add_session(parent_id=root_id)
    return fake.add_session(parent_id=middle)


async def test_a_child_request_is_delivered_after_its_ancestry_lookup_fails_for_a_while(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("child-asks", [Permission("bash", ["make *"])])
    info = await oc.start_session(T)
    child = descendant_the_adapter_never_saw(fake, info.session_id)
    middle = fake.sessions[child].parent_id
    fake.fail("GET", f"/session/{middle}", status=503, times=5)  # more than the client retries
    async with fake.client() as http:
        body = {"parts": [{"type": "text", "text": "go [[script:child-asks]]"}]}
        await http.post(f"/session/{child}/prompt_async", json=body)
    opened = await rec.wait_for("request.opened", timeout=5.0)
    assert (opened.thread_id, opened.session_id) == (T, child)
    assert not rec.of("runtime.warning", T)
    await oc.respond_to_request(T, opened.request_id, "accept")
    assert (await rec.wait_for("request.resolved")).decision == "accept"


async def test_a_child_request_whose_ancestry_stays_unknown_is_surfaced_as_a_warning(
    fake: FakeOpenCodeServer, record: Record
) -> None:
    timeouts = Timeouts(owner_lookup_retry=0.01)  # the lookup's backoff base, shortened
    async with OpenCodeAdapter(fake.base_url, transport=fake.transport, timeouts=timeouts) as oc:
        rec = record(oc)
        fake.script("child-asks", [Permission("bash", ["make *"])])
        info = await oc.start_session(T)
        child = descendant_the_adapter_never_saw(fake, info.session_id)
        fake.fail("GET", f"/session/{fake.sessions[child].parent_id}", status=503, times=None)
        async with fake.client() as http:
            body = {"parts": [{"type": "text", "text": "go [[script:child-asks]]"}]}
            await http.post(f"/session/{child}/prompt_async", json=body)
        await fake.wait_until(lambda: bool(fake.sessions[child].pending_requests))
        [request_id] = fake.sessions[child].pending_requests
        warning = await rec.wait_for("runtime.warning", timeout=10.0)
        assert (warning.thread_id, warning.request_id, warning.session_id) == (T, request_id, child)
        assert request_id in warning.message
        assert not rec.of("request.opened")


# -- directories and rollback -----------------------------------------------------------------


async def test_directory_spellings_of_one_directory_share_one_client_and_event_stream(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    await oc.start_session("a", directory="/p")
    await oc.start_session("b", directory="/p/")
    await oc.start_session("c", directory="/p/./")
    assert fake.stream_count == 1
    assert [r.path for r in fake.requests if r.method == "GET"].count("/event") == 1
    turn = await oc.send_turn("b", "hello")  # the default script answers "ok"
    done = await rec.wait_for("turn.completed")
    assert done.turn_id == turn.turn_id
    await caught_up(fake, oc)
    assert text_of(rec, "b") == "ok", "each event is handled once"
    assert len(rec.of("turn.completed")) == 1
    assert {i.directory for i in oc.list_sessions()} == {"/p"}


async def test_rollback_of_one_turn_reverts_a_steered_turn_whole(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("slow", [Text("working on it", chunks=4, delay=0.05)])
    await oc.start_session(T)
    first = await oc.send_turn(T, "first turn")
    await rec.wait_for("turn.completed", lambda e: e.turn_id == first.turn_id)
    second = await oc.send_turn(T, "second turn [[script:slow]]")
    await rec.wait_for("content.delta", lambda e: e.turn_id == second.turn_id)
    steer = await oc.send_turn(T, "and a steer")
    assert steer.turn_id == second.turn_id
    await rec.wait_for("turn.completed", lambda e: e.turn_id == second.turn_id)

    history = await oc.rollback_thread(T, 1)
    user_texts = [
        "".join(p.text or "" for p in m.parts if p.type == "text")
        for m in history.messages
        if m.info.role == "user"
    ]
    assert user_texts == ["first turn"]
    assert_every_turn_ended_once_after_its_output(rec)
