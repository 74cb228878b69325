"""The ACP agent: ACP sessions are adapter threads, Cancel stops the whole tree.

One ACP session is one :class:`~adapter.OpenCodeAdapter` thread; its id is the
OpenCode root session's id (so ``session/load`` can resume it in another
process). Each session has one task that reads the thread's canonical events and
forwards them, translated by :class:`~adapter.acp._updates.UpdateMapper`, while a
prompt is open.

The prompt's contract with the client (ACP, "Cancellation"):

* ``session/cancel`` stops the whole tree (``interrupt_turn``, every descendant
  awaited), then the prompt answers ``cancelled``, every time: also when the turn
  finished on its own in the meantime, and when the stop failed (the client is
  then told the first failure in an ``agent_message_chunk``).
* What the turn produced reaches the client before the answer: the events already
  emitted (the agent waits until its reader has forwarded the turn's
  ``turn.aborted``), then what the partial result has that the client was not
  told (calls still shown running end, answer text not streamed).
* No ``session/update`` of the turn is sent after the answer: every update is
  sent under the session's lock after checking that the prompt is still open, and
  the prompt closes under that lock before it answers.

Permission and question requests of any session of the tree become
``session/request_permission`` (:mod:`adapter.acp._requests`); one that OpenCode
withdraws (``request.resolved`` without our answer, e.g. by the stop) has its
client call cancelled on our side, and a late answer is ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import traceback
import uuid
from dataclasses import dataclass, field
from typing import Any, cast

from acp import PROTOCOL_VERSION, RequestError
from acp.helpers import update_agent_message_text, update_available_commands, update_current_mode
from acp.interfaces import Client
from acp.schema import (
    AgentCapabilities,
    CloseSessionResponse,
    ConfigOptionUpdate,
    ForkSessionResponse,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    McpCapabilities,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    ResumeSessionResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionForkCapabilities,
    SessionListCapabilities,
    SessionResumeCapabilities,
    SetSessionConfigOptionResponse,
    SetSessionModeResponse,
    StopReason,
    TextContentBlock,
)

from adapter import (
    AnyEvent,
    Event,
    InvalidInputError,
    OpenCodeAdapter,
    OpenCodeError,
    PartialResult,
    PermissionPreset,
    PromptPart,
    RequestOpened,
    RequestResolved,
    RuntimeErrorEvent,
    SessionExited,
    StreamGap,
    TaskStarted,
    TreeStopError,
    TurnAborted,
    TurnCompleted,
    UserInputRequested,
    UserInputResolved,
    __version__,
)
from adapter._logging import get_logger

from ._choices import AGENT, DEFAULT, PERMISSION_MODE, Choices, choices_from
from ._content_blocks import ContentBlock, check_cwd, prompt_parts
from ._extensions import EXTENSIONS_META, STOP_SUBAGENT, invalid, parse_stop_target, stop_subagent
from ._mcp_servers import add_mcp_servers
from ._outbound import WellFormedClient
from ._requests import (
    PERMISSION_OPTIONS,
    answer_for,
    decision_for,
    permission_tool_call,
    question_options,
    question_tool_call,
    unanswerable,
)
from ._sessions import session_page
from ._updates import SessionUpdate, UpdateMapper, history_updates

__all__ = ["OpenCodeTreeAgent"]

_log = get_logger("adapter.acp")


#: How long a cancel waits for the reader to forward the stopped turn's last events.
DRAIN_TIMEOUT = 5.0
#: OpenCode's error names that ACP has a stop reason for.
_STOP_REASONS: dict[str, StopReason] = {
    "MessageOutputLengthError": "max_tokens",
    "ContentFilterError": "refusal",
}


def _error(message: str, code: int = -32603, **data: Any) -> RequestError:
    return RequestError(code, message, data or None)


@dataclass(slots=True)
class _Prompt:
    """One ``session/prompt`` in flight."""

    turn_id: str | None = None
    failure: str | None = None  # a failed turn's message, until its error name comes
    open: bool = True
    cancelling: bool = False
    sent: asyncio.Event = field(default_factory=asyncio.Event)  # send_turn returned/failed
    ended: asyncio.Event = field(default_factory=asyncio.Event)  # the reader saw the turn end
    stopped: asyncio.Event = field(default_factory=asyncio.Event)  # the cancel is done
    outcome: asyncio.Future[StopReason] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


@dataclass(slots=True)
class _Ask:
    """A ``request_permission`` we sent for an OpenCode request."""

    task: asyncio.Task[None]
    waiting_client: bool = True


@dataclass(slots=True)
class _Session:
    session_id: str
    thread_id: str
    cwd: str
    mapper: UpdateMapper
    choices: Choices
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    prompt: _Prompt | None = None
    reader: asyncio.Task[None] | None = None
    asks: dict[str, _Ask] = field(default_factory=dict)
    turn_ends: dict[str, TurnCompleted | TurnAborted] = field(default_factory=dict)
    finished: set[str] = field(default_factory=set)  # turns that ended
    error_names: dict[str, str | None] = field(default_factory=dict)  # before send returned
    exited: str | None = None  # why the thread ended, once it did


class OpenCodeTreeAgent:
    """An ACP agent over one :class:`~adapter.OpenCodeAdapter` (entered by the caller)."""

    def __init__(self, adapter: OpenCodeAdapter) -> None:
        self._adapter = adapter
        self._conn: WellFormedClient | None = None
        self._sessions: dict[str, _Session] = {}
        self._background: set[asyncio.Task[None]] = set()

    def on_connect(self, conn: Client) -> None:
        # Every update and request goes out through it: server text made well formed.
        self._conn = WellFormedClient(conn)

    @property
    def _client(self) -> WellFormedClient:
        if self._conn is None:
            raise _error("the agent is not connected")
        return self._conn

    async def aclose(self) -> None:
        """Stop reading events and asking; the adapter's owner stops the sessions."""
        for session in self._sessions.values():
            for ask in session.asks.values():
                ask.task.cancel()
            if session.reader is not None:
                session.reader.cancel()
        tasks = [s.reader for s in self._sessions.values() if s.reader is not None]
        tasks += [a.task for s in self._sessions.values() for a in s.asks.values()]
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- initialize and sessions -----------------------------------------------------

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: Any = None,
        client_info: Any = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(
                    image=True, audio=False, embedded_context=True
                ),
                session_capabilities=SessionCapabilities(
                    resume=SessionResumeCapabilities(),
                    list=SessionListCapabilities(),
                    close=SessionCloseCapabilities(),
                    fork=SessionForkCapabilities(),
                ),
                mcp_capabilities=McpCapabilities(http=True, sse=True),
            ),
            agent_info=Implementation(
                name="opencode-tree", title="OpenCode (whole-tree stop)", version=__version__
            ),
            field_meta=EXTENSIONS_META,
        )

    async def new_session(
        self,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **kwargs: Any,
    ) -> NewSessionResponse:
        check_cwd(cwd)
        thread_id = f"acp-{uuid.uuid4().hex[:12]}"
        try:
            choices = await self._choices(cwd)
            await add_mcp_servers(self._adapter, mcp_servers or (), cwd)
            info = await self._adapter.start_session(thread_id, directory=cwd)
        except OpenCodeError as exc:
            raise _error(f"could not start an OpenCode session: {exc}") from exc
        self._announce_after_answer(self._open(info.session_id, thread_id, cwd, choices))
        return NewSessionResponse(
            session_id=info.session_id,
            config_options=choices.config_options(),  # type: ignore[arg-type]
            modes=choices.modes(),
        )

    async def _choices(self, cwd: str) -> Choices:
        return choices_from(await self._adapter.inventory(directory=cwd))

    async def _announce_commands(self, session: _Session) -> None:
        """``available_commands_update``, sent once the session's answer is out (the
        transport writes in order, and this task starts after the answer's write)."""
        commands = session.choices.available_commands()
        with contextlib.suppress(Exception):
            await self._client.session_update(
                session_id=session.session_id, update=update_available_commands(commands)
            )

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: list[Any] | None = None,
        additional_directories: list[str] | None = None,
        **kwargs: Any,
    ) -> LoadSessionResponse:
        """Bind the session and replay its conversation before answering (ACP asks for the
        whole history as updates on load)."""
        session = await self._bind(cwd, session_id)
        await add_mcp_servers(self._adapter, mcp_servers or (), cwd)
        try:
            history = await self._adapter.read_thread(session.thread_id)
        except OpenCodeError as exc:
            raise _error(f"could not read session {session_id}: {exc}") from exc
        for update in history_updates(history.messages):
            await self._client.session_update(session_id=session_id, update=update)
        self._announce_after_answer(session)
        return LoadSessionResponse(
            config_options=session.choices.config_options(),  # type: ignore[arg-type]
            modes=session.choices.modes(),
        )

    async def resume_session(
        self,
        session_id: str,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **kwargs: Any,
    ) -> ResumeSessionResponse:
        """Bind the session without replaying it (the client kept the conversation)."""
        session = await self._bind(cwd, session_id)
        await add_mcp_servers(self._adapter, mcp_servers or (), cwd)
        self._announce_after_answer(session)
        return ResumeSessionResponse(
            config_options=session.choices.config_options(),  # type: ignore[arg-type]
            modes=session.choices.modes(),
        )

    async def _bind(self, cwd: str, session_id: str) -> _Session:
        check_cwd(cwd)
        if not session_id.startswith("ses"):
            raise _error(
                f"not an OpenCode session id: {session_id!r:.80}", -32602, sessionId=session_id
            )
        session = self._sessions.get(session_id)
        if session is not None and session.prompt is not None:
            raise _error(f"session {session_id} has a prompt running", -32600)
        if session is not None and session.exited is not None:
            del self._sessions[session_id]  # its thread ended: bind the session again
            session = None
        if session is not None:
            return session
        thread_id = f"acp-{session_id}-{uuid.uuid4().hex[:6]}"
        resume = {"schema": 1, "session_id": session_id}
        try:
            choices = await self._choices(cwd)
            info = await self._adapter.start_session(thread_id, directory=cwd, resume=resume)
        except OpenCodeError as exc:
            raise _error(f"could not load session {session_id}: {exc}") from exc
        if info.session_id != session_id:
            # The cursor named a session the server no longer has: a fresh one was made.
            with contextlib.suppress(OpenCodeError):
                await self._adapter.stop_session(thread_id)
            raise RequestError(-32002, f"session {session_id} not found", {"sessionId": session_id})
        return self._open(session_id, thread_id, cwd, choices)

    def _open(self, session_id: str, thread_id: str, cwd: str, choices: Choices) -> _Session:
        session = _Session(session_id, thread_id, cwd, UpdateMapper(session_id), choices)
        # Subscribed now, synchronously: no event of the thread is missed.
        stream = self._adapter.events(thread_id)
        session.reader = asyncio.create_task(
            self._read(session, stream), name=f"acp-read:{session_id}"
        )
        self._sessions[session_id] = session
        return session

    def _announce_after_answer(self, session: _Session) -> None:
        announce = asyncio.create_task(self._announce_commands(session))
        self._background.add(announce)
        announce.add_done_callback(self._background.discard)

    # -- list, close, fork ---------------------------------------------------------------

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> ListSessionsResponse:
        """The server's root sessions of ``cwd`` (default: the agent's directory), newest
        first, paged (:mod:`adapter.acp._sessions`)."""
        if cwd is not None:
            check_cwd(cwd)
        try:
            found = await self._adapter.list_root_sessions(directory=cwd)
        except OpenCodeError as exc:
            raise _error(f"could not list the sessions: {exc}") from exc
        return session_page(found, cwd or "", cursor)

    async def close_session(self, session_id: str, **kwargs: Any) -> CloseSessionResponse:
        """Stop the session's whole tree (a running prompt answers ``cancelled``) and
        forget it; ``session/load`` binds it again."""
        session = self._session(session_id)
        if session.prompt is not None:
            await self.cancel(session_id)
        self._sessions.pop(session_id, None)
        if session.reader is not None:
            session.reader.cancel()
        try:
            await self._adapter.stop_session(session.thread_id)
        except OpenCodeError as exc:
            raise _error(f"could not stop session {session_id}: {exc}") from exc
        return CloseSessionResponse()

    async def fork_session(
        self,
        session_id: str,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **kwargs: Any,
    ) -> ForkSessionResponse:
        """A new session on OpenCode's fork of this one (every turn), in the source's
        directory, with its choices; the source goes on."""
        check_cwd(cwd)
        source = self._session(session_id)
        thread_id = f"acp-{uuid.uuid4().hex[:12]}"
        try:
            info = await self._adapter.fork_thread(source.thread_id, thread_id)
        except OpenCodeError as exc:
            raise _error(f"could not fork session {session_id}: {exc}") from exc
        choices = dataclasses.replace(source.choices)
        session = self._open(info.session_id, thread_id, source.cwd, choices)
        self._announce_after_answer(session)
        return ForkSessionResponse(
            session_id=info.session_id,
            config_options=choices.config_options(),  # type: ignore[arg-type]
            modes=choices.modes(),
        )

    # -- modes and config options ------------------------------------------------------

    async def set_session_mode(
        self, session_id: str, mode_id: str, **kwargs: Any
    ) -> SetSessionModeResponse:
        """A mode is a primary agent: the agent of the session's next prompts."""
        session = self._session(session_id)
        session.choices.set(AGENT, session.choices.check(AGENT, mode_id))
        await self._client.session_update(
            session_id=session_id,
            update=ConfigOptionUpdate(
                session_update="config_option_update",
                config_options=session.choices.config_options(),  # type: ignore[arg-type]
            ),
        )
        return SetSessionModeResponse()

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **kwargs: Any
    ) -> SetSessionConfigOptionResponse:
        session = self._session(session_id)
        chosen = session.choices.check(config_id, value)
        if config_id == PERMISSION_MODE and chosen != DEFAULT:
            try:
                await self._adapter.set_permissions(
                    session.thread_id, cast(PermissionPreset, chosen)
                )
            except OpenCodeError as exc:
                raise _error(f"could not set the permission mode: {exc}") from exc
        session.choices.set(config_id, chosen)
        if config_id == AGENT:
            await self._client.session_update(
                session_id=session_id, update=update_current_mode(chosen)
            )
        return SetSessionConfigOptionResponse(
            config_options=session.choices.config_options()  # type: ignore[arg-type]
        )

    def _session(self, session_id: str) -> _Session:
        session = self._sessions.get(session_id)
        if session is None:
            raise RequestError(
                -32602,
                f"unknown session {session_id!r:.80}: create it with session/new or session/load",
                {"sessionId": session_id},
            )
        return session

    # -- prompt ------------------------------------------------------------------------

    async def prompt(
        self, prompt: list[ContentBlock], session_id: str, **kwargs: Any
    ) -> PromptResponse:
        session = self._session(session_id)
        parts = prompt_parts(prompt)
        if session.exited is not None:
            raise _error(f"session {session_id} has ended: {session.exited}")
        if session.prompt is not None:
            # ACP leaves concurrent prompts unspecified; OpenCode would fold the second
            # into the running turn, which the client could not tell apart.
            raise _error(
                f"session {session_id} already has a prompt running: "
                "wait for its answer or send session/cancel",
                -32600,
            )
        current = session.prompt = _Prompt()
        session.mapper.new_turn()
        try:
            try:
                start = await self._start_turn(session, prompt, parts)
            except InvalidInputError as exc:
                raise _error(str(exc), -32602) from exc
            except OpenCodeError as exc:
                raise _error(f"OpenCode refused the prompt: {exc}") from exc
            finally:
                current.sent.set()
            current.turn_id = start.turn_id
            early = session.turn_ends.pop(start.turn_id, None)
            if early is not None:
                self._turn_ended(current, early)
                if start.turn_id in session.error_names:
                    self._turn_failed(current, session.error_names.pop(start.turn_id))
            try:
                reason = await current.outcome
            except RequestError:
                if not current.cancelling:
                    raise
                reason = "cancelled"
            if current.cancelling:
                await current.stopped.wait()
                reason = "cancelled"
            return PromptResponse(stop_reason=reason)
        finally:
            if current.cancelling:
                await current.stopped.wait()
            async with session.lock:
                current.open = False
            session.prompt = None

    async def _start_turn(
        self, session: _Session, blocks: list[ContentBlock], parts: list[PromptPart | str]
    ) -> Any:
        """A prompt that is ``/name args`` of a known command runs it; else the prompt is
        sent; with the session's chosen model and agent either way."""
        choices = session.choices
        text = (
            blocks[0].text if len(blocks) == 1 and isinstance(blocks[0], TextContentBlock) else ""
        )
        command = choices.command_of(text)
        if command is not None:
            name, arguments = command
            return await self._adapter.run_command(
                session.thread_id,
                name,
                arguments,
                model=choices.prompt_model,
                agent=choices.prompt_agent,
            )
        return await self._adapter.send_turn(
            session.thread_id, parts, model=choices.prompt_model, agent=choices.prompt_agent
        )

    def _turn_ended(self, prompt: _Prompt, event: TurnCompleted | TurnAborted) -> None:
        prompt.ended.set()
        if prompt.outcome.done():
            return
        if isinstance(event, TurnAborted):
            prompt.outcome.set_result("cancelled")
        elif event.state == "failed":
            # The error's name comes with the runtime.error right behind: it decides.
            prompt.failure = event.error or "unknown error"
        else:
            prompt.outcome.set_result("end_turn")

    def _turn_failed(self, prompt: _Prompt, name: str | None) -> None:
        """A failed turn: ``max_tokens`` / ``refusal`` when OpenCode's error says so, else
        a JSON-RPC error with OpenCode's message."""
        if prompt.outcome.done() or prompt.failure is None:
            return
        reason = _STOP_REASONS.get(name or "")
        if reason is not None:
            prompt.outcome.set_result(reason)
        else:
            message = f"the turn failed: {prompt.failure}"
            prompt.outcome.set_exception(_error(message, errorName=name))

    # -- cancel ------------------------------------------------------------------------

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self._sessions.get(session_id)
        if session is None:
            _log.warning("acp.cancel_unknown_session", session_id=session_id)
            return
        current = session.prompt
        if current is None or current.cancelling:
            return
        current.cancelling = True
        try:
            await self._stop(session, current)
        finally:
            current.stopped.set()
            if not current.outcome.done():
                current.outcome.set_result("cancelled")

    async def _stop(self, session: _Session, current: _Prompt) -> None:
        await current.sent.wait()
        if current.turn_id is None:
            return  # the prompt was refused: nothing runs
        partial: PartialResult | None = None
        failure: str | None = None
        try:
            result = await self._adapter.interrupt_turn(session.thread_id)
            partial = result.partial
        except TreeStopError as exc:
            first = exc.first_failure
            failure = f"{first.session_id}: {first.error}" if first is not None else str(exc)
        except OpenCodeError as exc:
            failure = str(exc)
        if failure is None:
            # Everything the stopped turn emitted is forwarded before the answer.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(DRAIN_TIMEOUT):
                    await current.ended.wait()
        updates: list[SessionUpdate] = []
        if partial is not None:
            updates = session.mapper.after_stop(partial)
        if failure is not None:
            _log.warning("acp.stop_failed", session_id=session.session_id, error=failure)
            updates.append(update_agent_message_text(f"\n\n[Stop failed: {failure}]\n"))
        for update in updates:
            await self._send(session, current, update)

    # -- extensions ----------------------------------------------------------------------

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == STOP_SUBAGENT[1:]:
            return await self._stop_subagent(params)
        raise RequestError.method_not_found(f"_{method}")

    async def _stop_subagent(self, params: dict[str, Any]) -> dict[str, Any]:
        target = parse_stop_target(params)
        session = self._sessions.get(target.session_id)
        if session is None:
            raise invalid("unknown session", sessionId=target.session_id)
        return await stop_subagent(self._adapter, session.thread_id, session.mapper, target)

    # -- forwarding ----------------------------------------------------------------------

    async def _send(self, session: _Session, current: _Prompt, update: SessionUpdate) -> None:
        async with session.lock:
            if not current.open or session.prompt is not current:
                return
            await self._client.session_update(session_id=session.session_id, update=update)

    async def _read(self, session: _Session, stream: Any) -> None:
        last: str | None = None
        while True:
            gap: StreamGap | None = None
            async for event in stream:
                if isinstance(event, StreamGap):
                    gap = event
                    continue
                last = event.event_id
                try:
                    await self._on_event(session, event)
                except Exception as exc:  # one event that failed must not end the forwarding
                    # The formatted traceback, not exc_info: structlog's default console
                    # renderer would print the frames' locals (see adapter.web._errors).
                    _log.error(
                        "acp.forward_failed",
                        session_id=session.session_id,
                        error_type=type(exc).__name__,
                        traceback="".join(traceback.format_exception(exc)),
                    )
            if gap is None or gap.reason != "overflow":
                break
            stream = self._adapter.events(session.thread_id, after=gap.last_event_id or last)
        self._exited(session, "the adapter closed")

    async def _on_event(self, session: _Session, event: Event) -> None:
        current = session.prompt
        if isinstance(event, SessionExited):
            self._exited(session, event.reason or "the session ended")
            return
        if isinstance(event, TurnCompleted | TurnAborted) and event.turn_id is not None:
            session.finished.add(event.turn_id)
            if current is not None and current.turn_id == event.turn_id:
                self._turn_ended(current, event)
            elif current is not None and current.turn_id is None:
                session.turn_ends[event.turn_id] = event  # before send_turn returned
            return
        if isinstance(event, RuntimeErrorEvent) and event.turn_id is not None:
            if current is not None and current.turn_id == event.turn_id:
                self._turn_failed(current, event.error_name)
            elif current is not None and current.turn_id is None:
                session.error_names[event.turn_id] = event.error_name
            return
        if isinstance(event, TaskStarted):
            session.mapper.note_task(event)  # also outside a prompt: a background child
        if isinstance(event, RequestResolved | UserInputResolved):
            ask = session.asks.pop(event.request_id, None)
            if ask is not None and ask.waiting_client:
                ask.task.cancel()  # withdrawn: the client's late answer is ignored
            return
        if current is None or not current.open:
            return
        if event.turn_id is not None and (
            event.turn_id in session.finished
            or (current.turn_id is not None and event.turn_id != current.turn_id)
        ):
            return  # a previous turn's late event
        if isinstance(event, RequestOpened | UserInputRequested):
            self._ask(session, current, event)
            return
        for update in session.mapper.updates(_as_any(event)):
            await self._send(session, current, update)

    def _exited(self, session: _Session, reason: str) -> None:
        if session.exited is None:
            session.exited = reason
        current = session.prompt
        if current is not None and not current.outcome.done():
            current.outcome.set_exception(
                _error(f"the OpenCode session ended during the prompt: {reason}")
            )
            current.ended.set()

    # -- requests ------------------------------------------------------------------------

    def _ask(
        self, session: _Session, current: _Prompt, event: RequestOpened | UserInputRequested
    ) -> None:
        if event.request_id in session.asks:
            return
        coro = (
            self._ask_permission(session, event)
            if isinstance(event, RequestOpened)
            else self._ask_questions(session, current, event)
        )
        task = asyncio.create_task(coro, name=f"acp-ask:{event.request_id}")
        session.asks[event.request_id] = _Ask(task)
        task.add_done_callback(lambda _t: _retrieve(_t))

    async def _ask_permission(self, session: _Session, event: RequestOpened) -> None:
        response = await self._client.request_permission(
            session_id=session.session_id,
            tool_call=permission_tool_call(session.mapper, event),
            options=list(PERMISSION_OPTIONS),
        )
        self._answered(session, event.request_id)
        decision = decision_for(response)
        if decision is None:
            return  # cancelled by the client: its session/cancel stops the tree
        try:
            await self._adapter.respond_to_request(session.thread_id, event.request_id, decision)
        except OpenCodeError as exc:
            _log.warning("acp.reply_failed", request_id=event.request_id, error=str(exc))

    async def _ask_questions(
        self, session: _Session, current: _Prompt, event: UserInputRequested
    ) -> None:
        answers: list[str] = []
        for question in event.questions:
            options = question_options(question)
            if options is None:
                self._answered(session, event.request_id)
                await self._send(
                    session, current, update_agent_message_text(unanswerable(question))
                )
                await self._reject(session, event.request_id)
                return
            response = await self._client.request_permission(
                session_id=session.session_id,
                tool_call=question_tool_call(session.mapper, event, question),
                options=options,
            )
            answer = answer_for(response, options)
            if answer is None:
                self._answered(session, event.request_id)
                if decision_for(response) is not None:  # Dismiss (not a client cancel)
                    await self._reject(session, event.request_id)
                return
            answers.append(answer)
        self._answered(session, event.request_id)
        try:
            await self._adapter.respond_to_user_input(session.thread_id, event.request_id, answers)
        except OpenCodeError as exc:
            _log.warning("acp.answer_failed", request_id=event.request_id, error=str(exc))

    def _answered(self, session: _Session, request_id: str) -> None:
        ask = session.asks.get(request_id)
        if ask is not None:
            ask.waiting_client = False

    async def _reject(self, session: _Session, request_id: str) -> None:
        try:
            await self._adapter.reject_user_input(session.thread_id, request_id)
        except OpenCodeError as exc:
            _log.warning("acp.reject_failed", request_id=request_id, error=str(exc))


# -- helpers ----------------------------------------------------------------------------


def _as_any(event: Event) -> AnyEvent:
    return event  # type: ignore[return-value]


def _retrieve(task: asyncio.Task[None]) -> None:
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        _log.warning("acp.ask_failed", error=repr(exc))
