"""``GET /event``: the server's event stream, opened and checked, as decoded events.

Why its own module: the stream is the one long-lived request of the client, and
none of the request machinery (:mod:`adapter._client._calls`) applies to it: it
is never retried here (the event pump reconnects it), it has a read timeout of
its own (the server's heartbeat), and its size bound is per event, on the raw
bytes, not per answer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import httpx
import httpx_sse

from .._exceptions import ProtocolError, RequestError
from ._calls import status_error
from ._sse_payloads import BoundedSSEStream, OnSkipped, RawEvent, decode_events

__all__ = ["open_event_stream"]


@asynccontextmanager
async def open_event_stream(
    http: httpx.AsyncClient,
    *,
    params: Mapping[str, str],
    timeout: httpx.Timeout,
    max_event_bytes: int,
    on_skipped: OnSkipped | None,
) -> AsyncIterator[AsyncIterator[RawEvent]]:
    """Open ``GET /event`` on ``http`` (see :meth:`OpenCodeClient.event_stream`)."""
    try:
        async with httpx_sse.aconnect_sse(
            http,
            "GET",
            "/event",
            params=params or None,
            timeout=timeout,
            headers={"accept-encoding": "identity"},
        ) as source:
            response = source.response
            if response.status_code != 200:
                await response.aread()
                raise status_error("event_stream", response.status_code, response.content, None)
            if "text/event-stream" not in response.headers.get("content-type", ""):
                raise ProtocolError(
                    "event_stream", "the server did not answer with an event stream"
                )
            if "content-encoding" not in response.headers:
                # httpx-sse buffers a whole line, and an event's lines, before it
                # decodes them: bound both on the raw bytes, so that no endless line
                # or event can fill memory.
                response.stream = BoundedSSEStream(response.stream, max_event_bytes)
            yield decode_events(source, max_event_bytes, on_skipped)
    except httpx.TimeoutException as exc:
        raise RequestError("event_stream", f"timed out ({type(exc).__name__})") from exc
    except httpx.TransportError as exc:
        raise RequestError("event_stream", f"connection failed ({type(exc).__name__})") from exc
