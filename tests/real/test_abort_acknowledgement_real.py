"""A Stop goes on when the real server acknowledges the root's abort, before the abort
request has returned (reference: "its acknowledgement can arrive before the request
returns").

On its own the order is a race between the event stream and the HTTP answer (with a
``bash`` tool running, OpenCode 1.18.34 emits the root's ``session.error``
``MessageAbortedError`` about 0.25 s before its abort returns: tools get 250 ms to
finish). To make it deterministic the answer to the root's first abort is withheld
from the adapter, after the server has handled the request: the walk can then only go
on by the server's acknowledgement. The stop still waits for that answer before it
returns (an abort given up on could land later), up to ``Timeouts.abort``, and then
gives the withheld request up.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from adapter import OpenCodeAdapter, OpenCodeClient, Timeouts, TurnCancelledError
from adapter.testing import RealOpenCodeServer, ScriptedModelServer
from adapter.testing.model import Hang, Text, ToolCall, ToolCalls, script_marker
from tests.adapter_support import Recorder
from tests.real.waits import bash_printed, holds_for

pytestmark = pytest.mark.real

T = "ack"
#: Timeouts.abort here: how long the stop waits for the withheld answer.
ABORT_BOUND = 2.0


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
            real_server.base_url,
            directory=str(real_server.directory),
            transport=transport,
            timeouts=Timeouts(abort=ABORT_BOUND),
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
            async with asyncio.timeout(8):
                result = await oc.interrupt_turn(T)
            # (transport.answered: whether the server's answer had come before the
            # acknowledgement; either way the adapter never saw it.) Had the walk waited
            # for the answer, the root abort would have failed at the bound.
            assert transport.cancelled, "the withheld answer was given up at the bound"
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


# ------------------------------------------------------- no abort of a Stop lands after it

#: How late the server gets the root's second aborts (see LateSecondAborts).
LATE = 1.0


class LateDelivery(httpx.AsyncBaseTransport):
    """Delivers each request that ``is_late`` picks to the server ``LATE`` seconds after it
    was sent, even when the caller gave up on it meanwhile: what a loaded server does with
    a request already on the wire (it reads and handles it late). ``sent`` is set when
    the first such request was sent; ``delivered`` counts those the server answered."""

    def __init__(self, is_late: Callable[[httpx.Request], bool]) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.is_late = is_late
        self.sent = asyncio.Event()
        self.delivered = 0
        self.deliveries: set[asyncio.Task[httpx.Response]] = set()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if not self.is_late(request):
            return await self.inner.handle_async_request(request)
        await request.aread()
        delivery = asyncio.create_task(self._deliver_late(request))
        self.deliveries.add(delivery)
        self.sent.set()
        return await asyncio.shield(delivery)  # a caller that gives up does not stop it

    async def _deliver_late(self, request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(LATE)
        response = await self.inner.handle_async_request(request)
        body = await response.aread()
        self.delivered += 1
        return httpx.Response(response.status_code, headers=response.headers, content=body)

    async def aclose(self) -> None:
        await asyncio.gather(*self.deliveries, return_exceptions=True)
        await self.inner.aclose()


class Picks:
    """Which requests of one session :class:`LateDelivery` delivers late."""

    def __init__(self) -> None:
        self.session_id: str | None = None
        self.aborts = 0
        self.prompts = 0

    def second_aborts(self, request: httpx.Request) -> bool:
        """Every abort of the session after its first."""
        if request.url.path != f"/session/{self.session_id}/abort":
            return False
        self.aborts += 1
        return self.aborts > 1

    def first_prompt(self, request: httpx.Request) -> bool:
        if request.url.path != f"/session/{self.session_id}/prompt_async":
            return False
        self.prompts += 1
        return self.prompts == 1


@contextlib.asynccontextmanager
async def through(
    server: RealOpenCodeServer, transport: httpx.AsyncBaseTransport
) -> AsyncIterator[tuple[OpenCodeAdapter, OpenCodeClient, Recorder]]:
    """An adapter on ``server`` whose requests go through ``transport``, a plain client
    for reading the server, and the adapter's recorder."""
    directory = str(server.directory)
    async with (
        OpenCodeAdapter(server.base_url, directory=directory, transport=transport) as oc,
        OpenCodeClient(server.base_url, directory=directory) as client,
    ):
        rec = Recorder(oc)
        try:
            yield oc, client, rec
        finally:
            await rec.close()


async def test_a_turn_sent_as_the_stop_returns_is_not_stopped_by_the_stops_own_aborts(
    real_server: RealOpenCodeServer, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    """Every abort a Stop sends is answered before the Stop returns. The root's second
    aborts reach the server late here (a loaded server); a Stop that gave up on them
    would return first, and they would then stop the next turn, sent at once."""
    picks = Picks()
    transport = LateDelivery(picks.second_aborts)
    name = f"{unique_name}-late"
    bash = ToolCall("bash", {"command": "echo started; sleep 30", "description": "sleep"})
    # The next turn's first step runs while the late aborts reach the server.
    slow = ToolCall("bash", {"command": f"sleep {2 * LATE}; echo again", "description": "s"})
    scripted_model.script(
        name, [ToolCalls([bash]), ToolCalls([slow]), Text("the follow-up answer")]
    )
    async with through(real_server, transport) as (oc, client, rec):
        info = await oc.start_session("late", title="late")
        picks.session_id = info.session_id
        await oc.send_turn("late", "go " + script_marker(name))
        await bash_printed(client, info.session_id, "started")
        result = await oc.interrupt_turn("late")
        assert result.stop is not None and result.stop.ok
        turn = await oc.send_turn("late", "and now?")
        ended = await rec.wait_for(
            lambda e: (
                e.type in ("turn.completed", "turn.aborted", "turn.failed")
                and e.turn_id == turn.turn_id
            ),
            timeout=60,
        )
        assert ended.type == "turn.completed", ended
        assert transport.delivered == picks.aborts - 1 >= 1, "second aborts went out"


async def test_a_prompt_on_its_way_when_stop_is_pressed_runs_nothing_after_the_stop(
    real_server: RealOpenCodeServer, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    """A prompt still being sent when the Stop starts: it may already be on the wire, so
    the Stop waits until the server has it and then aborts its run. Given up on instead,
    it reaches the server after the Stop returned and starts a run nobody stops."""
    picks = Picks()
    transport = LateDelivery(picks.first_prompt)
    name = f"{unique_name}-prompt"
    scripted_model.script(name, [Hang()])
    async with through(real_server, transport) as (oc, client, _):
        info = await oc.start_session("prompt", title="prompt")
        picks.session_id = info.session_id
        send = asyncio.create_task(oc.send_turn("prompt", "go " + script_marker(name)))
        await transport.sent.wait()
        result = await oc.interrupt_turn("prompt")
        assert result.stop is not None and result.stop.ok
        stopped = time.monotonic()
        with contextlib.suppress(TurnCancelledError):
            await send
        await asyncio.gather(*transport.deliveries, return_exceptions=True)

        def nothing_runs() -> bool:
            return not scripted_model.requests_after(stopped, [info.session_id])

        await holds_for(LATE, nothing_runs, "no model request after the Stop returned")
        statuses = await client.status()
        assert info.session_id not in statuses or not statuses[info.session_id].is_busy
