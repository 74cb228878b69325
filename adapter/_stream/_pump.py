"""The event pump: one ``/event`` stream per server directory, kept connected.

Why its own module: the stream is shared by every thread of a directory, and
its concerns (reconnecting with backoff, noticing an outage and its end,
parsing each native event exactly once, surviving a malformed event) have
nothing to do with threads. The pump knows none: it hands each parsed event,
the start of an outage and its end to the :class:`StreamSink` it was given, an
interface this module owns (the adapter implements it above, in
:mod:`adapter._stream._pump_sink`), so the pump never imports what it reports to.

It never dies while it should run:

* A native event that cannot be read (:mod:`adapter._client._sse_payloads`: not strict
  JSON, not an event object, nested too deep), parsed (:func:`parse_native`) or
  translated (``handle`` raised) is skipped and counted in :attr:`bad_events`.
  ``skipped`` hears of it at most once per type per
  ``skip_report`` seconds (``Timeouts.skip_report``, default
  :data:`SKIP_REPORT_INTERVAL`): the first skip at once, the others of the window
  with their count when it ends. Types beyond :data:`MAX_REPORTED_TYPES` in a
  window are reported together as ``other``, so a flood of invented types costs
  bounded memory and warnings.
* Anything else that goes wrong while reading (the stream is lost, or the pump
  itself fails: a bug) is an outage: ``lost`` once, reconnection with the
  adapter's one backoff (:data:`~adapter._client._retry.RECONNECT_BACKOFF`: tenacity,
  jittered), ``restored`` once reconnected, so the threads are reconciled.
  The backoff grows while connections fail to open, or while the pump fails
  on each one at once (a bug that recurs costs a few requests, not a loop);
  it starts again after a connection that lasted :data:`_STABLE_AFTER`
  seconds, and after any opened stream the server ended (a server that drops
  streams again and again is reconnected after the first step each time).
* A server that refuses every connection (nothing listens: its process is gone)
  for the sink's ``unreachable_after`` seconds (``Timeouts.unreachable``) is reported once:
  ``unreachable``, so that the turns waiting on it end instead of waiting for an
  answer that cannot come. The clock starts at the first refused connection and
  stops at any answer (a stream opened, or an HTTP status): something listens
  again. The pump goes on reconnecting; ``restored`` follows when it is back.
"""

from __future__ import annotations

import asyncio
import re
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import httpx

from .._base._unicode import well_formed
from .._client import OpenCodeClient
from .._client._native import NativeEvent, parse_native
from .._client._retry import RECONNECT_BACKOFF
from .._client._sse_payloads import RawEvent
from .._exceptions import NativeEventError, ProtocolError, RequestError
from .._logging import get_logger

__all__ = ["MAX_REPORTED_TYPES", "SKIP_REPORT_INTERVAL", "EventPump", "StreamSink"]

_log = get_logger("adapter.pump")

#: Seconds between two reports of skipped events of one type, by default.
SKIP_REPORT_INTERVAL = 10.0
#: Types with their own report per window; the rest are reported as ``other``.
MAX_REPORTED_TYPES = 32
#: The label of an event whose type could not be read.
UNKNOWN_TYPE = "unknown"

_STABLE_AFTER = 1.0
_TYPE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class StreamSink(Protocol):
    """What one pump reports to; it knows nothing else of the adapter."""

    def handle(self, event: NativeEvent) -> None:
        """One parsed native event (may raise: the event is then skipped)."""

    def lost(self, error: Exception) -> None:
        """The stream is down (once per outage)."""

    def restored(self) -> None:
        """The stream is up again after an outage."""

    def skipped(self, kind: str, count: int, reason: str) -> None:
        """``count`` events of type ``kind`` were skipped (throttled per type)."""

    def running(self) -> bool:
        """Whether the pump should go on (``False`` once the adapter closes)."""

    @property
    def unreachable_after(self) -> float | None:
        """Seconds of refused connections after which :meth:`unreachable` is called
        (``None``: never)."""

    def unreachable(self, seconds: float) -> None:
        """Every connection was refused for ``unreachable_after`` seconds (``seconds``:
        how long, measured); once per outage."""


@dataclass(slots=True)
class _Window:
    count: int = 0
    reason: str = ""
    timer: asyncio.TimerHandle | None = None


class _SkipReports:
    """Skipped events per type, reported at most once per type per interval."""

    def __init__(self, report: Callable[[str, int, str], None], interval: float) -> None:
        self._report = report
        self._interval = interval
        self._windows: dict[str, _Window] = {}

    def add(self, kind: str, reason: str) -> bool:
        """Count one skip; whether it was reported at once (the first of its window)."""
        window = self._windows.get(kind)
        if window is None:
            if len(self._windows) >= MAX_REPORTED_TYPES:
                kind = "other"
                window = self._windows.get(kind)
            if window is None:
                window = self._windows[kind] = _Window()
        window.count += 1
        window.reason = reason
        if window.timer is not None:
            return False
        self._flush(kind, window)
        return True

    def _flush(self, kind: str, window: _Window) -> None:
        if window.count == 0:
            self._windows.pop(kind, None)  # a quiet type is forgotten: bounded memory
            return
        count, window.count = window.count, 0
        window.timer = asyncio.get_running_loop().call_later(
            self._interval, self._flush, kind, window
        )
        _log.warning("adapter.events_skipped", type=kind, count=count, reason=window.reason)
        try:
            self._report(kind, count, window.reason)
        except Exception as exc:  # the report must never be what breaks the pump
            _log.error("adapter.skip_report_failed", error=repr(exc)[:300])

    def close(self) -> None:
        for window in self._windows.values():
            if window.timer is not None:
                window.timer.cancel()
        self._windows.clear()


class EventPump:
    """Reads one directory's event stream until its sink says stop."""

    def __init__(
        self,
        directory: str | None,
        client: OpenCodeClient,
        sink: StreamSink,
        *,
        skip_report: float = SKIP_REPORT_INTERVAL,
    ) -> None:
        self.directory = directory
        self.client = client
        self.connected = asyncio.Event()
        self.bad_events = 0
        self.reconnects = 0
        # Bound once: the first runs for every event.
        self._on_event = sink.handle
        self._on_lost = sink.lost
        self._on_restored = sink.restored
        self._should_run = sink.running
        self._skips = _SkipReports(sink.skipped, skip_report)
        self._outage = False
        self._on_unreachable = sink.unreachable
        self._unreachable_after = sink.unreachable_after
        #: Since when every connection was refused (``time.monotonic``), and the timer
        #: that reports it once ``unreachable_after`` has passed.
        self._refused_since: float | None = None
        self._refusal_timer: asyncio.TimerHandle | None = None

    async def run(self) -> None:
        """Read the stream, reconnecting after every failure, until ``should_run``
        says stop; returns then, and raises nothing but its cancellation."""
        # An opened stream the server ended: the backoff starts again from its
        # first step (the waits are RECONNECT_BACKOFF's, see _connection).
        ended: Exception | None = None
        try:
            while self._should_run():
                try:
                    async for attempt in RECONNECT_BACKOFF.retrying(self._restartable):
                        with attempt:
                            if ended is not None:
                                # Handed to the fresh retrying as its first failure:
                                # it waits the first step, then connects.
                                replayed, ended = ended, None
                                raise replayed
                            ended = await self._connection()
                except Exception:  # not restarted: the adapter is closing
                    return
        finally:
            self.connected.clear()
            self._skips.close()
            self._answered()

    def _restartable(self, exc: BaseException) -> bool:
        # Cancellation is a BaseException: never retried.
        return isinstance(exc, Exception) and self._should_run()

    async def _connection(self) -> Exception | None:
        """One connection, from opening the stream to losing it. Returns when the
        backoff should start again: ``None`` to reconnect at once (the stream was up
        :data:`_STABLE_AFTER` seconds), the error when the stream opened and the
        server ended it (reconnect after the first step); else raises (the backoff
        grows)."""
        loop = asyncio.get_running_loop()
        opened: float | None = None
        try:
            async with self.client.event_stream(on_skipped=self._unreadable) as events:
                opened = loop.time()
                self._answered()
                self.connected.set()
                if self._outage:
                    self._outage = False
                    self.reconnects += 1
                    self._on_restored()
                async for raw in events:
                    self._dispatch(raw)
            raise RequestError("event_stream", "the server ended the event stream")
        except Exception as exc:
            self.connected.clear()
            if not self._should_run():
                raise
            self._lost(exc)
            if opened is None:
                if _refused(exc):
                    self._refused()
                else:
                    self._answered()  # an HTTP status, a timeout: something listens
                raise  # it never opened: the backoff grows
            if loop.time() - opened >= _STABLE_AFTER:
                return None  # a stable connection was lost: reconnect at once
            if isinstance(exc, RequestError | ProtocolError):
                # It opened and the server ended it: the server's doing, however often
                # it happens, so the backoff starts again (after its first step).
                return exc
            raise  # a bug that recurs on every connection: the backoff grows

    def _lost(self, exc: Exception) -> None:
        if isinstance(exc, RequestError | ProtocolError):
            reason: Exception = exc
            if not self._outage:
                _log.warning("adapter.stream_lost", directory=self.directory, error=str(exc))
        else:
            # A bug of the pump (or of a callback): logged with its traceback; the host
            # hears only that the pump restarts, not the text of an internal error.
            # As text: structlog's default renderer would print every frame's locals.
            _log.error(
                "adapter.pump_failed",
                directory=self.directory,
                error_type=type(exc).__name__,
                traceback="".join(traceback.format_exception(exc)),
            )
            reason = RequestError(
                "event_stream", f"the event pump failed ({type(exc).__name__}) and restarts"
            )
        if not self._outage:
            self._outage = True
            try:
                self._on_lost(reason)
            except Exception as error:
                _log.error("adapter.outage_report_failed", error=repr(error)[:300])

    def _refused(self) -> None:
        """A connection was refused: start the unreachable clock, if it is not running."""
        if self._refused_since is not None or self._unreachable_after is None:
            return
        self._refused_since = time.monotonic()
        self._refusal_timer = asyncio.get_running_loop().call_later(
            self._unreachable_after, self._report_unreachable
        )

    def _answered(self) -> None:
        """Something answered (or the pump ends): the unreachable clock stops."""
        self._refused_since = None
        if self._refusal_timer is not None:
            self._refusal_timer.cancel()
            self._refusal_timer = None

    def _report_unreachable(self) -> None:
        self._refusal_timer = None
        since = self._refused_since
        if since is None or self.connected.is_set() or not self._should_run():
            return
        seconds = time.monotonic() - since
        _log.warning("adapter.server_unreachable", directory=self.directory, seconds=seconds)
        try:
            self._on_unreachable(seconds)
        except Exception as exc:  # the report must never be what breaks the pump
            _log.error("adapter.unreachable_report_failed", error=repr(exc)[:300])

    def _dispatch(self, raw: RawEvent) -> None:
        try:
            event = parse_native(raw)
        except Exception as exc:  # parse_native raises NativeEventError; a bug the same way
            if not isinstance(exc, NativeEventError):
                exc = NativeEventError(_type_of(raw), f"could not be parsed ({type(exc).__name__})")
            self._unreadable(exc)
            return
        try:
            self._on_event(event)
        except Exception as exc:  # a bug on one event must never stop the pump
            if self._skipped(event.type, f"its translation failed ({type(exc).__name__})"):
                # A bug: its traceback once per report (as text: no frame's locals).
                _log.error(
                    "adapter.event_failed",
                    type=_label(event.type),
                    error_type=type(exc).__name__,
                    traceback="".join(traceback.format_exception(exc)),
                )

    def _unreadable(self, error: NativeEventError) -> None:
        text = str(error)
        prefix = f"{error.operation}: "
        self._skipped(error.event_type, text[len(prefix) :] if text.startswith(prefix) else text)

    def _skipped(self, kind: str | None, reason: str) -> bool:
        self.bad_events += 1
        return self._skips.add(_label(kind), well_formed(reason)[:200])


def _refused(exc: BaseException) -> bool:
    """Whether a failed connection was refused (or timed out connecting): no server
    accepted it. The client keeps the transport's error as the cause."""
    cause = exc.__cause__
    return isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout) or isinstance(
        cause, httpx.ConnectError | httpx.ConnectTimeout
    )


def _type_of(raw: object) -> str | None:
    kind = raw.get("type") if isinstance(raw, dict) else None
    return kind if isinstance(kind, str) else None


def _label(kind: str | None) -> str:
    """A native type fit to be named in a warning: a plausible type name, else ``unknown``."""
    return kind if kind is not None and _TYPE_NAME.fullmatch(kind) else UNKNOWN_TYPE
