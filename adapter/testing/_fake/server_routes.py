"""The server-wide routes: health, the event stream, statuses, permission and question requests.

Why a module: these routes answer about the server rather than one session, and the
real server scopes most of them by the request's directory (a status list, the
pending requests, a reply sent in another directory is not found). :class:`ServerRoutes`
registers them in the route table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import httpx

from .event_bus import EventBus
from .http import Router
from .session_data import Settings
from .state import FakeState
from .wire import (
    OPENCODE_VERSION,
    HttpError,
    expected_prefix,
    invalid,
    js,
    json_response,
    session_not_found,
)


def _check_request_id(request_id: str, prefix: str) -> None:
    """A request id without its ``prefix`` (``per``, ``que``) is a 400 ``Params``."""
    bad_id = expected_prefix(request_id, prefix, "requestID", kind="Params")
    if bad_id is not None:
        raise HttpError(bad_id)


@dataclass(eq=False)
class ServerRoutes:
    """The handlers of ``/global/health``, ``/event``, ``/session/status``,
    ``/permission...`` and ``/question...`` (added to the router's table on creation)."""

    _router: Router
    _state: FakeState
    _bus: EventBus
    _settings: Settings

    def __post_init__(self) -> None:
        self._emit = self._bus.emit
        table = self._router.table
        table.add("GET", "/global/health", self._health)
        table.add("GET", "/event", self._event_stream)
        table.add("GET", "/session/status", self._list_status)
        table.add("GET", "/permission", self._list_permissions)
        table.add("POST", "/permission/{requestID}/reply", self._permission_reply)
        table.add("POST", "/session/{id}/permissions/{permissionID}", self._legacy_reply)
        table.add("GET", "/question", self._list_questions)
        table.add("POST", "/question/{requestID}/reply", self._question_reply)
        table.add("POST", "/question/{requestID}/reject", self._question_reject)

    async def _health(self, request: httpx.Request, params: tuple[str, ...]) -> httpx.Response:
        return json_response(200, {"healthy": True, "version": OPENCODE_VERSION})

    async def _event_stream(
        self, request: httpx.Request, params: tuple[str, ...]
    ) -> httpx.Response:
        return self._bus.open_stream(
            self._router.request_directory(request), self._settings.heartbeat
        )

    async def _list_status(self, request: httpx.Request, params: tuple[str, ...]) -> httpx.Response:
        """Measured: the non-idle sessions of the request's directory only."""
        directory = self._router.request_directory(request)
        of = self._state.directory_of
        return json_response(
            200, {sid: st for sid, st in self._state.non_idle.items() if of.get(sid) == directory}
        )

    async def _list_permissions(
        self, request: httpx.Request, params: tuple[str, ...]
    ) -> httpx.Response:
        return self._list_pending("permission", self._router.request_directory(request))

    async def _list_questions(
        self, request: httpx.Request, params: tuple[str, ...]
    ) -> httpx.Response:
        return self._list_pending("question", self._router.request_directory(request))

    def _list_pending(self, kind: str, directory: str) -> httpx.Response:
        """Measured: the pending requests of the request directory's sessions only."""
        return json_response(
            200,
            [
                r.payload
                for r in self._state.requests_pending.values()
                if r.kind == kind and self._state.in_directory(r, directory)
            ],
        )

    async def _permission_reply(
        self, request: httpx.Request, params: tuple[str, ...]
    ) -> httpx.Response:
        reply = await self._reply_body(request, params[0], "per", "reply")
        directory = self._router.request_directory(request)
        return self._reply_permission(params[0], reply, directory)

    async def _legacy_reply(
        self, request: httpx.Request, params: tuple[str, ...]
    ) -> httpx.Response:
        """``POST /session/{id}/permissions/{permissionID} {response}``."""
        session_id, request_id = params
        if not session_id.startswith("ses"):
            return self._router.unexpected_error()
        if session_id not in self._state.sessions:
            return session_not_found(session_id)
        body = await self._router.body(request)
        return self._reply_permission(request_id, body.get("response"), None)

    async def _question_reply(
        self, request: httpx.Request, params: tuple[str, ...]
    ) -> httpx.Response:
        request_id = params[0]
        answers = await self._reply_body(request, request_id, "que", "answers")
        if not isinstance(answers, list):
            return invalid(f"Expected array, got {js(answers)}", "answers")
        for index, answer in enumerate(answers):
            if not isinstance(answer, list):
                got = f"Expected QuestionAnswer, got {js(answer)}"
                return invalid(got, "answers", index)
        directory = self._router.request_directory(request)
        return self._answer("question", request_id, directory, {"answers": answers}, answers)

    async def _question_reject(
        self, request: httpx.Request, params: tuple[str, ...]
    ) -> httpx.Response:
        _check_request_id(params[0], "que")
        directory = self._router.request_directory(request)
        return self._answer("question", params[0], directory, {}, None)

    async def _reply_body(
        self, request: httpx.Request, request_id: str, prefix: str, key: str
    ) -> Any:
        """The ``key`` of a reply's body, checked in the measured order: the request id's
        prefix, the body, then the key."""
        _check_request_id(request_id, prefix)
        body = await self._router.body(request)
        if key not in body:
            raise HttpError(invalid("Missing key", key))
        return body[key]

    def _reply_permission(
        self, request_id: str, reply: Any, directory: str | None
    ) -> httpx.Response:
        """``directory``: the request's (measured: a request of another directory is not
        found); ``None`` for the legacy route, whose scoping was not measured."""
        if reply not in ("once", "always", "reject"):
            return invalid(f'Expected "once" | "always" | "reject", got {js(reply)}', "reply")
        replied = {"reply": reply}
        return self._answer("permission", request_id, directory, replied, reply)

    def _answer(
        self,
        kind: Literal["permission", "question"],
        request_id: str,
        directory: str | None,
        said: dict[str, Any],
        result: Any,
    ) -> httpx.Response:
        """Answer a pending request of ``kind`` with ``result``: its ``replied`` event
        (``rejected`` for a question answered ``None``) carries ``said``."""
        pending = self._state.requests_pending.get(request_id)
        if (
            pending is None
            or pending.kind != kind
            or not self._state.in_directory(pending, directory)
        ):
            noun = kind.capitalize()
            return json_response(
                404,
                {
                    "_tag": f"{noun}NotFoundError",
                    "requestID": request_id,
                    "message": f"{noun} request not found: {request_id}",
                },
            )
        self._state.forget_request(request_id)
        event = "question.rejected" if kind == "question" and result is None else f"{kind}.replied"
        self._emit(event, {"sessionID": pending.session_id, "requestID": request_id, **said})
        if not pending.future.done():
            pending.future.set_result(result)
        return json_response(200, True)
