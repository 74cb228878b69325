"""The app's one error shape, and the one mapping of adapter exceptions to statuses.

Every failure a client sees is ``{"error": {"type", "message"}}`` (a 422 adds
``"field"``, a failed stop adds ``"stop"``), with a ``type`` from a small stable
set a page can switch on. The adapter's messages carry no credentials (its
client never puts headers or userinfo URLs into them); an unexpected exception
is logged and answered ``internal`` with a fixed message, so neither a
traceback nor a secret can reach a body. Messages may repeat server text or a
client's id: :class:`adapter.web._json.JsonResponse` keeps the body well formed.
"""

from __future__ import annotations

import traceback
from typing import Any

import adapter
from adapter._logging import get_logger

from ._json import JsonResponse
from ._store import _errors as store

__all__ = ["ApiError", "error_response", "invalid", "response_for"]

_log = get_logger("adapter.web")


class ApiError(Exception):
    """A failure the app answers as it is: ``status``, a stable ``type``, a message."""

    def __init__(
        self,
        status: int,
        type: str,
        message: str,
        *,
        field: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        self.status = status
        self.type = type
        self.message = message
        self.field = field
        self.extra = extra or {}
        super().__init__(message)


def error_response(
    status: int,
    type: str,
    message: str,
    *,
    field: str | None = None,
    extra: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> JsonResponse:
    error: dict[str, Any] = {"type": type, "message": message}
    if field is not None:
        error["field"] = field
    return JsonResponse({"error": error, **(extra or {})}, status_code=status, headers=headers)


def invalid(field: str, message: str) -> ApiError:
    return ApiError(422, "invalid_input", message, field=field)


def _store_error(exc: Exception) -> JsonResponse:
    """The thread store's answers (``docs/web.md``, "The thread store"): a store that
    cannot answer now is 503 (retry), never a 500; a record that does not parse 502."""
    if isinstance(exc, store.ThreadExistsError):
        return error_response(409, "conflict", str(exc))
    if isinstance(exc, store.ThreadNotFoundError):
        return error_response(404, "unknown_thread", str(exc))
    if isinstance(exc, store.CorruptRecordError):
        _log.warning("web.corrupt_record", thread_id=exc.thread_id, reason=exc.reason)
        return error_response(502, "corrupt_record", str(exc))
    _log.warning("web.store_unavailable", error=str(exc), error_type=type(exc).__name__)
    return error_response(503, "store_unavailable", str(exc), headers={"Retry-After": "1"})


def response_for(exc: Exception, *, field: str | None = None) -> JsonResponse:
    """The answer to ``exc`` raised by a route; ``field`` names the body field an
    :class:`adapter.InvalidInputError` is about (the route knows what it passed)."""
    if isinstance(exc, ApiError):
        return error_response(exc.status, exc.type, exc.message, field=exc.field, extra=exc.extra)
    if isinstance(exc, store.StoreError):
        return _store_error(exc)
    if isinstance(exc, adapter.UnknownThreadError):
        return error_response(404, "unknown_thread", str(exc))
    if isinstance(exc, adapter.UnknownRequestError):
        return error_response(404, "not_found", str(exc))
    if isinstance(exc, adapter.InvalidInputError):
        return error_response(422, "invalid_input", str(exc), field=field or "body")
    if isinstance(exc, adapter.TreeStopError):
        _log.warning("web.stop_failed", error=str(exc))
        return error_response(502, "stop_failed", str(exc), extra={"stop": exc.report.to_dict()})
    if isinstance(
        exc,
        adapter.SessionClosedError | adapter.TurnCancelledError | adapter.AdapterClosedError,
    ):
        return error_response(409, "conflict", str(exc))
    if isinstance(exc, adapter.OpenCodeError):
        _log.warning("web.opencode_error", error=str(exc), error_type=type(exc).__name__)
        return error_response(502, "opencode_error", str(exc))
    # The formatted traceback, not ``exc_info``: a rich console renderer would print
    # the frames' locals, and one of them may hold a credential.
    _log.error(
        "web.internal_error",
        error_type=type(exc).__name__,
        traceback="".join(traceback.format_exception(exc)),
    )
    return error_response(500, "internal", "internal error (see the server log)")
