"""The event stream of one thread as Server-Sent Events.

Each canonical event is one frame: ``id: <event_id>``, ``event: <type>``,
``data: <event.to_dict() as JSON>``. The browser's ``EventSource`` remembers the
last ``id`` and sends it back as ``Last-Event-ID`` when it reconnects, and the
adapter replays exactly what came after it. So a ``stream.gap`` frame carries
``id: <last_event_id>`` (the last real event before the gap), never an id of its
own: a reconnect after it must resume from history, not skip past the gap.

The subscription is made when the response starts streaming and lives inside
the generator's ``async with``: when the client
goes, sse-starlette cancels the generator and the subscription is closed with
it; when the thread exits (``session.exited``) or the stream overflows, the
generator returns and the response ends.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import structlog
from sse_starlette import EventSourceResponse, ServerSentEvent

import adapter

from ._json import json_text

__all__ = ["event_frame", "event_response"]

_log = structlog.get_logger("adapter.web")


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
    finally:
        _log.debug("web.events_closed", thread_id=thread_id, frames=sent)


def event_response(
    subscribe: Callable[[], adapter.EventStream], thread_id: str, *, ping: float
) -> EventSourceResponse:
    """The streaming response; it subscribes when it starts streaming (not before:
    a response that never streams, such as a ``HEAD``, must leave no subscription)."""
    return EventSourceResponse(_frames(subscribe, thread_id), ping=ping)
