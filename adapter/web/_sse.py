"""The event stream of one thread as Server-Sent Events.

Each canonical event is one frame: ``id: <epoch>.<event_id>``, ``event: <type>``,
``data: <event.to_dict() as JSON>``. The browser's ``EventSource`` remembers the
last ``id`` and sends it back as ``Last-Event-ID`` when it reconnects, and the
adapter replays exactly what came after it. So a ``stream.gap`` frame carries
``id: <epoch>.<last_event_id>`` (the last real event before the gap), never an id
of its own: a reconnect after it must resume from history, not skip past the gap.

Why the epoch (:class:`FrameIds`): the adapter's event ids count from 1 in each
process, so an id another worker or an earlier process issued may name another
event here, and a replay after it would skip or repeat events. The epoch is
random per app: an id of another epoch is never looked up. The stream then starts
with a gap frame that holds the thread as it is (``thread``: its
``SessionInfo``), followed by everything the adapter retains of it (the current
and previous turn; for an adopted turn, its output read back): the page redraws
the thread from that, with nothing missing and nothing twice.

The subscription is made when the response starts streaming and lives inside
the generator's ``async with``: when the client goes, sse-starlette cancels the
generator and the subscription is closed with it; when the thread exits
(``session.exited``) or the stream overflows, the generator returns and the
response ends.

A client that stalls or vanishes costs the others nothing (``docs/web.md``, "Slow
and vanished clients"):

* a frame is taken from a non-empty queue without suspending, and uvicorn's send
  returns at once once the client is gone; so the generator yields to the loop
  between frames whenever more are queued. Without that, 50 stalled clients
  closing together each encoded their whole backlog into the void in one go and
  blocked the loop for seconds (``benchmarks/web_stalled_clients.py``);
* a send (a frame or a ping) that cannot complete within :data:`SEND_TIMEOUT`
  (the client reads nothing, its socket buffers are full) ends the response and
  closes its subscription: sse-starlette's ``send_timeout``. ``EventSource``
  reconnects by itself with ``Last-Event-ID`` if the client was merely slow.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Callable
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent
from sse_starlette.sse import SendTimeoutError
from starlette.types import Receive, Scope, Send

import adapter
from adapter._logging import get_logger

from ._json import json_text

__all__ = ["SEND_TIMEOUT", "FrameIds", "event_frame", "event_response", "snapshot_gap"]

_log = get_logger("adapter.web")

#: Seconds one send to a client may wait for its socket to take the bytes before the
#: client is dropped (a tab that cannot read a frame for this long is stuck or gone).
SEND_TIMEOUT = 30.0


class FrameIds:
    """The frames' ids of one app: ``<epoch>.<event_id>``, the epoch random per app
    (per worker, per process), so an id another worker or an earlier process issued
    is told apart from this one's even when its event id is also used here."""

    def __init__(self) -> None:
        self.epoch = secrets.token_hex(6)

    def of(self, event_id: str | None) -> str | None:
        return None if event_id is None else f"{self.epoch}.{event_id}"

    def local(self, frame_id: str) -> str | None:
        """The adapter's event id in a frame id this app issued; ``None`` for any other
        (another worker's, an earlier process's, a bare event id, garbage)."""
        epoch, dot, event_id = frame_id.partition(".")
        return event_id if dot and epoch == self.epoch and event_id else None


def snapshot_gap(info: adapter.SessionInfo, given: str) -> dict[str, Any]:
    """The data of the gap frame a stream starts with when ``Last-Event-ID`` was not
    this app's: a ``stream.gap`` (``reason: "expired"``) holding the thread as it is
    now; everything retained of it follows."""
    gap = adapter.StreamGap(
        thread_id=info.thread_id,
        reason="expired",
        last_event_id=None,
        message=(
            f"event {given!r:.80} was issued by another worker or an earlier process: "
            "the thread follows as this worker holds it (everything it retains)"
        ),
    )
    return {**gap.to_dict(), "thread": info.to_dict()}


def event_frame(event: adapter.Event, ids: FrameIds | None = None) -> ServerSentEvent:
    """One frame; a gap's frame carries the id of the last event before it. Its data is
    UTF-8 JSON whatever the server's text held (:func:`adapter.web._json.json_text`).
    ``ids``: the app's frame ids (``None``: the bare event ids)."""
    data = json_text(event.to_dict())
    event_id = event.last_event_id if isinstance(event, adapter.StreamGap) else event.event_id
    frame_id = event_id if ids is None else ids.of(event_id)
    return ServerSentEvent(data=data, event=event.type, id=frame_id)


async def _frames(
    subscribe: Callable[[], adapter.EventStream],
    thread_id: str,
    ids: FrameIds | None,
    lead: Callable[[], dict[str, Any]] | None,
) -> AsyncIterator[ServerSentEvent]:
    sent = 0
    try:
        async with subscribe() as stream:
            if lead is not None:
                # Read in the step the subscription was made in: the thread as it is
                # when its replay was taken, nothing between.
                yield ServerSentEvent(data=json_text(lead()), event="stream.gap")
                sent += 1
            async for event in stream:
                yield event_frame(event, ids)
                sent += 1
                if isinstance(event, adapter.SessionExited):
                    return
                if isinstance(event, adapter.StreamGap) and event.reason == "overflow":
                    # The subscription is over; the client reconnects with the gap's id.
                    return
                if stream.backlog:
                    # The next frame would come without a suspension: let the others
                    # (and this response's disconnect listener) run first.
                    await asyncio.sleep(0)
    finally:
        _log.debug("web.events_closed", thread_id=thread_id, frames=sent)


class _EventResponse(EventSourceResponse):
    """sse-starlette's response; a client dropped after the send timeout is logged,
    not an exception of the ASGI server (its connection is closed either way)."""

    def __init__(
        self,
        frames: AsyncIterator[ServerSentEvent],
        thread_id: str,
        *,
        ping: float,
        send_timeout: float,
    ) -> None:
        super().__init__(frames, ping=ping, send_timeout=send_timeout)
        self._thread_id = thread_id

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        except SendTimeoutError:
            _log.info(
                "web.events_client_stalled",
                thread_id=self._thread_id,
                send_timeout=self.send_timeout,
            )


def event_response(
    subscribe: Callable[[], adapter.EventStream],
    thread_id: str,
    *,
    ping: float,
    ids: FrameIds | None = None,
    lead: Callable[[], dict[str, Any]] | None = None,
) -> EventSourceResponse:
    """The streaming response; it subscribes when it starts streaming (not before:
    a response that never streams, such as a ``HEAD``, must leave no subscription).
    ``lead``: the data of a ``stream.gap`` frame sent first, built right after the
    subscription is made (:func:`snapshot_gap`)."""
    return _EventResponse(
        _frames(subscribe, thread_id, ids, lead), thread_id, ping=ping, send_timeout=SEND_TIMEOUT
    )
