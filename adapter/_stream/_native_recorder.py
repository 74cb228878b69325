"""Recording each thread's native event stream: a support tool, off by default.

Why it exists: a bug in the translation of OpenCode's events is reported as "the
turn never ended" or "the tool call showed twice"; what reproduces it is the native
stream the adapter read. With ``OpenCodeAdapter(..., native_recorder=...)`` every
native event of a thread's tree (its root and every descendant, the event types the
adapter maps and those it does not: ``session.diff``, ``todo.updated``...) reaches the
recorder under the thread id, in stream order, as the decoded JSON the server sent,
with the moment it was read. :class:`NativeFileRecorder` writes them as JSON lines a
user can attach to a bug report; :func:`read_native_recording` reads them back and
``FakeOpenCodeServer.replay_native`` plays them to an adapter in a test.

Rules (``docs/reliability.md``, "Recording the native stream"):

* The pump never waits for the recorder. An event is handed to a queue bounded in
  bytes (its JSON size plus a fixed overhead); the recorder is called from one task
  of its own, in order. What does not fit is dropped and counted, and the recorder
  gets a :class:`NativeRecordGap` for that thread where the records are missing.
* A recorder that raises is reported once (a log error with its traceback and a
  ``runtime.warning`` on the thread), then at most once per
  :data:`FAILURE_REPORT_INTERVAL` in the log with the count; every later event is
  still offered to it.
* A record holds the event payload only (no request, header or URL), and every
  occurrence of the server password in it, and of the Basic credential made from
  it, is replaced by ``[redacted]`` (keys and values, at any depth).
* At ``aclose`` what is queued is handed to the recorder for at most the teardown
  timeout; then the task is cancelled and awaited.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import inspect
import json
import os
import threading
import time
import traceback
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

import msgspec

from .._base._closing import Closing
from .._base._jsonable import field_values
from .._client._native import NativeEvent
from .._client._sse_payloads import decode_json
from .._exceptions import InvalidInputError
from .._logging import get_logger
from .._threads._registry import ThreadRegistry
from .._types._events import RuntimeWarningEvent

__all__ = [
    "DEFAULT_RECORDER_BYTES",
    "FAILURE_REPORT_INTERVAL",
    "REDACTED",
    "NativeFileRecorder",
    "NativeRecord",
    "NativeRecordGap",
    "NativeRecorder",
    "NativeRecording",
    "read_native_recording",
]

_log = get_logger("adapter.recorder")

#: The default bound of the recorder's queue, in bytes of JSON (4 of OpenCode's
#: largest events: :data:`adapter._client._sse_payloads.DEFAULT_MAX_EVENT_BYTES` is 4 MiB).
DEFAULT_RECORDER_BYTES = 16 * 1024 * 1024
#: Seconds between two log lines about a recorder that keeps failing, or falls behind.
FAILURE_REPORT_INTERVAL = 10.0
#: What a password found inside an event is replaced with.
REDACTED = "[redacted]"
#: Bytes charged per queued record on top of its JSON (the record and queue slot).
_OVERHEAD = 128

_ENCODE = msgspec.json.encode


@dataclass(frozen=True, slots=True)
class NativeRecord:
    """One native event of a thread's tree, as the server sent it."""

    thread_id: str
    #: The session the event is about (the thread's root or one of its descendants).
    session_id: str
    #: When the pump read the event, in seconds since the epoch (``time.time()``).
    received_at: float
    #: The decoded JSON event (``{"id"?, "type", "properties"}``), the password redacted.
    #: Shared with the canonical events' ``raw``, not copied: read it, never change it.
    event: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        """The record as one line of :class:`NativeFileRecorder`'s file."""
        return field_values(self)


@dataclass(frozen=True, slots=True)
class NativeRecordGap:
    """Records missing here: ``dropped`` events (``dropped_bytes`` of JSON) of
    ``thread_id`` did not fit the bound. ``thread_id`` is ``None`` in a file whose
    own byte bound was reached: every record after that point is missing."""

    thread_id: str | None
    dropped: int
    dropped_bytes: int

    def to_json(self) -> dict[str, Any]:
        return {
            "thread_id": self.thread_id,
            "gap": {"dropped": self.dropped, "bytes": self.dropped_bytes},
        }


#: What the adapter calls for each record or gap, in order, one call at a time: a
#: coroutine function or a plain function (which must not block the event loop).
NativeRecorder: TypeAlias = Callable[[NativeRecord | NativeRecordGap], Awaitable[None] | None]


def _json_bytes(value: Any) -> bytes:
    """Compact JSON; a lone surrogate (OpenCode cuts strings by UTF-16 units) is
    written as its ``\\ud800`` escape, so the file reads back to the same event."""
    try:
        return _ENCODE(value)
    except UnicodeEncodeError:
        return json.dumps(value, separators=(",", ":")).encode()


class _Redactor:
    """Replaces the password (and the Basic credential made from it) in an event."""

    def __init__(self, password: str | None, username: str = "opencode") -> None:
        secrets: list[str] = []
        if password:
            secrets.append(password)
            credential = base64.b64encode(f"{username}:{password}".encode()).decode()
            secrets.append(credential)
        self._secrets = tuple(secrets)
        # A string holding a secret holds its JSON-escaped form in the encoding (the
        # escaping is per character): only an event whose JSON contains one is walked.
        self._needles = tuple(_json_bytes(s)[1:-1] for s in secrets)

    def __call__(self, event: Mapping[str, Any], data: bytes) -> tuple[Mapping[str, Any], bytes]:
        if not any(needle in data for needle in self._needles):
            return event, data
        clean = self._walk(event)
        return clean, _json_bytes(clean)

    def _text(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        return text

    def _walk(self, value: Any) -> Any:
        # Events are at most MAX_EVENT_DEPTH (128) levels deep: the recursion is bounded.
        if isinstance(value, str):
            return self._text(value)
        if isinstance(value, Mapping):
            return {self._text(str(k)): self._walk(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self._walk(item) for item in value]
        return value


class NativeRecording:
    """The adapter's side of a recorder: the bounded queue and the task that drains it."""

    def __init__(self, core: ThreadRegistry, recorder: NativeRecorder, *, max_bytes: int) -> None:
        if not callable(recorder):
            raise InvalidInputError(f"native_recorder must be callable, got {recorder!r:.40}")
        self._registry = core
        self._recorder = recorder
        self._max_bytes = max_bytes
        self._redact = _Redactor(core.password)
        self._queue: deque[tuple[NativeRecord | NativeRecordGap, int]] = deque()
        self._gaps: dict[str, list[int]] = {}  # thread -> [dropped, bytes] not yet told
        self._ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._last_report = 0.0
        self._last_behind = -FAILURE_REPORT_INTERVAL
        self._unreported = 0
        self.queued_bytes = 0
        self.peak_bytes = 0
        self.recorded = 0
        self.dropped = 0
        self.failures = 0

    def observing(self, handle: Callable[[NativeEvent], None]) -> Callable[[NativeEvent], None]:
        """``handle`` (the translator), recording each event of a thread's tree: before
        it is translated, so an event whose translation fails is recorded too, or right
        after, when translating it made its session a thread's (a child's
        ``session.created``, a request of a child found by its ancestry)."""
        owner = self._registry.owner

        def on_event(event: NativeEvent) -> None:
            sid = event.session_id
            thread = owner.get(sid) if sid is not None else None
            if thread is not None and sid is not None:
                self.offer(thread.thread_id, sid, event.raw)
                handle(event)
                return
            try:
                handle(event)
            finally:
                thread = owner.get(sid) if sid is not None else None
                if thread is not None and sid is not None:
                    self.offer(thread.thread_id, sid, event.raw)

        return on_event

    def offer(self, thread_id: str, session_id: str, event: Mapping[str, Any]) -> None:
        """Queue one event of ``thread_id``'s tree, or count it dropped. Never waits."""
        if self._closed:
            return
        received_at = time.time()
        event, data = self._redact(event, _json_bytes(event))
        size = len(data) + _OVERHEAD
        gap = self._gaps.get(thread_id)
        needed = size + (_OVERHEAD if gap is not None else 0)
        if self.queued_bytes + needed > self._max_bytes:
            self.dropped += 1
            if gap is None:
                gap = self._gaps[thread_id] = [0, 0]
                now = time.monotonic()
                if now - self._last_behind >= FAILURE_REPORT_INTERVAL:  # a log line, rate-limited
                    self._last_behind = now
                    _log.warning("adapter.recorder_behind", bound=self._max_bytes)
            gap[0] += 1
            gap[1] += len(data)
            return
        if gap is not None:
            del self._gaps[thread_id]
            self._put(NativeRecordGap(thread_id, gap[0], gap[1]), _OVERHEAD)
        self._put(NativeRecord(thread_id, session_id, received_at, event), size)
        if self._task is None:
            self._task = self._registry.tasks.spawn(self._drain(), name="native-recorder")

    def _put(self, item: NativeRecord | NativeRecordGap, size: int) -> None:
        self._queue.append((item, size))
        self.queued_bytes += size
        self.peak_bytes = max(self.peak_bytes, self.queued_bytes)
        self._ready.set()

    async def _drain(self) -> None:
        while True:
            while self._queue:
                item, size = self._queue.popleft()
                try:
                    result = self._recorder(item)
                    if inspect.isawaitable(result):
                        await result
                except Exception as exc:  # the recorder's failure never reaches the pump
                    self._failed(item, exc)
                else:
                    if isinstance(item, NativeRecord):
                        self.recorded += 1
                finally:
                    self.queued_bytes -= size
            if self._closed:
                return
            self._ready.clear()
            await self._ready.wait()

    def _failed(self, item: NativeRecord | NativeRecordGap, exc: Exception) -> None:
        self.failures += 1
        now = time.monotonic()
        if self.failures == 1:
            self._last_report = now
            _log.error(
                "adapter.recorder_failed",
                error_type=type(exc).__name__,
                traceback="".join(traceback.format_exception(exc)),
            )
            thread = self._registry.threads.get(item.thread_id or "")
            if thread is not None:
                self._registry.emit(
                    RuntimeWarningEvent(
                        thread_id=thread.thread_id,
                        turn_id=thread.lifecycle.turn_id,
                        message=f"the native event recorder failed ({type(exc).__name__}); "
                        "it is still called for every event, further failures are only logged",
                        error_name=type(exc).__name__,
                    )
                )
            return
        self._unreported += 1
        if now - self._last_report >= FAILURE_REPORT_INTERVAL:
            self._last_report = now
            _log.warning(
                "adapter.recorder_failing", count=self._unreported, error_type=type(exc).__name__
            )
            self._unreported = 0

    async def aclose(self) -> None:
        """Hand the recorder what is queued (and the gaps not yet told), for at most
        the teardown timeout; then the task is cancelled and awaited."""
        if self._closed:
            return
        self._closed = True
        for thread_id, (dropped, size) in self._gaps.items():
            self._put(NativeRecordGap(thread_id, dropped, size), _OVERHEAD)
        self._gaps.clear()
        task = self._task
        if task is None and self._queue:
            task = self._task = self._registry.tasks.spawn(self._drain(), name="native-recorder")
        if task is None:
            return
        self._ready.set()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._registry.timeouts.teardown):
                await asyncio.shield(task)
        if not task.done():
            _log.warning("adapter.recorder_abandoned", queued=len(self._queue))
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        self._queue.clear()
        self.queued_bytes = 0


class NativeFileRecorder(Closing):
    """A :data:`NativeRecorder` writing JSON lines to ``path``, at most ``max_bytes``.

    Each line is a record ``{"thread_id", "session_id", "received_at", "event"}`` or a
    gap ``{"thread_id", "gap": {"dropped", "bytes"}}``. The file is created (or
    truncated) with mode 0600 when the recorder is made: its events hold the
    conversation and the tools' input and output. Once a line would pass
    ``max_bytes``, nothing more is written but one last gap line
    (``"thread_id": null``) counting what was left out, written at :meth:`close`.
    Writes run in a worker thread, never on the event loop.

    Use it around the adapter, so the file is complete when it closes::

        with NativeFileRecorder("bug-1234.jsonl") as recorder:
            async with OpenCodeAdapter(url, native_recorder=recorder) as oc:
                ...
    """

    #: Bytes kept free for the last gap line.
    _RESERVE = 128

    def __init__(self, path: str | os.PathLike[str], *, max_bytes: int = 64 * 1024 * 1024) -> None:
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1024:
            raise InvalidInputError(f"max_bytes must be an integer >= 1024, got {max_bytes!r:.40}")
        self.path = Path(path)
        self.max_bytes = max_bytes
        self.written_bytes = 0
        self.dropped = 0
        self._dropped_bytes = 0
        self._lock = threading.Lock()
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)
        self._fd: int | None = os.open(self.path, flags, 0o600)

    async def __call__(self, item: NativeRecord | NativeRecordGap) -> None:
        line = _json_bytes(item.to_json()) + b"\n"
        if self._fd is None or self.written_bytes + len(line) > self.max_bytes - self._RESERVE:
            if isinstance(item, NativeRecord):
                self.dropped += 1
                self._dropped_bytes += len(line)
            elif item.thread_id is not None:
                self.dropped += item.dropped
                self._dropped_bytes += item.dropped_bytes
            return
        self.written_bytes += len(line)
        await asyncio.to_thread(self._write, line)

    def _write(self, line: bytes) -> None:
        with self._lock:
            if self._fd is None:
                return
            view = memoryview(line)
            while view:
                view = view[os.write(self._fd, view) :]

    def close(self) -> None:
        """Write the last gap line if anything was left out, and close the file."""
        if self._fd is None:
            return
        if self.dropped:
            gap = NativeRecordGap(None, self.dropped, self._dropped_bytes)
            self._write(_json_bytes(gap.to_json()) + b"\n")
        with self._lock:
            fd, self._fd = self._fd, None
            assert fd is not None
            os.close(fd)


def read_native_recording(path: str | os.PathLike[str]) -> list[NativeRecord | NativeRecordGap]:
    """The records and gaps of a :class:`NativeFileRecorder` file, in order.

    A line that is not one of them raises :class:`~adapter.InvalidInputError` naming it."""
    items: list[NativeRecord | NativeRecordGap] = []
    with open(path, encoding="utf-8") as file:
        for number, line in enumerate(file, 1):
            if not line.strip():
                continue
            try:
                items.append(_item(decode_json(line)))
            except (ValueError, TypeError, KeyError) as exc:
                raise InvalidInputError(
                    f"{os.fspath(path)!r:.200} line {number} is not a native record ({exc!s:.80})"
                ) from None
    return items


def _item(value: Any) -> NativeRecord | NativeRecordGap:
    if not isinstance(value, dict):
        raise TypeError("not an object")
    thread_id = value.get("thread_id")
    gap = value.get("gap")
    if isinstance(gap, dict):
        return NativeRecordGap(thread_id, int(gap["dropped"]), int(gap["bytes"]))
    event = value["event"]
    if not isinstance(thread_id, str) or not isinstance(event, dict):
        raise TypeError("a record needs a thread_id and an event object")
    return NativeRecord(thread_id, str(value["session_id"]), float(value["received_at"]), event)
