"""The event pump: one ``/event`` stream per server directory, kept connected.

Why its own module: the stream is shared by every thread of a directory, and
its concerns (reconnecting with backoff, noticing an outage and its end,
parsing each native event exactly once, surviving a malformed event) have
nothing to do with threads. The pump knows none: it hands each parsed event,
the start of an outage and its end to the callbacks it was given.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ._client import OpenCodeClient
from ._exceptions import NativeEventError, ProtocolError, RequestError
from ._logging import get_logger
from ._native import NativeEvent, parse_native

__all__ = ["EventPump"]

_log = get_logger("adapter.pump")

_MAX_BACKOFF = 5.0


class EventPump:
    """Reads one directory's event stream until ``should_run`` says stop."""

    def __init__(
        self,
        directory: str | None,
        client: OpenCodeClient,
        *,
        on_event: Callable[[NativeEvent], None],
        on_lost: Callable[[Exception], None],
        on_restored: Callable[[], None],
        should_run: Callable[[], bool],
    ) -> None:
        self.directory = directory
        self.client = client
        self.connected = asyncio.Event()
        self.bad_events = 0
        self.reconnects = 0
        self._on_event = on_event
        self._on_lost = on_lost
        self._on_restored = on_restored
        self._should_run = should_run

    async def run(self) -> None:
        backoff = 0.1
        outage = False
        while self._should_run():
            try:
                async with self.client.event_stream() as events:
                    self.connected.set()
                    backoff = 0.1
                    if outage:
                        outage = False
                        self.reconnects += 1
                        self._on_restored()
                    async for raw in events:
                        self._dispatch(raw)
                raise RequestError("event_stream", "the server ended the event stream")
            except (RequestError, ProtocolError) as exc:
                self.connected.clear()
                if not self._should_run():
                    return
                if not outage:
                    outage = True
                    _log.warning("adapter.stream_lost", directory=self.directory, error=str(exc))
                    self._on_lost(exc)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF)

    def _dispatch(self, raw: object) -> None:
        try:
            event = parse_native(raw)
        except NativeEventError as exc:
            self.bad_events += 1
            _log.warning("adapter.bad_event", error=str(exc)[:300])
            return
        try:
            self._on_event(event)
        except Exception as exc:  # a bug on one event must never stop the pump
            self.bad_events += 1
            _log.error("adapter.event_failed", type=event.type, error=repr(exc)[:300])
