"""A scripted, OpenAI-compatible chat-completions server for tests.

`ScriptedModelServer` listens on 127.0.0.1 and answers ``POST /v1/chat/completions``
with server-sent events in the ``chat.completion.chunk`` format, which is what
OpenCode's ``@ai-sdk/openai-compatible`` provider consumes. What it answers is
decided by *scripts*:

* ``model.script("greet", [Text("hello")])`` registers a script named ``greet``.
* A conversation selects its script with a ``[[script:greet]]`` marker (see
  :func:`script_marker`) somewhere in its **first** user message.
* The Nth request of a conversation, where N is the number of assistant messages
  already present in the request's ``messages``, is answered with step N. Steps
  are :class:`Text`, :class:`ToolCalls`, :class:`Hang` and :class:`HttpError`.
* A request with no marker whose ``x-opencode-session-id`` was bound with
  :meth:`ScriptedModelServer.bind_session` follows that session's script (after an
  automatic compaction the first user message is OpenCode's own, so the marker is gone).
* Requests past the end of their script, or without a (known) marker, get the
  server's default text (``"done"``).
* Requests without ``tools`` are title requests: they get a short title text and
  are recorded with ``is_title=True``; they do not consume script steps.

The server runs its own event loop in a background thread, so it can be used from
synchronous tests and from async tests on any event loop. Every request is
recorded as a :class:`ModelRequest`; see :attr:`ScriptedModelServer.requests`,
:meth:`ScriptedModelServer.wait_for` and :meth:`ScriptedModelServer.wait_for_async`.

HTTP parsing is done by :mod:`h11`. Every response carries ``Connection: close``,
so each connection serves exactly one request; once the request has been read, end
of file on the socket means the client went away, which is how a disconnect during
a :class:`Hang` (or a slow :class:`Text`) is detected and recorded.

Note: OpenCode retries 429 and 5xx answers with backoff. Because step selection
depends only on the request's history, a retried request gets the same step again,
so an ``HttpError(500)`` step keeps the session in its retry state until aborted.
Use a 4xx status (other than 429) for an error that ends the turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Final, Literal, TypeAlias, TypeVar

import h11

__all__ = [
    "SCRIPT_MARKER_RE",
    "Hang",
    "HttpError",
    "ModelRequest",
    "RequestKind",
    "ScriptedModelServer",
    "Step",
    "Text",
    "ToolCall",
    "ToolCalls",
    "script_marker",
    "task_call",
]

T = TypeVar("T")

#: Matches a ``[[script:NAME]]`` marker; group 1 is the script name.
SCRIPT_MARKER_RE: Final = re.compile(r"\[\[script:([A-Za-z0-9_.\-/]+)\]\]")

_MODEL_NAME: Final = "fake-model"
_READ_SIZE: Final = 65536


def script_marker(name: str) -> str:
    """Return the marker that selects script ``name`` when put in a first user message."""
    if not SCRIPT_MARKER_RE.fullmatch(f"[[script:{name}]]"):
        raise ValueError(f"invalid script name {name!r}: use letters, digits, '_', '.', '-', '/'")
    return f"[[script:{name}]]"


# --------------------------------------------------------------------------- steps


@dataclass(frozen=True)
class Text:
    """Stream ``text`` as assistant content, ``chunk_size`` characters per SSE chunk.

    ``delay`` seconds are waited before every chunk after the first one ("slow
    streaming"); the wait ends early if the client disconnects. ``prompt_tokens``
    overrides the reported usage (e.g. above the model's context limit, to make
    OpenCode compact the session).
    """

    text: str
    chunk_size: int = 32
    delay: float = 0.0
    prompt_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.chunk_size < 1:
            raise ValueError("chunk_size must be >= 1")
        if self.delay < 0:
            raise ValueError("delay must be >= 0")


@dataclass(frozen=True)
class ToolCall:
    """One function call requested by the model.

    ``arguments`` is serialised to JSON. ``call_id`` defaults to a fresh unique id.
    """

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    call_id: str | None = None


@dataclass(frozen=True)
class ToolCalls:
    """Answer with one or more tool calls (``finish_reason == "tool_calls"``).

    ``text``, if given, is streamed as assistant content before the calls.
    ``prompt_tokens`` overrides the reported usage (see :class:`Text`).
    """

    calls: Sequence[ToolCall]
    text: str = ""
    prompt_tokens: int | None = None

    def __post_init__(self) -> None:
        calls = tuple(self.calls)
        if not calls:
            raise ValueError("ToolCalls needs at least one ToolCall")
        object.__setattr__(self, "calls", calls)


@dataclass(frozen=True)
class Hang:
    """Stream ``text_before`` (may be empty), then keep the response open.

    The response stays open until the client disconnects (recorded as
    ``ModelRequest.disconnected``) or the server is closed.
    """

    text_before: str = ""


def _default_error_body() -> dict[str, Any]:
    return {"error": {"message": "scripted error", "type": "server_error", "code": None}}


@dataclass(frozen=True)
class HttpError:
    """Answer with HTTP ``status`` and ``body`` (a string, or a mapping sent as JSON).

    What OpenCode 1.18.34 does with the answer decides how the turn ends (measured):
    a 5xx or a 429, and any status whose body mentions a retry keyword such as
    ``server_error`` (the default body), is **retried** five times over about 74 s,
    each retry announced as ``session.status {type: "retry"}``; any other 4xx fails
    the turn **at once** with ``session.error`` ``APIError``. Say which you mean with
    :meth:`invalid_request` or :meth:`server_error`.
    """

    status: int
    body: str | Mapping[str, Any] = field(default_factory=_default_error_body)

    def __post_init__(self) -> None:
        if not 400 <= self.status <= 599:
            raise ValueError("HttpError.status must be a 4xx or 5xx code")

    @classmethod
    def invalid_request(cls, message: str = "scripted error", status: int = 400) -> HttpError:
        """A provider error OpenCode does not retry: the turn fails at once (``APIError``)."""
        if not 400 <= status <= 499 or status == 429:
            raise ValueError("invalid_request needs a 4xx status other than 429")
        body = {"error": {"message": message, "type": "invalid_request_error", "code": None}}
        return cls(status, body)

    @classmethod
    def server_error(cls, message: str = "scripted error", status: int = 500) -> HttpError:
        """A provider error OpenCode retries (``session.status`` ``retry``), five times."""
        if not (500 <= status <= 599 or status == 429):
            raise ValueError("server_error needs a 5xx status or 429")
        return cls(status, {"error": {"message": message, "type": "server_error", "code": None}})


#: One scripted model response.
Step: TypeAlias = Text | ToolCalls | Hang | HttpError

#: How a request was answered.
RequestKind: TypeAlias = Literal[
    "text", "tool_calls", "hang", "http_error", "default", "title", "bad_request"
]


def task_call(description: str, script_name: str, subagent_type: str = "general") -> ToolCall:
    """Build a call of OpenCode's ``task`` tool whose child conversation runs ``script_name``.

    The child's first user message is the ``prompt`` argument, which carries the
    ``[[script:script_name]]`` marker, so the child picks that script.
    """
    prompt = f"Subtask: {description}. {script_marker(script_name)}"
    return ToolCall(
        "task",
        {"description": description, "prompt": prompt, "subagent_type": subagent_type},
    )


# ----------------------------------------------------------------------- recording


@dataclass(frozen=True)
class ModelRequest:
    """An immutable snapshot of one recorded request.

    Attributes:
        index: Position of the request in arrival order (0-based).
        path: The HTTP request target.
        session_id: Value of the ``x-opencode-session-id`` header, if any; older
            releases send the session id only as ``x-session-id`` (1.18.3) or
            ``x-session-affinity`` (1.15.13, 1.14.48); 1.3.2 sends none.
        script: Script name from the first user message's marker, if any.
        step: Index of the step selected (the number of assistant messages in the
            request); ``None`` for title and malformed requests.
        is_title: The request had no ``tools`` (OpenCode's title generation).
        kind: How the request was answered.
        tool_names: Names of the tools called in the answer, if any.
        started_at: ``time.monotonic()`` when the request had been read.
        ended_at: ``time.monotonic()`` when the response ended, ``None`` while open.
        disconnected: The client dropped the connection before the response ended.
        body: The parsed JSON request body (shared, do not mutate).
    """

    index: int
    path: str
    session_id: str | None
    script: str | None
    step: int | None
    is_title: bool
    kind: RequestKind
    tool_names: tuple[str, ...]
    started_at: float
    ended_at: float | None
    disconnected: bool
    body: Mapping[str, Any] = field(repr=False)

    @property
    def open(self) -> bool:
        """Whether the response is still in progress."""
        return self.ended_at is None

    def describe(self) -> str:
        """One line for error messages."""
        state = "open" if self.open else ("disconnected" if self.disconnected else "done")
        return (
            f"#{self.index} session={self.session_id} script={self.script} step={self.step}"
            f" kind={self.kind} {state}"
        )


@dataclass
class _Record:
    """Mutable counterpart of `ModelRequest`, guarded by the server lock."""

    index: int
    path: str
    session_id: str | None
    script: str | None
    step: int | None
    is_title: bool
    kind: RequestKind
    tool_names: tuple[str, ...]
    started_at: float
    body: Mapping[str, Any]
    ended_at: float | None = None
    disconnected: bool = False

    def snapshot(self) -> ModelRequest:
        return ModelRequest(
            index=self.index,
            path=self.path,
            session_id=self.session_id,
            script=self.script,
            step=self.step,
            is_title=self.is_title,
            kind=self.kind,
            tool_names=self.tool_names,
            started_at=self.started_at,
            ended_at=self.ended_at,
            disconnected=self.disconnected,
            body=self.body,
        )


class _ClientGone(Exception):
    """The client closed the connection while we were answering."""


# --------------------------------------------------------------------- helpers


def _message_text(message: Mapping[str, Any]) -> str:
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


def _find_script(messages: Sequence[Any]) -> str | None:
    for message in messages:
        if isinstance(message, Mapping) and message.get("role") == "user":
            match = SCRIPT_MARKER_RE.search(_message_text(message))
            return match.group(1) if match else None
    return None


def _count_assistant(messages: Sequence[Any]) -> int:
    return sum(1 for m in messages if isinstance(m, Mapping) and m.get("role") == "assistant")


def _id_set(session_ids: Iterable[str] | None) -> set[str] | None:
    if session_ids is None:
        return None
    if isinstance(session_ids, str):  # a single id, not an iterable of characters
        return {session_ids}
    return set(session_ids)


def _chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _sse(payload: Mapping[str, Any] | str) -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return f"data: {data}\n\n".encode()


def _usage(prompt_chars: int, completion_chars: int) -> dict[str, int]:
    prompt_tokens = max(1, prompt_chars // 4)
    completion_tokens = max(1, completion_chars // 4)
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


class _Responder:
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
            while await self.reader.read(_READ_SIZE):
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
            raise _ClientGone
        data = self.conn.send(event)
        if data:
            try:
                self.writer.write(data)
                await self.writer.drain()
            except (ConnectionError, OSError) as exc:
                self.gone.set()
                raise _ClientGone from exc

    async def sleep(self, seconds: float) -> None:
        """Sleep, but raise `_ClientGone` as soon as the client disconnects."""
        if seconds <= 0:
            if self.gone.is_set():
                raise _ClientGone
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.gone.wait(), seconds)
        if self.gone.is_set():
            raise _ClientGone


# ----------------------------------------------------------------------- server


class ScriptedModelServer:
    """OpenAI-compatible scripted model server on 127.0.0.1 (see module docstring).

    Use as ``with ScriptedModelServer() as model: ...`` or call :meth:`start` and
    :meth:`close` yourself. All public methods are thread-safe.
    """

    def __init__(
        self,
        *,
        default_text: str = "done",
        title_text: str = "Scripted session",
        host: str = "127.0.0.1",
    ) -> None:
        self.default_text = default_text
        self.title_text = title_text
        self._host = host
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._scripts: dict[str, tuple[Step, ...]] = {}
        self._session_scripts: dict[str, str] = {}
        self._records: list[_Record] = []
        self._listeners: set[Callable[[], None]] = set()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._port: int | None = None
        self._start_error: BaseException | None = None
        self._connections: set[asyncio.Task[Any]] = set()

    # ------------------------------------------------------------ lifecycle

    @property
    def port(self) -> int:
        """The TCP port the server listens on (only valid after :meth:`start`)."""
        if self._port is None:
            raise RuntimeError("ScriptedModelServer is not started")
        return self._port

    @property
    def base_url(self) -> str:
        """Base URL for an OpenAI-compatible client, e.g. ``http://127.0.0.1:PORT/v1``."""
        return f"http://{self._host}:{self.port}/v1"

    def start(self) -> ScriptedModelServer:
        """Start the server thread and wait until it listens. Returns ``self``."""
        if self._thread is not None:
            raise RuntimeError("ScriptedModelServer already started")
        ready = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(ready,), name="scripted-model-server", daemon=True
        )
        self._thread.start()
        if not ready.wait(10.0):
            raise RuntimeError("ScriptedModelServer did not start within 10 s")
        if self._start_error is not None:
            self._thread.join(5.0)
            self._thread = None
            raise RuntimeError("ScriptedModelServer failed to start") from self._start_error
        return self

    def close(self) -> None:
        """Stop the server: open responses are cut, the thread is joined. Idempotent."""
        thread, loop, stopping = self._thread, self._loop, self._stopping
        if thread is None:
            return
        if loop is not None and stopping is not None:
            with contextlib.suppress(RuntimeError):  # loop already closed
                loop.call_soon_threadsafe(stopping.set)
        thread.join(10.0)
        self._thread = None

    def __enter__(self) -> ScriptedModelServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _run(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve(ready))
        finally:
            loop.close()

    async def _serve(self, ready: threading.Event) -> None:
        try:
            server = await asyncio.start_server(self._on_connection, self._host, 0)
        except BaseException as exc:
            self._start_error = exc
            ready.set()
            return
        self._port = int(server.sockets[0].getsockname()[1])
        self._stopping = asyncio.Event()
        ready.set()
        try:
            await self._stopping.wait()
        finally:
            server.close()
            tasks = list(self._connections)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await server.wait_closed()

    # -------------------------------------------------------------- scripts

    def script(self, name: str, steps: Iterable[Step]) -> None:
        """Register (or replace) script ``name`` with the given steps."""
        script_marker(name)  # validates the name
        steps_tuple = tuple(steps)
        for step in steps_tuple:
            if not isinstance(step, Text | ToolCalls | Hang | HttpError):
                raise TypeError(f"not a step: {step!r}")
        with self._lock:
            self._scripts[name] = steps_tuple

    def bind_session(self, session_id: str, name: str) -> None:
        """Answer ``session_id``'s requests that carry no marker with script ``name``.

        After an automatic compaction OpenCode's continuation request starts with its
        own user message ("What did we do so far?"), so the conversation's marker is
        gone; binding the session lets a test script what the agent does next. The step
        is still chosen by the request's number of assistant messages (the summary
        counts as one).
        """
        script_marker(name)  # validates the name
        with self._lock:
            self._session_scripts[session_id] = name

    # ------------------------------------------------------------ recording

    @property
    def requests(self) -> list[ModelRequest]:
        """Snapshot of all recorded requests, in arrival order."""
        with self._lock:
            return [r.snapshot() for r in self._records]

    def open_requests(self, session_ids: Iterable[str] | None = None) -> list[ModelRequest]:
        """Requests whose response is still in progress (optionally of some sessions)."""
        wanted = _id_set(session_ids)
        return [r for r in self.requests if r.open and (wanted is None or r.session_id in wanted)]

    def requests_after(
        self, t: float, session_ids: Iterable[str] | None = None
    ) -> list[ModelRequest]:
        """Requests that started after monotonic time ``t`` (optionally of some sessions)."""
        wanted = _id_set(session_ids)
        return [
            r
            for r in self.requests
            if r.started_at > t and (wanted is None or r.session_id in wanted)
        ]

    def clear(self) -> None:
        """Forget all recorded requests (open responses keep running)."""
        with self._lock:
            self._records = []
            self._notify_locked()

    def describe(self) -> str:
        """Multi-line summary of recorded requests, for assertion messages."""
        lines = [r.describe() for r in self.requests]
        return "\n".join(lines) if lines else "(no model requests)"

    def wait_for(self, predicate: Callable[[list[ModelRequest]], T], timeout: float = 10.0) -> T:
        """Block until ``predicate(requests)`` is truthy and return its value.

        The predicate is re-evaluated whenever a request is recorded or changes.
        Raises `TimeoutError` (listing the recorded requests) after ``timeout`` s.
        Do not call this from the thread of an event loop that must keep running;
        use :meth:`wait_for_async` there.
        """
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                result = predicate([r.snapshot() for r in self._records])
                if result:
                    return result
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(
                        f"model requests did not match within {timeout} s:\n{self.describe()}"
                    )
                self._changed.wait(remaining)

    async def wait_for_async(
        self,
        predicate: Callable[[list[ModelRequest]], T],
        timeout: float = 10.0,
    ) -> T:
        """Async variant of :meth:`wait_for`; does not block the running event loop."""
        loop = asyncio.get_running_loop()
        changed = asyncio.Event()

        def listener() -> None:
            with contextlib.suppress(RuntimeError):  # the waiting loop is closed
                loop.call_soon_threadsafe(changed.set)

        with self._lock:
            self._listeners.add(listener)
        try:
            async with asyncio.timeout(timeout):
                while True:
                    changed.clear()
                    result = predicate(self.requests)
                    if result:
                        return result
                    await changed.wait()
        except TimeoutError:
            raise TimeoutError(
                f"model requests did not match within {timeout} s:\n{self.describe()}"
            ) from None
        finally:
            with self._lock:
                self._listeners.discard(listener)

    def _notify_locked(self) -> None:
        self._changed.notify_all()
        for listener in list(self._listeners):
            listener()

    def _add_record(self, **fields: Any) -> _Record:
        with self._lock:
            record = _Record(index=len(self._records), **fields)
            self._records.append(record)
            self._notify_locked()
            return record

    def _finish_record(self, record: _Record, *, disconnected: bool) -> None:
        with self._lock:
            record.ended_at = time.monotonic()
            record.disconnected = disconnected
            self._notify_locked()

    # ------------------------------------------------------------------ HTTP

    async def _on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        conn = h11.Connection(h11.SERVER)
        try:
            request = await self._read_request(conn, reader)
            if request is not None:
                responder = _Responder(conn, reader, writer)
                await self._dispatch(request[0], request[1], responder)
        except (h11.ProtocolError, ConnectionError, OSError, _ClientGone):
            pass
        finally:
            if task is not None:
                self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    @staticmethod
    async def _read_request(
        conn: h11.Connection, reader: asyncio.StreamReader
    ) -> tuple[h11.Request, bytes] | None:
        request: h11.Request | None = None
        body = bytearray()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await reader.read(_READ_SIZE))
            elif isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                return (request, bytes(body)) if request is not None else None
            else:  # ConnectionClosed, PAUSED, ...
                return None

    async def _dispatch(self, request: h11.Request, body: bytes, out: _Responder) -> None:
        method = request.method.decode("ascii", "replace").upper()
        path = request.target.decode("ascii", "replace").split("?", 1)[0]
        if method == "POST" and path.rstrip("/").endswith("/chat/completions"):
            await self._chat(request, body, out)
        elif method == "GET" and path.rstrip("/").endswith("/models"):
            payload = {"object": "list", "data": [{"id": _MODEL_NAME, "object": "model"}]}
            await self._send_json(out, 200, payload)
        else:
            await self._send_json(out, 404, {"error": {"message": f"no route {method} {path}"}})

    async def _send_json(self, out: _Responder, status: int, payload: object) -> None:
        raw = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
        content_type = b"text/plain" if isinstance(payload, str) else b"application/json"
        await out.send(
            h11.Response(
                status_code=status,
                headers=[
                    (b"content-type", content_type),
                    (b"content-length", str(len(raw)).encode()),
                    (b"connection", b"close"),
                ],
            )
        )
        await out.send(h11.Data(data=raw))
        await out.send(h11.EndOfMessage())

    def _select_step(
        self, messages: Sequence[Any], is_title: bool, session_id: str | None = None
    ) -> tuple[str | None, int | None, Step | None]:
        script = _find_script(messages)
        if script is None and session_id is not None:
            with self._lock:
                script = self._session_scripts.get(session_id)
        if is_title:
            return script, None, None
        index = _count_assistant(messages)
        with self._lock:
            steps = self._scripts.get(script) if script is not None else None
        step = steps[index] if steps is not None and index < len(steps) else None
        return script, index, step

    async def _chat(self, request: h11.Request, body: bytes, out: _Responder) -> None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in request.headers}
        path = request.target.decode("ascii", "replace")
        session_id = (
            headers.get("x-opencode-session-id")
            or headers.get("x-session-id")
            or headers.get("x-session-affinity")
        )
        try:
            payload = json.loads(body)
            if not isinstance(payload, dict):
                raise ValueError("body is not a JSON object")
            messages = payload.get("messages")
            if not isinstance(messages, list):
                raise ValueError("body has no 'messages' list")
        except ValueError as exc:
            record = self._add_record(
                path=path, session_id=session_id, script=None, step=None, is_title=False,
                kind="bad_request", tool_names=(), started_at=time.monotonic(), body={},
            )  # fmt: skip
            try:
                await self._send_json(out, 400, {"error": {"message": str(exc)}})
            finally:
                self._finish_record(record, disconnected=False)
            return

        is_title = not payload.get("tools")
        script, index, step = self._select_step(messages, is_title, session_id)
        kind: RequestKind
        if is_title:
            kind, step = "title", Text(self.title_text)
        elif step is None:
            kind, step = "default", Text(self.default_text)
        elif isinstance(step, Text):
            kind = "text"
        elif isinstance(step, ToolCalls):
            kind = "tool_calls"
        elif isinstance(step, Hang):
            kind = "hang"
        else:
            kind = "http_error"
        tool_names = tuple(c.name for c in step.calls) if isinstance(step, ToolCalls) else ()
        record = self._add_record(
            path=path, session_id=session_id, script=script, step=index, is_title=is_title,
            kind=kind, tool_names=tool_names, started_at=time.monotonic(), body=payload,
        )  # fmt: skip

        disconnected = False
        try:
            if isinstance(step, HttpError):
                await self._send_json(out, step.status, step.body)
            elif payload.get("stream") is False:
                await self._answer_plain(step, payload, out)
            else:
                await self._answer_stream(step, payload, body, out)
        except _ClientGone:
            disconnected = True
        finally:
            await out.stop_watching()
            self._finish_record(record, disconnected=disconnected or out.gone.is_set())

    async def _answer_stream(
        self, step: Step, payload: Mapping[str, Any], body: bytes, out: _Responder
    ) -> None:
        completion_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        model = str(payload.get("model") or _MODEL_NAME)
        created = int(time.time())

        def chunk(delta: Mapping[str, Any], finish: str | None = None, **extra: Any) -> bytes:
            obj: dict[str, Any] = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": dict(delta), "finish_reason": finish}],
            }
            obj.update(extra)
            return _sse(obj)

        await out.send(
            h11.Response(
                status_code=200,
                headers=[
                    (b"content-type", b"text/event-stream"),
                    (b"cache-control", b"no-cache"),
                    (b"connection", b"close"),
                ],
            )
        )
        out.watch()
        await out.send(h11.Data(data=chunk({"role": "assistant", "content": ""})))

        text, chunk_size, delay = "", 32, 0.0
        if isinstance(step, Text):
            text, chunk_size, delay = step.text, step.chunk_size, step.delay
        elif isinstance(step, ToolCalls):
            text = step.text
        elif isinstance(step, Hang):
            text = step.text_before
        for i, piece in enumerate(_chunks(text, chunk_size)):
            if i:
                await out.sleep(delay)
            await out.send(h11.Data(data=chunk({"content": piece})))

        if isinstance(step, Hang):
            await out.gone.wait()
            raise _ClientGone

        finish = "stop"
        completion_chars = len(text)
        if isinstance(step, ToolCalls):
            finish = "tool_calls"
            for i, call in enumerate(step.calls):
                arguments = json.dumps(dict(call.arguments))
                completion_chars += len(arguments)
                delta = {
                    "tool_calls": [
                        {
                            "index": i,
                            "id": call.call_id or f"call_{uuid.uuid4().hex[:24]}",
                            "type": "function",
                            "function": {"name": call.name, "arguments": arguments},
                        }
                    ]
                }
                await out.send(h11.Data(data=chunk(delta)))
        usage = _usage(len(body), completion_chars)
        if isinstance(step, Text | ToolCalls) and step.prompt_tokens is not None:
            usage["prompt_tokens"] = step.prompt_tokens
            usage["total_tokens"] = step.prompt_tokens + usage["completion_tokens"]
        await out.send(h11.Data(data=chunk({}, finish, usage=usage)))
        await out.send(h11.Data(data=_sse("[DONE]")))
        await out.send(h11.EndOfMessage())

    async def _answer_plain(self, step: Step, payload: Mapping[str, Any], out: _Responder) -> None:
        """Answer a ``stream: false`` request with one ``chat.completion`` object."""
        if isinstance(step, Hang):
            await out.send(h11.Response(status_code=200, headers=[(b"connection", b"close")]))
            out.watch()
            await out.gone.wait()
            raise _ClientGone
        message: dict[str, Any] = {"role": "assistant", "content": None}
        finish = "stop"
        if isinstance(step, Text):
            message["content"] = step.text
        elif isinstance(step, ToolCalls):
            finish = "tool_calls"
            message["content"] = step.text or None
            message["tool_calls"] = [
                {
                    "id": call.call_id or f"call_{uuid.uuid4().hex[:24]}",
                    "type": "function",
                    "function": {"name": call.name, "arguments": json.dumps(dict(call.arguments))},
                }
                for call in step.calls
            ]
        completion = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(payload.get("model") or _MODEL_NAME),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": _usage(0, len(str(message.get("content") or ""))),
        }
        await self._send_json(out, 200, completion)
