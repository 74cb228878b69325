"""This process's stdin and stdout as the ACP transport's byte streams, whatever they are.

Why its own module: asyncio's pipe transports (the SDK's ``acp.stdio_streams``) take pipes,
sockets and terminals only. A regular file or ``/dev/null`` as stdin (a recorded session
replayed from a file, ``opencode-tree acp < /dev/null`` in a script) cannot be polled:
the event loop's reader is never registered, so the agent waited forever instead of
reading to the end of its input; a regular file as stdout raised ``ValueError``. Such a
side is read or written with blocking calls in a worker thread instead, which on a file
return at once; a pollable side keeps the event loop's own transport, so a blocked read
of a pipe never holds a thread the interpreter would wait for at exit.
"""

from __future__ import annotations

import asyncio
import os
import stat
import sys
from typing import IO, Any

import acp

__all__ = ["stdio_streams"]


def _pollable(stream: IO[bytes] | IO[str]) -> bool:
    """Whether the event loop can watch ``stream``: a pipe, a socket or a terminal."""
    mode = os.fstat(stream.fileno()).st_mode
    return (
        stat.S_ISFIFO(mode)
        or stat.S_ISSOCK(mode)
        or (stat.S_ISCHR(mode) and os.isatty(stream.fileno()))
    )


class _FileReader:
    """Reads a file descriptor that cannot be polled, in a worker thread."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def read(self, n: int = -1) -> bytes:
        return await asyncio.to_thread(os.read, self._fd, n if n > 0 else 64 * 1024)


class _FileWriter:
    """Writes a file descriptor that cannot be polled: ``write`` buffers, ``drain``
    writes what is buffered in a worker thread (the transport drains after each line)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._pending = bytearray()

    def write(self, data: bytes) -> None:
        self._pending += data

    async def drain(self) -> None:
        data, self._pending = bytes(self._pending), bytearray()
        while data:
            written = await asyncio.to_thread(os.write, self._fd, data)
            data = data[written:]


class _WriteProtocol(asyncio.streams.FlowControlMixin, asyncio.Protocol):
    """The protocol a ``StreamWriter`` over a write pipe needs (``drain`` waits on it)."""


async def stdio_streams(limit: int) -> tuple[Any, Any]:
    """(reader, writer) over this process's stdin and stdout: the SDK's streams when both
    can be polled, else the event loop's pipe transport for a side that can and
    worker-thread reads or writes for a side that cannot."""
    if _pollable(sys.stdin) and _pollable(sys.stdout):
        return await acp.stdio_streams(limit=limit)
    loop = asyncio.get_running_loop()
    reader: Any
    writer: Any
    if _pollable(sys.stdin):
        stream_reader = asyncio.StreamReader(limit=limit)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stream_reader), sys.stdin)
        reader = stream_reader
    else:
        reader = _FileReader(sys.stdin.fileno())
    if _pollable(sys.stdout):
        protocol = _WriteProtocol()
        transport, _ = await loop.connect_write_pipe(lambda: protocol, sys.stdout)
        writer = asyncio.StreamWriter(transport, protocol, None, loop)
    else:
        writer = _FileWriter(sys.stdout.fileno())
    return reader, writer
