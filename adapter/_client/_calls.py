"""The request machinery of :class:`~adapter.OpenCodeClient`: one call to the server.

Why its own module: the endpoints say *what* to ask OpenCode (a :class:`Call`);
this says *how*, the same way for all of them: one attempt bounded in time and
in size, its failures mapped to the adapter's exceptions (transient or not),
idempotent calls retried with the adapter's one backoff
(:class:`~adapter._client._retry.Backoff`), and the answer parsed or refused as a
:class:`~adapter.ProtocolError`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import httpx
from tenacity import RetryCallState

from .._base._unicode import SURROGATE_REFUSAL, surrogate_path
from .._exceptions import AuthError, InvalidInputError, NotFoundError, ProtocolError, RequestError
from .._logging import get_logger
from ._retry import TRANSIENT_TRANSPORT_ERRORS, RetryPolicy, is_transient_status

__all__ = ["Call", "Caller", "status_error"]

T = TypeVar("T")
_log = get_logger("adapter.client")


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """One request, as an endpoint describes it.

    ``operation`` names it in errors and logs; ``parse`` turns the decoded JSON
    (``None`` for an empty answer) into the result, raising ``ValueError``,
    ``KeyError`` or ``TypeError`` on a shape it does not expect. Only an
    ``idempotent`` call is retried. ``deadline`` replaces the client's timeout
    for a call the server answers only once its work is done (``summarize``).
    """

    operation: str
    method: str
    path: str
    parse: Callable[[object], T]
    session_id: str | None = None
    json_body: Any = None
    params: Mapping[str, str] | None = None
    idempotent: bool = False
    deadline: float | None = None


class _TransientRequestError(RequestError):
    """A failure worth retrying for an idempotent request."""


class Caller:
    """Makes :class:`Call` s over one pooled ``httpx.AsyncClient``."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        *,
        params: Mapping[str, str],
        timeout: float,
        retry: RetryPolicy,
        max_response_bytes: int,
    ) -> None:
        self._http = http
        self._params = dict(params)
        self._timeout = timeout
        self._retry = retry
        self._max_response_bytes = max_response_bytes
        self._url_prefix = str(http.base_url).rstrip("/")
        self._extensions = {"timeout": httpx.Timeout(timeout).as_dict()}

    async def __call__(self, call: Call[T]) -> T:
        if self._http.is_closed:
            raise RequestError(call.operation, "the client is closed", session_id=call.session_id)
        if call.json_body is not None and (where := surrogate_path(call.json_body)) is not None:
            # UTF-8 cannot carry it: the caller learns which field, and nothing is sent.
            raise InvalidInputError(f"{call.operation}: {where} {SURROGATE_REFUSAL}")
        params = {**self._params, **call.params} if call.params else self._params or None
        try:
            # The first try runs outside tenacity: most calls succeed at once,
            # and a stop of thousands of sessions pays for every layer.
            return await self._attempt(call, params, 1)
        except _TransientRequestError as first:
            if not call.idempotent or self._retry.attempts <= 1:
                raise _final(call, first, "") from first.__cause__
            failed_first = first

        def log_retry(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            _log.warning(
                "opencode.retry",
                operation=call.operation,
                session_id=call.session_id,
                attempt=state.attempt_number,
                next_wait=round(state.upcoming_sleep, 3),
                error=str(exc),
            )

        retrying = self._retry.backoff.retrying(
            lambda exc: isinstance(exc, _TransientRequestError),
            attempts=self._retry.attempts,
            before_sleep=log_retry,
        )
        try:
            async for try_ in retrying:
                with try_:
                    number = try_.retry_state.attempt_number
                    if number == 1:
                        raise failed_first  # tenacity waits its first step after it
                    return await self._attempt(call, params, number)
        except _TransientRequestError as last:
            # Only a transient failure is retried: the last one ends the last attempt.
            suffix = f" (after {self._retry.attempts} attempts)"
            raise _final(call, last, suffix) from last.__cause__
        raise AssertionError("unreachable")  # pragma: no cover

    async def _attempt(self, call: Call[T], params: Mapping[str, str] | None, number: int) -> T:
        """One try: the answer parsed, or the failure as a (transient) RequestError."""
        started = time.perf_counter()
        status: int | None = None
        limit = self._timeout if call.deadline is None else call.deadline
        try:
            # httpx's timeout bounds each read; this bounds the whole attempt, so a
            # server that trickles a byte at a time (slow loris) cannot hold us.
            async with asyncio.timeout(limit):
                response = await self._http.send(self._request(call, params), stream=True)
                try:
                    status = response.status_code
                    body = await self._read_bounded(call.operation, response)
                finally:
                    await response.aclose()
        except Exception as exc:
            _raise_request_error(call, exc, limit)
            raise  # not a transport failure (the bounded read's ProtocolError): as it is
        finally:
            # The arguments are not even gathered when the host's logging drops debug.
            if _log.isEnabledFor(logging.DEBUG):
                _log.debug(
                    "opencode.request",
                    operation=call.operation,
                    session_id=call.session_id,
                    status=status,
                    attempt=number,
                    duration_ms=round((time.perf_counter() - started) * 1000, 2),
                )
        if not 200 <= status < 300:
            raise status_error(call.operation, status, body, call.session_id)
        return _parsed(call, status, body)

    def _request(self, call: Call[Any], params: Mapping[str, str] | None) -> httpx.Request:
        extensions = (
            self._extensions
            if call.deadline is None
            else {"timeout": httpx.Timeout(self._timeout, read=call.deadline).as_dict()}
        )
        if self._http.cookies:
            return self._http.build_request(
                call.method, call.path, json=call.json_body, params=params, extensions=extensions
            )
        # build_request merges URL, headers, cookies and timeout on every call
        # although they never change: build the request directly.
        return httpx.Request(
            call.method,
            self._url_prefix + call.path,
            params=params,
            json=call.json_body,
            headers=self._http.headers,
            extensions=extensions,
        )

    async def _read_bounded(self, operation: str, response: httpx.Response) -> bytes:
        limit = self._max_response_bytes
        declared = response.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise ProtocolError(operation, f"response of {declared} bytes exceeds the limit")
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > limit:
                raise ProtocolError(operation, f"response exceeds the limit of {limit} bytes")
            chunks.append(chunk)
        return b"".join(chunks)


def _raise_request_error(call: Call[Any], exc: Exception, limit: float) -> None:
    """Raise what a failed exchange means: transient (worth a retry) or not; returns
    for an exception that is no transport failure."""
    operation, session_id = call.operation, call.session_id
    kind = type(exc).__name__
    if isinstance(exc, TimeoutError):
        raise _TransientRequestError(
            operation, f"timed out: no complete answer within {limit} s", session_id=session_id
        ) from None
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
        raise _TransientRequestError(
            operation, f"connection failed ({kind})", session_id=session_id, delivered=False
        ) from exc
    if isinstance(exc, httpx.TimeoutException):
        cls = _TransientRequestError if isinstance(exc, httpx.ReadTimeout) else RequestError
        raise cls(operation, f"timed out ({kind})", session_id=session_id) from exc
    if isinstance(exc, TRANSIENT_TRANSPORT_ERRORS):
        raise _TransientRequestError(
            operation, f"connection failed ({kind})", session_id=session_id
        ) from exc
    if isinstance(exc, httpx.HTTPError):
        raise RequestError(operation, f"transport error ({kind})", session_id=session_id) from exc


def _final(call: Call[Any], error: _TransientRequestError, suffix: str) -> RequestError:
    """The public error for a transient failure that is not retried (any more)."""
    return RequestError(
        call.operation,
        error.detail + suffix,
        status=error.status,
        server_message=error.server_message,
        session_id=call.session_id,
        delivered=error.delivered,
    )


def _parsed(call: Call[T], status: int, body: bytes) -> T:
    operation = call.operation
    if status == 204 or not body:
        try:
            return call.parse(None)
        except (ValueError, KeyError, TypeError) as exc:
            raise ProtocolError(
                operation, f"empty response where data was expected ({exc})"
            ) from None
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise ProtocolError(operation, "the response is not valid JSON") from None
    try:
        return call.parse(data)
    except (ValueError, KeyError, TypeError) as exc:
        raise ProtocolError(operation, f"unexpected response shape: {exc}") from None


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


def status_error(operation: str, status: int, body: bytes, session_id: str | None) -> RequestError:
    """The error for an answer outside 2xx (transient for 5xx and 429)."""
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
