"""``OpenCodeClient``: typed access to one OpenCode server."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import random
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, Literal, Self, TypeVar

import httpx
import httpx_sse
import structlog
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)

from ._base_url import checked_base_url
from ._event_wire import (
    DEFAULT_MAX_EVENT_BYTES,
    BoundedSSEStream,
    OnSkipped,
    RawEvent,
    decode_events,
)
from ._exceptions import (
    AuthError,
    InvalidInputError,
    NotFoundError,
    ProtocolError,
    RequestError,
)
from ._ids import path_segment, validate_id
from ._logging import get_logger
from ._models import Health, Message, PendingRequest, Session, SessionStatus
from ._retry import TRANSIENT_TRANSPORT_ERRORS, RetryPolicy, is_transient_status
from ._unicode import SURROGATE_REFUSAL, surrogate_path

__all__ = ["OpenCodeClient", "PermissionReply", "RawEvent"]

T = TypeVar("T")
PermissionReply = Literal["once", "always", "reject"]
_log = get_logger("adapter.client")

DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024


class _TransientRequestError(RequestError):
    """A failure worth retrying for an idempotent request."""


def _server_message(body: bytes) -> tuple[str | None, str | None]:
    """Best effort (name, message) out of an error body; never raises."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        text = body[:200].decode("utf-8", "replace").strip()
        return None, text or None
    if not isinstance(data, dict):
        return None, None
    name = data.get("name") if isinstance(data.get("name"), str) else None
    inner = data.get("data")
    message = None
    if isinstance(inner, dict) and isinstance(inner.get("message"), str):
        message = inner["message"]
    elif isinstance(data.get("message"), str):
        message = data["message"]
    return name, message[:500] if message else None


class OpenCodeClient:
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
            trust_env=not _is_loopback(url.host),
        )
        self._url_prefix = str(self._http.base_url).rstrip("/")
        self._extensions = {"timeout": httpx.Timeout(timeout).as_dict()}
        # The first attempt runs outside tenacity (see _call): tenacity makes the rest.
        self._retrying_kwargs: dict[str, Any] = {
            "stop": stop_after_attempt(max(1, self.retry.attempts - 1)),
            "wait": wait_random_exponential(
                multiplier=self.retry.initial_wait, max=self.retry.max_wait
            ),
            "retry": retry_if_exception(lambda e: isinstance(e, _TransientRequestError)),
            "before_sleep": self._log_retry,
            "reraise": True,
        }

    def __repr__(self) -> str:
        auth = "basic" if self._has_password else "none"
        return (
            f"OpenCodeClient(base_url={self.base_url!r}, auth={auth}, directory={self.directory!r})"
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    @property
    def is_closed(self) -> bool:
        return self._http.is_closed

    # -- the API ---------------------------------------------------------------

    async def health(self) -> Health:
        return await self._call("health", "GET", "/global/health", parse=Health.parse)

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
        return await self._call(
            "create_session", "POST", "/session", json_body=body, parse=Session.parse
        )

    async def add_permission_rules(
        self, session_id: str, rules: Sequence[Mapping[str, str]]
    ) -> None:
        """``PATCH /session/{id}``: OpenCode 1.18.34 *appends* the rules (measured)."""
        body = {"permission": [dict(rule) for rule in rules]}
        path = f"/session/{self._segment('ses', session_id)}"
        await self._call(
            "update_session", "PATCH", path, session_id=session_id, json_body=body, parse=_ignore
        )

    async def get_session(self, session_id: str) -> Session:
        seg = self._segment("ses", session_id)
        return await self._call(
            "get_session",
            "GET",
            f"/session/{seg}",
            session_id=session_id,
            idempotent=True,
            parse=Session.parse,
        )

    async def fork_session(self, session_id: str) -> Session:
        """``POST /session/{id}/fork``: a new root session holding a copy of every message.

        Measured on 1.18.34: the fork lives in the *original's* directory whatever
        directory the request names (see :meth:`move_session`), has no ``parentID``, is
        titled ``"<title> (fork #1)"`` and carries none of the original's permission
        rules. Never retried: a retry could fork twice."""
        seg = self._segment("ses", session_id)
        path = f"/session/{seg}/fork"
        return await self._call(
            "fork_session", "POST", path, session_id=session_id, json_body={}, parse=Session.parse
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
        await self._call(
            "move_session", "POST", path, session_id=session_id, json_body=body, parse=_ignore
        )

    async def delete_session(self, session_id: str) -> None:
        """``DELETE /session/{id}`` (with its children; measured: ``200 true``)."""
        seg = self._segment("ses", session_id)
        await self._call(
            "delete_session",
            "DELETE",
            f"/session/{seg}",
            session_id=session_id,
            idempotent=True,
            parse=_ignore,
        )

    async def children(self, session_id: str) -> list[Session]:
        """Direct children of a session, oldest first.

        OpenCode 1.18.34 lists them in creation order; they are sorted by
        ``time.created`` again (stably, so ties keep the server's order) in case
        another release does not.
        """
        seg = self._segment("ses", session_id)

        bad: list[str] = []

        def parse(data: object) -> list[Session]:
            if not isinstance(data, list):
                raise ValueError("children is not a list")
            sessions: list[Session] = []
            for item in data:
                try:
                    sessions.append(Session.parse(item))
                except (ValueError, KeyError, TypeError) as exc:
                    bad.append(str(exc))
            sessions.sort(key=lambda s: s.created)
            return sessions

        sessions = await self._call(
            "children",
            "GET",
            f"/session/{seg}/children",
            session_id=session_id,
            idempotent=True,
            parse=parse,
        )
        if bad:
            raise ProtocolError(
                "children",
                f"{len(bad)} invalid child entr{'y' if len(bad) == 1 else 'ies'} "
                f"for {session_id}: {bad[0]}",
                partial=sessions,
            )
        return sessions

    async def abort(self, session_id: str) -> bool:
        """Abort a session's run. The server answers ``true`` even for unknown ids."""
        seg = self._segment("ses", session_id)
        return await self._call(
            "abort",
            "POST",
            f"/session/{seg}/abort",
            session_id=session_id,
            idempotent=True,
            parse=_parse_bool,
        )

    async def status(self) -> dict[str, SessionStatus]:
        """Every non-idle session of the directory; a missing id means idle."""
        return await self._call(
            "status", "GET", "/session/status", idempotent=True, parse=SessionStatus.parse_map
        )

    async def messages(self, session_id: str, *, limit: int | None = None) -> list[Message]:
        seg = self._segment("ses", session_id)

        def parse(data: object) -> list[Message]:
            if not isinstance(data, list):
                raise ValueError("messages is not a list")
            return [Message.parse(item) for item in data]

        return await self._call(
            "messages",
            "GET",
            f"/session/{seg}/message",
            session_id=session_id,
            params={"limit": str(limit)} if limit is not None else None,
            idempotent=True,
            parse=parse,
        )

    async def message(self, session_id: str, message_id: str) -> Message:
        seg = self._segment("ses", session_id)
        mseg = self._segment("msg", message_id)
        return await self._call(
            "message",
            "GET",
            f"/session/{seg}/message/{mseg}",
            session_id=session_id,
            idempotent=True,
            parse=Message.parse,
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
        seg = self._segment("ses", session_id)
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
        await self._call(
            "prompt_async",
            "POST",
            f"/session/{seg}/prompt_async",
            session_id=session_id,
            json_body=body,
            parse=_ignore,
        )

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

        permissions = await self._call(
            "pending_permissions", "GET", "/permission", idempotent=True, parse=parser("permission")
        )
        questions = await self._call(
            "pending_questions", "GET", "/question", idempotent=True, parse=parser("question")
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
        return await self._call(
            "permission_reply",
            "POST",
            f"/permission/{seg}/reply",
            json_body=body,
            parse=_parse_bool,
        )

    async def question_reply(self, request_id: str, answers: Sequence[Sequence[str]]) -> bool:
        """Answer a question request: one list of selected labels per question, in order."""
        seg = self._segment("que", request_id)
        body = {"answers": [[str(label) for label in answer] for answer in answers]}
        return await self._call(
            "question_reply",
            "POST",
            f"/question/{seg}/reply",
            json_body=body,
            parse=_parse_bool,
        )

    async def question_reject(self, request_id: str) -> bool:
        seg = self._segment("que", request_id)
        return await self._call(
            "question_reject", "POST", f"/question/{seg}/reject", json_body={}, parse=_parse_bool
        )

    async def summarize(self, session_id: str, model: tuple[str, str], *, deadline: float) -> bool:
        """Compact the session's history into a summary (``POST /session/{id}/summarize``).

        The server answers once the summary is written, after the run under way (whose
        agent then stops: measured on 1.18.34), so the call waits up to ``deadline``
        seconds. Never retried: a retry would compact twice.
        """
        seg = self._segment("ses", session_id)
        body = {"providerID": model[0], "modelID": model[1]}
        return await self._call(
            "summarize",
            "POST",
            f"/session/{seg}/summarize",
            session_id=session_id,
            json_body=body,
            parse=_parse_bool,
            deadline=deadline,
        )

    async def revert(
        self, session_id: str, message_id: str, *, part_id: str | None = None
    ) -> Session:
        seg = self._segment("ses", session_id)
        body: dict[str, Any] = {"messageID": self._caller_id("msg", message_id)}
        if part_id is not None:
            body["partID"] = self._caller_id("prt", part_id)
        return await self._call(
            "revert",
            "POST",
            f"/session/{seg}/revert",
            session_id=session_id,
            json_body=body,
            parse=Session.parse,
        )

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
        deeper than ``MAX_EVENT_DEPTH`` (:mod:`adapter._event_wire`), is skipped (a
        hostile or broken server must not stop the stream): ``on_skipped`` gets its
        :class:`~adapter.NativeEventError`, by default a warning is logged. One
        larger than ``max_event_bytes`` raises :class:`ProtocolError`. The server
        sends a heartbeat about every 10 s, so ``read_timeout`` detects a dead stream.
        """
        timeout = httpx.Timeout(self.timeout, read=read_timeout)
        try:
            async with httpx_sse.aconnect_sse(
                self._http,
                "GET",
                "/event",
                params=self._params or None,
                timeout=timeout,
                headers={"accept-encoding": "identity"},
            ) as source:
                response = source.response
                if response.status_code != 200:
                    await response.aread()
                    raise self._status_error(
                        "event_stream", response.status_code, response.content, None
                    )
                if "text/event-stream" not in response.headers.get("content-type", ""):
                    raise ProtocolError(
                        "event_stream", "the server did not answer with an event stream"
                    )
                if "content-encoding" not in response.headers:
                    # httpx-sse buffers a whole line, and an event's lines, before it
                    # decodes them: bound both on the raw bytes, so that no endless line
                    # or event can fill memory.
                    response.stream = BoundedSSEStream(response.stream, max_event_bytes)
                yield decode_events(source, max_event_bytes, on_skipped)
        except httpx.TimeoutException as exc:
            raise RequestError("event_stream", f"timed out ({type(exc).__name__})") from exc
        except httpx.TransportError as exc:
            raise RequestError("event_stream", f"connection failed ({type(exc).__name__})") from exc

    # -- machinery -------------------------------------------------------------

    @staticmethod
    def _segment(kind: str, value: str) -> str:
        try:
            return path_segment(kind, value)
        except ValueError as exc:
            raise InvalidInputError(str(exc)) from None

    @staticmethod
    def _caller_id(kind: str, value: str) -> str:
        try:
            return validate_id(kind, value)
        except ValueError as exc:
            raise InvalidInputError(str(exc)) from None

    def _log_retry(self, state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        _log.warning(
            "opencode.retry",
            attempt=state.attempt_number,
            next_wait=round(state.upcoming_sleep, 3),
            error=str(exc),
        )

    async def _call(
        self,
        operation: str,
        method: str,
        path: str,
        *,
        parse: Callable[[object], T],
        session_id: str | None = None,
        json_body: Any = None,
        params: Mapping[str, str] | None = None,
        idempotent: bool = False,
        deadline: float | None = None,
    ) -> T:
        """``deadline`` replaces :attr:`timeout` for a call the server answers only once
        its work is done (``summarize``)."""
        if self._http.is_closed:
            raise RequestError(operation, "the client is closed", session_id=session_id)
        if json_body is not None and (where := surrogate_path(json_body)) is not None:
            # UTF-8 cannot carry it: the caller learns which field, and nothing is sent.
            raise InvalidInputError(f"{operation}: {where} {SURROGATE_REFUSAL}")
        merged = {**self._params, **(params or {})} or None
        try:
            # The first try runs outside tenacity: most calls succeed at once,
            # and a stop of thousands of sessions pays for every layer.
            return await self._attempt(
                operation, method, path, parse, session_id, json_body, merged, 1, deadline
            )
        except _TransientRequestError as first:
            if not idempotent or self.retry.attempts <= 1:
                raise RequestError(
                    operation,
                    first.detail,
                    status=first.status,
                    server_message=first.server_message,
                    session_id=session_id,
                    delivered=first.delivered,
                ) from first.__cause__
            first_wait = random.uniform(0, min(self.retry.initial_wait, self.retry.max_wait))
            _log.warning(
                "opencode.retry",
                operation=operation,
                session_id=session_id,
                attempt=1,
                next_wait=round(first_wait, 3),
                error=str(first),
            )
            await asyncio.sleep(first_wait)  # the same jittered backoff as the later retries
        attempt = 1
        try:
            retrying = AsyncRetrying(**self._retrying_kwargs)
            async for try_ in retrying:
                with try_:
                    attempt += 1
                    return await self._attempt(
                        operation,
                        method,
                        path,
                        parse,
                        session_id,
                        json_body,
                        merged,
                        attempt,
                        deadline,
                    )
        except _TransientRequestError as last:
            raise RequestError(
                operation,
                f"{last.detail} (after {attempt} attempts)",
                status=last.status,
                server_message=last.server_message,
                session_id=session_id,
                delivered=last.delivered,
            ) from last.__cause__
        raise AssertionError("unreachable")  # pragma: no cover

    async def _attempt(
        self,
        operation: str,
        method: str,
        path: str,
        parse: Callable[[object], T],
        session_id: str | None,
        json_body: Any,
        params: Mapping[str, str] | None,
        attempt: int,
        deadline: float | None = None,
    ) -> T:
        started = time.perf_counter()
        status: int | None = None
        limit = self.timeout if deadline is None else deadline
        extensions = (
            self._extensions
            if deadline is None
            else {"timeout": httpx.Timeout(self.timeout, read=deadline).as_dict()}
        )
        try:
            # httpx's timeout bounds each read; this bounds the whole attempt, so a
            # server that trickles a byte at a time (slow loris) cannot hold us.
            async with asyncio.timeout(limit):
                if self._http.cookies:
                    request = self._http.build_request(
                        method, path, json=json_body, params=params, extensions=extensions
                    )
                else:
                    # build_request merges URL, headers, cookies and timeout on every
                    # call although they never change: build the request directly.
                    request = httpx.Request(
                        method,
                        self._url_prefix + path,
                        params=params,
                        json=json_body,
                        headers=self._http.headers,
                        extensions=extensions,
                    )
                response = await self._http.send(request, stream=True)
                try:
                    status = response.status_code
                    body = await self._read_bounded(operation, response)
                finally:
                    await response.aclose()
        except TimeoutError:
            raise _TransientRequestError(
                operation,
                f"timed out: no complete answer within {limit} s",
                session_id=session_id,
            ) from None
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise _TransientRequestError(
                operation,
                f"connection failed ({type(exc).__name__})",
                session_id=session_id,
                delivered=False,
            ) from exc
        except httpx.TimeoutException as exc:
            cls = (
                _TransientRequestError
                if isinstance(exc, httpx.ReadTimeout | httpx.ConnectTimeout)
                else RequestError
            )
            raise cls(
                operation, f"timed out ({type(exc).__name__})", session_id=session_id
            ) from exc
        except TRANSIENT_TRANSPORT_ERRORS as exc:
            raise _TransientRequestError(
                operation, f"connection failed ({type(exc).__name__})", session_id=session_id
            ) from exc
        except httpx.HTTPError as exc:
            raise RequestError(
                operation, f"transport error ({type(exc).__name__})", session_id=session_id
            ) from exc
        finally:
            # Unconfigured structlog prints every level to stdout: a library stays
            # quiet about each request until the host configured logging.
            if structlog.is_configured():
                _log.debug(
                    "opencode.request",
                    operation=operation,
                    session_id=session_id,
                    status=status,
                    attempt=attempt,
                    duration_ms=round((time.perf_counter() - started) * 1000, 2),
                )
        if not 200 <= status < 300:
            raise self._status_error(operation, status, body, session_id)
        if status == 204 or not body:
            try:
                return parse(None)
            except (ValueError, KeyError, TypeError) as exc:
                raise ProtocolError(
                    operation, f"empty response where data was expected ({exc})"
                ) from None
        try:
            data = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            raise ProtocolError(operation, "the response is not valid JSON") from None
        try:
            return parse(data)
        except (ValueError, KeyError, TypeError) as exc:
            raise ProtocolError(operation, f"unexpected response shape: {exc}") from None

    async def _read_bounded(self, operation: str, response: httpx.Response) -> bytes:
        declared = response.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_response_bytes:
            raise ProtocolError(operation, f"response of {declared} bytes exceeds the limit")
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > self.max_response_bytes:
                raise ProtocolError(
                    operation, f"response exceeds the limit of {self.max_response_bytes} bytes"
                )
            chunks.append(chunk)
        return b"".join(chunks)

    @staticmethod
    def _status_error(
        operation: str, status: int, body: bytes, session_id: str | None
    ) -> RequestError:
        name, message = _server_message(body)
        text = message or name or "request failed"
        if status == 401:
            return AuthError(
                operation,
                "unauthorized: check the server password",
                status=status,
                session_id=session_id,
            )
        if status == 404 or name == "NotFoundError":
            return NotFoundError(
                operation, text, status=status, server_message=message, session_id=session_id
            )
        cls = _TransientRequestError if is_transient_status(status) else RequestError
        return cls(operation, text, status=status, server_message=message, session_id=session_id)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _parse_bool(data: object) -> bool:
    if not isinstance(data, bool):
        raise ValueError("expected a boolean")
    return data


def _ignore(data: object) -> None:
    return None
