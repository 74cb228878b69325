"""The event stream of one thread as Server-Sent Events.

Each canonical event is one frame: ``id: <event_id>``, ``event: <type>``,
``data: <event.to_dict() as JSON>``. The browser's ``EventSource`` remembers the
last ``id`` and sends it back as ``Last-Event-ID`` when it reconnects, and the
adapter replays exactly what came after it. So a ``stream.gap`` frame carries
``id: <last_event_id>`` (the last real event before the gap), never an id of its
own: a reconnect after it must resume from history, not skip past the gap.

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
from collections.abc import AsyncIterator, Callable

from sse_starlette import EventSourceResponse, ServerSentEvent
from sse_starlette.sse import SendTimeoutError
from starlette.types import Receive, Scope, Send

import adapter
from adapter._logging import get_logger

from ._json import json_text

__all__ = ["SEND_TIMEOUT", "event_frame", "event_response"]

_log = get_logger("adapter.web")

#: Seconds one send to a client may wait for its socket to take the bytes before the
#: client is dropped (a tab that cannot read a frame for this long is stuck or gone).
SEND_TIMEOUT = 30.0


def event_frame(event: adapter.Event) -> ServerSentEvent:
    """One frame; a gap's frame carries the id of the last event before it. Its data is
    UTF-8 JSON whatever the server's text held (:func:`adapter.web._json.json_text`)."""
    data = json_text(event.to_dict())
    if isinstance(event, adapter.StreamGap):
        return ServerSentEvent(data=data, event=event.type, id=event.last_event_id)
    return ServerSentEvent(data=data, event=event.type, id=event.event_id)


async def _frames(
    subscribe: Callable[[], adapter.EventStream], thread_id: str
) -> AsyncIterator[ServerSentEvent]:
    sent = 0
    try:
        async with subscribe() as stream:
            async for event in stream:
                yield event_frame(event)
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
    subscribe: Callable[[], adapter.EventStream], thread_id: str, *, ping: float
) -> EventSourceResponse:
    """The streaming response; it subscribes when it starts streaming (not before:
    a response that never streams, such as a ``HEAD``, must leave no subscription)."""
    return _EventResponse(
        _frames(subscribe, thread_id), thread_id, ping=ping, send_timeout=SEND_TIMEOUT
    )
