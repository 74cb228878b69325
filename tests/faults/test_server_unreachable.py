"""An external server that stops listening mid-turn (its process killed): its running
turns end ``failed`` (``ServerUnreachable``) within ``Timeouts.unreachable``, the threads
stay, and once the server listens again their next turn runs.

The fake refuses every request with ``httpx.ConnectError`` (``fake.refuse_connections``),
as a port nothing listens on does; ``fake.restart()`` is a server started again on the
same data (runs gone, sessions kept)."""

from __future__ import annotations

import time

from adapter.testing.fake import FakeOpenCodeServer, Hang, Text
from tests.faults.harness import Harness, fast

T = "t-unreachable"


async def test_a_server_refusing_connections_ends_the_running_turn_failed_and_the_thread_goes_on(
    fake: FakeOpenCodeServer,
) -> None:
    fake.script("work", [Text("partial answer"), Hang()])
    async with Harness(fake, timeouts=fast(unreachable=0.5)) as h:
        await h.oc.start_session(T)
        turn = await h.oc.send_turn(T, "go [[script:work]]")
        await h.rec.wait_for("content.delta")
        down = fake.refuse_connections()
        refused_at = time.perf_counter()
        done = await h.rec.wait_for("turn.completed", timeout=5.0)
        took = time.perf_counter() - refused_at
        assert done.turn_id == turn.turn_id and done.state == "failed"
        assert "unreachable" in (done.error or "") and "0.5 s" in (done.error or "")
        [error] = [e for e in h.rec.of("runtime.error", T) if e.turn_id == turn.turn_id]
        assert error.error_name == "ServerUnreachable"
        assert 0.5 <= took < 3.0, took
        # What the turn produced stays reported; the thread stays, ready.
        assert "".join(e.delta for e in h.rec.of("content.delta", T)) == "partial answer"
        info = h.oc.session_info(T)
        assert info.status == "ready" and info.active_turn_id is None
        await h.consistent()
        # The server comes back on the same data: the stream reconnects, a turn runs.
        await fake.restart()
        down.remove()
        await fake.wait_until(lambda: fake.stream_count >= 1)
        second = await h.oc.send_turn(T, "again")
        ended = await h.rec.wait_for(
            "turn.completed", lambda e: e.turn_id == second.turn_id, timeout=10.0
        )
        assert ended.state == "completed"
        assert len(h.rec.of("turn.completed", T)) == 2


async def test_a_refused_connection_that_recovers_within_the_bound_ends_nothing(
    fake: FakeOpenCodeServer,
) -> None:
    fake.script("work", [Text("partial"), Hang()])
    async with Harness(fake, timeouts=fast(unreachable=5.0)) as h:
        info = await h.oc.start_session(T)
        turn = await h.oc.send_turn(T, "go [[script:work]]")
        await h.rec.wait_for("content.delta")
        down = fake.refuse_connections()
        await fake.wait_until(lambda: len(fake.calls("GET", "/event")) >= 3)
        down.remove()
        await fake.wait_until(lambda: fake.stream_count >= 1)
        await h.consistent()
        assert h.oc.session_info(T).active_turn_id == turn.turn_id
        assert h.rec.of("turn.completed", T) == []
        assert info.session_id in fake.sessions
