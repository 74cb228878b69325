"""Driving ``adapter.web`` in tests.

JSON routes go through ``httpx.ASGITransport``. The event stream cannot: httpx
0.28's ``ASGITransport`` collects the whole body before it returns the response,
and an event stream has no end. So :class:`SseClient` drives the ASGI app
directly: it plays the server's part (``receive``/``send``), parses the frames as
they are sent, can make the client slow (``send`` waits until ``resume()``) and
disconnects the way a server does (``http.disconnect``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.types import ASGIApp, Message

from adapter import OpenCodeAdapter

#: The thread the stream tests use.
T = "t"

#: Every route under ``/threads/{id}``: method, the path after the id, a valid body.
THREAD_ROUTES: list[tuple[str, str, dict[str, Any] | None]] = [
    ("GET", "", None),
    ("POST", "/turns", {"text": "hi"}),
    ("POST", "/stop", None),
    ("POST", "/subagents/ses_child/stop", None),
    ("POST", "/fork", {"thread_id": "f"}),
    ("POST", "/commands", {"name": "init"}),
    ("GET", "/events", None),
    ("GET", "/tree", None),
    ("POST", "/requests/per_1", {"decision": "accept"}),
]

#: Every API route, on the thread ``T``: the thread list, each of :data:`THREAD_ROUTES`,
#: the inventory (method, path).
API_ROUTES: list[tuple[str, str]] = [
    ("POST", "/threads"),
    ("GET", "/threads"),
    *[(method, f"/threads/{T}{path}") for method, path, _ in THREAD_ROUTES],
    ("GET", "/inventory"),
]

#: The body limits ``docs/web.md`` documents ("Bodies and thread ids"): bodies up to
#: ``MAX_BODY_BYTES`` = 4 MiB, JSON nested up to ``MAX_JSON_DEPTH`` = 32 levels. The tests
#: hold the app to the documented numbers (a change of either shows as a failure here).
MAX_BODY_BYTES = 4 * 1024 * 1024
MAX_JSON_DEPTH = 32

#: A question the tests ask through the fake (its answer field is ``Color``).
COLOR = {
    "question": "Which color?",
    "header": "Color",
    "options": [{"label": "red", "description": ""}, {"label": "blue", "description": ""}],
}


@dataclass(frozen=True)
class Frame:
    id: str | None
    event: str | None
    data: str

    def json(self) -> Any:
        return json.loads(self.data)


def parse_frame(block: str) -> Frame | None:
    """One SSE block; ``None`` for a comment-only block (a keep-alive ping)."""
    fields: dict[str, list[str]] = {}
    # The SSE line ends only (str.splitlines() would also split at U+2028, U+0085, ...,
    # which JSON text written with ensure_ascii=False may hold).
    for line in re.split("\r\n|\r|\n", block):
        if not line or line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        fields.setdefault(name, []).append(value.removeprefix(" "))
    if not fields:
        return None
    ids = fields.get("id")
    events = fields.get("event")
    return Frame(
        id=ids[-1] if ids else None,
        event=events[-1] if events else None,
        data="\n".join(fields.get("data", [])),
    )


class SseClient:
    """One ``GET`` of the event stream, driven in a task of the test's loop."""

    def __init__(
        self, app: ASGIApp, url: str, headers: dict[str, str] | None = None, *, slow: bool = False
    ) -> None:
        parts = urlsplit(url)
        self.scope: dict[str, Any] = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.4"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": parts.path,
            "raw_path": parts.path.encode(),
            "root_path": "",
            "query_string": parts.query.encode(),
            # A browser always sends Host: the app refuses a request without one.
            "headers": [
                (k.lower().encode(), v.encode())
                for k, v in {"Host": "testserver", **(headers or {})}.items()
            ],
            "client": ("127.0.0.1", 50000),
            "server": ("testserver", 80),
        }
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.ended = False
        self.sent_after_gone = 0  # body messages the app sent after the disconnect
        self._app = app
        self._buffer = ""
        self._frames: asyncio.Queue[Frame | None] = asyncio.Queue()
        self._body = b""
        self._started = asyncio.Event()
        self._gone = asyncio.Event()
        self._flowing = asyncio.Event()
        if not slow:
            self._flowing.set()
        self._requested = False
        self._task = asyncio.create_task(self._run())

    async def _receive(self) -> Message:
        if not self._requested:
            self._requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await self._gone.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = {k.decode(): v.decode() for k, v in message.get("headers", [])}
            self._started.set()
            return
        await self._flowing.wait()
        if self._gone.is_set():
            # What uvicorn does with a send after the client went: nothing, at once.
            self.sent_after_gone += 1
            return
        chunk: bytes = message.get("body", b"")
        self._body += chunk
        self._buffer += chunk.decode()
        self._buffer = self._buffer.replace("\r\n", "\n")
        while "\n\n" in self._buffer:
            block, self._buffer = self._buffer.split("\n\n", 1)
            frame = parse_frame(block)
            if frame is not None:
                self._frames.put_nowait(frame)
        if not message.get("more_body", False):
            self.ended = True
            self._frames.put_nowait(None)

    async def _run(self) -> None:
        try:
            await self._app(self.scope, self._receive, self._send)
        finally:
            self._started.set()
            self._frames.put_nowait(None)

    async def started(self, timeout: float = 5.0) -> int:
        async with asyncio.timeout(timeout):
            await self._started.wait()
        assert self.status is not None
        return self.status

    def resume(self) -> None:
        """A slow client starts reading."""
        self._flowing.set()

    @property
    def body(self) -> bytes:
        return self._body

    async def next(self, timeout: float = 5.0) -> Frame | None:
        """The next frame, or ``None`` once the response has ended."""
        async with asyncio.timeout(timeout):
            return await self._frames.get()

    async def until(self, event_type: str, timeout: float = 5.0) -> list[Frame]:
        """Every frame up to and including the first of ``event_type``."""
        frames: list[Frame] = []
        while True:
            frame = await self.next(timeout)
            assert frame is not None, f"the stream ended before {event_type}: {frames}"
            frames.append(frame)
            if frame.event == event_type:
                return frames

    async def rest(self, timeout: float = 5.0) -> list[Frame]:
        """Every frame until the response ends."""
        frames: list[Frame] = []
        while (frame := await self.next(timeout)) is not None:
            frames.append(frame)
        return frames

    async def finished(self, timeout: float = 5.0) -> None:
        """The app's call has returned (the response is over, its tasks are done)."""
        async with asyncio.timeout(timeout):
            await self._task

    async def disconnect(self, timeout: float = 5.0) -> None:
        self._gone.set()
        self._flowing.set()
        await self.finished(timeout)

    async def aclose(self) -> None:
        self._gone.set()
        self._flowing.set()
        if not self._task.done():
            self._task.cancel()
        with contextlib.suppress(BaseException):
            await self._task


def subscribers(oc: OpenCodeAdapter) -> int:
    """How many event subscriptions (``oc.events()``) are open: the web tests' one read of
    the adapter's internals (its event hub's count). No public view counts a stream
    that its consumer stopped reading but the app has not closed, which is what these
    tests pin: every SSE response's subscription ends with the response."""
    return oc._registry.hub.subscribers


async def open_stream(
    app: Starlette,
    oc: OpenCodeAdapter,
    streams: list[SseClient],
    url: str = f"/threads/{T}/events",
    headers: dict[str, str] | None = None,
    *,
    slow: bool = False,
    wait_subscribed: bool = True,
) -> SseClient:
    """An SSE client whose subscription exists when this returns (unless told not to
    wait: a replay larger than the queue ends the subscription as it is made)."""
    before = subscribers(oc)
    sse = SseClient(app, url, headers, slow=slow)
    streams.append(sse)
    assert await sse.started() == 200
    assert sse.headers["content-type"].startswith("text/event-stream")
    async with asyncio.timeout(5):
        while wait_subscribed and subscribers(oc) == before:
            await asyncio.sleep(0.001)
    return sse


def serves_the_stream(task: asyncio.Task[object]) -> bool:
    """A task running sse-starlette's or the app's code for a response. (sse-starlette's
    ``_shutdown_watcher`` is one task per event loop, by its design, not per response.)"""
    if task.get_coro().__qualname__ == "_shutdown_watcher":  # type: ignore[union-attr]
        return False
    files = [f.f_code.co_filename for f in task.get_stack()]
    return any("sse_starlette" in f or "adapter/web" in f for f in files)
