"""``stop_all`` while a ``start_session`` still waits for its session (``POST /session``
or the resume's reads held): the start ends with ``SessionClosedError`` and leaves no
thread and nothing running; the adapter stays usable."""

from __future__ import annotations

import asyncio

import pytest

from adapter import SessionClosedError
from adapter.testing.fake import FakeOpenCodeServer, Hang, Text
from tests.faults.harness import Harness, aborts, fast

T = "thread-caught"


async def test_stop_all_while_a_start_waits_for_its_session_ends_that_start(
    fake: FakeOpenCodeServer,
) -> None:
    fake.script("ok", [Text("fine")])
    async with Harness(fake, timeouts=fast(connect=30.0)) as h:
        hold = fake.hold("POST", "/session")
        start = asyncio.create_task(h.oc.start_session(T))
        await hold.wait_started()
        async with asyncio.timeout(5):
            stopping = asyncio.create_task(h.oc.stop_all())
            await asyncio.sleep(0)
            hold.release()
            await stopping
            with pytest.raises(SessionClosedError):
                await start
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
        start = asyncio.create_task(h.oc.start_session(T, resume=cursor))
        await hold.wait_started()
        async with asyncio.timeout(5):
            stopping = asyncio.create_task(h.oc.stop_all())
            await asyncio.sleep(0)
            hold.release()
            await stopping
            with pytest.raises(SessionClosedError):
                await start
        assert h.oc.list_sessions() == []
