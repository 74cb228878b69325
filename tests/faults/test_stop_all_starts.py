"""``stop_all`` while a ``start_session`` still waits for its session (``POST /session``
or the resume's reads held): the start ends with ``SessionClosedError`` and leaves no
thread and nothing running; the adapter stays usable."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import pytest

from adapter import SessionClosedError, SessionInfo
from adapter.testing.fake import FakeOpenCodeServer, Hang, Hold, Text
from tests.faults.harness import Harness, aborts, fast

T = "thread-caught"


async def stop_all_while_held(
    h: Harness, hold: Hold, start: Coroutine[Any, Any, SessionInfo]
) -> None:
    """Runs ``start`` until it waits at ``hold``, then calls ``stop_all`` and lets the held
    request through: the start ends with ``SessionClosedError``, the stop returns."""
    starting = asyncio.create_task(start)
    await hold.wait_started()
    async with asyncio.timeout(5):
        stopping = asyncio.create_task(h.oc.stop_all())
        await asyncio.sleep(0)
        hold.release()
        await stopping
        with pytest.raises(SessionClosedError):
            await starting


async def test_stop_all_while_a_start_waits_for_its_session_ends_that_start(
    fake: FakeOpenCodeServer,
) -> None:
    fake.script("ok", [Text("fine")])
    async with Harness(fake, timeouts=fast(connect=30.0)) as h:
        hold = fake.hold("POST", "/session")
        await stop_all_while_held(h, hold, h.oc.start_session(T))
        await h.consistent()
        assert h.oc.list_sessions() == [] and not h.oc.has_session(T)
        [created] = list(fake.sessions)
        assert aborts(fake, created) >= 1, "the session the start created is torn down"
        assert "session.started" not in h.rec.types(T)
        # The adapter is still open: the thread starts again and runs a turn.
        again = await h.oc.start_session(T)
        assert again.session_id != created and again.status == "ready"
        await h.oc.send_turn(T, "go [[script:ok]]")
        await h.rec.wait_for("turn.completed")


async def test_stop_all_while_a_resume_reads_its_session_ends_that_start(
    fake: FakeOpenCodeServer,
) -> None:
    fake.script("work", [Text("busy"), Hang()])
    async with Harness(fake, timeouts=fast(connect=30.0)) as h:
        first = await h.oc.start_session("origin")
        cursor = first.resume
        await h.oc.stop_session("origin")
        hold = fake.hold("GET", f"/session/{first.session_id}")
        await stop_all_while_held(h, hold, h.oc.start_session(T, resume=cursor))
        assert h.oc.list_sessions() == []
