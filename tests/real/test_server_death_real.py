"""An external ``opencode serve`` killed (``SIGKILL``) mid-turn: the turn ends ``failed``
(``ServerUnreachable``) within ``Timeouts.unreachable`` (plus the pump's reconnect
step), the thread stays ``ready``; the server restarted on the same storage and port,
the stream reconnects and the thread's next turn completes; a host resuming the thread
from its cursor then finds it ``ready``: the killed run did not survive the restart, so
nothing is adopted."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from adapter import OpenCodeAdapter, Timeouts
from adapter.testing import RealOpenCodeServer
from adapter.testing.model import Hang, ScriptedModelServer, Text, script_marker
from tests.adapter_support import Recorder

pytestmark = pytest.mark.real

UNREACHABLE = 3.0


@pytest.fixture
def own_server(scripted_model: ScriptedModelServer) -> Iterator[RealOpenCodeServer]:
    """A server of this test alone: it is killed and restarted."""
    with RealOpenCodeServer(scripted_model.base_url) as server:
        yield server


async def test_a_killed_server_ends_the_turn_unreachable_and_the_thread_goes_on_after_restart(
    own_server: RealOpenCodeServer, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    server = own_server
    # The second request of the session (after the restart) is step 1 of the same script:
    # the conversation's first marker names the script, its assistant messages the step.
    scripted_model.script(unique_name, [Hang("working on it"), Text("back again")])
    timeouts = Timeouts(unreachable=UNREACHABLE)
    async with OpenCodeAdapter(
        server.base_url, directory=str(server.directory), timeouts=timeouts
    ) as oc:
        rec = Recorder(oc)
        await oc.start_session("t")
        turn = await oc.send_turn("t", "go " + script_marker(unique_name))
        await rec.wait_for("content.delta", timeout=30.0)
        killed_at = time.monotonic()
        await asyncio.to_thread(server.kill)
        done = await rec.wait_for("turn.completed", timeout=UNREACHABLE + 10.0)
        took = time.monotonic() - killed_at
        print(f"kill -> turn.completed(failed): {took:.2f} s")
        assert done.turn_id == turn.turn_id and done.state == "failed"
        assert done.error is not None and "unreachable" in done.error
        [error] = [e for e in rec.of("runtime.error", "t") if e.turn_id == turn.turn_id]
        assert error.error_name == "ServerUnreachable"
        # The bound: the unreachable time, from the first refused reconnect (0.1 s in).
        assert UNREACHABLE <= took < UNREACHABLE + 2.0, took
        assert "working on it" in "".join(e.delta for e in rec.of("content.delta", "t"))
        info = oc.session_info("t")
        assert info.status == "ready" and info.active_turn_id is None

        await asyncio.to_thread(server.restart)
        # A host restarted with the server resumes the thread: the killed run is gone (its
        # unfinished answer stays stored, the root idle), so there is nothing to adopt.
        async with OpenCodeAdapter(
            server.base_url, directory=str(server.directory), on_close="detach"
        ) as other:
            other_rec = Recorder(other)
            resumed = await other.start_session("t", resume=oc.session_info("t").resume)
            assert (resumed.status, resumed.active_turn_id) == ("ready", None)
            await other_rec.close()
        assert not other_rec.of("turn.started")
        second = await oc.send_turn("t", "again")
        ended = await rec.wait_for(
            "turn.completed", lambda e: e.turn_id == second.turn_id, timeout=60.0
        )
        assert ended.state == "completed", ended
        text = "".join(e.delta for e in rec.of("content.delta", "t") if e.turn_id == second.turn_id)
        assert "back again" in text
