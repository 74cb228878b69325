"""A turn ends when ``GET /session/status`` confirms the idle, and only then (B35, B41).

An idle on the event stream is only a hint: the adapter asks ``/session/status`` and
ends the turn on its answer (``Turns._settle``). These tests pin what happens when that
answer is late or never comes:

* B35: an answer that arrives after its turn ended and the next turn started is
  ignored: it ends neither turn (the next one runs until its own end).
* B41: while status keeps failing the turn keeps running, for at most
  ``Timeouts.idle_confirm``; then it ends on the stream's evidence (``completed`` plus
  a ``runtime.warning`` if the answer finished, else ``failed`` ``StatusUnavailable``).
  The reference keeps it running forever; the bound is a deliberate difference
  (docs/adapter.md, "Turns"), so that a turn is never stuck.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from adapter import OpenCodeAdapter, Timeouts
from adapter.testing import caught_up
from adapter.testing.fake import FakeOpenCodeServer, Hang, Text
from tests.adapter_support import Record, Recorder
from tests.test_turn_lifecycle import (
    assert_every_turn_ended_once_after_its_output,
    assert_ready_with_every_turn_ended_once,
    endings,
    status,
    text_of,
)

T = "thread-1"
IDLE_CONFIRM = 1.0


TIGHT = Timeouts(
    connect=2.0,
    echo=0.5,
    idle_confirm=IDLE_CONFIRM,
    idle_confirm_backoff_max=0.1,
    watchdog=0.05,  # the watchdog's tick, shortened
)


@pytest.fixture
async def tight(
    fake: FakeOpenCodeServer, request: pytest.FixtureRequest
) -> AsyncIterator[OpenCodeAdapter]:
    """Small watchdog bounds: a settling turn is looked at again after ``echo``. A test
    changes them with ``@pytest.mark.parametrize("tight", [{...}], indirect=True)``."""
    timeouts = dataclasses.replace(TIGHT, **getattr(request, "param", {}))
    async with OpenCodeAdapter(fake.base_url, transport=fake.transport, timeouts=timeouts) as oc:
        yield oc


class StalePoll:
    """Holds the first ``GET /session/status`` until :meth:`answer_idle`, then answers it
    "every session idle" (``{}``) whatever the server's state; later polls pass."""

    def __init__(self, fake: FakeOpenCodeServer) -> None:
        self.held = asyncio.Event()
        self.done = asyncio.Event()
        self.outcome: str | None = None
        self._answer = asyncio.Event()
        self.hook = fake.on("GET", "/session/status", self._handle)

    async def _handle(self, request: httpx.Request) -> httpx.Response | None:
        if self.held.is_set():
            return None  # only the first poll is held
        self.held.set()
        try:
            await self._answer.wait()
        except asyncio.CancelledError:
            self.outcome = "cancelled"  # the client gave up on the poll
            self.done.set()
            raise
        self.outcome = "answered idle"
        self.done.set()
        return httpx.Response(200, json={})

    def answer_idle(self) -> None:
        self._answer.set()


#: The watchdog also looks at a quiet running turn (it asks ``/session/status``), so
#: that the test can wait for its looks instead of for a time.
@pytest.mark.parametrize("tight", [{"quiet_check": 0.1}], indirect=True)
@pytest.mark.parametrize("first_ends_by", ["watchdog", "stop"])
async def test_a_stale_status_answer_after_the_next_turn_started_ends_neither_turn(
    tight: OpenCodeAdapter, fake: FakeOpenCodeServer, first_ends_by: str, record: Record
) -> None:
    """Turn 1's settle asks for the status and its answer is held. Turn 1 ends another
    way (the watchdog's own status check, or Stop), turn 2 starts, and only then does
    the held poll answer "idle": turn 2 still runs until its own end."""
    rec = record(tight)
    info = await tight.start_session(T)
    stale = StalePoll(fake)
    fake.script("one", [Text("one")])
    first = await tight.send_turn(T, "go [[script:one]]")
    # The idle of turn 1's run: its settle asks for the status, and waits.
    async with asyncio.timeout(5):
        await stale.held.wait()
    if first_ends_by == "watchdog":
        # The watchdog asks again (this poll passes) and completes turn 1.
        done = await rec.wait_for("turn.completed", lambda e: e.turn_id == first.turn_id)
        assert done.state == "completed"
    else:
        await tight.interrupt_turn(T)
        await rec.wait_for("turn.aborted", lambda e: e.turn_id == first.turn_id)
    assert not stale.done.is_set() or stale.outcome == "cancelled"
    # Turn 2 runs, and its run is held before its idle.
    run_end = fake.hold_run_end(info.session_id)
    fake.script("two", [Text("two")])
    second = await tight.send_turn(T, "go [[script:two]]")
    await run_end.wait_started()
    assert status(tight) == "running"
    # Now turn 1's poll answers: "idle". Turn 2 is not over.
    stale.answer_idle()
    async with asyncio.timeout(5):
        await stale.done.wait()
    await caught_up(fake, tight)
    # The watchdog looks at turn 2 again, twice (the server says busy).
    polls = len(fake.calls("GET", "/session/status"))
    await fake.wait_until(
        lambda: len(fake.calls("GET", "/session/status")) >= polls + 2,
        description="two more watchdog looks at the running turn 2 (GET /session/status)",
    )
    await caught_up(fake, tight)
    assert endings(rec, second.turn_id) == [], "a stale answer ended the next turn"
    assert len(endings(rec, first.turn_id)) == 1, "a stale answer ended turn 1 again"
    assert status(tight) == "running"
    assert not rec.of("runtime.warning", T)
    # Turn 2 ends at its own end, with its own output.
    run_end.release()
    ended = await rec.wait_for("turn.completed", lambda e: e.turn_id == second.turn_id)
    assert ended.state == "completed"
    assert text_of(rec, turn_id=second.turn_id) == "two"
    await caught_up(fake, tight)
    assert_every_turn_ended_once_after_its_output(rec)


# -- B41: status keeps failing --------------------------------------------------------------


def warnings_of(rec: Recorder) -> list[Any]:
    return rec.of("runtime.warning", T)


@pytest.mark.parametrize("answered", [True, False], ids=["answer-finished", "no-answer"])
async def test_a_turn_stays_running_while_status_fails_then_ends_after_idle_confirm(
    tight: OpenCodeAdapter, fake: FakeOpenCodeServer, answered: bool, record: Record
) -> None:
    """The turn's run ends (idle on the stream) while ``/session/status`` answers 503.
    Up to ``idle_confirm`` the turn stays ``running``; after it, the turn ends on what
    the stream said: ``completed`` with a warning if the answer finished, ``failed``
    (``StatusUnavailable``) if the server went idle without answering."""
    rec = record(tight)
    info = await tight.start_session(T)
    fake.script("run", [Text("done")] if answered else [Text("partial"), Hang()])
    outage = fake.fail("GET", "/session/status", status=503, times=None)
    turn = await tight.send_turn(T, "go [[script:run]]")
    if not answered:
        # The answer started and never finished, yet the stream says idle.
        await rec.wait_for("content.delta")
        fake.emit("session.status", {"sessionID": info.session_id, "status": {"type": "idle"}})
        fake.emit("session.idle", {"sessionID": info.session_id})
    await fake.wait_until(lambda: outage.call_count >= 1)  # the idle's settle asks
    failing_since = time.monotonic()
    # Running while status fails: look several times before the bound.
    while time.monotonic() - failing_since < IDLE_CONFIRM * 0.5:
        assert status(tight) == "running", "ended before idle_confirm"
        assert not endings(rec, turn.turn_id)
        await asyncio.sleep(0.05)
    assert outage.call_count >= 2, "status was asked again while failing"
    done = await rec.wait_for("turn.completed", timeout=IDLE_CONFIRM + 4)
    # Not before the bound (it starts at the first failed poll; a retry's delay may
    # end the wait up to idle_confirm_backoff_max early).
    assert time.monotonic() - failing_since >= IDLE_CONFIRM * 0.7
    assert done.turn_id == turn.turn_id
    [warning] = warnings_of(rec)
    assert warning.turn_id == turn.turn_id and "/session/status" in warning.message
    assert rec.events.index(warning) < rec.events.index(done)
    if answered:
        assert done.state == "completed"
        assert text_of(rec) == "done"
    else:
        assert text_of(rec) == "partial"
        assert done.state == "failed"
        [error] = rec.of("runtime.error", T)
        assert error.error_name == "StatusUnavailable"
    await assert_ready_with_every_turn_ended_once(fake, tight, rec)


async def test_a_turn_completes_once_status_answers_again_within_idle_confirm(
    fake: FakeOpenCodeServer,
    record: Record,
) -> None:
    """Status fails at the turn's end, then answers again before ``idle_confirm``: the
    turn was ``running`` all along and completes on the answer, with no warning."""
    timeouts = Timeouts(connect=2.0, idle_confirm=30.0, idle_confirm_backoff_max=0.1)
    async with OpenCodeAdapter(fake.base_url, transport=fake.transport, timeouts=timeouts) as oc:
        rec = record(oc)
        fake.script("run", [Text("done")])
        outage = fake.fail("GET", "/session/status", status=503, times=None)
        await oc.start_session(T)
        turn = await oc.send_turn(T, "go [[script:run]]")
        await fake.wait_until(lambda: outage.call_count >= 3)  # asked, and asked again
        assert status(oc) == "running" and not endings(rec, turn.turn_id)
        outage.remove()
        done = await rec.wait_for("turn.completed", timeout=3.0)
        assert done.turn_id == turn.turn_id and done.state == "completed"
        assert text_of(rec) == "done"
        assert status(oc) == "ready"
        assert not warnings_of(rec)
        await caught_up(fake, oc)
        assert_every_turn_ended_once_after_its_output(rec)
