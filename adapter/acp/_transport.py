"""The ACP agent's transport: newline-delimited JSON with every line checked.

Why its own module: the SDK's stdio reader (``NdjsonTransport``) hands each parsed
line to its receive loop as it is, and one line that is not a JSON-RPC object ends the
loop, so the agent (:mod:`adapter.acp._inbound` lists the failures). The SDK takes a
message-level transport in its place (``acp.run_agent(agent, transport)``, the seam
its HTTP and WebSocket transports use): :class:`CheckedTransport` is one, so the SDK
is neither forked nor patched.

* Reading: the input is read in chunks and split at newlines here, so no stream
  limit of the SDK's or asyncio's decides what happens to a long line. A line longer
  than ``max_line_bytes`` is answered ``-32600`` and discarded as it arrives: what is
  held is at most the bound plus one chunk, whatever the line's length.
* Each line goes through :func:`~adapter.acp._inbound.check_line`: an accepted message
  goes to the SDK; a refused one is answered, a dropped one logged, and the next line
  is read. A long line is checked in a worker thread so the event loop (the sessions'
  updates) is not held up by its parse. The agent ends only at the end of input
  (``receive`` returns ``None``), a read error included.
* Writing: the SDK's messages and the refusals take the same :meth:`send`, one whole
  line per write under one lock, encoded by
  :func:`~adapter.acp._outbound.encode_message`, so they never interleave.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from adapter._logging import get_logger

from ._inbound import MAX_LINE_BYTES, Accept, Refuse, Verdict, check_line, too_long
from ._outbound import encode_message

__all__ = ["CheckedTransport"]

_log = get_logger("adapter.acp")

#: Bytes asked of the reader at a time.
CHUNK_BYTES = 64 * 1024
#: Lines longer than this are checked in a worker thread.
_THREAD_BYTES = 256 * 1024


class _Reader(Protocol):
    async def read(self, n: int = -1) -> bytes: ...


class _Writer(Protocol):
    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...


class _TooLong:
    """The marker of a line that went past the bound (its bytes were discarded)."""


_TOO_LONG = _TooLong()


class CheckedTransport:
    """An ``acp`` message transport over a byte reader and writer (stdin and stdout)."""

    def __init__(
        self, reader: _Reader, writer: _Writer, *, max_line_bytes: int = MAX_LINE_BYTES
    ) -> None:
        if max_line_bytes < 1:
            raise ValueError("max_line_bytes must be positive")
        self._reader = reader
        self._writer = writer
        self._max = max_line_bytes
        self._buffer = bytearray()
        self._scanned = 0  # bytes of the buffer known to hold no newline
        self._discarding = False  # inside a line past the bound
        self._eof = False
        self._lock = asyncio.Lock()
        self._closed = False

    async def send(self, message: dict[str, Any]) -> None:
        if self._closed:
            raise ConnectionError("the ACP transport is closed")
        data = encode_message(message)
        async with self._lock:
            self._writer.write(data)
            await self._writer.drain()

    async def receive(self) -> dict[str, Any] | None:
        """The next message to route; ``None`` at the end of input."""
        while True:
            line = await self._next_line()
            if line is None:
                return None
            verdict = await self._check(line)
            if verdict is None:
                continue
            if isinstance(verdict, Accept):
                return verdict.message
            # The line itself is not logged: it may be a prompt, or megabytes.
            size = len(line) if isinstance(line, bytes) else f">{self._max}"
            if isinstance(verdict, Refuse):
                error = verdict.response["error"]
                _log.warning(
                    "acp.line_refused", code=error["code"], reason=verdict.reason, bytes=size
                )
                await self._answer(verdict.response)
            else:
                _log.warning("acp.line_dropped", reason=verdict.reason, bytes=size)

    async def close(self) -> None:
        """No more sends; the caller owns the streams."""
        self._closed = True
        async with self._lock:  # a line being written is finished
            pass

    async def _check(self, line: bytes | _TooLong) -> Verdict | None:
        if isinstance(line, _TooLong):
            return too_long(self._max)
        if len(line) > _THREAD_BYTES:
            return await asyncio.to_thread(check_line, line)
        return check_line(line)

    async def _answer(self, response: dict[str, Any]) -> None:
        try:
            await self.send(response)
        except (ConnectionError, OSError, RuntimeError) as exc:
            # The client stopped reading; its input decides when the agent ends.
            _log.warning("acp.answer_failed", error=repr(exc))

    async def _next_line(self) -> bytes | _TooLong | None:
        while True:
            newline = self._buffer.find(b"\n", self._scanned)
            if newline >= 0:
                with memoryview(self._buffer) as view:
                    line = bytes(view[:newline])  # one copy, however long the line
                del self._buffer[: newline + 1]
                self._scanned = 0
                if self._discarding or len(line) > self._max:
                    self._discarding = False
                    return _TOO_LONG
                return line
            if self._eof:
                return self._last_line()
            if len(self._buffer) > self._max:
                self._discarding = True
            if self._discarding:
                self._buffer.clear()
            self._scanned = len(self._buffer)
            await self._fill()

    def _last_line(self) -> bytes | _TooLong | None:
        """What is left at the end of input: a line without its newline, or nothing."""
        if self._discarding:
            self._discarding = False
            self._buffer.clear()
            return _TOO_LONG
        if not self._buffer:
            return None
        line = bytes(self._buffer)
        self._buffer.clear()
        return line if len(line) <= self._max else _TOO_LONG

    async def _fill(self) -> None:
        try:
            chunk = await self._reader.read(CHUNK_BYTES)
        except Exception as exc:  # whatever broke the input, it has ended: not a crash
            _log.warning("acp.input_failed", error=repr(exc))
            chunk = b""
        if chunk:
            self._buffer += chunk
        else:
            self._eof = True
