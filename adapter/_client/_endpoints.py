"""``OpenCodeClient``: typed access to one OpenCode server, one method per endpoint.

Why its own module: this is the client's surface, the endpoints grouped by what
they touch (the server, sessions, messages and prompts, permission and question
requests, the event stream). Each says what to ask (a :class:`~._calls.Call`) and
how to read the answer; how a call is made, bounded and retried is
:mod:`adapter._client._calls`, and ``GET /event`` is :mod:`adapter._client._sse_connection`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Literal, TypeVar

import httpx

from .._base._closing import AsyncClosing
from .._base._ids import path_segment, validate_id
from .._exceptions import InvalidInputError, ProtocolError
from ._base_url import checked_base_url, is_loopback
from ._calls import Call, Caller
from ._context_limits import ContextLimits
from ._inventory import (
    AgentInfo,
    CommandInfo,
    ModelInfo,
    ServerInventory,
    SkillInfo,
    parse_agents,
    parse_commands,
    parse_mcp,
    parse_mcp_servers,
    parse_models,
    parse_skills,
    read_inventory,
)
from ._mcp import McpServerStatus, checked_mcp_body, mcp_deadline, parse_added
from ._responses import Health, Message, PendingRequest, Session, SessionStatus
from ._retry import RetryPolicy
from ._sse_connection import open_event_stream
from ._sse_payloads import DEFAULT_MAX_EVENT_BYTES, OnSkipped, RawEvent

__all__ = ["OpenCodeClient", "PermissionReply", "RawEvent"]

PermissionReply = Literal["once", "always", "reject"]

DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024

T = TypeVar("T")


class OpenCodeClient(AsyncClosing):
    """An async client for one OpenCode server.

    Use it as an async context manager; it owns one pooled ``httpx.AsyncClient``
    with keep-alive. Idempotent calls (``children``, ``status``,
    ``get_session``, ``messages``, ``message``, ``abort``) are retried on
    transient faults; ``prompt_async`` and other writes never are.

    ``transport`` is the test seam: pass ``FakeOpenCodeServer().transport`` (or
    any ``httpx.AsyncBaseTransport``) to talk to something other than a socket.
    """

    def __init__(
        self,
        base_url: str,
        *,
        password: str | None = None,
        username: str = "opencode",
        directory: str | None = None,
        timeout: float = 10.0,
        retry: RetryPolicy | None = None,
        max_connections: int = 64,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        url = checked_base_url(base_url)  # never a credential, never echoed
        if timeout <= 0:
            raise InvalidInputError("timeout must be positive")
        if max_connections < 1:
            raise InvalidInputError("max_connections must be at least 1")
        self.base_url = str(url).rstrip("/")
        self.username = username
        self.directory = directory
        self.timeout = timeout
        self.retry = retry or RetryPolicy()
        self.max_response_bytes = max_response_bytes
        self._has_password = password is not None
        headers: dict[str, str] = {"accept": "application/json"}
        params: dict[str, str] = {}
        if directory is not None:
            if directory.isascii():
                headers["x-opencode-directory"] = directory
            else:
                params["directory"] = directory
        self._params = params
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            auth=httpx.BasicAuth(username, password) if password is not None else None,
            headers=headers,
            timeout=httpx.Timeout(timeout),
            limits=httpx.Limits(
                max_connections=max_connections,
                max_keepalive_connections=max_connections,
                keepalive_expiry=30.0,
            ),
            transport=transport,
            # A proxy from the environment would receive the Basic credentials of a
            # server on this very machine: loopback servers are always reached directly.
            trust_env=not is_loopback(url.host.strip("[]")),
        )
        self._send = Caller(
            self._http,
            params=params,
            timeout=timeout,
            retry=self.retry,
            max_response_bytes=max_response_bytes,
        )
        #: Each model's ``limit.context``, read once for the turns' context meter.
        self.context_limits = ContextLimits(self.models, timeout)

    def __repr__(self) -> str:
        auth = "basic" if self._has_password else "none"
        return (
            f"OpenCodeClient(base_url={self.base_url!r}, auth={auth}, directory={self.directory!r})"
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    @property
    def is_closed(self) -> bool:
        return self._http.is_closed

    # -- the server ------------------------------------------------------------

    async def health(self) -> Health:
        return await self._send(Call("health", "GET", "/global/health", parse=Health.parse))

    async def status(self) -> dict[str, SessionStatus]:
        """Every non-idle session of the directory; a missing id means idle."""
        return await self._send(
            Call("status", "GET", "/session/status", idempotent=True, parse=SessionStatus.parse_map)
        )

    # -- what the server offers (see :mod:`._inventory`) ------------------------

    async def models(self) -> tuple[ModelInfo, ...]:
        return await self._send(
            Call("models", "GET", "/config/providers", parse_models, idempotent=True)
        )

    async def agents(self) -> tuple[AgentInfo, ...]:
        return await self._send(Call("agents", "GET", "/agent", parse_agents, idempotent=True))

    async def commands(self) -> tuple[CommandInfo, ...]:
        return await self._send(
            Call("commands", "GET", "/command", parse_commands, idempotent=True)
        )

    async def skills(self) -> tuple[SkillInfo, ...]:
        return await self._send(Call("skills", "GET", "/skill", parse_skills, idempotent=True))

    async def mcp_status(self) -> Mapping[str, str]:
        return await self._send(Call("mcp_status", "GET", "/mcp", parse_mcp, idempotent=True))

    async def mcp_servers(self) -> tuple[McpServerStatus, ...]:
        """Each MCP server's status and error text (``GET /mcp``)."""
        return await self._send(
            Call("mcp_status", "GET", "/mcp", parse_mcp_servers, idempotent=True)
        )

    async def inventory(self) -> ServerInventory:
        """Every part read at once, each bounded by the request timeout (retries
        included); a failed part is named in ``errors``, the others are kept."""

        async def version() -> str | None:
            return (await self.health()).version

        reads = {
            "models": self.models,
            "agents": self.agents,
            "commands": self.commands,
            "skills": self.skills,
            "mcp": self.mcp_servers,
            "version": version,
        }
        return await read_inventory(reads, self.timeout)

    async def add_mcp(self, name: str, config: Mapping[str, Any]) -> McpServerStatus:
        """``POST /mcp {name, config}`` (checked first: :mod:`adapter._client._mcp`): the
        new server's status once OpenCode tried to start it, which takes up to the
        config's ``timeout`` (30 s without one, measured); the call waits that long plus
        the request timeout. Never retried: an add starts a process."""
        body = checked_mcp_body(name, config)
        deadline = mcp_deadline(body["config"], self.timeout)
        call = Call("add_mcp", "POST", "/mcp", parse_added(name), json_body=body, deadline=deadline)
        return await self._send(call)

    # -- sessions --------------------------------------------------------------

    async def create_session(
        self,
        *,
        title: str | None = None,
        parent_id: str | None = None,
        permission: Sequence[Mapping[str, str]] | None = None,
    ) -> Session:
        body: dict[str, Any] = {}
        if title is not None:
            body["title"] = title
        if parent_id is not None:
            body["parentID"] = self._caller_id("ses", parent_id)
        body |= {"permission": [dict(r) for r in permission]} if permission is not None else {}
        return await self._send(
            Call("create_session", "POST", "/session", json_body=body, parse=Session.parse)
        )

    async def add_permission_rules(
        self, session_id: str, rules: Sequence[Mapping[str, str]]
    ) -> None:
        """``PATCH /session/{id}``: OpenCode 1.18.34 *appends* the rules (measured)."""
        body = {"permission": [dict(rule) for rule in rules]}
        await self._send(
            self._session_call(
                "update_session", "PATCH", session_id, "", json_body=body, parse=_ignore
            )
        )

    async def get_session(self, session_id: str) -> Session:
        return await self._send(
            self._session_call(
                "get_session", "GET", session_id, "", idempotent=True, parse=Session.parse
            )
        )

    async def fork_session(self, session_id: str, *, before: str | None = None) -> Session:
        """``POST /session/{id}/fork {messageID?}``: a new root session holding a copy of
        every message, or of those stored before message ``before``.

        Measured on 1.18.34: the fork lives in the *original's* directory whatever
        directory the request names (see :meth:`move_session`), has no ``parentID``, is
        titled ``"<title> (fork #1)"`` (``#2`` for a fork of that fork) and carries none
        of the original's permission rules; ``messageID`` is excluded with everything
        after it, and one the session does not hold forks every message. Never
        retried: a retry could fork twice."""
        body = {} if before is None else {"messageID": self._caller_id("msg", before)}
        return await self._send(
            self._session_call(
                "fork_session", "POST", session_id, "/fork", json_body=body, parse=Session.parse
            )
        )

    async def move_session(self, session_id: str, directory: str) -> None:
        """Move a session to ``directory``, leaving the files alone (``moveChanges: false``).

        OpenCode 1.18.34's ``POST /experimental/control-plane/move-session`` (measured):
        204 and no event; the session's directory becomes ``directory`` as given (not
        normalised), and its later runs and events are in it. A directory of another
        project (another git repository) is a 400 ``MoveSessionError``, as is an
        unknown session."""
        body = {
            "sessionID": self._caller_id("ses", session_id),
            "destination": {"directory": directory},
            "moveChanges": False,
        }
        path = "/experimental/control-plane/move-session"
        await self._send(
            Call("move_session", "POST", path, session_id=session_id, json_body=body, parse=_ignore)
        )

    async def delete_session(self, session_id: str) -> None:
        """``DELETE /session/{id}`` (with its children; measured: ``200 true``)."""
        await self._send(
            self._session_call(
                "delete_session", "DELETE", session_id, "", idempotent=True, parse=_ignore
            )
        )

    async def children(self, session_id: str) -> list[Session]:
        """Direct children of a session, oldest first.

        OpenCode 1.18.34 lists them in creation order; they are sorted by
        ``time.created`` again (stably, so ties keep the server's order) in case
        another release does not.
        """

        bad: list[str] = []

        def parse(data: object) -> list[Session]:
            return sorted(_sessions(data, "children", bad), key=lambda s: s.created)

        sessions = await self._send(
            self._session_call(
                "children", "GET", session_id, "/children", idempotent=True, parse=parse
            )
        )
        if bad:
            raise ProtocolError(
                "children",
                f"{len(bad)} invalid child entr{'y' if len(bad) == 1 else 'ies'} "
                f"for {session_id}: {bad[0]}",
                partial=sessions,
            )
        return sessions

    async def root_sessions(self, directory: str | None) -> list[Session]:
        """``GET /session?directory=&roots=true``: the root sessions of ``directory`` (of
        every directory without one),
        most recently updated first (measured on 1.18.34); an entry that does not parse
        is left out (a listing for people to pick from, not a tree to stop)."""

        def parse(data: object) -> list[Session]:
            return [s for s in _sessions(data, "the session list") if s.parent_id is None]

        params = {"roots": "true"} | ({"directory": directory} if directory else {})
        call = Call("list_sessions", "GET", "/session", parse, params=params, idempotent=True)
        return await self._send(call)

    async def abort(self, session_id: str) -> bool:
        """Abort a session's run. The server answers ``true`` even for unknown ids."""
        return await self._send(
            self._session_call(
                "abort", "POST", session_id, "/abort", idempotent=True, parse=_parse_bool
            )
        )

    async def revert(
        self, session_id: str, message_id: str, *, part_id: str | None = None
    ) -> Session:
        body: dict[str, Any] = {"messageID": self._caller_id("msg", message_id)}
        if part_id is not None:
            body["partID"] = self._caller_id("prt", part_id)
        return await self._send(
            self._session_call(
                "revert", "POST", session_id, "/revert", json_body=body, parse=Session.parse
            )
        )

    # -- messages and prompts --------------------------------------------------

    async def messages(self, session_id: str, *, limit: int | None = None) -> list[Message]:

        def parse(data: object) -> list[Message]:
            if not isinstance(data, list):
                raise ValueError("messages is not a list")
            return [Message.parse(item) for item in data]

        return await self._send(
            self._session_call(
                "messages",
                "GET",
                session_id,
                "/message",
                params={"limit": str(limit)} if limit is not None else None,
                idempotent=True,
                parse=parse,
            )
        )

    async def message(self, session_id: str, message_id: str) -> Message:
        mseg = self._segment("msg", message_id)
        return await self._send(
            self._session_call(
                "message",
                "GET",
                session_id,
                f"/message/{mseg}",
                idempotent=True,
                parse=Message.parse,
            )
        )

    async def prompt_async(
        self,
        session_id: str,
        parts: str | Sequence[Mapping[str, Any]],
        *,
        message_id: str | None = None,
        model: tuple[str, str] | None = None,
        agent: str | None = None,
        variant: str | None = None,
        system: str | None = None,
        tools: Mapping[str, bool] | None = None,
    ) -> None:
        """Queue a prompt; the server answers 204 and reports failures as events.

        ``parts`` is plain text or a list of OpenCode part inputs. ``model`` is
        ``(provider_id, model_id)``. Never retried: a retry could run it twice.
        """
        body: dict[str, Any] = {
            "parts": [{"type": "text", "text": parts}] if isinstance(parts, str) else list(parts)
        }
        if message_id is not None:
            body["messageID"] = self._caller_id("msg", message_id)
        if model is not None:
            body["model"] = {"providerID": model[0], "modelID": model[1]}
        if agent is not None:
            body["agent"] = agent
        if variant is not None:
            body["variant"] = variant
        body |= {k: v for k, v in (("system", system), ("tools", tools)) if v is not None}
        await self._send(
            self._session_call(
                "prompt_async", "POST", session_id, "/prompt_async", json_body=body, parse=_ignore
            )
        )

    async def command(
        self,
        session_id: str,
        name: str,
        arguments: str = "",
        *,
        message_id: str | None = None,
        model: tuple[str, str] | None = None,
        agent: str | None = None,
        deadline: float,
    ) -> Message:
        """Run the slash command ``name`` (``POST /session/{id}/command``) and return the
        assistant message that ended its run.

        The server answers only once the run has ended (measured on 1.18.34, and on
        1.14.48 to 1.18.3: an abort ends it early, the message then carrying
        ``MessageAbortedError``), so the call waits up to ``deadline`` seconds; the
        user message it writes takes ``message_id`` when given. Never retried: a retry
        could run it twice.
        """
        body: dict[str, Any] = {"command": name, "arguments": arguments}
        if message_id is not None:
            body["messageID"] = self._caller_id("msg", message_id)
        if model is not None:
            body["model"] = f"{model[0]}/{model[1]}"  # a string here, unlike a prompt's
        if agent is not None:
            body["agent"] = agent
        return await self._send(
            self._session_call(
                "command",
                "POST",
                session_id,
                "/command",
                json_body=body,
                parse=Message.parse,
                deadline=deadline,
            )
        )

    async def summarize(self, session_id: str, model: tuple[str, str], *, deadline: float) -> bool:
        """Compact the session's history into a summary (``POST /session/{id}/summarize``).

        The server answers once the summary is written, after the run under way (whose
        agent then stops: measured on 1.18.34), so the call waits up to ``deadline``
        seconds. Never retried: a retry would compact twice.
        """
        body = {"providerID": model[0], "modelID": model[1]}
        return await self._send(
            self._session_call(
                "summarize",
                "POST",
                session_id,
                "/summarize",
                json_body=body,
                parse=_parse_bool,
                deadline=deadline,
            )
        )

    # -- permission and question requests --------------------------------------

    async def pending_requests(self) -> list[PendingRequest]:
        """Permission and question requests the server is waiting on (every session)."""

        def parser(
            kind: Literal["permission", "question"],
        ) -> Callable[[object], list[PendingRequest]]:
            def parse(data: object) -> list[PendingRequest]:
                if not isinstance(data, list):
                    raise ValueError(f"the {kind} list is not a list")
                return [PendingRequest.parse(item, kind) for item in data]

            return parse

        permissions = await self._send(
            Call(
                "pending_permissions",
                "GET",
                "/permission",
                idempotent=True,
                parse=parser("permission"),
            )
        )
        questions = await self._send(
            Call("pending_questions", "GET", "/question", idempotent=True, parse=parser("question"))
        )
        return permissions + questions

    async def permission_reply(
        self, request_id: str, reply: PermissionReply, *, message: str | None = None
    ) -> bool:
        if reply not in ("once", "always", "reject"):
            raise InvalidInputError(f"reply must be once, always or reject, got {reply!r}")
        seg = self._segment("per", request_id)
        body: dict[str, Any] = {"reply": reply}
        if message is not None:
            body["message"] = message
        return await self._send(
            Call(
                "permission_reply",
                "POST",
                f"/permission/{seg}/reply",
                json_body=body,
                parse=_parse_bool,
            )
        )

    async def question_reply(self, request_id: str, answers: Sequence[Sequence[str]]) -> bool:
        """Answer a question request: one list of selected labels per question, in order."""
        seg = self._segment("que", request_id)
        body = {"answers": [[str(label) for label in answer] for answer in answers]}
        return await self._send(
            Call(
                "question_reply",
                "POST",
                f"/question/{seg}/reply",
                json_body=body,
                parse=_parse_bool,
            )
        )

    async def question_reject(self, request_id: str) -> bool:
        seg = self._segment("que", request_id)
        return await self._send(
            Call(
                "question_reject",
                "POST",
                f"/question/{seg}/reject",
                json_body={},
                parse=_parse_bool,
            )
        )

    # -- the event stream ------------------------------------------------------

    @asynccontextmanager
    async def event_stream(
        self,
        *,
        read_timeout: float = 30.0,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        on_skipped: OnSkipped | None = None,
    ) -> AsyncIterator[AsyncIterator[RawEvent]]:
        """Open ``GET /event`` and yield an iterator of decoded events.

        A ``data:`` payload that is not an event object of strict JSON, or is nested
        deeper than ``MAX_EVENT_DEPTH`` (:mod:`adapter._client._sse_payloads`), is skipped (a
        hostile or broken server must not stop the stream): ``on_skipped`` gets its
        :class:`~adapter.NativeEventError`, by default a warning is logged. One
        larger than ``max_event_bytes`` raises :class:`ProtocolError`. The server
        sends a heartbeat about every 10 s, so ``read_timeout`` detects a dead stream.
        """
        timeout = httpx.Timeout(self.timeout, read=read_timeout)
        async with open_event_stream(
            self._http,
            params=self._params,
            timeout=timeout,
            max_event_bytes=max_event_bytes,
            on_skipped=on_skipped,
        ) as events:
            yield events

    # -- machinery -------------------------------------------------------------

    def _session_call(
        self,
        operation: str,
        method: str,
        session_id: str,
        tail: str,
        *,
        parse: Callable[[object], T],
        json_body: Any = None,
        params: Mapping[str, str] | None = None,
        idempotent: bool = False,
        deadline: float | None = None,
    ) -> Call[T]:
        """A call on ``/session/{session_id}<tail>``, the id checked as a path segment
        and named in the call's errors."""
        return Call(
            operation,
            method,
            f"/session/{self._segment('ses', session_id)}{tail}",
            parse,
            session_id=session_id,
            json_body=json_body,
            params=params,
            idempotent=idempotent,
            deadline=deadline,
        )

    @staticmethod
    def _segment(kind: str, value: str) -> str:
        return _checked_input(path_segment, kind, value)

    @staticmethod
    def _caller_id(kind: str, value: str) -> str:
        return _checked_input(validate_id, kind, value)


def _checked_input(check: Callable[[str, str], str], kind: str, value: str) -> str:
    """``check(kind, value)``; a ``ValueError`` is the caller's ``InvalidInputError``."""
    try:
        return check(kind, value)
    except ValueError as exc:
        raise InvalidInputError(str(exc)) from None


def _sessions(data: object, what: str, bad: list[str] | None = None) -> list[Session]:
    """The sessions of a listing, in its order; an entry that does not parse is left out
    (its reason added to ``bad`` when given); a top level that is not a list fails."""
    if not isinstance(data, list):
        raise ValueError(f"{what} is not a list")
    sessions: list[Session] = []
    for item in data:
        try:
            sessions.append(Session.parse(item))
        except (ValueError, KeyError, TypeError) as exc:
            if bad is not None:
                bad.append(str(exc))
    return sessions


def _parse_bool(data: object) -> bool:
    if not isinstance(data, bool):
        raise ValueError("expected a boolean")
    return data


def _ignore(data: object) -> None:
    return None
