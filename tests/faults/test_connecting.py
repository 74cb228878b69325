"""A start whose event stream has not connected yet: cancelled, stopped, or joined.

Every test holds the fake's ``GET /event`` so the thread stays ``connecting`` for as
long as the test needs, and uses a ``connect`` bound of 30 s: whatever ends the
start must be the action under test, never the connect timeout (that one is B3,
``tests/test_adapter.py::test_start_times_out_when_the_event_stream_never_connects``).
"""

from __future__ import annotations

import asyncio

import pytest

from adapter import OpenCodeAdapter, SessionClosedError
from adapter.testing import caught_up
from adapter.testing.fake import FakeOpenCodeServer, Hang, Hold, Text
from tests.faults.harness import Harness, aborts, fast

T = "thread-1"
CONNECT = fast(connect=30.0)


async def connecting(oc: OpenCodeAdapter, hold: Hold, thread_id: str = T) -> str:
    """Wait until the start has created its session and published the thread, which is
    still ``connecting`` (the stream is held); its session id."""
    await hold.wait_started()
    async with asyncio.timeout(5):
        while not oc.has_session(thread_id):
            await asyncio.sleep(0)
    info = oc.session_info(thread_id)
    assert info.status == "connecting"
    return info.session_id


def creates(fake: FakeOpenCodeServer) -> int:
    return sum(1 for r in fake.requests if r.method == "POST" and r.path == "/session")


async def test_a_start_cancelled_while_connecting_aborts_its_session_and_leaves_nothing(
    fake: FakeOpenCodeServer,
) -> None:
    """B4: the host gives up on a start (e.g. its request handler timed out)."""
    async with Harness(fake, timeouts=CONNECT) as h:
        hold = fake.hold("GET", "/event")
        before = asyncio.all_tasks()
        start = asyncio.create_task(h.oc.start_session(T))
        session_id = await connecting(h.oc, hold)
        send = asyncio.create_task(h.oc.send_turn(T, "queued behind the start"))
        await caught_up(fake, h.oc)
        assert not send.done(), "the send waits for the start"

        start.cancel()
        async with asyncio.timeout(5):
            with pytest.raises(asyncio.CancelledError):
                await start
            with pytest.raises(SessionClosedError):
                await send
        await caught_up(fake, h.oc)

        assert h.oc.list_sessions() == []
        assert not h.oc.has_session(T)
        assert aborts(fake, session_id) == 1, "the session the start created is aborted"
        assert fake.in_flight == 0
        left = [t for t in asyncio.all_tasks() - before if not t.done()]
        assert [t.get_name() for t in left] == ["opencode-adapter:pump:None"], (
            "only the shared event pump outlives the start"
        )
        assert "session.started" not in h.rec.types(T)
        hold.release()


async def test_a_resume_cancelled_while_connecting_leaves_the_resumed_tree_running(
    fake: FakeOpenCodeServer,
) -> None:
    """A resumed session is not the start's to abort: its run may be another process's
    (a worker that detached, a second worker), and a failed start must not stop it."""
    fake.script("long", [Text("working"), Hang()])
    async with fake.client() as http:
        root = (await http.post("/session", json={})).json()["id"]
        body = {"parts": [{"type": "text", "text": "go [[script:long]]"}]}
        (await http.post(f"/session/{root}/prompt_async", json=body)).raise_for_status()
    await fake.wait_hanging(root)
    async with Harness(fake, timeouts=CONNECT) as h:
        hold = fake.hold("GET", "/event")
        cursor = {"schema": 1, "session_id": root, "directory": None}
        start = asyncio.create_task(h.oc.start_session(T, resume=cursor))
        await connecting(h.oc, hold)
        start.cancel()
        with pytest.raises(asyncio.CancelledError):
            await start
        await caught_up(fake, h.oc)
        assert aborts(fake, root) == 0
        assert fake.sessions[root].busy
        hold.release()


async def test_stop_all_alone_closes_a_connecting_session_and_releases_its_waiters(
    fake: FakeOpenCodeServer,
) -> None:
    """B7: ``stop_all`` (not ``aclose``, which would release the start by itself)."""
    fake.script("ok", [Text("fine")])
    async with Harness(fake, timeouts=CONNECT) as h:
        hold = fake.hold("GET", "/event")
        start = asyncio.create_task(h.oc.start_session(T))
        session_id = await connecting(h.oc, hold)
        send = asyncio.create_task(h.oc.send_turn(T, "queued behind the start"))
        await caught_up(fake, h.oc)
        assert not send.done()

        async with asyncio.timeout(5):
            await h.oc.stop_all()
            outcomes = await asyncio.gather(start, send, return_exceptions=True)
        assert [type(o) for o in outcomes] == [SessionClosedError, SessionClosedError], outcomes
        assert h.oc.list_sessions() == []
        assert aborts(fake, session_id) >= 1, "the connecting session is torn down"
        assert not h.oc.has_session(T)

        # The adapter is still open and works: the same thread starts again.
        hold.release()
        again = await h.oc.start_session(T)
        assert again.session_id != session_id and again.status == "ready"
        await h.oc.send_turn(T, "go [[script:ok]]")
        done = await h.rec.wait_for("turn.completed")
        assert done.thread_id == T


async def test_a_second_start_finding_the_thread_connecting_waits_and_returns_the_same_session(
    fake: FakeOpenCodeServer,
) -> None:
    """B10: the second start sees the published ``connecting`` thread (not the pending
    start before it is published, which ``test_concurrent_starts…`` covers)."""
    async with Harness(fake, timeouts=CONNECT) as h:
        hold = fake.hold("GET", "/event")
        first = asyncio.create_task(h.oc.start_session(T))
        session_id = await connecting(h.oc, hold)
        second = asyncio.create_task(h.oc.start_session(T))
        await caught_up(fake, h.oc)
        assert not second.done(), "the second start waits for the connect, too"

        hold.release()
        async with asyncio.timeout(5):
            one, two = await asyncio.gather(first, second)
        assert one.session_id == two.session_id == session_id
        assert two.status == "ready"
        assert creates(fake) == 1
        assert h.rec.types(T).count("session.started") == 1
