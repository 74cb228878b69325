"""A Stop goes on when the real server acknowledges the root's abort, before the abort
request has returned (reference: "its acknowledgement can arrive before the request
returns").

On its own the order is a race between the event stream and the HTTP answer (with a
``bash`` tool running, OpenCode 1.18.34 emits the root's ``session.error``
``MessageAbortedError`` about 0.25 s before its abort returns: tools get 250 ms to
finish). To make it deterministic the answer to the root's first abort is withheld
from the adapter, after the server has handled the request: the stop can then only go
on by the server's acknowledgement, and must cancel the withheld request.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest

from adapter import OpenCodeAdapter, OpenCodeClient
from adapter.testing import RealOpenCodeServer, ScriptedModelServer
from adapter.testing.model import ToolCall, ToolCalls, script_marker
from tests.adapter_support import Recorder
from tests.real.waits import bash_printed, holds_for

pytestmark = pytest.mark.real

T = "ack"


class WithheldAbortAnswer(httpx.AsyncBaseTransport):
    """Sends every request to the server, but never delivers the answer to the first
    ``POST /session/{session_id}/abort``: only a cancel by the caller ends that call."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.session_id: str | None = None
        self.answered = False  # the server answered the withheld abort before the cancel
        self.cancelled = False  # the caller gave up on it
        self._taken = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self._taken or request.url.path != f"/session/{self.session_id}/abort":
            return await self.inner.handle_async_request(request)
        self._taken = True
        try:
            response = await self.inner.handle_async_request(request)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        self.answered = True
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        finally:
            await response.aclose()
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_the_stop_goes_on_by_the_acknowledgement_while_the_abort_answer_is_withheld(
    real_server: RealOpenCodeServer, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    transport = WithheldAbortAnswer()
    sleepy = f"{unique_name}-sleep"
    bash = ToolCall("bash", {"command": "echo started; sleep 30", "description": "sleep"})
    scripted_model.script(sleepy, [ToolCalls([bash])])
    async with (
        OpenCodeAdapter(
            real_server.base_url, directory=str(real_server.directory), transport=transport
        ) as oc,
        OpenCodeClient(real_server.base_url, directory=str(real_server.directory)) as client,
    ):
        rec = Recorder(oc)
        try:
            info = await oc.start_session(T, title=T)
            transport.session_id = info.session_id
            turn = await oc.send_turn(T, "go " + script_marker(sleepy))
            await rec.wait_for(
                "item.updated", lambda e: "sleep 30" in str(e.input.get("command")), timeout=30
            )
            await bash_printed(client, info.session_id, "started")  # the process runs
            async with asyncio.timeout(8):  # else: Timeouts.abort (10 s), and a failed stop
                result = await oc.interrupt_turn(T)
            # (transport.answered: whether the server's answer had come before the
            # acknowledgement; either way the adapter never saw it)
            assert transport.cancelled, "the stop went on without the abort's answer"
            assert result.turn_id == turn.turn_id
            assert result.stop is not None and result.stop.ok
            aborted = await rec.wait_for("turn.aborted")
            assert aborted.turn_id == turn.turn_id
            await holds_for(
                0.2, lambda: len(rec.of("turn.aborted", T)) == 1, "the turn aborted once"
            )
            assert rec.of("runtime.error", T) == [], "the acknowledgement is not an error"
            statuses = await client.status()
            assert info.session_id not in statuses or not statuses[info.session_id].is_busy
        finally:
            await rec.close()
