"""One exception hierarchy for everything the library raises.

Every error the client, ``stop_tree`` or the adapter raises derives from
:class:`OpenCodeError`, so a host can catch one type at its boundary. Messages
never contain credentials: the client never puts headers or URLs with
userinfo into them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: the exceptions are below every other layer
    from ._types._partial_result import PartialResult
    from ._types._stop_report import SessionStop, StopReport

__all__ = [
    "AdapterClosedError",
    "AuthError",
    "CannotDetachError",
    "ConnectTimeoutError",
    "InvalidInputError",
    "NativeEventError",
    "NotFoundError",
    "OpenCodeError",
    "ProtocolError",
    "RequestError",
    "ServerExitedError",
    "SessionClosedError",
    "TreeStopError",
    "TurnCancelledError",
    "UnknownRequestError",
    "UnknownThreadError",
]


class OpenCodeError(Exception):
    """Base class of every error raised by this library."""


class RequestError(OpenCodeError):
    """A request to the server failed.

    ``operation`` is the client method (``"abort"``, ``"children"``, ...),
    ``status`` the HTTP status when the server answered (``None`` for transport
    failures such as a refused connection or a timeout), ``server_message`` the
    server's own explanation when its body carried one.
    """

    def __init__(
        self,
        operation: str,
        message: str,
        *,
        status: int | None = None,
        server_message: str | None = None,
        session_id: str | None = None,
        delivered: bool | None = None,
    ) -> None:
        self.operation = operation
        self.detail = message
        #: Did the request reach the server? True when it answered, False when
        #: it certainly did not (the connection failed), None when unknown (the
        #: answer was lost): a write may then have taken effect.
        self.delivered = True if status is not None else delivered
        self.status = status
        self.server_message = server_message
        self.session_id = session_id
        parts = [f"{operation} failed"]
        if session_id is not None:
            parts.append(f"for {session_id}")
        if status is not None:
            parts.append(f"(HTTP {status})")
        super().__init__(" ".join(parts) + f": {message}")


class NotFoundError(RequestError):
    """The server says the session, message or request does not exist (404)."""


class AuthError(RequestError):
    """The server rejected our credentials (401)."""


class ProtocolError(OpenCodeError):
    """A response that does not match the OpenCode API.

    Bad JSON, a wrong shape, an oversized body, or a session id that is not a
    valid ``ses_...`` id. Raised instead of acting on data we do not trust.
    """

    def __init__(self, operation: str, message: str, *, partial: object = None) -> None:
        self.operation = operation
        #: What could be trusted of the response (e.g. the valid entries of a
        #: children list with one hostile id), so a caller loses nothing valid.
        self.partial = partial
        super().__init__(f"{operation}: {message}")


class NativeEventError(ProtocolError):
    """A native event of a known type whose fields cannot be trusted.

    ``event_type`` is the event's ``type`` (``None`` when it had none). Raised
    by the one parse of each event, so the adapter and the partial-result
    collector skip the same events for the same reason.
    """

    def __init__(self, event_type: str | None, message: str) -> None:
        self.event_type = event_type
        where = "event" if event_type is None else f"event {event_type[:80]}"
        super().__init__(where, message)


class InvalidInputError(OpenCodeError, ValueError):
    """A caller passed something the library refuses (bad model string, empty prompt...)."""


class CannotDetachError(InvalidInputError):
    """Detaching was asked of an adapter that started its own server (no ``base_url``).

    Detaching leaves the threads' trees running on the server for a later process; a
    server the adapter started dies with it, so there is nothing to leave them on.
    Raised by the constructor for ``on_close="detach"``, and by ``aclose(detach=True)``
    before anything is closed (the adapter stays open: close it without detaching)."""


class TreeStopError(OpenCodeError):
    """``stop_tree`` could not stop every session of the tree.

    ``first_failure`` is the first failing session in breadth-first discovery
    order (the root's own failure first), ``report`` the complete report of the
    walk (every session that was attempted, with its outcome), ``cause`` the
    underlying exception of the first failure (or a :class:`TimeoutError` when
    the whole walk ran out of time).

    ``partial`` is what the interrupted turn had produced when ``interrupt_turn``
    raised this (the :class:`~adapter.PartialResult` a successful stop returns in its
    :class:`~adapter.InterruptResult`; an empty one when no turn ran). It is what the
    events had shown: nothing is read back from the server, since the turn runs on
    after a failed stop and ends later with its own result. ``None`` when raised by
    :func:`~adapter.stop_tree` or ``stop_subagent``: they end no turn, so there is no
    partial result of theirs to keep (the turn's own comes with its end).
    """

    def __init__(
        self,
        message: str,
        *,
        report: StopReport,
        first_failure: SessionStop | None,
        cause: BaseException | None,
        partial: PartialResult | None = None,
    ) -> None:
        self.report = report
        self.first_failure = first_failure
        self.cause = cause
        self.partial = partial
        super().__init__(message)


class UnknownThreadError(OpenCodeError, KeyError):
    """No session is bound to this thread id."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        super().__init__(f"no OpenCode session for thread {thread_id!r}")

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class UnknownRequestError(OpenCodeError, KeyError):
    """No pending permission or question request with this id on this thread."""

    def __init__(self, thread_id: str, request_id: str) -> None:
        self.thread_id = thread_id
        self.request_id = request_id
        super().__init__(f"no pending request {request_id!r} on thread {thread_id!r}")

    def __str__(self) -> str:
        return str(self.args[0])


class SessionClosedError(OpenCodeError):
    """The thread's session was stopped while the call was waiting."""


class TurnCancelledError(OpenCodeError):
    """A send was cancelled because its session was stopped, or its turn was interrupted."""


class AdapterClosedError(OpenCodeError):
    """The adapter is closed (or closing) and accepts no more calls."""


class ConnectTimeoutError(RequestError):
    """The event stream did not connect within the bounded wait."""


class ServerExitedError(OpenCodeError):
    """The OpenCode server process the adapter started has exited."""
