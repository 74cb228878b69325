"""The scripted model server: an OpenAI-compatible HTTP server on a thread of its own.

Why a module: the server's lifecycle (its thread and event loop, start and close),
its thread-safe recording and waits, and the answers it streams are what a test
drives; the steps it plays (:mod:`.steps`), what it records (:mod:`.recording`) and
the HTTP mechanics (:mod:`.wire`) live beside it. See :mod:`adapter.testing._model`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Final, TypeVar

import h11

from ..._base._closing import Closing
from .._started import started
from .recording import ModelRequest
from .steps import Hang, HttpError, RequestKind, Step, Text, ToolCalls, script_marker
from .wire import (
    READ_SIZE,
    ClientGone,
    Responder,
    chunks,
    count_assistant,
    find_script,
    id_set,
    sse,
    token_usage,
)

T = TypeVar("T")

_MODEL_NAME: Final = "fake-model"


class ScriptedModelServer(Closing):
    """OpenAI-compatible scripted model server on 127.0.0.1 (see :mod:`adapter.testing._model`).

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
        self._records: list[ModelRequest] = []
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
        return started(self._port, self)

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
            return list(self._records)

    def open_requests(self, session_ids: Iterable[str] | None = None) -> list[ModelRequest]:
        """Requests whose response is still in progress (optionally of some sessions)."""
        wanted = id_set(session_ids)
        return [r for r in self.requests if r.open and (wanted is None or r.session_id in wanted)]

    def requests_after(
        self, t: float, session_ids: Iterable[str] | None = None
    ) -> list[ModelRequest]:
        """Requests that started after monotonic time ``t`` (optionally of some sessions)."""
        wanted = id_set(session_ids)
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
                result = predicate(list(self._records))
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

    def _add_record(self, **fields: Any) -> ModelRequest:
        with self._lock:
            record = ModelRequest(
                index=len(self._records), ended_at=None, disconnected=False, **fields
            )
            self._records.append(record)
            self._notify_locked()
            return record

    def _finish_record(self, record: ModelRequest, *, disconnected: bool) -> None:
        with self._lock:
            index = record.index
            if index < len(self._records) and self._records[index] is record:  # not cleared
                ended = replace(record, ended_at=time.monotonic(), disconnected=disconnected)
                self._records[index] = ended
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
                responder = Responder(conn, reader, writer)
                await self._dispatch(request[0], request[1], responder)
        except (h11.ProtocolError, ConnectionError, OSError, ClientGone):
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
                conn.receive_data(await reader.read(READ_SIZE))
            elif isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                return (request, bytes(body)) if request is not None else None
            else:  # ConnectionClosed, PAUSED, ...
                return None

    async def _dispatch(self, request: h11.Request, body: bytes, out: Responder) -> None:
        method = request.method.decode("ascii", "replace").upper()
        path = request.target.decode("ascii", "replace").split("?", 1)[0]
        if method == "POST" and path.rstrip("/").endswith("/chat/completions"):
            await self._chat(request, body, out)
        elif method == "GET" and path.rstrip("/").endswith("/models"):
            payload = {"object": "list", "data": [{"id": _MODEL_NAME, "object": "model"}]}
            await self._send_json(out, 200, payload)
        else:
            await self._send_json(out, 404, {"error": {"message": f"no route {method} {path}"}})

    async def _send_json(self, out: Responder, status: int, payload: object) -> None:
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
        script = find_script(messages)
        if script is None and session_id is not None:
            with self._lock:
                script = self._session_scripts.get(session_id)
        if is_title:
            return script, None, None
        index = count_assistant(messages)
        with self._lock:
            steps = self._scripts.get(script) if script is not None else None
        step = steps[index] if steps is not None and index < len(steps) else None
        return script, index, step

    async def _chat(self, request: h11.Request, body: bytes, out: Responder) -> None:
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
        except ClientGone:
            disconnected = True
        finally:
            await out.stop_watching()
            self._finish_record(record, disconnected=disconnected or out.gone.is_set())

    async def _answer_stream(
        self, step: Step, payload: Mapping[str, Any], body: bytes, out: Responder
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
            return sse(obj)

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
        if isinstance(step, Text | ToolCalls):
            text, chunk_size, delay = step.text, step.chunk_size, step.delay
        elif isinstance(step, Hang):
            text = step.text_before
        for i, piece in enumerate(chunks(text, chunk_size)):
            if i:
                await out.sleep(delay)
            await out.send(h11.Data(data=chunk({"content": piece})))

        if isinstance(step, Hang):
            await out.gone.wait()
            raise ClientGone

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
        usage = token_usage(len(body), completion_chars)
        if isinstance(step, Text | ToolCalls) and step.prompt_tokens is not None:
            usage["prompt_tokens"] = step.prompt_tokens
            usage["total_tokens"] = step.prompt_tokens + usage["completion_tokens"]
        await out.send(h11.Data(data=chunk({}, finish, usage=usage)))
        await out.send(h11.Data(data=sse("[DONE]")))
        await out.send(h11.EndOfMessage())

    async def _answer_plain(self, step: Step, payload: Mapping[str, Any], out: Responder) -> None:
        """Answer a ``stream: false`` request with one ``chat.completion`` object."""
        if isinstance(step, Hang):
            await out.send(h11.Response(status_code=200, headers=[(b"connection", b"close")]))
            out.watch()
            await out.gone.wait()
            raise ClientGone
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
            "usage": token_usage(0, len(str(message.get("content") or ""))),
        }
        await self._send_json(out, 200, completion)
