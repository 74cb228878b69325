"""``OpenCodeAdapter``: the public facade over threads, turns, events and the Stop button.

It owns the pieces and wires them together; each concept lives in its own package
(``docs/architecture.md`` draws them): the registry of threads
(:mod:`adapter._threads._registry`), the event pump (:mod:`adapter._stream._pump`),
session ownership (:mod:`adapter._threads._session_owners`), requests
(:mod:`adapter._requests._pending`), a turn's output (:mod:`adapter._stream._output`),
turns (:mod:`adapter._turns._running`), native-to-canonical translation
(:mod:`adapter._stream._translator`), the interrupt (:mod:`adapter._stop._interrupt`),
what the threads hear of the stream (:mod:`adapter._stream._pump_sink`), and each
thread's lifecycle (:mod:`adapter._turns._lifecycle`, drawn in ``docs/interrupt.md``).

Data flows one way. Inside the concepts, bottom to top (a module imports only below
it): the thread's state (:mod:`adapter._threads._thread_state`, with the lifecycle and
the event hub :mod:`adapter._stream._hub`); the registry; ownership and requests;
output; turns; translation, the interrupt and the pump's sink; this facade. The pump
sits low, beside the client: it reports to the ``StreamSink`` interface it defines.
No module is handed a callback into this facade or the translator: a request whose
thread ownership found comes back through its ``routed`` queue, which this facade
reads (:meth:`OpenCodeAdapter._translate_routed`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Self

import httpx

from ._base._closing import AsyncClosing
from ._base._task_owner import first_of
from ._client import OpenCodeClient
from ._client._base_url import checked_base_url
from ._client._inventory import ServerInventory, known_command
from ._client._mcp import McpServerStatus
from ._client._native import NativeEvent
from ._client._responses import Session
from ._exceptions import (
    AdapterClosedError,
    CannotDetachError,
    ConnectTimeoutError,
    InvalidInputError,
    OpenCodeError,
    ServerExitedError,
    SessionClosedError,
    UnknownThreadError,
)
from ._logging import get_logger
from ._requests._answers import Answers
from ._requests._pending import Requests
from ._server._directories import normalise_directory
from ._server._process import ServerProcess
from ._server._releases import ServerVersionCheck
from ._stop._interrupt import Interrupts
from ._stream._hub import DEFAULT_MAX_QUEUE, EventStream
from ._stream._native_recorder import DEFAULT_RECORDER_BYTES, NativeRecorder, NativeRecording
from ._stream._output import Output
from ._stream._pump import EventPump
from ._stream._pump_sink import PumpSink
from ._stream._replay_window import DEFAULT_HISTORY_BYTES, DEFAULT_HISTORY_LIMIT
from ._stream._translator import Translator
from ._threads._compaction import summarize
from ._threads._fork_at_turn import check_free, checked_at_turn, discard_fork, fork_session_at
from ._threads._history import live_tree, read_history, roll_back
from ._threads._limits import Limits
from ._threads._registry import ThreadRegistry
from ._threads._resume_cursors import cursor_of, parse_cursor, resume_session
from ._threads._session_owners import Ownership
from ._threads._session_tree import SessionTree
from ._threads._thread_state import ThreadState, TreeMembership
from ._timeouts import Timeouts
from ._turns._lifecycle import Lifecycle, ThreadPhase
from ._turns._prompt_input import FilePart, PromptPart, build_prompt, parse_model
from ._turns._running import Turns
from ._types._events import RequestOpened, RuntimeWarningEvent, UserInputRequested
from ._types._permissions import (
    PermissionRule,
    Permissions,
    describe,
    native_rules,
    permission_rules,
)
from ._types._records import InterruptResult, SessionInfo, ThreadHistory, TurnStart
from ._types._stop_report import StopReport

__all__ = ["OpenCodeAdapter"]

_log = get_logger("adapter")
_OWNED_SERVER = "an adapter cannot detach from the server it started itself (it dies with it)"


class OpenCodeAdapter(AsyncClosing):
    """Drive one OpenCode server: many threads, each bound to a root session.

    With ``base_url`` the adapter connects to that server and never owns its
    lifecycle. Without it, it starts ``opencode serve`` (``binary``) on
    127.0.0.1 on a free port and stops it on exit. A ``password`` given here
    goes to a server the adapter starts and to its own requests; an external
    server only ever gets the password passed explicitly.

    ``timeouts`` bounds every wait (see :class:`~adapter.Timeouts`). ``transport`` is the
    test seam (see :class:`adapter.testing.FakeOpenCodeServer`).

    ``native_recorder`` (off by default) is handed every native event of each
    thread's tree, mapped or not, under its thread id (a support tool:
    ``docs/reliability.md``, "Recording the native stream"; :class:`NativeFileRecorder`
    writes a file). It is an adapter option, not a per-thread switch, so it sees each
    thread from its first event and costs one queue bounded by ``native_recorder_bytes``
    and one task whatever the number of threads; a recorder filters by ``thread_id``.

    ``on_close`` is what closing does to the threads' trees: ``"abort"`` stops them,
    ``"detach"`` leaves them (and their open requests) on the server for a later
    process to resume and adopt; see :meth:`aclose`.
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        password: str | None = None,
        binary: str = "opencode",
        directory: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        timeouts: Timeouts | None = None,
        stop_concurrency: int = 8,
        max_output_bytes: int = 64 * 1024,
        max_tree_sessions: int = 10_000,
        eager_root_listing: bool = False,
        event_history: int = DEFAULT_HISTORY_LIMIT,
        event_history_bytes: int = DEFAULT_HISTORY_BYTES,
        native_recorder: NativeRecorder | None = None,
        native_recorder_bytes: int = DEFAULT_RECORDER_BYTES,
        on_close: Literal["abort", "detach"] = "abort",
    ) -> None:
        if base_url is None and transport is not None:
            raise InvalidInputError("a transport needs a base_url")
        if on_close not in ("abort", "detach"):
            raise InvalidInputError(f"on_close must be 'abort' or 'detach', got {on_close!r:.40}")
        if on_close == "detach" and base_url is None:
            raise CannotDetachError(_OWNED_SERVER)
        if base_url is not None:
            checked_base_url(base_url)  # refused here, before a repr or a log can show it
        if timeouts is not None and not isinstance(timeouts, Timeouts):
            raise InvalidInputError("timeouts must be a Timeouts")
        for name, value in (
            ("stop_concurrency", stop_concurrency),
            ("max_output_bytes", max_output_bytes),
            ("max_tree_sessions", max_tree_sessions),
            ("event_history", event_history),
            ("event_history_bytes", event_history_bytes),
            ("native_recorder_bytes", native_recorder_bytes),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidInputError(f"{name} must be a positive integer, got {value!r:.40}")
        self._base_url = base_url
        self._on_close = on_close
        self._password = password
        self._binary = binary
        self._directory = normalise_directory(directory)
        self._timeouts = timeouts if timeouts is not None else Timeouts()
        self._server: ServerProcess | None = None
        self._registry = core = ThreadRegistry(
            base_url=base_url,
            password=password,
            transport=transport,
            timeouts=self._timeouts,
            limits=Limits(
                stop_concurrency=stop_concurrency,
                max_output_bytes=max_output_bytes,
                max_tree_sessions=max_tree_sessions,
                eager_root_listing=eager_root_listing,
                event_history=event_history,
                event_history_bytes=event_history_bytes,
            ),
        )
        # Built bottom-up: each is given only what is below it, and none calls back up.
        self._ownership = Ownership(core)
        self._requests = Requests(core, self._ownership)
        output = Output(core, self._ownership, self._requests)
        self._turns = Turns(core, output, self._ownership)
        self._translator = Translator(core, self._ownership, self._requests, self._turns, output)
        # Off by default: the pump then calls the translator directly, at no cost.
        self._recording: NativeRecording | None = None
        self._on_event: Callable[[NativeEvent], None] = self._translator.handle
        if native_recorder is not None:
            self._recording = NativeRecording(
                core, native_recorder, max_bytes=native_recorder_bytes
            )
            self._on_event = self._recording.observing(self._translator.handle)
        self._interrupts = Interrupts(core, self._ownership, self._requests, self._turns)
        self._pumps: dict[str | None, EventPump] = {}
        self._starting: dict[str, asyncio.Future[SessionInfo]] = {}
        self._entered = False
        self._version = ServerVersionCheck()

    def __repr__(self) -> str:
        return (
            f"OpenCodeAdapter(base_url={self.base_url!r}, threads={len(self._registry.threads)}, "
            f"auth={'basic' if self._password is not None else 'none'})"
        )

    @property
    def base_url(self) -> str | None:
        return self._base_url if self._server is None else self._server.base_url

    @property
    def server_version(self) -> str | None:
        """The version the server reported at the first connect (``None`` until then)."""
        return self._version.version

    @property
    def timeouts(self) -> Timeouts:
        return self._timeouts

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
                ready_timeout=self._timeouts.server_ready,
            )
            await self._server.start()
            self._registry.base_url = self._server.base_url
            self._registry.tasks.spawn(self._watch_server(self._server), name="server-watch")
        self._registry.tasks.spawn(self._translate_routed(), name="routed-requests")
        return self

    async def aclose(self, *, detach: bool | None = None) -> None:
        """End every thread, the event streams and the clients; release everything.

        Aborting (``on_close="abort"``, the default) stops each thread's tree (best
        effort, bounded) and withdraws its open requests; detaching (``detach=True``, or
        ``on_close="detach"``; ``detach`` overrides the option for this close) leaves
        them on the server for a later process (``docs/adapter.md``, "Closing: abort or
        detach"). :class:`CannotDetachError` for an adapter that started its own server,
        raised before anything is closed."""
        if detach is not None and not isinstance(detach, bool):
            raise InvalidInputError("detach must be a bool or None")
        detaching = self._on_close == "detach" if detach is None else detach
        if detaching and self._base_url is None:
            raise CannotDetachError(_OWNED_SERVER)
        core = self._registry
        if core.closed:
            return
        core.closed = True
        core.closing.set()
        try:
            if not core.server_dead:
                await self.stop_all(detach=detaching)
        finally:
            try:
                if self._recording is not None:
                    await self._recording.aclose()  # what is queued is recorded first
            finally:
                await core.tasks.aclose()
            for client in core.clients.values():
                await client.aclose()
            # Drop what a closed adapter no longer needs (a host may keep the object).
            self._pumps.clear()
            core.clients.clear()
            core.strangers.clear()
            core.transport = None
            if self._server is not None:
                await self._server.stop()
            core.hub.close()

    def events(
        self,
        thread_id: str | None = None,
        *,
        after: str | None = None,
        replay: bool = False,
        max_queue: int = DEFAULT_MAX_QUEUE,
    ) -> EventStream:
        """A new consumer of canonical events: of one thread, or of all (``None``).

        It sees every event emitted from now on or, with ``after=<event_id>``, every
        retained event after that one first (the thread's current and previous turn,
        at most ``event_history`` events and ``event_history_bytes`` bytes per thread;
        ``docs/adapter.md``, "Events").
        An ``after`` no longer retained starts with a ``stream.gap`` (``expired``).
        ``replay=True`` (without ``after``) starts with everything retained: what a
        page that loads mid-turn needs to draw the turn so far.
        A consumer more than ``max_queue`` events behind gets a ``stream.gap``
        (``overflow``) and its stream ends: subscribe again with
        ``after=gap.last_event_id`` to catch up. Nothing is lost or doubled between
        the replay and the live events."""
        if thread_id is not None and (not isinstance(thread_id, str) or not thread_id):
            raise InvalidInputError("thread_id must be a non-empty string or None")
        if after is not None and (not isinstance(after, str) or not after):
            raise InvalidInputError("after must be an event_id or None")
        if isinstance(max_queue, bool) or not isinstance(max_queue, int) or max_queue < 1:
            raise InvalidInputError(f"max_queue must be a positive integer, got {max_queue!r:.40}")
        if not isinstance(replay, bool):
            raise InvalidInputError("replay must be a bool")
        if replay and after is not None:
            raise InvalidInputError("give after or replay, not both")
        return self._registry.hub.subscribe(
            thread_id, after=after, replay=replay, max_queue=max_queue
        )

    def list_sessions(self) -> list[SessionInfo]:
        return [t.info() for t in self._registry.threads.values()]

    def has_session(self, thread_id: str) -> bool:
        return thread_id in self._registry.threads

    def session_info(self, thread_id: str) -> SessionInfo:
        """One thread's :class:`SessionInfo`, as :meth:`list_sessions` lists it (a
        closing thread included); :class:`UnknownThreadError` if there is none."""
        thread = self._registry.threads.get(thread_id)
        if thread is None:
            raise UnknownThreadError(thread_id)
        return thread.info()

    # -- sessions --------------------------------------------------------------

    async def start_session(
        self,
        thread_id: str,
        *,
        directory: str | None = None,
        title: str | None = None,
        model: str | None = None,
        resume: Mapping[str, Any] | None = None,
        permissions: Permissions | None = None,
    ) -> SessionInfo:
        """Bind ``thread_id`` to an OpenCode session (new, or resumed from a cursor).

        ``permissions`` (a preset name, ``"ask"``, ``"auto-edit"``, ``"full-access"``,
        or raw OpenCode rules) is set on a new session and re-applied to a resumed
        one; without it the server config decides (``docs/adapter.md``,
        "Permission modes"). A thread that is already started is returned as it is
        (change its mode with :meth:`set_permissions`)."""
        self._check_open()
        if not isinstance(thread_id, str) or not thread_id:
            raise InvalidInputError("thread_id must be a non-empty string")
        if model is not None:
            parse_model(model)
        rules = permission_rules(permissions) if permissions is not None else None
        directory = normalise_directory(directory) if directory is not None else self._directory
        existing = self._registry.threads.get(thread_id)
        if existing is not None and existing.closing:
            # A stop of this thread is under way: its session.exited comes first.
            await existing.finished.wait()
            self._check_open()
            existing = self._registry.threads.get(thread_id)
        if existing is not None and not existing.closing:
            if existing.lifecycle.phase is ThreadPhase.CONNECTING:
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
            info = await self._start(thread_id, directory, title, model, resume, permissions, rules)
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
        permissions: Permissions | None = None,
        rules: tuple[PermissionRule, ...] | None = None,
    ) -> SessionInfo:
        core = self._registry
        client = core.client_for(directory)
        pump = self._pump_for(directory, client)
        if self._version.needed:
            await self._version.check(client)
        session_id: str | None = None
        cursor = parse_cursor(resume)
        resumed_id = cursor.session_id if cursor is not None else None
        if resume is not None and cursor is None:
            _log.warning("adapter.resume_ignored", thread_id=thread_id, reason="malformed cursor")
        warning = forked = newest = None
        if cursor is not None:
            native = native_rules(rules) if rules is not None else None
            teardown = self._timeouts.teardown
            resumed = await resume_session(client, cursor, directory, native, teardown=teardown)
            session_id, warning, forked = resumed.session_id, resumed.warning, resumed.forked
            newest = resumed.newest_message_id
        if session_id is None:
            session = await client.create_session(
                title=title, permission=native_rules(rules) if rules is not None else None
            )
            session_id = session.id
        thread = ThreadState(
            thread_id=thread_id,
            session_id=session_id,
            directory=directory,
            client=client,
            lifecycle=Lifecycle(thread_id, session_id, core.emit),
            scope=core.tasks.scope(f"thread:{thread_id}"),
            model=model,
            permissions=describe(permissions) if permissions is not None else None,
            title=title,
            tree=TreeMembership(sessions={session_id: None}, parents={session_id: None}),
        )
        core.register(thread)
        created = session_id != resumed_id  # a resumed tree may be another process's work
        try:
            async with asyncio.timeout(self._timeouts.connect):
                await first_of(pump.connected.wait(), thread.closed.wait(), core.closing.wait())
        except TimeoutError:
            await self._discard(thread, abort=created)
            raise ConnectTimeoutError(
                "event_stream",
                f"the event stream did not connect within {self._timeouts.connect} s",
            ) from None
        except BaseException:
            await self._discard(thread, abort=created)
            raise
        if core.closed:
            await self._discard(thread, abort=created)
            raise AdapterClosedError("the adapter closed while the session was connecting")
        if thread.closing:
            raise SessionClosedError(f"thread {thread_id} was stopped while it was connecting")
        thread.lifecycle.connected()
        if warning is not None:
            core.emit(RuntimeWarningEvent(thread_id=thread_id, message=warning))
        if forked is not None:
            message = (
                f"session {resumed_id} was resumed in another directory ({directory}): the "
                f"thread goes on in its fork {forked} there (history kept, the original "
                "unchanged); store the new resume cursor"
            )
            core.emit(RuntimeWarningEvent(thread_id=thread_id, message=message, session_id=forked))
            _log.info("adapter.session_forked", thread_id=thread_id, original=resumed_id)
        version_warning = self._version.take_warning()
        if version_warning is not None:
            core.emit(RuntimeWarningEvent(thread_id=thread_id, message=version_warning))
        if resumed_id is not None and session_id == resumed_id:
            # A run of the tree still working is the thread's turn (its output so far
            # read back), before the requests it raised are listed: they are the turn's.
            await self._turns.attached(thread, newest)
            # The stream has no replay: requests raised before we connected are listed.
            thread.scope.spawn(self._requests.recover(client), name="recover")
        _log.info("adapter.session_started", thread_id=thread_id, session_id=session_id)
        return thread.info()

    async def _discard(self, thread: ThreadState, *, abort: bool) -> None:
        """Undo a start that did not complete: forget the thread, abort what it created
        (``abort``; never a resumed session, whose run may be another process's)."""
        thread.lifecycle.begin_close()
        thread.scope.cancel()
        self._registry.forget(thread)
        thread.lifecycle.closed("start failed")
        thread.finished.set()
        with contextlib.suppress(OpenCodeError, TimeoutError):
            async with asyncio.timeout(self._timeouts.teardown):
                if abort:
                    await thread.client.abort(thread.session_id)

    async def stop_session(self, thread_id: str) -> None:
        """Stop the thread: a pending stop completes, then root and tree are aborted
        (best effort, bounded), its open requests are withdrawn, and ``session.exited``
        is emitted once."""
        await self._interrupts.close(self._registry.get(thread_id, allow_closing=True))

    async def stop_all(self, *, detach: bool = False) -> None:
        """``stop_session`` of every thread, and of every start under way (it raises
        :class:`SessionClosedError`); ``detach`` (by :meth:`aclose`) leaves the trees and
        requests on the server. (Closing, a start under way raises by itself.)"""
        core = self._registry
        threads = [t for t in core.threads.values() if not t.closing]
        reason = "detached: the tree goes on on the server" if detach else "stopped"

        async def caught(thread_id: str, start: asyncio.Future[Any]) -> None:
            if (thread := await core.threads.registered(thread_id, start)) is not None:
                await self._interrupts.close(thread)

        starts = {} if core.closed else self._starting
        results = await asyncio.gather(
            *(self._interrupts.close(t, reason, detach=detach) for t in threads),
            *(caught(i, f) for i, f in starts.items() if i not in core.threads),
            return_exceptions=True,
        )
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, OpenCodeError):
                raise result

    # -- turns -----------------------------------------------------------------

    async def send_turn(
        self,
        thread_id: str,
        text_or_parts: str | Sequence[PromptPart | str],
        *,
        model: str | None = None,
        agent: str | None = None,
        variant: str | None = None,
        system: str | None = None,
        tools: Mapping[str, bool] | None = None,
        files: Sequence[FilePart | str | os.PathLike[str]] = (),
    ) -> TurnStart:
        """Start a turn, or steer the running one (no new ``turn.started``).

        ``text_or_parts`` is the prompt text, or a list of parts (strings,
        :func:`text_part`, :func:`file_part`, :func:`image_part`); ``files`` (parts
        or paths) are sent after them. ``system`` is added to this prompt's system
        prompt, ``tools`` enables or disables tools by name, ``variant`` picks the
        model's variant. Everything is checked before anything is sent
        (``InvalidInputError`` names the bad field; ``docs/adapter.md``, "Prompt input").

        A prompt sent as the running turn ends still belongs to that turn: its
        output is emitted and the turn ends after it (``docs/adapter.md``)."""
        prompt = build_prompt(
            text_or_parts, files=files, system=system, tools=tools, variant=variant
        )
        if agent is not None and (not isinstance(agent, str) or not agent):
            raise InvalidInputError("agent must be a non-empty string")
        parsed_model = parse_model(model) if model is not None else None
        thread = self._registry.get(thread_id)
        if parsed_model is None and thread.model is not None:
            parsed_model = parse_model(thread.model)
        await self._wait_ready(thread)
        return await self._turns.send(thread, prompt, parsed_model, agent)

    async def run_command(
        self,
        thread_id: str,
        name: str,
        arguments: str = "",
        *,
        model: str | None = None,
        agent: str | None = None,
    ) -> TurnStart:
        """Run the slash command ``name`` (``GET /command`` lists them; an unknown one is
        :class:`InvalidInputError` naming them, nothing run) with ``arguments`` as a new
        turn: the events, usage and Stop of :meth:`send_turn`. Refused while a turn runs
        (``docs/adapter.md``, "Slash commands")."""
        if not isinstance(name, str) or not name or not isinstance(arguments, str):
            raise InvalidInputError("name must be a non-empty string, arguments a string")
        if agent is not None and (not isinstance(agent, str) or not agent):
            raise InvalidInputError("agent must be a non-empty string")
        thread = self._registry.get(thread_id)
        chosen = model if model is not None else thread.model
        parsed = parse_model(chosen) if chosen is not None else None
        await self._wait_ready(thread)
        name = known_command(name, await thread.client.commands())
        return await self._turns.command(thread, name, arguments, parsed, agent)

    async def set_permissions(self, thread_id: str, permissions: Permissions) -> SessionInfo:
        """Change a live thread's permission mode (a preset name or raw rules).

        OpenCode appends the rules to the session's and the last matching rule
        wins, so a preset replaces whatever mode was set before; raw rules are
        added to it. The running turn's next tool call is checked against them."""
        rules = permission_rules(permissions)
        thread = self._registry.get(thread_id)
        await self._wait_ready(thread)
        await thread.client.add_permission_rules(thread.session_id, native_rules(rules))
        thread.permissions = describe(permissions)
        return thread.info()

    async def _wait_ready(self, thread: ThreadState) -> None:
        if thread.lifecycle.phase is not ThreadPhase.CONNECTING:
            return
        pending = self._starting.get(thread.thread_id)
        if pending is not None:
            await asyncio.shield(pending)

    async def interrupt_turn(self, thread_id: str, turn_id: str | None = None) -> InterruptResult:
        """Stop the thread's whole session tree and return what the turn had produced.

        See ``docs/interrupt.md``. Concurrent calls share one stop (one root
        abort) and get the same result or the same exception.
        """
        if turn_id is not None and not isinstance(turn_id, str):
            raise InvalidInputError("turn_id must be a string or None")
        thread = self._registry.get(thread_id)
        await self._wait_ready(thread)
        if thread.closing:
            raise SessionClosedError(f"thread {thread_id} is stopping")
        return await self._interrupts.interrupt(thread, turn_id)

    async def stop_subagent(self, thread_id: str, session_id: str) -> StopReport:
        """Stop one subagent of the thread's tree and its whole subtree, with the turn's
        walk (``docs/interrupt.md``, "Stopping one subagent"); the root, the other
        subagents and the turn go on. The thread's root (``interrupt_turn`` stops it)
        and a session outside the tree are refused (``InvalidInputError``, nothing
        sent). A stop of the turn under way is joined: its report is returned."""
        thread = self._registry.get(thread_id)
        await self._wait_ready(thread)
        if thread.closing:
            raise SessionClosedError(f"thread {thread_id} is stopping")
        return await self._interrupts.stop_subagent(thread, session_id)

    async def session_tree(self, thread_id: str) -> SessionTree:
        """The thread's session tree as the adapter knows it (the root, every subagent
        and API-created child it adopted), with each session's status read from the
        server now (``busy``, ``retry`` or ``idle``); root first, then breadth-first."""
        thread = self._registry.get(thread_id)
        await self._wait_ready(thread)
        return await live_tree(thread)

    async def inventory(self, *, directory: str | None = None) -> ServerInventory:
        """What the server offers in ``directory`` (default: the adapter's): models,
        agents, slash commands, skills, MCP servers and the version, read concurrently,
        each part bounded by the request timeout; a part that failed is empty and named
        in ``errors``. See :class:`ServerInventory`."""
        self._check_open()
        where = normalise_directory(directory) if directory is not None else self._directory
        return await self._registry.client_for(where).inventory()

    async def list_root_sessions(self, *, directory: str | None = None) -> list[Session]:
        """The server's root sessions of ``directory`` (default: the adapter's), most
        recently updated first: what a host offers to resume (``start_session(resume=)``)."""
        self._check_open()
        where = normalise_directory(directory) if directory is not None else self._directory
        return await self._registry.client_for(where).root_sessions(where)

    async def add_mcp_server(
        self, name: str, config: Mapping[str, Any], *, directory: str | None = None
    ) -> McpServerStatus:
        """Add (or replace) MCP server ``name`` in ``directory`` (default: the adapter's)
        with OpenCode's ``config`` (``{"type": "local", "command": [...], ...}`` or
        ``{"type": "remote", "url": ..., ...}``, checked first); its status once the
        server tried to start it (``docs/adapter.md``, "MCP servers")."""
        self._check_open()
        where = normalise_directory(directory) if directory is not None else self._directory
        return await self._registry.client_for(where).add_mcp(name, config)

    # -- requests --------------------------------------------------------------

    def pending_requests(self, thread_id: str) -> list[RequestOpened | UserInputRequested]:
        """The open permission and question requests of the thread's whole tree, each
        as the event that announced it (``request.opened`` / ``user-input.requested``),
        in the order announced: what a host shows as waiting and answers with
        :meth:`respond_to_request` / :meth:`respond_to_user_input`. One leaves the list
        with its ``*.resolved`` event: answered (here or elsewhere), moot, or withdrawn
        by a stop; :class:`UnknownThreadError` for a thread that is not started."""
        return self._requests.open_in(self._registry.get(thread_id))

    async def respond_to_request(self, thread_id: str, request_id: str, decision: str) -> None:
        await self._requests.respond(self._registry.get(thread_id), request_id, decision)

    async def respond_to_user_input(
        self, thread_id: str, request_id: str, answers: Answers
    ) -> None:
        """Answer a question request: answers keyed by question text (or header), or one
        per question in order. Checked against the questions first (every question
        answered, keys and option labels exact, one answer unless ``multiple``):
        :class:`InvalidInputError` names what does not fit, and nothing is sent."""
        await self._requests.answer(self._registry.get(thread_id), request_id, answers)

    async def reject_user_input(self, thread_id: str, request_id: str) -> None:
        """Decline a question request: its tool call fails and the asking session's run
        stops, as when a user dismisses the question in OpenCode's own UI."""
        await self._requests.reject(self._registry.get(thread_id), request_id)

    async def summarize_thread(self, thread_id: str, *, model: str | None = None) -> str | None:
        """Compact the thread's history into a summary (OpenCode's ``summarize``) and
        return the summary's text.

        ``model`` (``"provider/model"``) writes the summary; by default the thread's
        model, else the one its newest message used. The server answers once the
        summary is written (bounded by ``Timeouts.summarize``). A turn under way
        ends when its current tool step finishes: ``thread.compacted``, then
        ``turn.aborted`` with a reason that starts ``summarized:``. ``None`` when
        the server wrote no summary (measured once on 1.18.34: a summarize sent just
        as a run began was taken as an ordinary message and the agent went on).
        """
        thread = self._registry.get(thread_id)
        chosen = parse_model(model) if model is not None else None
        if chosen is None and thread.model is not None:
            chosen = parse_model(thread.model)
        await self._wait_ready(thread)
        deadline = self._registry.timeouts.summarize
        with thread.compactions.summarizing():  # its run is no other client's to adopt
            return await summarize(thread.client, thread.session_id, chosen, deadline=deadline)

    # -- history ---------------------------------------------------------------

    async def read_thread(self, thread_id: str) -> ThreadHistory:
        """The thread's messages, without those a rollback reverted.

        OpenCode keeps reverted messages stored (marked by the session's ``revert``)
        until the next prompt removes them, so they are cut here."""
        return await read_history(self._registry.get(thread_id))

    async def rollback_thread(self, thread_id: str, num_turns: int) -> ThreadHistory:
        """Revert the last ``num_turns`` turns (all of them if there are fewer).

        A turn is a prompt with its steers, follow-ups and server continuations
        (see :func:`adapter._threads._turn_boundaries.turn_starts`), not one user message."""
        if isinstance(num_turns, bool) or not isinstance(num_turns, int) or num_turns < 1:
            raise InvalidInputError("num_turns must be a positive integer")
        return await roll_back(self._registry.get(thread_id), num_turns)

    async def fork_thread(
        self, thread_id: str, new_thread_id: str, *, at_turn: int | None = None
    ) -> SessionInfo:
        """Start ``new_thread_id`` on OpenCode's fork of the thread's root: every turn, or
        those before turn ``at_turn`` (from 0, as ``rollback_thread`` counts turns;
        negative from the end), with the source's directory, model and permission mode;
        the source is untouched (``docs/adapter.md``, "Forking a thread")."""
        self._check_open()
        source, at_turn = self._registry.get(thread_id), checked_at_turn(at_turn)
        check_free(new_thread_id, self._registry.threads, self._starting)
        await self._wait_ready(source)
        teardown, known = self._timeouts.teardown, source.ledger.user_turns()
        fork = await fork_session_at(
            source.client, source.session_id, known, at_turn, teardown=teardown
        )
        try:  # no await between this check and start_session's registration
            check_free(new_thread_id, self._registry.threads, self._starting)
            cursor = cursor_of(fork.id, source.directory)
            await self.start_session(
                new_thread_id, directory=source.directory, model=source.model, resume=cursor
            )
        except BaseException:
            await discard_fork(source.client, fork.id, teardown=teardown)
            raise
        self._registry.threads[new_thread_id].permissions = source.permissions
        return self.session_info(new_thread_id)

    # -- plumbing --------------------------------------------------------------

    def _check_open(self) -> None:
        if self._registry.closed or not self._entered:
            raise AdapterClosedError(
                "the adapter is closed"
                if self._registry.closed
                else "use `async with OpenCodeAdapter(...)`"
            )
        if self._registry.server_dead:
            raise ServerExitedError("the OpenCode server the adapter started has exited")

    def _pump_for(self, directory: str | None, client: OpenCodeClient) -> EventPump:
        pump = self._pumps.get(directory)
        if pump is None:
            core = self._registry
            sink = PumpSink(core, directory, client, self._on_event, self._requests, self._turns)
            pump = EventPump(directory, client, sink, skip_report=core.timeouts.skip_report)
            self._pumps[directory] = pump
            core.tasks.spawn(pump.run(), name=f"pump:{directory}")
        return pump

    async def _translate_routed(self) -> None:
        """Requests whose thread an ancestry lookup found
        (:mod:`adapter._threads._session_owners`) are translated here, as that thread's,
        through the same path as the stream's."""
        routed = self._ownership.routed
        while True:
            event = await routed.get()
            if self._registry.closed:
                continue
            try:
                self._on_event(event)
            except Exception as exc:  # one bad request must not stop the others
                _log.error("adapter.routed_request_failed", error=repr(exc)[:300])

    async def _watch_server(self, server: ServerProcess) -> None:
        await server.exited.wait()
        core = self._registry
        if core.closed:
            return
        _log.error("adapter.server_exited", returncode=server.returncode)
        message = f"the OpenCode server exited (code {server.returncode})"
        core.server_exited(message)
        for future in self._starting.values():
            if not future.done():
                future.set_exception(ServerExitedError(message))
                future.exception()
