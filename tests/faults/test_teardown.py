"""A thread's teardown (``stop_session``, ``aclose``) when its aborts hang, and a start of
the same thread id while the old one is still being torn down.

The timeouts are distinct on purpose: ``teardown`` is 0.2 s while ``abort`` and ``tree``
(the Stop button's bounds) are 30 s, so a teardown bounded by the wrong one shows up as
a test that runs into its 5 s guard instead of passing.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from adapter.testing import caught_up
from adapter.testing.fake import FakeOpenCodeServer, Text
from tests.adapter_support import held_abort
from tests.faults.harness import Harness, fast

T = "thread-1"
TEARDOWN = fast(abort=30.0, tree=30.0, teardown=0.2)


class HoldFirst:
    """Holds the first matching request forever; later ones (the stop's second root
    aborts) go through. Records whether the held one was cancelled by its sender."""

    def __init__(self, fake: FakeOpenCodeServer, method: str, path: str) -> None:
        self.started = asyncio.Event()
        self.cancelled = False
        self.calls = 0
        self.hook = fake.on(method, path, self._handle)

    async def _handle(self, request: httpx.Request) -> httpx.Response | None:
        self.calls += 1
        if self.calls > 1:
            return None
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return None


def listed_children(fake: FakeOpenCodeServer, session_id: str) -> int:
    path = f"/session/{session_id}/children"
    return sum(1 for r in fake.requests if r.method == "GET" and r.path == path)


async def exited(h: Harness, how: str) -> list[str]:
    """The thread's event types once its ``session.exited`` is in (or the stream ended)."""
    if how == "aclose":
        await h.rec.task  # the adapter's stream ended: everything is recorded
    else:
        await h.rec.wait_for("session.exited")
    return h.rec.types(T)


# -- B6: teardown aborts are bounded by Timeouts.teardown ---------------------------------


async def test_a_hanging_teardown_root_abort_gives_up_at_the_teardown_bound_and_the_walk_goes_on(
    fake: FakeOpenCodeServer, captured_logs: list[dict[str, Any]]
) -> None:
    """The root's own abort is bounded by ``teardown`` (not by ``abort``, and not only by
    the walk's cap of 2 x ``teardown``): it is cancelled, and the walk then lists the
    root's children, which it does only after the root's abort has settled. (0.5 s: the
    listing must come before the walk's cap, ``teardown`` later, on a loaded machine too.)"""
    async with Harness(fake, timeouts=fast(abort=30.0, tree=30.0, teardown=0.5)) as h:
        info = await h.oc.start_session(T)
        held = HoldFirst(fake, "POST", f"/session/{info.session_id}/abort")
        async with asyncio.timeout(5):
            await h.oc.stop_session(T)
        assert held.started.is_set() and held.cancelled
        assert fake.in_flight == 0
        assert listed_children(fake, info.session_id) >= 1, (
            "the walk went on after the root's abort gave up"
        )
        incomplete = [e for e in captured_logs if e["event"] == "adapter.teardown_incomplete"]
        assert len(incomplete) == 1
        assert f"could not stop {info.session_id} (abort)" in incomplete[0]["error"]
        assert (await exited(h, "stop_session"))[-1] == "session.exited"


@pytest.mark.parametrize("how", ["stop_session", "aclose"])
async def test_a_teardown_whose_aborts_all_hang_ends_within_its_own_bound(
    fake: FakeOpenCodeServer, how: str
) -> None:
    """Every abort of the root hangs (its first and its two second aborts): the teardown
    ends at its walk cap (2 x 0.2 s), cancels them all, and the thread exits."""
    async with Harness(fake, timeouts=TEARDOWN) as h:
        info = await h.oc.start_session(T)
        hold = fake.hold("POST", f"/session/{info.session_id}/abort")  # never released
        async with asyncio.timeout(5):  # the abort bound would take 30 s
            await (h.oc.stop_session(T) if how == "stop_session" else h.oc.aclose())
        assert len(hold.requests) >= 1
        assert fake.in_flight == 0, "the held aborts were cancelled"
        assert (await exited(h, how))[-1] == "session.exited"
        assert h.oc.list_sessions() == []


# -- B11/B12: a start of a thread whose teardown is held ----------------------------------


def lifecycle(h: Harness) -> list[tuple[str, str | None]]:
    return [
        (e.type, getattr(e, "session_id", None))
        for e in h.rec.events
        if e.type in ("session.started", "session.exited")
    ]


async def test_a_start_waits_for_the_held_teardown_of_the_old_session_which_never_removes_it(
    fake: FakeOpenCodeServer,
) -> None:
    """B12 (deliberate): the replacement waits for the old session's ``session.exited``.
    B11: the old stop, once its teardown ends, leaves the replacement registered."""
    fake.script("ok", [Text("second life")])
    async with Harness(fake, timeouts=fast(teardown=5.0)) as h:
        old = await h.oc.start_session(T)
        hold, stop = await held_abort(fake, old.session_id, h.oc.stop_session(T))
        replacement = asyncio.create_task(h.oc.start_session(T))
        await caught_up(fake, h.oc)
        assert not replacement.done(), "the replacement waits for the old teardown"
        assert h.oc.session_info(T).session_id == old.session_id
        assert h.oc.session_info(T).status == "closing"
        assert len(fake.sessions) == 1, "nothing is created before the old session exits"

        hold.release()
        async with asyncio.timeout(5):
            await stop
            new = await replacement
        assert new.session_id != old.session_id
        assert h.oc.session_info(T).session_id == new.session_id
        await h.oc.send_turn(T, "go [[script:ok]]")
        done = await h.rec.wait_for("turn.completed")
        assert done.thread_id == T
        assert lifecycle(h) == [
            ("session.started", old.session_id),
            ("session.exited", old.session_id),
            ("session.started", new.session_id),
        ]


@pytest.mark.parametrize("pending_stop", [False, True], ids=["teardown", "stop-then-teardown"])
async def test_the_wait_of_a_replacement_is_bounded_by_the_old_stop_and_teardown(
    fake: FakeOpenCodeServer, pending_stop: bool
) -> None:
    """B12's bound: the old session's aborts never answer, and the replacement starts
    once the old close gives up: at the teardown's walk cap (2 x 0.2 s), after a pending
    Stop's own bounds (``abort`` + ``tree``) first when one is under way."""
    timeouts = fast(abort=0.2, tree=0.2, teardown=0.2) if pending_stop else TEARDOWN
    async with Harness(fake, timeouts=timeouts) as h:
        old = await h.oc.start_session(T)
        hold = fake.hold("POST", f"/session/{old.session_id}/abort")  # never released
        stops: list[asyncio.Task[object]] = []
        if pending_stop:
            stops.append(asyncio.create_task(h.oc.interrupt_turn(T)))
            await hold.wait_started()
        stops.append(asyncio.create_task(h.oc.stop_session(T)))
        await hold.wait_started()
        replacement = asyncio.create_task(h.oc.start_session(T))
        await caught_up(fake, h.oc)
        assert not replacement.done()
        async with asyncio.timeout(5):
            new = await replacement
            await asyncio.gather(*stops, return_exceptions=True)
        assert new.session_id != old.session_id and new.status == "ready"
        assert h.oc.session_info(T).session_id == new.session_id
        assert lifecycle(h)[-2:] == [
            ("session.exited", old.session_id),
            ("session.started", new.session_id),
        ]
