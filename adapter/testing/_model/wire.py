"""The model server's wire: request parsing helpers, SSE framing, and one response's writer.

Why a module: how a request's script and step are found in an OpenAI chat body, how
an SSE chunk is framed, and how a response is written through h11 while watching
for the client to go away are the mechanics under every answer; :mod:`.server`
decides what to answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import h11

from .steps import SCRIPT_MARKER_RE

READ_SIZE: Final = 65536


class ClientGone(Exception):
    """The client closed the connection while we were answering."""


def message_text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            str(part.get("text", ""))
            for part in content
            if isinstance(part, Mapping) and part.get("type") == "text"
        ]
        return "\n".join(texts)
    return ""


def find_script(messages: Sequence[Any]) -> str | None:
    for message in messages:
        if isinstance(message, Mapping) and message.get("role") == "user":
            match = SCRIPT_MARKER_RE.search(message_text(message))
            return match.group(1) if match else None
    return None


def count_assistant(messages: Sequence[Any]) -> int:
    return sum(1 for m in messages if isinstance(m, Mapping) and m.get("role") == "assistant")


def id_set(session_ids: Iterable[str] | None) -> set[str] | None:
    if session_ids is None:
        return None
    if isinstance(session_ids, str):  # a single id, not an iterable of characters
        return {session_ids}
    return set(session_ids)


def chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def sse(payload: Mapping[str, Any] | str) -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return f"data: {data}\n\n".encode()


def token_usage(prompt_chars: int, completion_chars: int) -> dict[str, int]:
    prompt_tokens = max(1, prompt_chars // 4)
    completion_tokens = max(1, completion_chars // 4)
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


class Responder:
    """Writes one HTTP response through h11 and tracks the client's presence."""

    def __init__(
        self,
        conn: h11.Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        self.conn = conn
        self.reader = reader
        self.writer = writer
        self.gone = asyncio.Event()
        self._watcher: asyncio.Task[None] | None = None

    def watch(self) -> None:
        """Start watching the socket for end of file (= client disconnect)."""
        self._watcher = asyncio.create_task(self._watch_eof())

    async def _watch_eof(self) -> None:
        try:
            while await self.reader.read(READ_SIZE):
                pass  # nothing more is expected on a Connection: close exchange
        except (ConnectionError, OSError):
            pass
        self.gone.set()

    async def stop_watching(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher

    async def send(self, event: h11.Event) -> None:
        if self.gone.is_set() or self.writer.is_closing():
            raise ClientGone
        data = self.conn.send(event)
        if data:
            try:
                self.writer.write(data)
                await self.writer.drain()
            except (ConnectionError, OSError) as exc:
                self.gone.set()
                raise ClientGone from exc

    async def sleep(self, seconds: float) -> None:
        """Sleep, but raise `ClientGone` as soon as the client disconnects."""
        if seconds <= 0:
            if self.gone.is_set():
                raise ClientGone
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.gone.wait(), seconds)
        if self.gone.is_set():
            raise ClientGone
