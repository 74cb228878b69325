"""The fake OpenCode server: the public face that puts the fake's parts together.

Why a module: a test sees one object, :class:`FakeOpenCodeServer` (its settings, its
records of requests and events, its fault injection and waits), while the work is
done by parts that each own one concern: the state (:mod:`.state`), the script
runner (:mod:`.runner`), the route table and its handlers (:mod:`.http`,
:mod:`.session_routes`, :mod:`.server_routes`), the event transport
(:mod:`.event_bus`) and the hooks (:mod:`.hooks`). This module only composes them and
keeps the request accounting every request goes through; a failed wait or request
assertion says what it saw through :mod:`.failure_report`.
"""

from __future__ import annotations

import asyncio
import random
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import httpx

from ..._base._closing import AsyncClosing
from .command_routes import CommandRoutes
from .event_bus import EventBus
from .failure_report import calls_mismatch, describe_predicate, render_state
from .hooks import Hold, Hook, HookChain, HookHandler, RequestPattern, RunEndHold, failure
from .http import Router, Transport, basic_token
from .id_minting import IdMinter
from .inventory_routes import FakeInventory, InventoryRoutes
from .model_input import ModelInput
from .runner import ScriptRunner
from .server_routes import ServerRoutes
from .session_data import FakeSession, RecordedRequest
from .session_routes import SessionRoutes
from .state import FakeState
from .steps import Step
from .views import FakeViews
from .wire import BUSY, IDLE, JSON, resolve_directory


def _renamed(value: Any, renames: Mapping[str, str]) -> Any:
    """A copy of recorded JSON with every string equal to a key of ``renames`` replaced."""
    if isinstance(value, str):
        return renames.get(value, value)
    if isinstance(value, Mapping):
        return {key: _renamed(item, renames) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_renamed(item, renames) for item in value]
    return value


class FakeOpenCodeServer(AsyncClosing):
    """An in-process OpenCode server; talk to it through :attr:`transport`.

    Args:
        password: require ``Authorization: Basic base64(username:password)``
            (or ``?auth_token=``) on every route, else 401.
        username: the basic-auth user (``opencode`` like the real server).
        latency: seconds to sleep before handling each request (not ``/event``).
        jitter: a uniform random ``[0, jitter)`` added to ``latency``.
        seed: seed for ids, slugs and jitter (deterministic runs).
        heartbeat: seconds between ``server.heartbeat`` events on idle streams
            (``None``: no heartbeats).
        directory: the server's working directory: that of requests naming none
            (no ``?directory=``, no ``x-opencode-directory`` header), and the base of
            relative ones. Sessions, statuses, pending requests and event streams are
            scoped by directory like on the real server (see :mod:`adapter.testing._fake`).
        provider_id, model_id: the model reported when a prompt names none.
        event_history: how many emitted events :attr:`events` keeps.
        background_subagents: behave like a real server started with
            ``OPENCODE_EXPERIMENTAL_BACKGROUND_SUBAGENTS=true``: a ``Task(...,
            background=True)`` runs its child in the background (see :class:`Task`
            and :mod:`adapter.testing._fake.background`). Off (the default, like the
            real server's), such a call ends ``error`` and starts no child.
    """

    base_url = "http://fake-opencode"
    """A base URL to use with :attr:`transport` (any host works)."""

    def __init__(
        self,
        *,
        password: str | None = None,
        username: str = "opencode",
        latency: float = 0.0,
        jitter: float = 0.0,
        seed: int | None = None,
        heartbeat: float | None = None,
        directory: str = "/home/user/project",
        provider_id: str = "fake",
        model_id: str = "fake-model",
        event_history: int = 10_000,
        background_subagents: bool = False,
    ) -> None:
        self.latency = latency
        self.jitter = jitter
        self.heartbeat = heartbeat
        self.directory = resolve_directory(directory, "/")
        """The server's working directory (normalised like a request's)."""
        self.provider_id = provider_id
        self.model_id = model_id
        self.background_subagents = background_subagents
        """Whether background subagents are on (may be changed per test, between runs)."""
        self.summary_text = "Summary of the conversation so far."
        """What the model answers to ``POST /session/{id}/summarize`` (set it per test)."""
        self.model_cost: Mapping[str, float] = {}
        """The model's prices per million tokens, as in ``opencode.json``'s model ``cost``
        (``input``, ``output``, ``cache_read``, ``cache_write``): each step then costs
        what the real server computes for its tokens (reasoning at the output price).
        Empty (the default): every step costs 0, as with a model without prices."""
        self.model_modalities: frozenset[str] = frozenset({"text"})
        """The model's input modalities (``opencode.json``'s ``modalities.input``): an
        image or PDF part reaches the model only if its kind (``image``, ``pdf``) is here."""
        self.model_inputs: list[ModelInput] = []
        """What the real server would send the model for each admitted prompt, in order
        (see :mod:`adapter.testing._fake.model_input`)."""
        self.requests: list[RecordedRequest] = []
        """Every request received since the last :meth:`reset_stats`."""
        self.in_flight = 0
        """Requests being handled now (``/event`` streams excluded)."""
        self.max_in_flight = 0
        """Peak of :attr:`in_flight` since the last :meth:`reset_stats`."""
        self._latency_rng = random.Random(None if seed is None else seed + 1)
        self._ids = IdMinter(seed)
        directory_of: dict[str, str] = {}
        self._bus = EventBus(self._ids, directory_of, event_history)
        self._state = FakeState(self._ids, self._bus, directory_of)
        self._runner = ScriptRunner(self._state, self._ids, self)
        self._views = FakeViews(self._state, self._bus, self.describe_state)
        self._hooks = HookChain()
        token = None if password is None else basic_token(username, password)
        self._router = Router(self, self._ids, token)
        SessionRoutes(self._router, self._state, self._runner, self._ids, self)
        ServerRoutes(self._router, self._state, self._bus, self)
        self.inventory = FakeInventory()
        """What ``GET /agent``, ``/command``, ``/skill``, ``/mcp`` and the model's limits
        in ``GET /config/providers`` answer (the real server's defaults; change it per test)."""
        InventoryRoutes(self._router, self, self.inventory)
        CommandRoutes(self._router, self._state, self._runner, self.inventory)
        self._transport = Transport(self._handle)

    # ------------------------------------------------------------------ settings & records

    @property
    def clock_skew_ms(self) -> int:
        """How far the server's clock runs ahead of the adapter's when it mints ids
        (negative: behind), as a remote server's can: its message ids then sort after
        (before) ids the adapter mints at the same moment. The ``time`` fields keep the
        local clock."""
        return self._ids.clock_skew_ms

    @clock_skew_ms.setter
    def clock_skew_ms(self, value: int) -> None:
        self._ids.clock_skew_ms = value

    @property
    def events(self) -> deque[JSON]:
        """The last emitted events (envelopes ``{id, type, properties}``), oldest first."""
        return self._bus.events

    @property
    def transport(self) -> httpx.AsyncBaseTransport:
        """The transport to give to ``httpx.AsyncClient(transport=...)``."""
        return self._transport

    def client(self, **kwargs: Any) -> httpx.AsyncClient:
        """A new ``httpx.AsyncClient`` on this fake (``base_url`` preset)."""
        kwargs.setdefault("base_url", self.base_url)
        return httpx.AsyncClient(transport=self._transport, **kwargs)

    @property
    def sessions(self) -> Mapping[str, FakeSession]:
        """Read-only view: session id -> :class:`FakeSession`."""
        return MappingProxyType(self._state.sessions)

    @property
    def snapshot(self) -> bool:
        """OpenCode's ``snapshot`` config in a git project (default off, as the real
        suite's ``snapshot: false``). On, the ``write`` and ``edit`` tools change the
        fake's project files and each step and run end sends the prompt's diff summary
        (``message.updated`` of the user message, ``info.summary.diffs``), as measured
        on 1.18.34; ``session.diff`` stays ``[]`` either way."""
        return self._state.files.enabled

    @snapshot.setter
    def snapshot(self, value: bool) -> None:
        self._state.files.enabled = value

    @property
    def closed(self) -> bool:
        """Whether :meth:`aclose` was called."""
        return self._state.closed

    @property
    def event_count(self) -> int:
        """Number of events emitted so far; pass it as ``since=`` to :meth:`wait_for_event`."""
        return self._bus.seq

    @property
    def stream_count(self) -> int:
        """Number of open ``/event`` streams."""
        return self._bus.stream_count

    # ------------------------------------------------------------------ scripts & sessions

    def script(self, name: str, steps: Sequence[Step]) -> None:
        """Register (or replace) the script run by prompts containing ``[[script:NAME]]``.

        The ``"default"`` script runs for prompts without a marker.
        """
        self._runner.script(name, steps)

    def add_session(
        self,
        parent_id: str | None = None,
        title: str | None = None,
        busy: bool = False,
        *,
        emit: bool = False,
        directory: str | None = None,
    ) -> str:
        """Create a session directly (no request; no events unless ``emit``); return its id.

        ``busy=True`` marks it busy without a running script (an abort then emits
        ``session.error`` MessageAbortedError and goes idle). ``directory`` (resolved
        like a request's) defaults to the parent's, else to :attr:`directory`.
        """
        parent = None
        if parent_id is not None:
            parent = self._state.sessions.get(parent_id)
            if parent is None:
                raise KeyError(f"unknown parent session {parent_id!r}")
        if directory is not None:
            directory = resolve_directory(directory, self.directory)
        elif parent is not None:
            directory = parent.directory
        else:
            directory = self.directory
        session = self._state.create_session(parent_id, title, directory, emit=emit)
        if busy:
            self._state.set_status(session, BUSY, emit=emit)
        return session.id

    def set_busy(self, session_id: str, busy: bool) -> None:
        """Set a session's status busy or idle (emits ``session.status``, and
        ``session.idle`` when idle). Does not start or stop scripts."""
        session = self._state.session(session_id)
        if busy:
            self._state.set_status(session, BUSY)
        else:
            self._state.set_idle(session)

    def set_status(self, session_id: str, status: Mapping[str, Any]) -> None:
        """Set any status (e.g. ``{"type": "retry", "attempt": 1, "message": "...",
        "next": ms}``) and emit ``session.status``."""
        session = self._state.session(session_id)
        if status.get("type") == "idle":
            self._state.set_idle(session)
        else:
            self._state.set_status(session, dict(status))

    # ------------------------------------------------------------------ events

    def emit(
        self,
        type: str,
        properties: Mapping[str, Any] | None = None,
        *,
        directory: str | None = None,
    ) -> JSON:
        """Emit an arbitrary event; return its envelope.

        Like every event it goes to the streams of ``directory``, by default to those of
        the directory of the session named by ``properties["sessionID"]``; an event about
        no session the fake knows goes to every stream.
        """
        if directory is not None:
            directory = resolve_directory(directory, self.directory)
        return self._bus.emit(type, dict(properties or {}), directory=directory)

    def emit_raw(self, data: bytes | str) -> None:
        """Write to every stream: ``bytes`` verbatim (include the SSE framing yourself),
        a ``str`` as one SSE event whose ``data`` it is (one ``data:`` line per line of
        it), UTF-8 encoded (a lone surrogate character as the invalid bytes a broken
        encoder writes). A hostile or broken server's event, scripted as it is sent:
        ``fake.emit_raw('{"type":"session.idle","properties":{"sessionID":"ses_\\ud800"}}')``
        (a lone surrogate escaped as OpenCode's ``JSON.stringify`` writes it)."""
        if isinstance(data, str):
            framed = "".join(f"data: {line}\n" for line in data.split("\n")) + "\n"
            data = framed.encode("utf-8", "surrogatepass")
        self._bus.send_raw(bytes(data))

    def replay_native(self, records: Iterable[Any], *, ids: Mapping[str, str] | None = None) -> int:
        """Emit the events of a native recording in order, as they were recorded; return
        how many. A bug report's recording plays to an adapter in a test this way.

        ``records`` are what :func:`adapter.read_native_recording` returns (or what an
        ``OpenCodeAdapter(native_recorder=...)`` recorder received): anything with an
        ``event`` mapping is emitted, gaps are skipped. ``ids`` renames the ids that are
        new here (the recorded root session -> this thread's, the recorded user message
        -> the prompt's): every string equal to a key, at any depth, becomes its value.
        Each event goes to the streams of its session's directory, like :meth:`emit`.
        Nothing else happens: the fake's sessions and scripts are not touched.
        """
        renames = dict(ids or {})
        emitted = 0
        for record in records:
            event = getattr(record, "event", None)
            if not isinstance(event, Mapping):
                continue
            envelope = _renamed(event, renames)
            properties = envelope.get("properties")
            self._bus.send(envelope, properties if isinstance(properties, dict) else {}, None)
            emitted += 1
        return emitted

    def drop_event_streams(self, *, error: bool = True) -> int:
        """Cut every open ``/event`` stream now; return how many were cut.

        With ``error`` (default) readers get :class:`httpx.RemoteProtocolError`, like a
        connection dropped mid-body; otherwise the streams just end.
        """
        dropped = self._bus.end_streams(error=error)
        self._bus.notify()
        return dropped

    # ------------------------------------------------------------------ fault injection

    def reset_stats(self) -> None:
        """Clear :attr:`requests` and reset :attr:`max_in_flight` to :attr:`in_flight`.

        (A hook's ``calls`` stay: they go with the hook.)"""
        self.requests = []
        self.max_in_flight = self.in_flight

    def calls(self, method: str, path_pattern: str) -> list[RecordedRequest]:
        """The received requests matching ``method`` and ``path_pattern``, oldest first.

        The pattern is :meth:`on`'s (``{name}`` one path segment, ``*`` anything;
        method ``"*"``: any), the requests those of :attr:`requests`::

            aborts = fake.calls("POST", "/session/{id}/abort")
            assert {call.session_id for call in aborts} == {root, child}

        (:meth:`assert_called_once` and its siblings also say what was sent when they fail.)
        """
        pattern = RequestPattern(method, path_pattern)
        return [r for r in self.requests if pattern.matches(r.method, r.path)]

    def assert_called(
        self, method: str, path_pattern: str, *, times: int | None = None
    ) -> list[RecordedRequest]:
        """Assert that :meth:`calls` finds a request (exactly ``times`` if given); return
        them. Else raise ``AssertionError`` listing the matching requests (with their
        bodies) and the last requests the fake received."""
        matched = self.calls(method, path_pattern)
        if (not matched) if times is None else (len(matched) != times):
            expected = (
                "at least 1 request"
                if times is None
                else {0: "no request", 1: "1 request"}.get(times, f"{times} requests")
            )
            raise calls_mismatch(method, path_pattern, expected, matched, self.requests)
        return matched

    def assert_called_once(self, method: str, path_pattern: str) -> RecordedRequest:
        """Assert that exactly one request matches (as :meth:`calls`); return it. Else
        raise ``AssertionError`` as :meth:`assert_called` does::

            reply = fake.assert_called_once("POST", "/permission/{id}/reply")
            assert reply.body == {"reply": "once"}
        """
        [request] = self.assert_called(method, path_pattern, times=1)
        return request

    def assert_not_called(self, method: str, path_pattern: str) -> None:
        """Assert that no request matches (as :meth:`calls`). Else raise
        ``AssertionError`` listing those that did, as :meth:`assert_called` does."""
        self.assert_called(method, path_pattern, times=0)

    def on(self, method: str, path_pattern: str, handler: HookHandler) -> Hook:
        """Run ``handler(request)`` before matching requests are handled.

        ``method`` is an HTTP method or ``"*"``; ``path_pattern`` is an exact path,
        with ``{name}`` matching one path segment and ``*`` anything. The handler may
        return a response (sent as is), ``None`` (normal handling goes on), raise
        (e.g. ``httpx.ConnectError``), or wait. Hooks run in registration order;
        the first response wins. They run before latency and auth.
        """
        return self._hooks.add(method, path_pattern, handler)

    def fail(
        self,
        method: str,
        path_pattern: str,
        status: int = 503,
        times: int | None = 1,
        body: Any = None,
    ) -> Hook:
        """Answer the next ``times`` matching requests (``None``: all) with ``status``.

        ``body``: bytes/str are sent verbatim (e.g. malformed JSON); anything else
        as JSON; default an ``UnknownError`` object.
        """
        return self.on(method, path_pattern, failure(status, times, body))

    def fail_abort(self, session_id: str, *, status: int = 503, body: Any = None) -> Hook:
        """Fail every abort of ``session_id`` (``POST /session/{id}/abort``) with ``status``.

        Every attempt fails, the client's retries included (it retries an abort answered
        5xx or 429), until ``hook.remove()``: a stop of a tree holding this session then
        raises :class:`adapter.TreeStopError` naming it, while the rest of the tree
        stops::

            hook = fake.fail_abort(child)
            with pytest.raises(TreeStopError) as caught:
                await oc.interrupt_turn("t")
            assert caught.value.first_failure.session_id == child
            assert {call.status for call in hook.calls} == {503}

        One ``client.abort`` makes 4 attempts (the default ``RetryPolicy``); a stop
        makes several aborts. ``body`` is :meth:`fail`'s.
        """
        return self.fail("POST", f"/session/{session_id}/abort", status, times=None, body=body)

    def refuse_connections(self) -> Hook:
        """Behave like a server whose process is gone: cut every open ``/event`` stream
        (as :meth:`drop_event_streams`) and refuse every request from now on with
        :class:`httpx.ConnectError` (nothing listens on the port), until
        ``hook.remove()``. Nothing else changes: runs go on in the fake unless the test
        also calls :meth:`restart`, as a server started again on the same data::

            down = fake.refuse_connections()
            ...                     # the adapter sees the server unreachable
            await fake.restart()    # its runs vanish, sessions and messages stay
            down.remove()           # it listens again
        """

        async def refuse(request: httpx.Request) -> None:
            raise httpx.ConnectError("fake OpenCode server refuses connections", request=request)

        hook = self.on("*", "*", refuse)
        self.drop_event_streams()
        return hook

    def hold(self, method: str, path_pattern: str) -> Hold:
        """Hold matching requests until ``hold.release()``."""
        hold = Hold(f"fake.hold({method!r}, {path_pattern!r})", self.describe_state)
        hold.hook = self.on(method, path_pattern, hold._handle)
        self._hooks.holds.append(hold)
        return hold

    def hold_run_end(self, session_id: str | None = None) -> RunEndHold:
        """Hold runs between their last finished step and their idle, until ``release()``.

        On the real server a prompt sent in the last ~60 ms of a run, or just after its
        idle, is not taken into the ending run: it is echoed *after* the run's
        ``session.idle`` and starts a second run (``busy``, an assistant message whose
        ``parentID`` is the new prompt, ``idle``). The fake's window is one event-loop
        turn; this hold keeps it open so that a test can send its prompt inside it::

            hold = fake.hold_run_end(session_id)
            ...  # start the run
            await hold.wait_started()       # the last step finished, no idle yet
            await client.post(f"/session/{session_id}/prompt_async", json=...)
            hold.release()                  # idle, then the prompt's echo and its run

        ``session_id``: hold only that session's runs (default: every session's, task
        children included). A prompt sent while a step is still going joins the run's
        next step instead (no idle in between), as measured.
        """
        hold = RunEndHold(session_id, self.describe_state)
        self._runner.run_end_holds.append(hold)
        self._hooks.holds.append(hold)
        return hold

    async def restart(self) -> None:
        """Behave like a server that was restarted on the same data: runs vanish.

        Measured on 1.18.34 (``opencode serve`` killed mid-run, SIGTERM or SIGKILL, and
        started again on the same data directory): the run is not resumed and nothing
        is said about it. Every session is idle (``GET /session/status`` lists none);
        the interrupted assistant message stays stored as it was, with no
        ``time.completed``, no ``error`` and no ``finish``; a streaming text part keeps
        what was stored of it (``""``: deltas are not stored) and a running tool stays
        ``running``; pending permission and question requests are gone; the new
        ``/event`` streams start with ``server.connected`` and say nothing else. An
        abort of such a session then answers ``true`` with an idle pair only.

        So this cuts every ``/event`` stream (as :meth:`drop_event_streams`), ends every
        run, queued prompt and pending request with no event, and marks every session
        idle silently; sessions, messages and parts stay. A blocking ``POST .../message``
        or ``summarize`` still waiting fails with :class:`httpx.RemoteProtocolError`,
        as a request whose server went away does.
        """
        state = self._state
        sessions = [*state.sessions.values(), *state.deleted.values()]
        self.drop_event_streams()
        await self._runner.vanish(sessions)
        for request_id in list(state.requests_pending):
            pending = state.forget_request(request_id)
            if pending is not None and not pending.future.done():
                pending.future.cancel()
        for session in sessions:
            session._run = None
            session._finishing = False
            if session.busy:
                state.set_status(session, IDLE, emit=False)
        state.deleted.clear()

    # ------------------------------------------------------------------ waiting & closing

    async def wait_until(
        self,
        predicate: Callable[[], bool],
        timeout: float = 5.0,
        *,
        description: str | None = None,
    ) -> None:
        """Wait until ``predicate()`` is true (re-checked on every event and request).

        Raises ``TimeoutError`` after ``timeout`` seconds; its message names the
        condition (``description``, else the predicate's name or a lambda's source) and
        shows the fake's state (:meth:`describe_state`)::

            await fake.wait_until(lambda: len(fake.tree(root)) == 3, timeout=0.1)
            # TimeoutError: condition lambda: len(fake.tree(root)) == 3 not met within 0.1s
            # the fake's state:
            #   sessions (2):
            #     ses_… busy
            #       ses_… busy, hanging
            #   pending requests: none
            #   last requests (3, oldest first):
            #     POST /session -> 200 ...
        """
        try:
            await self._bus.wait_until(predicate, timeout)
        except TimeoutError:
            what = description or describe_predicate(predicate)
            raise self._views.timed_out(f"condition {what} not met", timeout) from None

    async def wait_for_event(
        self,
        type: str,
        predicate: Callable[[JSON], bool] | None = None,
        *,
        timeout: float = 5.0,
        since: int | None = None,
        description: str | None = None,
    ) -> JSON:
        """Wait for an event of ``type`` (whose envelope passes ``predicate``); return it.

        Only events emitted after the call count, unless ``since`` (a previous
        :attr:`event_count`) asks to also search the kept history from that point.
        Raises ``TimeoutError`` after ``timeout`` seconds, naming ``type`` and the
        predicate (``description``, else its name or a lambda's source) and showing the
        fake's state (:meth:`describe_state`).
        """
        try:
            return await self._bus.wait_for_event(type, predicate, timeout=timeout, since=since)
        except TimeoutError:
            matching = ""
            if description is not None:
                matching = f" matching {description}"
            elif predicate is not None:
                matching = f" matching {describe_predicate(predicate)}"
            raise self._views.timed_out(f"no {type!r} event{matching}", timeout) from None

    async def wait_for_tool(
        self,
        name: str,
        *,
        status: str = "running",
        session_id: str | None = None,
        since: int = 0,
        timeout: float = 5.0,
    ) -> JSON:
        """Wait until a ``name`` tool part reaches ``status``; return that part (a copy).

        ``status`` is the wire's ``state.status``: ``pending``, ``running``,
        ``completed`` or ``error``. A part that reached it before the call counts (the
        kept history of :attr:`events`, oldest first; a part stored in that state if
        the history was trimmed): ``since`` (a previous :attr:`event_count`) counts only
        later ones, as for a second turn's tool. Any session's part, unless
        ``session_id``. Raises ``TimeoutError`` after ``timeout`` seconds::

            fake.script("work", [Tool("bash", {"command": "make"}, duration=float("inf"))])
            await oc.send_turn("t", "go [[script:work]]")
            part = await fake.wait_for_tool("bash")            # running now
            assert part["state"]["input"] == {"command": "make"}
            await oc.interrupt_turn("t")
            await fake.wait_for_tool("bash", status="completed")   # "User aborted the command"
        """
        return await self._views.wait_for_tool(name, status, session_id, since, timeout)

    async def wait_hanging(self, session_id: str, timeout: float = 5.0) -> None:
        """Return once the run of ``session_id`` waits for nothing but an abort: it is in a
        :class:`Hang` step or an endless tool (``Tool(..., duration=float("inf"))``).

        So a test stops it knowing it is mid-run. Only the session's own run counts (a
        parent waiting for its hanging ``task`` child does not hang itself). Raises
        ``KeyError`` for an unknown session, ``TimeoutError`` after ``timeout`` seconds::

            fake.script("child", [Text("working"), Hang()])
            fake.script("root", [Task("explore", "child")])
            root = (await oc.start_session("t")).session_id
            await oc.send_turn("t", "go [[script:root]]")
            [_, child] = await fake.wait_for_tree(root, sessions=2)
            await fake.wait_hanging(child)
            await oc.interrupt_turn("t")

        (:meth:`wait_for_tree` with ``hanging=True`` does both in one call.)
        """
        await self._views.wait_hanging(session_id, timeout)

    async def wait_for_tree(
        self,
        root_id: str | None = None,
        *,
        sessions: int,
        hanging: bool = False,
        timeout: float = 5.0,
    ) -> list[str]:
        """Wait until the tree of ``root_id`` holds exactly ``sessions`` sessions (and, with
        ``hanging``, its deepest one hangs as :meth:`wait_hanging` means it); return the
        tree as :meth:`tree` does: root first, breadth-first, so the deepest session (the
        newest at the greatest depth) is last.

        Without ``root_id``, any root session's tree counts (the oldest that matches).
        Raises ``KeyError`` for an unknown ``root_id``, ``TimeoutError`` after
        ``timeout`` seconds (its message shows the fake's sessions)::

            fake.script("leaf", [Hang()])
            fake.script("mid", [Task("explore", "leaf")])
            fake.script("root", [Task("explore", "mid")])
            await oc.send_turn("t", "go [[script:root]]")
            root, mid, leaf = await fake.wait_for_tree(root, sessions=3, hanging=True)
        """
        return await self._views.wait_for_tree(root_id, sessions, hanging, timeout)

    def describe_state(self) -> str:
        """The fake's state as a failed wait shows it, a few dozen lines at most: the
        session trees with each session's status (``hanging``, ``asking`` a pending
        request, prompts ``queued``), the pending permission and question requests, and
        the last requests received (method, path, status)."""
        return render_state(self._state, self.requests)

    def tree(self, root_id: str) -> list[str]:
        """``root_id`` and the ids of all its descendants, breadth-first (root first),
        children in creation order (``task`` children and API-created ones alike).
        Raises ``KeyError`` for an unknown session::

            assert fake.tree(root) == [root, child, grandchild]
            assert not any(fake.sessions[s].busy for s in fake.tree(root))
        """
        return self._views.tree(root_id)

    def pending_permissions(self, *, session_id: str | None = None) -> list[JSON]:
        """The open permission requests, as ``GET /permission`` lists them (copies of its
        objects: ``id``, ``sessionID``, ``permission``, ``patterns``, ``metadata``,
        ``always``, ``tool``), oldest first, of every directory; of ``session_id`` only if
        given. Like the real server, a request outlives an abort of its session::

            await fake.wait_until(lambda: bool(fake.pending_permissions()))
            [asked] = fake.pending_permissions(session_id=child)
            assert asked["permission"] == "bash" and asked["patterns"] == ["rm -rf build"]
        """
        return self._views.pending("permission", session_id)

    def pending_questions(self, *, session_id: str | None = None) -> list[JSON]:
        """The open question requests, as ``GET /question`` lists them (``id``,
        ``sessionID``, ``questions``, ``tool``); otherwise as :meth:`pending_permissions`::

            [asked] = fake.pending_questions()
            assert asked["questions"][0]["header"] == "Color"
        """
        return self._views.pending("question", session_id)

    async def aclose(self) -> None:
        """Stop everything: end event streams, cancel scripts, fail later requests.

        Idempotent; afterwards no task created by the fake is left running.
        """
        state = self._state
        if state.closed:
            return
        state.closed = True
        self._bus.end_streams(error=False)
        self._hooks.release_holds()
        self._runner.drop_all_queues()
        for req in state.requests_pending.values():
            if not req.future.done():
                req.future.cancel()
        state.requests_pending.clear()
        await self._runner.cancel_tasks()
        self._bus.fail_waiters()
        self._bus.notify()

    # ------------------------------------------------------------------ HTTP

    async def _handle(self, request: httpx.Request) -> httpx.Response:
        loop = asyncio.get_running_loop()
        method = request.method.upper()
        path = request.url.path
        is_stream = method == "GET" and path == "/event"
        session_id = None
        if path.startswith("/session/"):
            segment = path.split("/", 3)[2]
            if segment and segment != "status":
                session_id = segment
        # Read once here: the routes' own reads get the same (cached) bytes.
        content = await request.aread()
        record = RecordedRequest.of(request, content, session_id, loop.time())
        self.requests.append(record)
        if not is_stream:
            self.in_flight += 1
            if self.in_flight > self.max_in_flight:
                self.max_in_flight = self.in_flight
        self._bus.notify()
        try:
            if self._state.closed:
                raise httpx.ConnectError("fake OpenCode server is closed", request=request)
            response = await self._hooks.answer(request, record)
            if response is None:
                if self._state.closed:
                    raise httpx.ConnectError("fake OpenCode server is closed", request=request)
                if not is_stream:
                    delay = self.latency
                    if self.jitter > 0:
                        delay += self._latency_rng.uniform(0, self.jitter)
                    await asyncio.sleep(max(0.0, delay))
                response = await self._router.route(request, method, path)
            record.status = response.status_code
            return response
        finally:
            record.ended_at = loop.time()
            if not is_stream:
                self.in_flight -= 1
            self._bus.notify()
