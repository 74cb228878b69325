"""The fake's HTTP front: the ``httpx`` transport, and a route table in front of the handlers.

Why a module: the real server's routing answers have rules of their own, apart from
what any route does: basic auth first, a ``BadRequest`` for a body that is not a JSON
object, a 500 for malformed JSON, a plain ``404 Not Found`` for a path it does not
route (its web UI). :class:`RouteTable` maps a method and a path pattern to a handler
(``{name}`` matches one segment, and a literal segment beats a parameter), so the
routes of :mod:`.session_routes` and :mod:`.server_routes` are listed, not searched
through an if-chain; :class:`Router` applies the rules around them.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeAlias
from urllib.parse import parse_qs, unquote

import httpx

from .id_minting import IdMinter
from .session_data import FakeSession, Settings
from .wire import (
    JSON,
    HttpError,
    invalid,
    js,
    json_response,
    resolve_directory,
    session_not_found,
)

Handler: TypeAlias = Callable[[httpx.Request, tuple[str, ...]], Awaitable[httpx.Response]]
"""A route's handler: the request and the path's ``{name}`` segments, in order."""

SessionHandler: TypeAlias = Callable[[httpx.Request, FakeSession], Awaitable[httpx.Response]]
"""The handler of a route of one existing session (:meth:`Router.of_session`)."""


class Transport(httpx.AsyncBaseTransport):
    """Hands each request to the fake, in the caller's event loop."""

    def __init__(self, handle: Callable[[httpx.Request], Awaitable[httpx.Response]]) -> None:
        self._handle = handle

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        # Like a socket transport, give up when the answer does not start within
        # the client's read timeout (httpx only enforces it on real sockets).
        timeouts = request.extensions.get("timeout")
        read = timeouts.get("read") if isinstance(timeouts, dict) else None
        if read is None:
            return await self._handle(request)
        try:
            async with asyncio.timeout(read):
                return await self._handle(request)
        except TimeoutError:
            raise httpx.ReadTimeout(
                "the fake server did not answer in time", request=request
            ) from None


class RouteTable:
    """Method + path pattern -> handler."""

    def __init__(self) -> None:
        # (method, segment count) -> [(segments, None for a parameter; handler)]
        self._routes: dict[tuple[str, int], list[tuple[tuple[str | None, ...], Handler]]] = {}

    def add(self, method: str, pattern: str, handler: Handler) -> None:
        segments = tuple(
            None if s.startswith("{") else s for s in pattern.strip("/").split("/") if s
        )
        routes = self._routes.setdefault((method, len(segments)), [])
        routes.append((segments, handler))
        # ``/session/status`` before ``/session/{id}``: fewer parameters first.
        routes.sort(key=lambda route: sum(s is None for s in route[0]))

    def match(self, method: str, parts: list[str]) -> tuple[Handler, tuple[str, ...]] | None:
        for segments, handler in self._routes.get((method, len(parts)), ()):
            params: list[str] = []
            for want, got in zip(segments, parts, strict=True):
                if want is None:
                    params.append(got)
                elif want != got:
                    break
            else:
                return handler, tuple(params)
        return None


class Router:
    """Auth, the route table, and what every handler needs from a request."""

    def __init__(self, settings: Settings, ids: IdMinter, auth_token: str | None) -> None:
        self.table = RouteTable()
        self._settings = settings
        self._ids = ids
        self._auth = None if auth_token is None else {auth_token}

    async def route(self, request: httpx.Request, method: str, path: str) -> httpx.Response:
        if not self._authorized(request):
            return httpx.Response(
                401,
                content=b"Unauthorized",
                headers={"www-authenticate": 'Basic realm="Secure Area"'},
            )
        parts = [p for p in path.split("/") if p]
        found = self.table.match(method, parts)
        if found is None:
            # An unrouted path (the real server serves its web UI there). Under
            # /session/{id}/ the fake has always answered without a content type.
            if len(parts) >= 2 and parts[0] == "session":
                return httpx.Response(404, content=b"404 Not Found")
            return httpx.Response(
                404, content=b"404 Not Found", headers={"content-type": "text/plain"}
            )
        handler, params = found
        try:
            return await handler(request, params)
        except HttpError as exc:
            return exc.response

    def _authorized(self, request: httpx.Request) -> bool:
        if self._auth is None:
            return True
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() == "basic" and token.strip() in self._auth:
            return True
        query = parse_qs(request.url.query.decode())
        return any(t in self._auth for t in query.get("auth_token", []))

    def request_directory(self, request: httpx.Request) -> str:
        """The directory a request is served in (measured on 1.18.34): ``?directory=``,
        else the ``x-opencode-directory`` header (percent-decoded; raw non-ASCII bytes
        read as Latin-1, as the real server does), else the server's directory."""
        cwd = self._settings.directory
        query = parse_qs(request.url.query.decode()).get("directory")
        if query and query[0]:
            return resolve_directory(query[0], cwd)
        for name, raw in request.headers.raw:
            if name.lower() == b"x-opencode-directory" and raw:
                value = raw.decode("latin-1")
                with contextlib.suppress(UnicodeDecodeError):
                    value = unquote(value, errors="strict")
                return resolve_directory(value, cwd)
        return cwd

    async def body(self, request: httpx.Request) -> JSON:
        raw = await request.aread()
        if not raw:
            return {}
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            # Measured: malformed JSON is an unexpected error (500), not a 400.
            raise HttpError(self.unexpected_error()) from None
        if not isinstance(body, dict):
            raise HttpError(invalid(f"Expected object, got {js(body)}"))
        return body

    def of_session(self, sessions: Mapping[str, FakeSession], handler: SessionHandler) -> Handler:
        """A route of one existing session of ``sessions``: ``{id}`` (the first
        parameter) without its ``ses`` prefix is a 500 (measured), an unknown session
        a 404."""

        async def route(request: httpx.Request, params: tuple[str, ...]) -> httpx.Response:
            session_id = params[0]
            if not session_id.startswith("ses"):
                return self.unexpected_error()
            session = sessions.get(session_id)
            if session is None:
                return session_not_found(session_id)
            return await handler(request, session)

        return route

    def unexpected_error(self) -> httpx.Response:
        """The real server's 500 for what its handlers did not expect (malformed JSON,
        an id without its ``ses`` prefix in the path)."""
        message = "Unexpected server error. Check server logs for details."
        ref = f"err_{self._ids.rng.getrandbits(32):08x}"
        return json_response(
            500, {"name": "UnknownError", "data": {"message": message, "ref": ref}}
        )


def basic_token(username: str, password: str) -> str:
    return base64.b64encode(f"{username}:{password}".encode()).decode()
