"""Server-sent events: the ``data`` of each event of a byte stream.

Why not ``httpx-sse``: it splits the text into lines and builds an event
object line by line, which cost more than decoding the JSON in each event
(1.8-1.9 µs of the 10.5 µs an event took through the whole adapter before
issue 12; docs/benchmarks.md section 2). OpenCode sends one ``data:`` line
per event, so this decoder finds the blank lines that end events in whole
chunks of bytes and takes such a one-line event in one slice; anything else
(several ``data`` lines, comments, ``id``/``event``/``retry`` fields, blank
lines in a row, ``\\r`` line ends) goes through the general rules.

The rules are the WHATWG event-stream interpretation, as ``httpx-sse``
applies them, restricted to what the client reads: lines end at ``\\r\\n``,
``\\n`` or ``\\r``; a line starting with ``:`` is a comment; a field's value
loses one leading space; the ``data`` lines of an event are joined with
``\\n``; an event is dispatched at a blank line, and one that the stream's end
cuts off is not. Events whose data is empty are left out (the client has
nothing to decode). Bytes are split, never decoded: ``\\n`` and ``\\r`` never
occur inside a UTF-8 sequence, and the JSON decoder reads UTF-8 itself.

Memory is bounded: an event that is not complete after ``limit`` bytes (plus
a little for field names) raises :class:`~adapter.ProtocolError`.
"""

from __future__ import annotations

from ._exceptions import ProtocolError

__all__ = ["SSEDataDecoder"]

# Room for field names, comments and line ends around an event's data.
_SLACK = 4096


class SSEDataDecoder:
    """Fed the stream's bytes chunk by chunk, returns the data of each complete event."""

    def __init__(self, limit: int) -> None:
        self._limit = limit + _SLACK
        self._pending: list[bytes] = []  # the bytes after the last blank line
        self._pending_size = 0
        self._held_cr = False  # a chunk ended in "\r": it may be half of "\r\n"

    def feed(self, chunk: bytes) -> list[bytes]:
        if self._held_cr:
            chunk = b"\r" + chunk
            self._held_cr = False
        if b"\r" in chunk:
            if chunk.endswith(b"\r"):
                self._held_cr = True
                chunk = chunk[:-1]
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        return self._feed_lf(chunk)

    def close(self) -> list[bytes]:
        """The stream ended: a held ``\\r`` was a line end (a cut-off event is dropped)."""
        if not self._held_cr:
            return []
        self._held_cr = False
        return self._feed_lf(b"\n")

    def _feed_lf(self, chunk: bytes) -> list[bytes]:
        """``chunk`` with every line ending in ``\\n``."""
        out: list[bytes] = []
        start = 0
        pending = self._pending
        if pending and pending[-1].endswith(b"\n") and chunk.startswith(b"\n"):
            # The blank line that ends the pending event straddles the chunks.
            self._frame(b"".join(pending)[:-1], out)
            pending.clear()
            self._pending_size = 0
            start = 1
        end = chunk.find(b"\n\n", start)
        if end < 0:
            self._keep(chunk[start:] if start else chunk)
            return out
        if pending:
            pending.append(chunk[start:end])
            self._frame(b"".join(pending), out)
            pending.clear()
            self._pending_size = 0
        else:
            self._frame(chunk[start:end], out)
        frames = chunk[end + 2 :].split(b"\n\n")
        self._keep(frames.pop())
        for frame in frames:
            # `_frame`'s first case, inlined: nearly every event of the stream is one.
            if frame.startswith(b"data: ") and len(frame) > 6 and b"\n" not in frame:
                out.append(frame[6:])
            else:
                self._frame(frame, out)
        return out

    def _keep(self, rest: bytes) -> None:
        if not rest:
            return
        self._pending.append(rest)
        self._pending_size += len(rest)
        if self._pending_size > self._limit:
            raise ProtocolError("event_stream", f"an event exceeds {self._limit - _SLACK} bytes")

    def _frame(self, frame: bytes, out: list[bytes]) -> None:
        """One event's lines (the text between two blank lines, without the line end)."""
        if frame.startswith(b"data:") and b"\n" not in frame:
            data = frame[6:] if frame.startswith(b" ", 5) else frame[5:]
            if data:
                out.append(data)
            return
        lines: list[bytes] = []
        for line in frame.split(b"\n"):
            if not line:  # a blank line of its own: an event ends here
                self._dispatch(lines, out)
                lines = []
            elif not line.startswith(b":"):
                name, _, value = line.partition(b":")
                if name == b"data":
                    lines.append(value[1:] if value.startswith(b" ") else value)
        self._dispatch(lines, out)

    @staticmethod
    def _dispatch(lines: list[bytes], out: list[bytes]) -> None:
        data = b"\n".join(lines)
        if data:
            out.append(data)
