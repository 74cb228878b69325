"""The fault suite's harness: an adapter on the fake server whose exit checks that nothing leaked.

``Harness`` wraps one ``OpenCodeAdapter`` on a ``FakeOpenCodeServer`` with an ``EventRecorder``.
Leaving it (without an exception in the body) closes the adapter and the fake, then asserts:

* no asyncio task created since entering is still pending,
* the fake has no request in flight (checked once the adapter is closed),
* ``list_sessions()`` is empty, and
* the canonical event log keeps the turn invariants (:func:`check_event_invariants`).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
import textwrap
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx

from adapter import Event, OpenCodeAdapter, Timeouts
from adapter.testing import EventRecorder, caught_up
from adapter.testing.fake import FakeOpenCodeServer

TERMINAL = ("turn.completed", "turn.aborted")
TURN_OUTPUT = ("content.delta", "item.started", "item.updated", "item.completed")

# Small bounds so a fault that is not bounded shows up as a slow test, not a hung one.
FAST = Timeouts(connect=2.0, abort=2.0, tree=2.0, submit=2.0, teardown=0.5)


def fast(**changes: float) -> Timeouts:
    """The harness's short timeouts, with ``changes``."""
    return replace(FAST, **changes)


def check_event_invariants(events: Sequence[Event], *, closed: bool) -> None:
    """The canonical stream's promises, per thread.

    * at most one active turn: a ``turn.started`` only while no turn is active;
    * a turn ends in exactly one of ``turn.completed`` / ``turn.aborted`` / the
      ``session.exited`` that carries its id (all of them, once ``closed``);
    * turn output (deltas, items) only for the active turn;
    * nothing for a thread after its ``session.exited``, except a new ``session.started``.
    """
    by_thread: dict[str, list[Event]] = defaultdict(list)
    for event in events:
        by_thread[event.thread_id].append(event)
    for thread_id, log in by_thread.items():
        active: str | None = None
        exited = False
        started: list[str] = []
        ends: Counter[str] = Counter()
        for event in log:
            where = f"thread {thread_id}: {event.type} (turn {event.turn_id})"
            if exited:
                assert event.type == "session.started", f"{where} after session.exited"
                exited = False
            if event.type == "turn.started":
                assert active is None, f"{where} while turn {active} is active"
                assert event.turn_id is not None
                active = event.turn_id
                started.append(active)
            elif event.type in TERMINAL:
                assert event.turn_id == active, f"{where}, but the active turn is {active}"
                assert active is not None
                ends[active] += 1
                active = None
            elif event.type == "session.exited":
                assert event.turn_id == active, f"{where}, but the active turn is {active}"
                if active is not None:
                    ends[active] += 1
                active = None
                exited = True
            elif event.type in TURN_OUTPUT and event.turn_id is not None:
                assert event.turn_id == active, f"{where}: output of a turn that is not active"
        for turn_id in started:
            assert ends[turn_id] <= 1, f"thread {thread_id}: turn {turn_id} ended {ends[turn_id]}x"
            if closed:
                assert ends[turn_id] == 1, f"thread {thread_id}: turn {turn_id} never ended"


def active_turns(events: Iterable[Event]) -> dict[str, str | None]:
    """Per thread, the turn the event log says is active."""
    active: dict[str, str | None] = {}
    for event in events:
        if event.type == "turn.started":
            active[event.thread_id] = event.turn_id
        elif event.type in (*TERMINAL, "session.exited", "session.started"):
            active[event.thread_id] = None
    return active


def assert_consistent(oc: OpenCodeAdapter, events: Sequence[Event] | None = None) -> None:
    """No half-updated thread: status and active turn agree (and agree with the events)."""
    infos = oc.list_sessions()
    assert len({i.thread_id for i in infos}) == len(infos)
    for info in infos:
        assert info.status in ("connecting", "ready", "running", "stopping"), info
        if info.status in ("running", "ready"):
            assert (info.status == "running") == (info.active_turn_id is not None), info
    if events is not None:
        from_events = active_turns(events)
        for info in infos:
            if info.status != "connecting":
                assert from_events.get(info.thread_id) == info.active_turn_id, (info, from_events)


async def wait_any(rec: EventRecorder, types: Sequence[str], timeout: float = 5.0) -> Event:
    """The first recorded event whose type is one of ``types``."""
    event: Event = await rec.wait_for(lambda event: event.type in types, timeout=timeout)
    return event


class Harness:
    """One adapter on ``fake``, its event log, and the leak checks on exit."""

    def __init__(self, fake: FakeOpenCodeServer, **options: Any) -> None:
        self.fake = fake
        self.options = {"timeouts": FAST, **options}
        self.tasks_before: set[asyncio.Task[Any]] = set()
        self.in_flight_after_close: int | None = None

    async def __aenter__(self) -> Self:
        self.tasks_before = asyncio.all_tasks()
        options = {"transport": self.fake.transport, **self.options}
        self.oc = OpenCodeAdapter(self.fake.base_url, **options)
        await self.oc.__aenter__()
        self.rec = EventRecorder(self.oc)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            async with asyncio.timeout(15):
                await self.oc.aclose()
                await caught_up(self.fake, self.oc)  # a cancelled request's handler has ended
                self.in_flight_after_close = self.fake.in_flight
                await self.rec.task  # ends with the adapter's event stream
                await self.fake.aclose()
        finally:
            if not self.rec.task.done():
                self.rec.task.cancel()
                await asyncio.gather(self.rec.task, return_exceptions=True)
        if exc_type is None:
            await self.assert_clean()

    @property
    def events(self) -> list[Event]:
        return self.rec.events

    async def assert_clean(self) -> None:
        await caught_up(self.fake, self.oc)  # a task that is ending has ended
        # The current task runs this check (a fixture's teardown runs in a task of its own).
        current = asyncio.current_task()
        new = asyncio.all_tasks() - self.tasks_before
        leaked = [t for t in new if not t.done() and t is not current]
        assert leaked == [], f"tasks outlived the adapter: {leaked}"
        assert self.in_flight_after_close == 0, "requests still in flight after close"
        assert self.fake.in_flight == 0
        assert self.oc.list_sessions() == []
        check_event_invariants(self.events, closed=True)

    async def consistent(self) -> None:
        """Mid-test check: once the adapter has handled every event the fake published,
        thread state and the event log agree."""
        await caught_up(self.fake, self.oc)
        assert_consistent(self.oc, self.events)
        check_event_invariants(self.events, closed=False)


def request_paths(fake: FakeOpenCodeServer) -> list[str]:
    return [f"{r.method} {r.path}" for r in fake.requests]


# One stop aborts the root three times: its abort, and two more 5 and 25 ms later (so
# that OpenCode starts no extra model step: adapter/_stop/_stop_tree.py).
ROOT_ABORTS_PER_STOP = 3


def aborts(fake: FakeOpenCodeServer, session_id: str) -> int:
    return sum(
        1 for r in fake.requests if r.method == "POST" and r.path == f"/session/{session_id}/abort"
    )


def root_of(fake: FakeOpenCodeServer, session_id: str) -> str | None:
    """The root of ``session_id``'s tree in the fake (``None`` for an unknown id)."""
    seen: set[str] = set()
    current: str | None = session_id
    while current is not None and current in fake.sessions and current not in seen:
        seen.add(current)
        parent = fake.sessions[current].parent_id
        if parent is None:
            return current
        current = parent
    return None


# -------------------------------------------------------------------------- transports


class ResetAfterServing(httpx.AsyncBaseTransport):
    """Lets the fake handle a matching request, then loses the response (connection reset).

    The server did the work; the client only sees ``httpx.ReadError``: the ambiguous
    outcome of a write whose response never arrived.
    """

    def __init__(
        self, inner: httpx.AsyncBaseTransport, match: Callable[[httpx.Request], bool]
    ) -> None:
        self.inner = inner
        self.match = match
        self.resets = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if self.match(request):
            self.resets += 1
            await response.aclose()
            raise httpx.ReadError("connection reset by peer", request=request)
        return response


# -------------------------------------------------------------------------- real sockets


def closed_port() -> int:
    """A loopback port nothing listens on (connection refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class LoopbackServer:
    """A raw TCP server on 127.0.0.1 with a handler the test writes; every connection
    task is cancelled and awaited on exit, so it leaks nothing itself."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.received: list[bytes] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._server: asyncio.Server | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections += 1
        try:
            await self.handler(reader, writer)
        except (asyncio.CancelledError, ConnectionError, asyncio.IncompleteReadError):
            pass  # the test is over or the client hung up: either is fine here
        finally:
            writer.close()
            self._tasks.discard(task)

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        with contextlib.suppress(Exception):
            async with asyncio.timeout(1):
                await self._server.wait_closed()


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    body = await reader.readexactly(length) if length else b""
    return head + body


# -------------------------------------------------------------------------- a stand-in binary

# Enough of `opencode serve` for one turn, so the adapter can own a real child process
# (start-up handshake, process group, exit detection) without a model or the real server.
_STUB = """
import asyncio, json, os, sys

MODE = os.environ.get("FAULTS_STUB_MODE", "")
SID = "ses_stubroot0001"
SESSION = {"id": SID, "title": "stub", "directory": "/tmp",
           "time": {"created": 1, "updated": 1}}
streams = []
busy = set()


def frame(obj):
    return b"data: " + json.dumps(obj).encode() + b"\\n\\n"


def emit(type_, props):
    for writer in list(streams):
        writer.write(frame({"type": type_, "properties": props}))


async def handle(reader, writer):
    try:
        head = await reader.readuntil(b"\\r\\n\\r\\n")
    except Exception:
        writer.close()
        return
    lines = head.decode().split("\\r\\n")
    method, target, _ = lines[0].split(" ", 2)
    path = target.split("?")[0]
    headers = {k.lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:] if x)}
    body = await reader.readexactly(int(headers.get("content-length", "0") or 0))

    def respond(status, obj=None):
        data = b"" if obj is None else json.dumps(obj).encode()
        writer.write(
            f"HTTP/1.1 {status} X\\r\\ncontent-type: application/json\\r\\n"
            f"content-length: {len(data)}\\r\\nconnection: close\\r\\n\\r\\n".encode() + data
        )

    if path == "/event":
        writer.write(b"HTTP/1.1 200 OK\\r\\ncontent-type: text/event-stream\\r\\n\\r\\n")
        writer.write(frame({"type": "server.connected", "properties": {}}))
        streams.append(writer)
        await asyncio.Event().wait()
    elif path == "/global/health":
        respond(200, {"healthy": True, "version": "stub"})
    elif path == "/session" and method == "POST":
        respond(200, SESSION)
    elif path.endswith("/prompt_async"):
        message_id = json.loads(body).get("messageID")
        respond(204)
        busy.add(SID)
        emit("session.status", {"sessionID": SID, "status": {"type": "busy"}})
        emit("message.updated",
             {"sessionID": SID, "info": {"id": message_id, "role": "user", "sessionID": SID}})
    elif path.endswith("/abort"):
        if MODE == "hang-abort":
            await asyncio.Event().wait()
        busy.discard(SID)
        respond(200, True)
    elif path.endswith("/children"):
        respond(200, [])
    elif path == "/session/status":
        respond(200, {s: {"type": "busy"} for s in busy})
    elif path.endswith("/message"):
        if MODE == "hang-messages":
            await asyncio.Event().wait()
        respond(200, [])
    else:
        respond(404, {"name": "NotFoundError", "data": {"message": path}})
    await writer.drain()
    writer.close()


async def main():
    port = int(sys.argv[sys.argv.index("--port") + 1])
    with open(os.environ["FAULTS_STUB_PIDFILE"], "w") as f:
        json.dump({"pid": os.getpid(), "password": os.environ.get("OPENCODE_SERVER_PASSWORD")}, f)
    if MODE == "exit-at-start":
        print("something went wrong", flush=True)
        sys.exit(3)
    if MODE == "never-ready":
        await asyncio.Event().wait()
    server = await asyncio.start_server(handle, "127.0.0.1", port)
    print(f"opencode server listening on http://127.0.0.1:{port}", flush=True)
    async with server:
        await server.serve_forever()


asyncio.run(main())
"""


def write_stub_binary(directory: Path) -> Path:
    """Write the stand-in ``opencode`` executable into ``directory``."""
    path = directory / "opencode-stub"
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(_STUB))
    path.chmod(0o755)
    return path
