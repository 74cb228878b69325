"""The fake's event transport: every event it emits, and the ``GET /event`` streams.

Why a module: an event has three audiences (the SSE streams of its session's
directory, the kept history that :meth:`FakeOpenCodeServer.wait_for_event` searches,
and the waiters of :meth:`FakeOpenCodeServer.wait_until`), and the directory
scoping, SSE framing and stream ends (a clean end, a dropped connection) must be
the same for all of them. The rest of the fake only calls :meth:`EventBus.emit`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from .id_minting import IdMinter
from .wire import JSON

_EOF = object()
_DROP = object()


class _Subscriber:
    __slots__ = ("closed", "directory", "queue")

    def __init__(self, directory: str) -> None:
        self.queue: asyncio.Queue[object] = asyncio.Queue()
        self.closed = False
        self.directory = directory


def _frame(envelope: JSON) -> bytes:
    return b"data: " + json.dumps(envelope, separators=(",", ":")).encode() + b"\n\n"


class EventBus:
    """Emits events to the streams, the history and the waiters.

    ``directory_of`` (session id -> directory, deleted sessions too) is the state's:
    it decides which streams get an event about a session.
    """

    def __init__(self, ids: IdMinter, directory_of: Mapping[str, str], history: int) -> None:
        self._ids = ids
        self._directory_of = directory_of
        self.events: deque[JSON] = deque(maxlen=history)
        self.seq = 0
        """How many events were emitted."""
        self._subscribers: set[_Subscriber] = set()
        self._waiters: dict[str, list[tuple[Callable[[JSON], bool], asyncio.Future[JSON]]]] = {}
        self._changed: asyncio.Event | None = None

    @property
    def stream_count(self) -> int:
        return len(self._subscribers)

    def envelope(self, type: str, properties: JSON) -> JSON:
        return {"id": self._ids.new("evt"), "type": type, "properties": properties}

    def emit(self, type: str, properties: JSON, *, directory: str | None = None) -> JSON:
        """Send an event to the streams of its directory: ``directory``, else that of the
        session it is about. Measured: a stream gets only the events of its directory's
        sessions, wherever the request that caused them came from."""
        envelope = self.envelope(type, properties)
        self.send(envelope, properties, directory)
        return envelope

    def send(self, envelope: JSON, properties: JSON, directory: str | None) -> None:
        type = envelope.get("type")
        self.seq += 1
        self.events.append(envelope)
        if self._subscribers:
            session_id = properties.get("sessionID")
            if directory is None and isinstance(session_id, str):
                directory = self._directory_of.get(session_id)
            frame = _frame(envelope)
            for sub in self._subscribers:
                if directory is None or sub.directory == directory:
                    sub.queue.put_nowait(frame)
        waiters = self._waiters.get(type) if isinstance(type, str) else None
        if waiters:
            for check, future in list(waiters):
                if not future.done() and check(envelope):
                    future.set_result(envelope)
                    waiters.remove((check, future))
        self.notify()

    def send_raw(self, data: bytes) -> None:
        """Write ``data`` verbatim to every stream."""
        for sub in self._subscribers:
            sub.queue.put_nowait(data)

    def notify(self) -> None:
        """Wake :meth:`wait_until`: something (an event, a request) changed."""
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    # ------------------------------------------------------------------ streams

    def open_stream(self, directory: str, heartbeat: float | None) -> httpx.Response:
        """The response to ``GET /event``: ``server.connected``, then its directory's events."""
        sub = _Subscriber(directory)
        self._subscribers.add(sub)
        first = _frame(self.envelope("server.connected", {}))
        stream = _EventStream(self, sub, first, heartbeat)
        self.notify()
        return httpx.Response(
            200,
            stream=stream,
            headers={"content-type": "text/event-stream", "cache-control": "no-cache"},
        )

    def end_streams(self, *, error: bool) -> int:
        """End every open stream (``error``: as a dropped connection); return how many."""
        subs = list(self._subscribers)
        for sub in subs:
            self.unsubscribe(sub)
            sub.queue.put_nowait(_DROP if error else _EOF)
        return len(subs)

    def unsubscribe(self, sub: _Subscriber) -> None:
        if not sub.closed:
            sub.closed = True
            self._subscribers.discard(sub)

    # ------------------------------------------------------------------ waiting

    async def wait_until(self, predicate: Callable[[], bool], timeout: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not predicate():
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError(f"condition not met within {timeout}s")
            if self._changed is None:
                self._changed = asyncio.Event()
            changed = self._changed
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(remaining, 0.05)):
                    await changed.wait()

    async def wait_for_event(
        self,
        type: str,
        predicate: Callable[[JSON], bool] | None,
        *,
        timeout: float,
        since: int | None,
    ) -> JSON:
        check = predicate or (lambda _event: True)
        if since is not None:
            first = self.seq - len(self.events)
            for index, event in enumerate(self.events):
                if first + index >= since and event["type"] == type and check(event):
                    return event
        future: asyncio.Future[JSON] = asyncio.get_running_loop().create_future()
        entry = (check, future)
        self._waiters.setdefault(type, []).append(entry)
        try:
            async with asyncio.timeout(timeout):
                return await future
        except TimeoutError:
            raise TimeoutError(f"no {type!r} event within {timeout}s") from None
        finally:
            waiters = self._waiters.get(type)
            if waiters is not None and entry in waiters:
                waiters.remove(entry)

    def fail_waiters(self) -> None:
        """Fail every :meth:`wait_for_event` still waiting (the server closed)."""
        for waiters in self._waiters.values():
            for _check, future in waiters:
                if not future.done():
                    future.set_exception(RuntimeError("FakeOpenCodeServer closed"))
        self._waiters.clear()
        self.notify()


class _EventStream(httpx.AsyncByteStream):
    """The body of one ``GET /event`` response."""

    def __init__(
        self, bus: EventBus, sub: _Subscriber, first: bytes, heartbeat: float | None
    ) -> None:
        self._bus = bus
        self._sub = sub
        self._first: bytes | None = first
        self._heartbeat = heartbeat
        self._stash: object | None = None
        self._done = False

    def __aiter__(self) -> _EventStream:
        return self

    async def __anext__(self) -> bytes:
        if self._first is not None:
            first, self._first = self._first, None
            return first
        if self._done:
            raise StopAsyncIteration
        if self._stash is not None:
            item, self._stash = self._stash, None
        elif self._heartbeat is not None:
            try:
                async with asyncio.timeout(self._heartbeat):
                    item = await self._sub.queue.get()
            except TimeoutError:
                return _frame(self._bus.envelope("server.heartbeat", {}))
        else:
            item = await self._sub.queue.get()
        if not isinstance(item, bytes):
            return self._end(item)
        chunks = [item]
        queue = self._sub.queue
        while not queue.empty():
            more = queue.get_nowait()
            if not isinstance(more, bytes):
                self._stash = more
                break
            chunks.append(more)
        return b"".join(chunks) if len(chunks) > 1 else item

    def _end(self, item: Any) -> bytes:
        self._done = True
        self._bus.unsubscribe(self._sub)
        if item is _DROP:
            raise httpx.RemoteProtocolError(
                "peer closed connection without sending complete message body "
                "(incomplete chunked read)"
            )
        raise StopAsyncIteration

    async def aclose(self) -> None:
        if not self._done:
            self._done = True
            self._bus.unsubscribe(self._sub)
            self._sub.queue.put_nowait(_EOF)
