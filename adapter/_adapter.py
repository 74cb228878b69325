"""``OpenCodeAdapter``: threads, turns, the canonical event stream, and the Stop button."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import replace
from types import TracebackType
from typing import Any, Self, cast

import httpx

from ._client import OpenCodeClient
from ._compat import unreadable_version_warning, untested_version_warning
from ._events import (
    ChildStarted,
    ContentDelta,
    Event,
    ItemEvent,
    RequestEvent,
    RuntimeEvent,
    SessionEvent,
    ThreadMetadataUpdated,
    TurnEvent,
)
from ._exceptions import (
    AdapterClosedError,
    ConnectTimeoutError,
    InvalidInputError,
    NotFoundError,
    OpenCodeError,
    ProtocolError,
    RequestError,
    ServerExitedError,
    SessionClosedError,
    TurnCancelledError,
    UnknownRequestError,
    UnknownThreadError,
)
from ._ids import is_session_id, mint_message_id
from ._logging import get_logger
from ._mapping import (
    DECISION_FOR_REPLY,
    is_placeholder_title,
    item_type_for_tool,
    permission_reply_for,
)
from ._models import Message, PendingRequest
from ._partial import PartialResult
from ._server_process import ServerProcess
from ._state import (
    InterruptResult,
    OpenRequest,
    SessionInfo,
    Stop,
    ThreadHistory,
    ThreadState,
    Turn,
    TurnStart,
)
from ._stop_tree import StopReport, stop_tree
from ._stream import EventHub, EventStream
from ._tasks import TaskOwner

__all__ = ["OpenCodeAdapter"]

_log = get_logger("adapter")
_MODEL = re.compile(r"^([^/\s]+)/(\S+)$")
INTERRUPTED_BY_USER = "Interrupted by user."


class _Pump:
    """One event stream per server directory, shared by every thread on it."""

    def __init__(self, key: str | None, client: OpenCodeClient) -> None:
        self.key = key
        self.client = client
        self.connected = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.bad_events = 0
        self.reconnects = 0


class OpenCodeAdapter:
    """Drive one OpenCode server: many threads, each bound to a root session.

    With ``base_url`` the adapter connects to that server and never owns its
    lifecycle. Without it, it starts ``opencode serve`` (``binary``) on
    127.0.0.1 on a free port and stops it on exit. A ``password`` given here
    goes to a server the adapter starts and to its own requests; an external
    server only ever gets the password passed explicitly.

    ``transport`` is the test seam (see :class:`adapter.testing.FakeOpenCodeServer`).
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        password: str | None = None,
        binary: str = "opencode",
        directory: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        request_timeout: float = 10.0,
        connect_timeout: float = 10.0,
        submit_timeout: float = 10.0,
        abort_timeout: float = 10.0,
        tree_timeout: float = 10.0,
        teardown_timeout: float = 1.0,
        stop_concurrency: int = 8,
        max_output_bytes: int = 64 * 1024,
        max_tree_sessions: int = 10_000,
        eager_root_listing: bool = False,
        server_ready_timeout: float = 30.0,
    ) -> None:
        if base_url is None and transport is not None:
            raise InvalidInputError("a transport needs a base_url")
        self._base_url = base_url
        self._password = password
        self._binary = binary
        self._directory = directory
        self._transport = transport
        self._request_timeout = request_timeout
        self._connect_timeout = connect_timeout
        self._submit_timeout = submit_timeout
        self._abort_timeout = abort_timeout
        self._tree_timeout = tree_timeout
        self._teardown_timeout = teardown_timeout
        self._stop_concurrency = stop_concurrency
        self._max_output_bytes = max_output_bytes
        self._max_tree_sessions = max_tree_sessions
        self._eager_root_listing = eager_root_listing
        self._server_ready_timeout = server_ready_timeout
        self._server: ServerProcess | None = None
        self._hub = EventHub()
        self._tasks = TaskOwner("opencode-adapter")
        self._clients: dict[str | None, OpenCodeClient] = {}
        self._pumps: dict[str | None, _Pump] = {}
        self._threads: dict[str, ThreadState] = {}
        self._starting: dict[str, asyncio.Future[SessionInfo]] = {}
        self._owner: dict[str, ThreadState] = {}
        self._entered = False
        self._closed = False
        self._closing = asyncio.Event()
        self._orphan_lookups: dict[str, asyncio.Task[None]] = {}
        self._strangers: dict[str, None] = {}  # bounded cache of sessions that are not ours
        self._lookup_permits = asyncio.Semaphore(2)
        # Requests seen answered (bounded): a recovery that listed one before its
        # answer arrived must not announce it again.
        self._answered: dict[str, None] = {}
        self._server_dead = False
        self._server_version: str | None = None
        self._version_checked = False
        self._version_warning: str | None = None  # emitted on the next thread started
        self._version_failure_warned = False

    def __repr__(self) -> str:
        return (
            f"OpenCodeAdapter(base_url={self.base_url!r}, threads={len(self._threads)}, "
            f"auth={'basic' if self._password is not None else 'none'})"
        )

    @property
    def base_url(self) -> str | None:
        return self._base_url if self._server is None else self._server.base_url

    @property
    def server_version(self) -> str | None:
        """The version the server reported at the first connect (``None`` until then)."""
        return self._server_version

    # -- lifecycle -------------------------------------------------------------

    async def __aenter__(self) -> Self:
        if self._entered:
            raise RuntimeError("an OpenCodeAdapter can be entered once")
        self._entered = True
        if self._base_url is None:
            self._server = ServerProcess(
                self._binary,
                password=self._password,
                cwd=self._directory,
                ready_timeout=self._server_ready_timeout,
            )
            await self._server.start()
            self._tasks.spawn(self._watch_server(self._server), name="server-watch")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop every session (best effort), end the event streams, release everything."""
        if self._closed:
            return
        self._closed = True
        self._closing.set()
        try:
            if not self._server_dead:
                await self.stop_all()
        finally:
            await self._tasks.aclose()
            for client in self._clients.values():
                await client.aclose()
            # Drop what a closed adapter no longer needs (a host may keep the object).
            self._pumps.clear()
            self._clients.clear()
            self._strangers.clear()
            self._transport = None
            if self._server is not None:
                await self._server.stop()
            self._hub.close()

    def events(self) -> EventStream:
        """A new consumer of canonical events (it sees events emitted from now on)."""
        return self._hub.subscribe()

    def list_sessions(self) -> list[SessionInfo]:
        return [t.info() for t in self._threads.values()]

    def has_session(self, thread_id: str) -> bool:
        return thread_id in self._threads

    # -- sessions --------------------------------------------------------------

    async def start_session(
        self,
        thread_id: str,
        *,
        directory: str | None = None,
        title: str | None = None,
        model: str | None = None,
        resume: Mapping[str, Any] | None = None,
    ) -> SessionInfo:
        """Bind ``thread_id`` to an OpenCode session (new, or resumed from a cursor)."""
        self._check_open()
        if not isinstance(thread_id, str) or not thread_id:
            raise InvalidInputError("thread_id must be a non-empty string")
        if model is not None:
            _parse_model(model)
        existing = self._threads.get(thread_id)
        if existing is not None and existing.closing:
            # A stop of this thread is under way: its session.exited comes first.
            await existing.finished.wait()
            self._check_open()
            existing = self._threads.get(thread_id)
        if existing is not None and not existing.closing:
            if existing.status == "connecting":
                pending = self._starting.get(thread_id)
                if pending is not None:
                    return await asyncio.shield(pending)
            return existing.info()
        pending = self._starting.get(thread_id)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[SessionInfo] = asyncio.get_running_loop().create_future()
        self._starting[thread_id] = future
        try:
            info = await self._start(thread_id, directory, title, model, resume)
        except BaseException as exc:
            if not future.done():
                future.set_exception(
                    exc if isinstance(exc, Exception) else SessionClosedError("start cancelled")
                )
                future.exception()  # retrieved: a start nobody else awaited is not an error
            raise
        else:
            future.set_result(info)
            return info
        finally:
            self._starting.pop(thread_id, None)

    async def _start(
        self,
        thread_id: str,
        directory: str | None,
        title: str | None,
        model: str | None,
        resume: Mapping[str, Any] | None,
    ) -> SessionInfo:
        directory = directory if directory is not None else self._directory
        client = self._client_for(directory)
        pump = self._pump_for(directory, client)
        if not self._version_checked:
            await self._check_server_version(client)
        session_id: str | None = None
        resumed_id = _cursor_session(resume)
        if resume is not None and resumed_id is None:
            _log.warning("adapter.resume_ignored", thread_id=thread_id, reason="malformed cursor")
        warning: str | None = None
        if resumed_id is not None:
            try:
                session = await client.get_session(resumed_id)
                session_id = session.id
            except NotFoundError:
                warning = f"session {resumed_id} no longer exists; started a fresh session"
        if session_id is None:
            session = await client.create_session(title=title)
            session_id = session.id
        thread = ThreadState(
            thread_id=thread_id,
            session_id=session_id,
            directory=directory,
            client=client,
            pump_key=directory,
            model=model,
        )
        thread.sessions[session_id] = None
        thread.parents[session_id] = None
        if title is not None:
            thread.title = title
        self._threads[thread_id] = thread
        self._owner[session_id] = thread
        self._strangers.clear()  # a new root can make yesterday's strangers ours
        try:
            async with asyncio.timeout(self._connect_timeout):
                await _first(pump.connected.wait(), thread.closed.wait(), self._closing.wait())
        except TimeoutError:
            await self._discard(thread)
            raise ConnectTimeoutError(
                "event_stream", f"the event stream did not connect within {self._connect_timeout} s"
            ) from None
        except BaseException:
            await self._discard(thread)
            raise
        if self._closed:
            await self._discard(thread)
            raise AdapterClosedError("the adapter closed while the session was connecting")
        if thread.closing:
            raise SessionClosedError(f"thread {thread_id} was stopped while it was connecting")
        thread.status = "ready"
        thread.started_emitted = True
        self._emit(SessionEvent(type="session.started", thread_id=thread_id, session_id=session_id))
        self._emit(SessionEvent(type="thread.started", thread_id=thread_id, session_id=session_id))
        if warning is not None:
            self._emit(RuntimeEvent(type="runtime.warning", thread_id=thread_id, message=warning))
        if self._version_warning is not None:
            message, self._version_warning = self._version_warning, None
            self._emit(RuntimeEvent(type="runtime.warning", thread_id=thread_id, message=message))
        if resumed_id is not None and session_id == resumed_id:
            # The stream has no replay: requests raised before we connected are listed.
            self._tasks.spawn(self._recover_pending(pump), name=f"recover:{thread_id}")
        _log.info("adapter.session_started", thread_id=thread_id, session_id=session_id)
        return thread.info()

    async def _check_server_version(self, client: OpenCodeClient) -> None:
        """Read the server's version once; warn (once) if no tested release reports it.

        Runs before a start creates anything, so a cancelled start leaves no thread
        behind; the warning goes out with the first thread that starts.

        A server that answers without a usable version (no field, a malformed body,
        no health route) is warned about too. A failed request (transport error,
        5xx, 401) changes nothing about the connect: the next connect asks again,
        and the first such failure is warned about once (OpenCode 1.0.185 answers
        its health route with a 500 offline: a host must not be left guessing).
        """
        self._version_checked = True
        try:
            version = (await client.health()).version
        except (ProtocolError, NotFoundError) as exc:
            _log.warning("adapter.version_unreadable", error=str(exc))
            version = None
        except OpenCodeError as exc:
            self._version_checked = False
            _log.warning("adapter.version_unknown", error=str(exc))
            if not self._version_failure_warned:
                self._version_failure_warned = True
                self._version_warning = unreadable_version_warning(str(exc))
            return
        except BaseException:  # a cancelled start: the next connect asks again
            self._version_checked = False
            raise
        self._server_version = version
        self._version_warning = untested_version_warning(version)
        if self._version_warning is not None:
            _log.warning("adapter.untested_server", version=version)

    async def _discard(self, thread: ThreadState) -> None:
        """Undo a start that did not complete: forget the thread, abort what it created."""
        thread.closing = True
        self._forget(thread)
        with contextlib.suppress(OpenCodeError, TimeoutError):
            async with asyncio.timeout(self._teardown_timeout):
                await thread.client.abort(thread.session_id)

    def _forget(self, thread: ThreadState) -> None:
        if self._threads.get(thread.thread_id) is thread:
            del self._threads[thread.thread_id]
        for sid in list(thread.sessions):
            if self._owner.get(sid) is thread:
                del self._owner[sid]
        thread.closed.set()

    async def stop_session(self, thread_id: str) -> None:
        """Stop the thread: a pending stop completes, then root and tree are aborted
        (best effort, bounded) and ``session.exited`` is emitted once."""
        await self._stop_thread(self._get(thread_id, allow_closing=True))

    async def _stop_thread(self, thread: ThreadState) -> None:
        if thread.closing:
            await thread.closed.wait()
            return
        thread.closing = True
        thread.closed.set()  # releases sends waiting on a stop: they end as cancelled
        try:
            if thread.submitting is not None and not thread.submitting.done():
                thread.submitting.cancel()
                await asyncio.wait([thread.submitting])
            if thread.stop is not None:
                await asyncio.wait([thread.stop.future])
            if not self._server_dead:
                await self._teardown_tree(thread)
        finally:
            thread.status = "stopped"
            self._forget(thread)
            self._emit_exited(thread, "stopped")
            thread.finished.set()

    async def stop_all(self) -> None:
        threads = [t for t in self._threads.values() if not t.closing]
        results = await asyncio.gather(
            *(self._stop_thread(t) for t in threads), return_exceptions=True
        )
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, OpenCodeError):
                raise result

    async def _teardown_tree(self, thread: ThreadState) -> None:
        async def root_abort() -> None:
            try:
                async with asyncio.timeout(self._teardown_timeout):
                    await thread.client.abort(thread.session_id)
            except TimeoutError:
                raise RequestError("abort", f"timed out after {self._teardown_timeout} s") from None

        try:
            await stop_tree(
                thread.client,
                thread.session_id,
                concurrency=self._stop_concurrency,
                max_sessions=self._max_tree_sessions,
                timeout=2 * self._teardown_timeout,
                verify=False,
                root_abort=root_abort,
            )
        except (OpenCodeError, TimeoutError) as exc:
            _log.warning("adapter.teardown_incomplete", thread_id=thread.thread_id, error=str(exc))

    def _emit_exited(self, thread: ThreadState, reason: str) -> None:
        if thread.exited_emitted or not thread.started_emitted:
            return  # never started (still connecting): nothing to announce
        thread.exited_emitted = True
        turn_id = thread.active_turn.turn_id if thread.active_turn else None
        thread.active_turn = None
        self._emit(
            SessionEvent(
                type="session.exited",
                thread_id=thread.thread_id,
                turn_id=turn_id,
                session_id=thread.session_id,
                reason=reason,
            )
        )

    # -- turns -----------------------------------------------------------------

    async def send_turn(
        self, thread_id: str, text: str, *, model: str | None = None, agent: str | None = None
    ) -> TurnStart:
        """Start a turn, or steer the running one (no new ``turn.started``)."""
        if not isinstance(text, str) or not text.strip():
            raise InvalidInputError("the prompt is empty")
        parsed_model = _parse_model(model) if model is not None else None
        thread = self._get(thread_id)
        if parsed_model is None and thread.model is not None:
            parsed_model = _parse_model(thread.model)
        await self._wait_ready(thread)
        async with thread.send_lock:
            await self._wait_for_stop(thread)
            turn = thread.active_turn
            new_turn = turn is None
            if turn is None:
                turn = Turn.new(thread.session_id, self._max_output_bytes)
                thread.active_turn = turn
                thread.status = "running"
                thread.last_error = None
                self._emit(
                    TurnEvent(type="turn.started", thread_id=thread_id, turn_id=turn.turn_id)
                )
            message_id = mint_message_id()
            turn.message_ids.append(message_id)
            turn.collector.add_turn_message(message_id)
            submission = self._tasks.spawn(
                self._submit(thread, text, message_id, parsed_model, agent),
                name=f"submit:{thread_id}",
                log_errors=False,
            )
            thread.submitting = submission
            try:
                await asyncio.wait([submission])
            except asyncio.CancelledError:
                submission.cancel()
                if new_turn:
                    self._roll_back(
                        thread, turn, "the send was cancelled before the prompt was accepted"
                    )
                raise
            finally:
                if thread.submitting is submission:
                    thread.submitting = None
            if submission.cancelled():
                raise TurnCancelledError(
                    "the prompt was cancelled before the server accepted it "
                    "(its turn was interrupted or its session stopped)"
                )
            exc = submission.exception()
            if exc is not None:
                if await self._landed_anyway(thread, exc, message_id):
                    # The answer was lost, but the server has our prompt: the turn runs.
                    _log.warning("adapter.prompt_answer_lost", thread_id=thread_id, error=str(exc))
                    return TurnStart(thread_id=thread_id, turn_id=turn.turn_id)
                if new_turn:
                    self._roll_back(thread, turn, f"The prompt was not accepted: {exc}")
                raise exc
            return TurnStart(thread_id=thread_id, turn_id=turn.turn_id)

    def _roll_back(self, thread: ThreadState, turn: Turn, reason: str) -> None:
        """A new turn whose prompt never landed ends at once (``turn.aborted``)."""
        if thread.active_turn is not turn or thread.stop is not None:
            return
        thread.active_turn = None
        thread.status = "ready" if not thread.closing else thread.status
        thread.last_error = reason
        self._emit(
            TurnEvent(
                type="turn.aborted", thread_id=thread.thread_id, turn_id=turn.turn_id, reason=reason
            )
        )

    async def _landed_anyway(
        self, thread: ThreadState, exc: BaseException, message_id: str
    ) -> bool:
        """After a lost answer, ask the server whether our (minted) message exists."""
        lost = isinstance(exc, ProtocolError) or (
            isinstance(exc, RequestError) and exc.delivered is None
        )
        if not lost:
            return False
        try:
            async with asyncio.timeout(self._request_timeout):
                await thread.client.message(thread.session_id, message_id)
        except NotFoundError:
            return False
        except (OpenCodeError, TimeoutError):
            # Unknown either way: keep the turn (a Stop or an idle will settle it).
            return thread.active_turn is not None
        return True

    async def _submit(
        self,
        thread: ThreadState,
        text: str,
        message_id: str,
        model: tuple[str, str] | None,
        agent: str | None,
    ) -> None:
        try:
            async with asyncio.timeout(self._submit_timeout):
                await thread.client.prompt_async(
                    thread.session_id, text, message_id=message_id, model=model, agent=agent
                )
        except TimeoutError:
            raise RequestError(
                "prompt_async",
                f"the server did not accept the prompt within {self._submit_timeout} s",
                session_id=thread.session_id,
            ) from None

    async def _wait_ready(self, thread: ThreadState) -> None:
        if thread.status != "connecting":
            return
        pending = self._starting.get(thread.thread_id)
        if pending is not None:
            await asyncio.shield(pending)

    async def _wait_for_stop(self, thread: ThreadState) -> None:
        """A send waits for a pending stop: then it goes on, or raises the stop's error."""
        while True:
            if thread.closing:
                raise TurnCancelledError(f"thread {thread.thread_id} was stopped")
            stop = thread.stop
            if stop is None:
                return
            closed: asyncio.Future[Any] = asyncio.ensure_future(thread.closed.wait())
            waiting: list[asyncio.Future[Any]] = [stop.future, closed]
            try:
                await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            finally:
                closed.cancel()
            if thread.closing:
                raise TurnCancelledError(
                    f"thread {thread.thread_id} was stopped while a send waited"
                )
            if stop.future.done() and stop.future.exception() is not None:
                raise cast(BaseException, stop.future.exception())

    # -- interrupt -------------------------------------------------------------

    async def interrupt_turn(self, thread_id: str, turn_id: str | None = None) -> InterruptResult:
        """Stop the thread's whole session tree and return what the turn had produced.

        See ``docs/interrupt.md``. Concurrent calls share one stop (one root
        abort) and get the same result or the same exception.
        """
        thread = self._get(thread_id)
        stop = thread.stop
        if stop is not None:
            return await asyncio.shield(stop.future)
        active = thread.active_turn
        if turn_id is not None and (active is None or active.turn_id != turn_id):
            last = thread.last_interrupt
            if last is not None and last.turn_id == turn_id:
                return last
            return InterruptResult(
                turn_id=turn_id, stop=None, partial=PartialResult.empty(thread.session_id, turn_id)
            )
        stop = Stop(
            turn_id=active.turn_id if active else None,
            future=asyncio.get_running_loop().create_future(),
        )
        thread.stop = stop
        self._tasks.spawn(self._run_stop(thread, stop, active), name=f"stop:{thread_id}")
        return await asyncio.shield(stop.future)

    async def _run_stop(self, thread: ThreadState, stop: Stop, turn: Turn | None) -> None:
        try:
            result = await self._stop_tree_of(thread, stop, turn)
        except BaseException as exc:
            if thread.stop is stop:
                thread.stop = None
            if (
                stop.root_abort_failed
                and stop.deferred_idle
                and thread.active_turn is turn
                and turn
            ):
                # The root may really have finished: let the held idle complete the turn.
                self._schedule_idle_check(thread, turn)
            error = (
                exc if isinstance(exc, Exception) else TurnCancelledError("the stop was cancelled")
            )
            if not stop.future.done():
                stop.future.set_exception(error)
                stop.future.exception()
            if not isinstance(exc, Exception):
                raise
            return
        if thread.stop is stop:
            thread.stop = None
        if stop.future.done():
            return  # the server's death settled it already
        thread.last_interrupt = result
        if turn is not None and thread.active_turn is turn and not stop.turn_settled:
            thread.active_turn = None
            thread.status = "ready" if not thread.closing else thread.status
            self._emit(
                TurnEvent(
                    type="turn.aborted",
                    thread_id=thread.thread_id,
                    turn_id=turn.turn_id,
                    reason=INTERRUPTED_BY_USER,
                    partial=result.partial,
                )
            )
        elif thread.active_turn is None and thread.status == "running":
            thread.status = "ready"
        stop.future.set_result(result)

    async def _stop_tree_of(
        self, thread: ThreadState, stop: Stop, turn: Turn | None
    ) -> InterruptResult:
        # A prompt still on its way would start work behind the abort: cancel it first.
        submitting = thread.submitting
        if submitting is not None and not submitting.done():
            submitting.cancel()
            await asyncio.wait([submitting])

        async def root_abort() -> None:
            abort = asyncio.ensure_future(thread.client.abort(thread.session_id))
            ack = asyncio.ensure_future(stop.acknowledged.wait())
            try:
                async with asyncio.timeout(self._abort_timeout):
                    await asyncio.wait([abort, ack], return_when=asyncio.FIRST_COMPLETED)
            except TimeoutError:
                stop.root_abort_failed = True
                raise RequestError(
                    "abort",
                    f"the root abort did not finish within {self._abort_timeout} s",
                    session_id=thread.session_id,
                ) from None
            finally:
                ack.cancel()
                if not abort.done():
                    abort.cancel()
                with contextlib.suppress(asyncio.CancelledError, OpenCodeError):
                    await abort
            failed = abort.done() and not abort.cancelled() and abort.exception() is not None
            if failed and not stop.acknowledged.is_set():
                stop.root_abort_failed = True
                raise cast(BaseException, abort.exception())

        report: StopReport = await stop_tree(
            thread.client,
            thread.session_id,
            concurrency=self._stop_concurrency,
            max_sessions=self._max_tree_sessions,
            timeout=self._abort_timeout + self._tree_timeout,
            root_abort=root_abort,
            eager_root_listing=self._eager_root_listing,
        )
        for sid in report.session_ids:
            if sid not in thread.sessions:
                self._adopt(thread, sid, report[sid].parent_id, announce=True)
        self._resolve_pending_requests(thread, report, stop.turn_id)
        partial = await self._collect_partial(thread, turn, report)
        return InterruptResult(turn_id=stop.turn_id, stop=report, partial=partial)

    async def _collect_partial(
        self, thread: ThreadState, turn: Turn | None, report: StopReport
    ) -> PartialResult:
        if turn is None:
            return PartialResult.empty(thread.session_id, None)
        collector = turn.collector
        # The turn's own sessions: the root, and those born during this turn. Finished
        # subagents of earlier turns are stopped too, but hold nothing of this turn.
        mine = [
            s
            for s in report
            if s.outcome != "not_found"
            and (
                s.session_id == thread.session_id
                or thread.sessions.get(s.session_id) == turn.turn_id
            )
        ]
        for s in mine:
            if s.session_id != thread.session_id:
                collector.add_session(s.session_id, s.parent_id)
        permits = asyncio.Semaphore(self._stop_concurrency)

        async def fetch(session_id: str) -> None:
            async with permits:
                try:
                    messages = await thread.client.messages(session_id)
                except OpenCodeError as exc:
                    _log.warning(
                        "adapter.partial_reconcile_failed", session_id=session_id, error=str(exc)
                    )
                    return
                collector.reconcile(session_id, messages)

        try:
            async with asyncio.timeout(self._tree_timeout):
                async with asyncio.TaskGroup() as tg:
                    for s in mine:
                        tg.create_task(fetch(s.session_id))
        except TimeoutError:
            _log.warning("adapter.partial_reconcile_timeout", thread_id=thread.thread_id)
        return collector.result(turn.turn_id)

    def _resolve_pending_requests(
        self, thread: ThreadState, report: StopReport, turn_id: str | None
    ) -> None:
        stopped = {s.session_id for s in report if s.outcome != "failed"}
        for request_id, pending in list(thread.pending.items()):
            if pending.session_id in stopped:
                self._cancel_request(thread, request_id, turn_id)

    def _cancel_request(self, thread: ThreadState, request_id: str, turn_id: str | None) -> None:
        """Forget an open request nobody can answer any more, and say so (``cancelled``)."""
        pending = thread.pending.pop(request_id, None)
        if pending is None:
            return
        self._emit(
            RequestEvent(
                type="request.resolved" if pending.kind == "permission" else "user-input.resolved",
                thread_id=thread.thread_id,
                turn_id=turn_id,
                request_id=request_id,
                session_id=pending.session_id,
                decision="cancelled",
            )
        )

    # -- requests --------------------------------------------------------------

    async def respond_to_request(self, thread_id: str, request_id: str, decision: str) -> None:
        thread = self._get(thread_id)
        reply = permission_reply_for(decision)
        pending = thread.pending.get(request_id)
        if pending is None or pending.kind != "permission":
            raise UnknownRequestError(thread_id, request_id)
        try:
            await thread.client.permission_reply(request_id, reply)
        except NotFoundError:
            thread.pending.pop(request_id, None)
            raise UnknownRequestError(thread_id, request_id) from None

    async def respond_to_user_input(
        self,
        thread_id: str,
        request_id: str,
        answers: Mapping[str, str | Sequence[str]] | Sequence[str | Sequence[str]],
    ) -> None:
        """Answer a question request: answers keyed by question text (or header), or in order."""
        thread = self._get(thread_id)
        pending = thread.pending.get(request_id)
        if pending is None or pending.kind != "question":
            raise UnknownRequestError(thread_id, request_id)
        ordered: list[list[str]] = []
        if isinstance(answers, Mapping):
            for q in pending.questions:
                key = next((k for k in (q.get("question"), q.get("header")) if k in answers), None)
                value = answers[key] if isinstance(key, str) else []
                ordered.append([value] if isinstance(value, str) else list(value))
        else:
            ordered = [[a] if isinstance(a, str) else list(a) for a in answers]
        try:
            await thread.client.question_reply(request_id, ordered)
        except NotFoundError:
            thread.pending.pop(request_id, None)
            raise UnknownRequestError(thread_id, request_id) from None

    # -- history ---------------------------------------------------------------

    async def read_thread(self, thread_id: str) -> ThreadHistory:
        """The thread's messages, without those a rollback reverted.

        OpenCode keeps reverted messages stored (marked by the session's ``revert``)
        until the next prompt removes them, so they are cut here."""
        thread = self._get(thread_id)
        session = await thread.client.get_session(thread.session_id)
        messages = await thread.client.messages(thread.session_id)
        return ThreadHistory(
            thread_id=thread_id,
            session_id=thread.session_id,
            messages=_unreverted(messages, session.raw.get("revert")),
        )

    async def rollback_thread(self, thread_id: str, num_turns: int) -> ThreadHistory:
        """Revert the last ``num_turns`` turns (all of them if there are fewer)."""
        if not isinstance(num_turns, int) or num_turns < 1:
            raise InvalidInputError("num_turns must be a positive integer")
        thread = self._get(thread_id)
        if thread.active_turn is not None or thread.stop is not None:
            raise InvalidInputError("cannot roll back while a turn is running")
        messages = (await self.read_thread(thread_id)).messages
        users = [m for m in messages if m.info.role == "user"]
        if users:
            target = users[max(0, len(users) - num_turns)]
            await thread.client.revert(thread.session_id, target.info.id)
        return await self.read_thread(thread_id)

    # -- plumbing --------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed or not self._entered:
            raise AdapterClosedError(
                "the adapter is closed" if self._closed else "use `async with OpenCodeAdapter(...)`"
            )
        if self._server_dead:
            raise ServerExitedError("the OpenCode server the adapter started has exited")

    def _get(self, thread_id: str, *, allow_closing: bool = False) -> ThreadState:
        if self._closed:
            raise AdapterClosedError("the adapter is closed")
        thread = self._threads.get(thread_id)
        if thread is None:
            raise UnknownThreadError(thread_id)
        if thread.closing and not allow_closing:
            raise SessionClosedError(f"thread {thread_id} is stopping")
        return thread

    def _client_for(self, directory: str | None) -> OpenCodeClient:
        client = self._clients.get(directory)
        if client is None:
            base_url = self.base_url
            assert base_url is not None
            client = OpenCodeClient(
                base_url,
                password=self._password,
                directory=directory,
                timeout=self._request_timeout,
                transport=self._transport,
            )
            self._clients[directory] = client
        return client

    def _pump_for(self, directory: str | None, client: OpenCodeClient) -> _Pump:
        pump = self._pumps.get(directory)
        if pump is None:
            pump = _Pump(directory, client)
            self._pumps[directory] = pump
            pump.task = self._tasks.spawn(self._run_pump(pump), name=f"pump:{directory}")
        return pump

    def _emit(self, event: Event) -> None:
        self._hub.emit(event)

    def _threads_of(self, pump: _Pump) -> list[ThreadState]:
        return [t for t in self._threads.values() if t.pump_key == pump.key]

    async def _run_pump(self, pump: _Pump) -> None:
        backoff = 0.1
        outage = False
        while not self._closed:
            try:
                async with pump.client.event_stream() as events:
                    pump.connected.set()
                    backoff = 0.1
                    if outage:
                        outage = False
                        pump.reconnects += 1
                        self._tasks.spawn(self._reconcile_after_outage(pump), name="reconcile")
                    async for event in events:
                        self._dispatch(pump, event)
                raise RequestError("event_stream", "the server ended the event stream")
            except (RequestError, ProtocolError) as exc:
                pump.connected.clear()
                if self._closed:
                    return
                if self._server_dead:
                    return
                if not outage:
                    outage = True
                    _log.warning("adapter.stream_lost", error=str(exc))
                    for thread in self._threads_of(pump):
                        self._emit(
                            RuntimeEvent(
                                type="runtime.warning",
                                thread_id=thread.thread_id,
                                turn_id=thread.active_turn.turn_id if thread.active_turn else None,
                                message=f"event stream lost, reconnecting: {exc}",
                            )
                        )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)

    async def _recover_pending(self, pump: _Pump) -> None:
        """Announce permission and question requests the event stream did not deliver
        (raised before we connected, or during an outage), for every thread they belong to.

        OpenCode 1.18.34 keeps listing a request after its session was aborted: a
        *ghost*, which a reply "accepts" (``200 true``) without running anything. So
        only live requests are announced, and a ghost a thread still holds open is
        resolved as cancelled. A request answered while this runs is not announced
        (see ``_answered``)."""
        try:
            listed = await pump.client.pending_requests()
        except OpenCodeError as exc:
            _log.warning("adapter.recover_requests_failed", error=str(exc))
            return
        candidates = [
            r for r in listed if r.session_id in self._owner or r.session_id not in self._strangers
        ]
        permits = asyncio.Semaphore(4)

        async def check(request: PendingRequest) -> bool:
            async with permits:
                return await _request_is_live(pump.client, request)

        live = await asyncio.gather(*(check(r) for r in candidates))
        for request, is_live in zip(candidates, live, strict=True):
            thread = self._owner.get(request.session_id)
            if not is_live:
                # A ghost: its run was aborted (during an outage, or before we connected).
                if thread is not None:
                    turn_id = thread.active_turn.turn_id if thread.active_turn else None
                    self._cancel_request(thread, request.id, turn_id)
                continue
            etype = f"{request.kind}.asked"
            event = {"type": etype, "properties": dict(request.raw)}
            if thread is not None:
                self._on_request_asked(thread, request.session_id, etype, request.raw, event)
            elif not self._closed:
                self._lookup_orphan(request.session_id, event)

    async def _reconcile_after_outage(self, pump: _Pump) -> None:
        """The stream has no replay: ask the server whether active turns ended meanwhile."""
        await self._recover_pending(pump)
        for thread in self._threads_of(pump):
            turn = thread.active_turn
            if turn is None or thread.stop is not None:
                continue
            try:
                statuses = await thread.client.status()
                if thread.session_id in statuses and statuses[thread.session_id].is_busy:
                    continue
                messages = await thread.client.messages(thread.session_id)
            except OpenCodeError as exc:
                _log.warning("adapter.reconcile_failed", thread_id=thread.thread_id, error=str(exc))
                continue
            if thread.active_turn is not turn or thread.stop is not None:
                continue
            ours = set(turn.message_ids)
            if not any(m.info.id in ours for m in messages):
                continue  # the prompt has not landed yet; events will tell
            replies = [
                m for m in messages if m.info.role == "assistant" and m.info.parent_id in ours
            ]
            error = next((m.info.error for m in reversed(replies) if m.info.error), None)
            turn.collector.reconcile(thread.session_id, messages)
            if error is not None and error.name == "MessageAbortedError":
                self._end_aborted_elsewhere(thread, turn, None)
            elif error is not None:
                self._fail_turn(thread, turn, error.name, error.message or error.name, None)
            else:
                self._complete_turn(thread, turn, None)

    async def _watch_server(self, server: ServerProcess) -> None:
        await server.exited.wait()
        if self._closed:
            return
        self._server_dead = True
        message = f"the OpenCode server exited (code {server.returncode})"
        _log.error("adapter.server_exited", returncode=server.returncode)
        for thread in list(self._threads.values()):
            self._emit(
                RuntimeEvent(
                    type="runtime.error",
                    thread_id=thread.thread_id,
                    turn_id=thread.active_turn.turn_id if thread.active_turn else None,
                    message=message,
                )
            )
            thread.closing = True
            if thread.stop is not None and not thread.stop.future.done():
                thread.stop.future.set_exception(ServerExitedError(message))
                thread.stop.future.exception()
            if thread.submitting is not None:
                thread.submitting.cancel()
            thread.status = "stopped"
            self._forget(thread)
            self._emit_exited(thread, "server exited")
            thread.finished.set()
        for future in self._starting.values():
            if not future.done():
                future.set_exception(ServerExitedError(message))
                future.exception()

    # -- native event handling (synchronous: no await between read and write of state) ----

    def _dispatch(self, pump: _Pump, event: Mapping[str, Any]) -> None:
        try:
            self._handle(event)
        except Exception as exc:  # a bad event must never stop the pump
            pump.bad_events += 1
            _log.warning("adapter.bad_event", type=event.get("type"), error=repr(exc))

    def _handle(self, event: Mapping[str, Any]) -> None:
        etype = event["type"]
        props = event.get("properties")
        if not isinstance(props, Mapping):
            raise ProtocolError("event", f"{etype} has no properties object")
        sid = _session_of(etype, props)
        if etype in ("server.connected", "server.heartbeat") or sid is None:
            return
        thread = self._owner.get(sid)
        if thread is None:
            if etype in ("session.created", "session.updated"):
                info = props.get("info")
                parent = info.get("parentID") if isinstance(info, Mapping) else None
                owner = self._owner.get(parent) if isinstance(parent, str) else None
                if owner is not None and is_session_id(sid):
                    self._adopt(owner, sid, parent, announce=True, raw=event, info=info)
            elif etype in ("permission.asked", "question.asked") and is_session_id(sid):
                self._lookup_orphan(sid, event)
            return
        turn = thread.active_turn
        if turn is not None:
            turn.collector.observe(event)
        root = sid == thread.session_id
        if etype in ("session.created", "session.updated"):
            self._on_session_info(thread, sid, props, event)
        elif etype == "session.status":
            status = props.get("status")
            kind = status.get("type") if isinstance(status, Mapping) else None
            if root and kind in ("busy", "retry"):
                thread.busy_gen += 1
            elif root and kind == "idle":
                self._on_root_idle(thread)
        elif etype == "session.idle":
            if root:
                self._on_root_idle(thread)
        elif etype == "session.error":
            if root:
                self._on_root_error(thread, props, event)
        elif etype == "message.updated":
            self._on_message(thread, sid, props)
        elif etype == "message.part.updated":
            self._on_part(thread, sid, props, event)
        elif etype == "message.part.delta":
            self._on_delta(thread, sid, props, event)
        elif etype in ("permission.asked", "question.asked"):
            self._on_request_asked(thread, sid, etype, props, event)
        elif etype in ("permission.replied", "question.replied", "question.rejected"):
            self._on_request_resolved(thread, sid, etype, props, event)

    def _adopt(
        self,
        thread: ThreadState,
        session_id: str,
        parent_id: str | None,
        *,
        announce: bool,
        raw: Mapping[str, Any] | None = None,
        info: Any = None,
    ) -> None:
        if session_id in thread.sessions:
            return
        turn = thread.active_turn
        thread.sessions[session_id] = turn.turn_id if turn else None
        thread.parents[session_id] = parent_id
        self._owner[session_id] = thread
        if turn is not None:
            turn.collector.add_session(session_id, parent_id)
        if announce and parent_id is not None:
            title = info.get("title") if isinstance(info, Mapping) else None
            self._emit(
                ChildStarted(
                    type="child.started",
                    thread_id=thread.thread_id,
                    turn_id=turn.turn_id if turn else None,
                    session_id=session_id,
                    parent_id=parent_id,
                    title=title if isinstance(title, str) else None,
                    raw=raw,
                )
            )

    def _lookup_orphan(self, session_id: str, event: Mapping[str, Any]) -> None:
        """Find the thread of a request from an unknown session: one lookup per session,
        a cache of strangers, and at most two lookups at a time, so a flood of foreign
        events cannot crowd out the Stop button's requests."""
        if session_id in self._strangers:
            return
        running = self._orphan_lookups.get(session_id)
        if running is not None:
            running.add_done_callback(lambda _: self._redispatch_if_ours(session_id, event))
            return
        task = self._tasks.spawn(
            self._route_orphan_request(session_id, event), name="route-request"
        )
        self._orphan_lookups[session_id] = task
        task.add_done_callback(lambda _: self._orphan_lookups.pop(session_id, None))

    def _redispatch_if_ours(self, session_id: str, event: Mapping[str, Any]) -> None:
        thread = self._owner.get(session_id)
        pump = self._pumps.get(thread.pump_key) if thread is not None else None
        if pump is not None and not self._closed:
            self._dispatch(pump, event)

    def _remember_stranger(self, session_id: str) -> None:
        self._strangers[session_id] = None
        if len(self._strangers) > 4096:
            self._strangers.pop(next(iter(self._strangers)))

    async def _route_orphan_request(self, session_id: str, event: Mapping[str, Any]) -> None:
        """A request from a session we have not seen: find its thread through its ancestry."""
        chain: list[tuple[str, str | None]] = []
        current: str | None = session_id
        client = next(iter(self._clients.values()), None)
        if client is None:
            return
        async with self._lookup_permits:
            for _ in range(16):
                if current is None or current in self._owner or current in self._strangers:
                    break
                try:
                    session = await client.get_session(current)
                except OpenCodeError as exc:
                    _log.warning("adapter.ancestry_failed", session_id=current, error=str(exc))
                    return
                chain.append((session.id, session.parent_id))
                current = session.parent_id
        if current is None or current not in self._owner:
            for sid, _ in chain:
                self._remember_stranger(sid)
            return
        thread = self._owner[current]
        for sid, parent in reversed(chain):
            self._adopt(thread, sid, parent, announce=True)
        self._redispatch_if_ours(session_id, event)

    def _on_session_info(
        self, thread: ThreadState, sid: str, props: Mapping[str, Any], raw: Mapping[str, Any]
    ) -> None:
        info = props.get("info")
        if sid != thread.session_id or not isinstance(info, Mapping):
            return
        title = info.get("title")
        if (
            isinstance(title, str)
            and title
            and not is_placeholder_title(title)
            and title != thread.title
        ):
            thread.title = title
            self._emit(
                ThreadMetadataUpdated(
                    type="thread.metadata.updated",
                    thread_id=thread.thread_id,
                    turn_id=thread.active_turn.turn_id if thread.active_turn else None,
                    title=title,
                    raw=raw,
                )
            )

    def _on_message(self, thread: ThreadState, sid: str, props: Mapping[str, Any]) -> None:
        info = props.get("info")
        if sid != thread.session_id or not isinstance(info, Mapping):
            return
        mid, role, parent = info.get("id"), info.get("role"), info.get("parentID")
        if not isinstance(mid, str) or role not in ("user", "assistant"):
            return
        if mid not in thread.messages and len(thread.messages) > 10_000:
            thread.messages.pop(next(iter(thread.messages)))  # bounded: oldest first
        thread.messages[mid] = (role, parent if isinstance(parent, str) else None)
        turn = thread.active_turn
        if role == "user" and turn is not None and mid in turn.message_ids and not turn.echo_seen:
            turn.echo_seen = True
            if turn.idle_before_echo:
                self._schedule_idle_check(thread, turn)

    def _turn_of_part(self, thread: ThreadState, sid: str, message_id: object) -> Turn | None:
        """The active turn if this part belongs to it; ``None`` means suppress."""
        turn = thread.active_turn
        if turn is None:
            return None
        if sid != thread.session_id:
            return turn if thread.sessions.get(sid) == turn.turn_id else None
        entry = thread.messages.get(message_id) if isinstance(message_id, str) else None
        if entry is None or entry[0] != "assistant" or entry[1] not in turn.message_ids:
            return None
        return turn

    def _on_part(
        self, thread: ThreadState, sid: str, props: Mapping[str, Any], raw: Mapping[str, Any]
    ) -> None:
        part = props.get("part")
        if not isinstance(part, Mapping):
            return
        ptype = part.get("type")
        if ptype == "tool":
            state = part.get("state")
            metadata = state.get("metadata") if isinstance(state, Mapping) else None
            child = metadata.get("sessionId") if isinstance(metadata, Mapping) else None
            if part.get("tool") == "task" and isinstance(child, str) and is_session_id(child):
                self._adopt(thread, child, sid, announce=True)
        turn = self._turn_of_part(thread, sid, part.get("messageID"))
        if turn is None:
            return
        if ptype in ("text", "reasoning") and sid == thread.session_id:
            part_id, text = part.get("id"), part.get("text")
            if isinstance(part_id, str) and isinstance(text, str):
                turn.part_streams[part_id] = (
                    "assistant_text" if ptype == "text" else "reasoning_text"
                )
                seen = turn.emitted_text.get(part_id, "")
                if text.startswith(seen) and len(text) > len(seen):
                    self._emit_delta(thread, turn, sid, part_id, text[len(seen) :], raw)
                    turn.emitted_text[part_id] = text
                elif not seen.startswith(text):
                    _log.debug("adapter.snapshot_diverged", part_id=part_id)
        elif ptype == "tool":
            self._on_tool_part(thread, turn, sid, part, raw)

    def _emit_delta(
        self,
        thread: ThreadState,
        turn: Turn,
        sid: str,
        part_id: str,
        delta: str,
        raw: Mapping[str, Any],
    ) -> None:
        self._emit(
            ContentDelta(
                type="content.delta",
                thread_id=thread.thread_id,
                turn_id=turn.turn_id,
                stream=turn.part_streams.get(part_id, "assistant_text"),
                delta=delta,
                item_id=part_id,
                session_id=sid,
                raw=raw,
            )
        )

    def _on_delta(
        self, thread: ThreadState, sid: str, props: Mapping[str, Any], raw: Mapping[str, Any]
    ) -> None:
        if sid != thread.session_id or props.get("field", "text") != "text":
            return
        turn = self._turn_of_part(thread, sid, props.get("messageID"))
        part_id, delta = props.get("partID"), props.get("delta")
        if turn is None or not isinstance(part_id, str) or not isinstance(delta, str) or not delta:
            return
        turn.emitted_text[part_id] = turn.emitted_text.get(part_id, "") + delta
        self._emit_delta(thread, turn, sid, part_id, delta, raw)

    def _on_tool_part(
        self,
        thread: ThreadState,
        turn: Turn,
        sid: str,
        part: Mapping[str, Any],
        raw: Mapping[str, Any],
    ) -> None:
        state = part.get("state")
        if not isinstance(state, Mapping):
            return
        status = state.get("status")
        tool = part.get("tool")
        item_id = part.get("callID") or part.get("id")
        if not isinstance(status, str) or not isinstance(tool, str) or not isinstance(item_id, str):
            return
        previous = turn.item_status.get(item_id)
        if previous in ("completed", "error") or previous == status:
            return
        turn.item_status[item_id] = status
        if status in ("completed", "error"):
            etype = "item.completed"
        elif previous is None:
            etype = "item.started"
        else:
            etype = "item.updated"
        title = state.get("title")
        detail = state.get("output") if status == "completed" else state.get("error")
        tool_input = state.get("input")
        event = ItemEvent(
            type=etype,
            thread_id=thread.thread_id,
            turn_id=turn.turn_id,
            item_id=item_id,
            item_type=item_type_for_tool(tool),
            tool=tool,
            status=status,
            title=title if isinstance(title, str) else None,
            detail=detail if isinstance(detail, str) else None,
            session_id=sid,
            input=tool_input if isinstance(tool_input, Mapping) else {},
            raw=raw,
        )
        if etype == "item.completed" and previous is None:
            self._emit(
                ItemEvent(
                    **{
                        **_fields(event),
                        "type": "item.started",
                        "status": "running",
                        "detail": None,
                    }
                )
            )
        self._emit(event)

    def _on_request_asked(
        self,
        thread: ThreadState,
        sid: str,
        etype: str,
        props: Mapping[str, Any],
        raw: Mapping[str, Any],
    ) -> None:
        request_id = props.get("id")
        if not isinstance(request_id, str) or request_id in thread.pending:
            return  # a duplicate, or one recovered already
        if request_id in self._answered:
            return  # answered while a recovery was reading the list: never re-announce
        turn_id = thread.active_turn.turn_id if thread.active_turn else None
        if etype == "permission.asked":
            patterns = props.get("patterns")
            permission = props.get("permission")
            thread.pending[request_id] = OpenRequest("permission", request_id, sid)
            self._emit(
                RequestEvent(
                    type="request.opened",
                    thread_id=thread.thread_id,
                    turn_id=turn_id,
                    request_id=request_id,
                    session_id=sid,
                    permission=permission if isinstance(permission, str) else None,
                    patterns=tuple(p for p in patterns if isinstance(p, str))
                    if isinstance(patterns, list)
                    else (),
                    raw=raw,
                )
            )
        else:
            questions = props.get("questions")
            qs = (
                tuple(q for q in questions if isinstance(q, Mapping))
                if isinstance(questions, list)
                else ()
            )
            thread.pending[request_id] = OpenRequest("question", request_id, sid, qs)
            self._emit(
                RequestEvent(
                    type="user-input.requested",
                    thread_id=thread.thread_id,
                    turn_id=turn_id,
                    request_id=request_id,
                    session_id=sid,
                    questions=qs,
                    raw=raw,
                )
            )

    def _on_request_resolved(
        self,
        thread: ThreadState,
        sid: str,
        etype: str,
        props: Mapping[str, Any],
        raw: Mapping[str, Any],
    ) -> None:
        request_id = props.get("requestID")
        if not isinstance(request_id, str):
            return
        self._answered[request_id] = None
        if len(self._answered) > 4096:
            self._answered.pop(next(iter(self._answered)))  # bounded: oldest first
        if thread.pending.pop(request_id, None) is None:
            return
        turn_id = thread.active_turn.turn_id if thread.active_turn else None
        if etype == "permission.replied":
            reply = props.get("reply")
            decision = DECISION_FOR_REPLY.get(reply, "decline") if isinstance(reply, str) else None
            self._emit(
                RequestEvent(
                    type="request.resolved",
                    thread_id=thread.thread_id,
                    turn_id=turn_id,
                    request_id=request_id,
                    session_id=sid,
                    decision=decision,
                    raw=raw,
                )
            )
        else:
            answers = props.get("answers") if etype == "question.replied" else None
            parsed = (
                tuple(tuple(str(x) for x in a) for a in answers if isinstance(a, list))
                if isinstance(answers, list)
                else ()
            )
            self._emit(
                RequestEvent(
                    type="user-input.resolved",
                    thread_id=thread.thread_id,
                    turn_id=turn_id,
                    request_id=request_id,
                    session_id=sid,
                    decision="answered" if etype == "question.replied" else "rejected",
                    answers=parsed,
                    raw=raw,
                )
            )

    def _on_root_idle(self, thread: ThreadState) -> None:
        stop = thread.stop
        if stop is not None:
            stop.deferred_idle = True  # never completes a turn while a stop is pending
            return
        turn = thread.active_turn
        if turn is None:
            return  # a late idle of a finished or stopped turn
        if not turn.echo_seen:
            turn.idle_before_echo = True  # may be stale: decide once our prompt is echoed
            return
        self._schedule_idle_check(thread, turn)

    def _schedule_idle_check(self, thread: ThreadState, turn: Turn) -> None:
        self._tasks.spawn(
            self._confirm_idle(thread, turn, thread.busy_gen), name=f"idle:{thread.thread_id}"
        )

    async def _confirm_idle(self, thread: ThreadState, turn: Turn, busy_gen: int) -> None:
        """An idle completes the turn only if ``/session/status`` agrees (never on a guess)."""
        delay = 0.05
        for _ in range(6):
            try:
                statuses = await thread.client.status()
                break
            except OpenCodeError as exc:
                _log.warning("adapter.status_failed", thread_id=thread.thread_id, error=str(exc))
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
        else:
            return
        if thread.active_turn is not turn or thread.stop is not None or thread.busy_gen != busy_gen:
            return
        status = statuses.get(thread.session_id)
        if status is not None and status.is_busy:
            return
        self._complete_turn(thread, turn, None)

    def _end_turn(self, thread: ThreadState, turn: Turn, type: str, **fields: Any) -> None:
        """The turn is over: the thread is ready again, and the host is told how it ended."""
        thread.active_turn = None
        thread.status = "ready"
        self._emit(TurnEvent(type=type, thread_id=thread.thread_id, turn_id=turn.turn_id, **fields))

    def _complete_turn(
        self, thread: ThreadState, turn: Turn, raw: Mapping[str, Any] | None
    ) -> None:
        self._end_turn(thread, turn, "turn.completed", state="completed", raw=raw)

    def _end_aborted_elsewhere(
        self, thread: ThreadState, turn: Turn, raw: Mapping[str, Any] | None
    ) -> None:
        partial = turn.collector.result(turn.turn_id)
        self._end_turn(
            thread,
            turn,
            "turn.aborted",
            reason="Aborted outside this adapter.",
            partial=partial,
            raw=raw,
        )

    def _fail_turn(
        self,
        thread: ThreadState,
        turn: Turn,
        name: str,
        message: str,
        raw: Mapping[str, Any] | None,
    ) -> None:
        thread.last_error = message
        self._end_turn(thread, turn, "turn.completed", state="failed", error=message, raw=raw)
        self._emit(
            RuntimeEvent(
                type="runtime.error",
                thread_id=thread.thread_id,
                turn_id=turn.turn_id,
                message=message,
                error_name=name,
                raw=raw,
            )
        )

    def _on_root_error(
        self, thread: ThreadState, props: Mapping[str, Any], raw: Mapping[str, Any]
    ) -> None:
        error = props.get("error")
        name = error.get("name") if isinstance(error, Mapping) else None
        data = error.get("data") if isinstance(error, Mapping) else None
        message = data.get("message") if isinstance(data, Mapping) else None
        name = name if isinstance(name, str) else "UnknownError"
        text = message if isinstance(message, str) and message else name
        stop = thread.stop
        turn = thread.active_turn
        if name == "MessageAbortedError":
            if stop is not None:
                stop.acknowledged.set()  # an acknowledgement, not an error
                return
            if thread.closing:
                return  # the acknowledgement of our own teardown
            if turn is not None and turn.echo_seen:
                # Aborted by someone else (another client, the TUI): the turn ends.
                self._end_aborted_elsewhere(thread, turn, raw)
            return  # otherwise a late acknowledgement of an earlier stop
        if turn is None:
            self._emit(
                RuntimeEvent(
                    type="runtime.error",
                    thread_id=thread.thread_id,
                    message=text,
                    error_name=name,
                    raw=raw,
                )
            )
            return
        if stop is not None:
            stop.turn_settled = True
        self._fail_turn(thread, turn, name, text, raw)


def _unreverted(messages: Sequence[Message], revert: object) -> tuple[Message, ...]:
    """``messages`` before a session's ``revert`` mark ``{messageID, partID?}``: from
    that message on (or, with a part, from that part of it on) everything is reverted."""
    if not isinstance(revert, Mapping) or not isinstance(revert.get("messageID"), str):
        return tuple(messages)
    message_id, part_id = revert["messageID"], revert.get("partID")
    kept: list[Message] = []
    for message in messages:
        if message.info.id == message_id:
            parts = [p.id for p in message.parts]
            if isinstance(part_id, str) and part_id in parts:
                kept.append(replace(message, parts=message.parts[: parts.index(part_id)]))
            break
        kept.append(message)
    return tuple(kept)


async def _request_is_live(client: OpenCodeClient, request: PendingRequest) -> bool:
    """Whether a listed request still blocks a run, by the rule measured on 1.18.34:
    while a request is live, the tool call that asked it is ``pending`` or ``running``;
    once its run was aborted, that part has ended (``error``, interrupted) although the
    request is still listed. A request without a tool call is live while its session
    is busy. When the server cannot tell, the request counts as live: a host had
    better see a dead request than miss one that blocks its turn."""
    tool = request.raw.get("tool")
    message_id = tool.get("messageID") if isinstance(tool, Mapping) else None
    call_id = tool.get("callID") if isinstance(tool, Mapping) else None
    try:
        if isinstance(message_id, str) and isinstance(call_id, str):
            message = await client.message(request.session_id, message_id)
            return any(
                p.call_id == call_id
                and p.state is not None
                and p.state.status in ("pending", "running")
                for p in message.parts
            )
        status = (await client.status()).get(request.session_id)
        return status is not None and status.is_busy
    except NotFoundError:
        return False  # its message or session is gone (deleted): nothing waits on it
    except (OpenCodeError, ValueError) as exc:
        _log.warning("adapter.request_check_failed", request_id=request.id, error=str(exc))
        return True


async def _first(*aws: Coroutine[Any, Any, Any]) -> None:
    """Wait until the first of ``aws`` finishes; the others are cancelled and awaited."""
    tasks = [asyncio.ensure_future(aw) for aw in aws]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _fields(event: ItemEvent) -> dict[str, Any]:
    return {name: getattr(event, name) for name in event.__dataclass_fields__ if name != "event_id"}


def _session_of(etype: str, props: Mapping[str, Any]) -> str | None:
    sid = props.get("sessionID")
    if isinstance(sid, str):
        return sid
    for key in ("info", "part"):
        inner = props.get(key)
        if isinstance(inner, Mapping):
            value = (
                inner.get("sessionID") if key == "part" else inner.get("sessionID", inner.get("id"))
            )
            if isinstance(value, str):
                return value
    return None


def _cursor_session(resume: Mapping[str, Any] | None) -> str | None:
    if not isinstance(resume, Mapping) or resume.get("schema") != 1:
        return None
    sid = resume.get("session_id")
    return sid if is_session_id(sid) else None


def _parse_model(model: str) -> tuple[str, str]:
    match = _MODEL.match(model) if isinstance(model, str) else None
    if match is None:
        raise InvalidInputError(f"model must look like 'provider/model', got {model!r:.80}")
    return match.group(1), match.group(2)
