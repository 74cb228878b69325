"""The optional bearer token: every route but the page and its static files needs it.

A pure ASGI middleware (not ``BaseHTTPMiddleware``, which would buffer the event
stream), so unknown paths are refused too and nothing about the API leaks to a
client without the token. ``EventSource`` cannot set headers, so a ``GET`` (or
``HEAD``) of exactly the events route ``/threads/{id}/events`` also takes
``?token=``, and nothing else does: a token in a URL ends up in histories and
logs, so no other route invites one. Compared with :func:`hmac.compare_digest`, so the
answer time says nothing about how much of a guess was right.
"""

from __future__ import annotations

import hmac
import re
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Receive, Scope, Send

from ._errors import error_response

__all__ = ["BearerAuth"]

#: The one route that takes ``?token=`` (a thread id is one path segment).
_EVENTS = re.compile(r"/threads/[^/]+/events")


class BearerAuth:
    def __init__(self, app: ASGIApp, *, token: str) -> None:
        self._app = app
        self._token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self._public(scope) or self._authorised(scope):
            await self._app(scope, receive, send)
            return
        response = error_response(
            401,
            "unauthorized",
            "a bearer token is required (Authorization: Bearer <token>)",
            headers={"WWW-Authenticate": "Bearer"},
        )
        await response(scope, receive, send)

    @staticmethod
    def _route_path(scope: Scope) -> str:
        """The path inside the app, also when a host mounts it under a prefix."""
        path: str = scope["path"]
        root: str = scope.get("root_path", "")
        return path[len(root) :] if root and path.startswith(root) else path

    def _public(self, scope: Scope) -> bool:
        path = self._route_path(scope)
        return scope["method"] in ("GET", "HEAD") and (path == "/" or path.startswith("/static/"))

    def _authorised(self, scope: Scope) -> bool:
        for name, value in scope["headers"]:
            if name == b"authorization":
                scheme, _, credential = value.partition(b" ")
                if scheme.lower() == b"bearer" and self._matches(credential.strip()):
                    return True
        if scope["method"] in ("GET", "HEAD") and _EVENTS.fullmatch(self._route_path(scope)):
            query = parse_qs(scope.get("query_string", b""))
            return any(self._matches(t) for t in query.get(b"token", []))
        return False

    def _matches(self, candidate: bytes) -> bool:
        return hmac.compare_digest(candidate, self._token)
