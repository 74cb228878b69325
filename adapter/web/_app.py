"""The routes of the stop-button backend, over an :class:`adapter.OpenCodeAdapter`.

The app owns nothing: the host creates, enters and closes the adapter, and may
mount this app under any prefix of its own Starlette/FastAPI app. Every route
answers JSON (``docs/web.md``, "Endpoints"), and every failure goes through
:func:`adapter.web._errors.response_for`, the one place that maps the adapter's
exceptions to statuses.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

import adapter
from adapter._logging import get_logger

from ._auth import BearerAuth
from ._body import (
    optional_str,
    path_session_id,
    path_thread_id,
    read_object,
    required_str,
    resume_value,
    thread_id_value,
)
from ._choices import checked_choices
from ._errors import ApiError, error_response, invalid, response_for
from ._guard import RequestGuard, allowed_host_names, allowed_origin_set
from ._headers import SecurityHeaders
from ._json import JsonResponse
from ._sse import FrameIds, event_response, snapshot_gap
from ._store import ThreadStore
from ._threads import Threads

__all__ = ["STATIC_DIR", "create_app"]

#: The page and its files (``GET /``, ``GET /static/{file}``).
STATIC_DIR = Path(__file__).resolve().parent / "static"

_log = get_logger("adapter.web")

Endpoint = Callable[[Request], Awaitable[Response]]
_DECISIONS = ("accept", "accept_for_session", "decline")


def create_app(
    oc: adapter.OpenCodeAdapter,
    *,
    token: str | None = None,
    allowed_hosts: Iterable[str] = (),
    allowed_origins: Iterable[str] = (),
    max_queue: int = 10_000,
    ping: float = 15.0,
    store: ThreadStore | None = None,
) -> Starlette:
    """The ASGI app (Starlette) serving the page and the JSON/SSE API over ``oc``.

    ``token``: when set, every route but the page (``GET /``) and ``/static/*``
    needs ``Authorization: Bearer <token>`` (``GET`` of the events route also takes
    ``?token=``, for ``EventSource``); set one whenever the app listens beyond
    loopback. Whatever the token, a request whose ``Host`` is not a loopback name,
    the address the app is served on or one of ``allowed_hosts`` is refused (DNS
    rebinding), and so is a cross-site one: an ``Origin`` other than the page's own
    or one of ``allowed_origins`` (``http(s)://host[:port]``), and a state-changing
    request that is not ``application/json`` (``docs/web.md``). Every answer carries
    a Content Security Policy and the framing, sniffing and referrer headers.

    ``max_queue``: events an SSE client may have unread before its stream ends with
    an overflow ``stream.gap`` frame (it reconnects with ``Last-Event-ID`` and
    catches up from the adapter's history). ``ping``: seconds between SSE keep-alive
    comments (0: none).

    ``store``: the thread store the app's workers share (``open_store``; the host
    opens and closes it). A thread id this worker does not hold is then resumed from
    its record before the request is served, ``GET /threads`` lists the store, and
    every change a later request depends on is written to it before the answer
    (``docs/web.md``, "Deploying: workers, hosts and restarts"). The threads this
    worker holds also have their status and turn id written as their turns end in
    the background: one subscription to ``oc``'s events, started by the app's lifespan
    or its first request, ended by the lifespan's shutdown or the adapter's close.
    Without a store the threads are the adapter's, in this process.
    """
    if not isinstance(oc, adapter.OpenCodeAdapter):
        raise adapter.InvalidInputError("create_app needs an OpenCodeAdapter")
    if token is not None and (not isinstance(token, str) or not token):
        raise adapter.InvalidInputError("token must be a non-empty string or None")
    if isinstance(max_queue, bool) or not isinstance(max_queue, int) or max_queue < 1:
        raise adapter.InvalidInputError("max_queue must be a positive integer")
    if isinstance(ping, bool) or not isinstance(ping, int | float) or ping < 0:
        raise adapter.InvalidInputError("ping must be a number of seconds >= 0")
    if store is not None and not isinstance(store, ThreadStore):
        raise adapter.InvalidInputError("store must be a ThreadStore (open_store) or None")
    hosts = allowed_host_names(allowed_hosts)
    origins = allowed_origin_set(allowed_origins)
    threads = Threads(oc, store)
    api = _Api(oc, threads, max_queue=max_queue, ping=float(ping))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        threads.follow()
        try:
            yield
        finally:
            await threads.aclose()

    # The API, in matching order: each route's failures take the one error shape (_guard).
    api_routes = (
        ("POST", "/threads", api.create_thread),
        ("GET", "/threads", api.list_threads),
        ("GET", "/inventory", api.inventory),
        ("GET", "/threads/{thread_id}", api.get_thread),
        ("POST", "/threads/{thread_id}/turns", api.send_turn),
        ("POST", "/threads/{thread_id}/stop", api.stop),
        ("POST", "/threads/{thread_id}/fork", api.fork),
        ("POST", "/threads/{thread_id}/commands", api.run_command),
        ("POST", "/threads/{thread_id}/subagents/{session_id}/stop", api.stop_subagent),
        ("GET", "/threads/{thread_id}/events", api.events),
        ("GET", "/threads/{thread_id}/tree", api.tree),
        ("POST", "/threads/{thread_id}/requests/{request_id}", api.reply),
    )
    routes: list[BaseRoute] = [
        Route("/", _page, methods=["GET"]),
        Mount("/static", app=StaticFiles(directory=STATIC_DIR, check_dir=False), name="static"),
        *(Route(path, _guard(handler), methods=[method]) for method, path, handler in api_routes),
    ]
    # Outermost first: every answer gets the headers, and the guard refuses a
    # request before the token check or any route sees it.
    middleware = [
        Middleware(SecurityHeaders),
        Middleware(RequestGuard, hosts=hosts, origins=origins),
    ]
    if token is not None:
        middleware.append(Middleware(BearerAuth, token=token))
    return Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={HTTPException: _http_error},
        lifespan=lifespan,
    )


def _guard(handler: Endpoint) -> Endpoint:
    """Every route's failures become the one error shape (never a traceback)."""

    async def endpoint(request: Request) -> Response:
        try:
            return await handler(request)
        except Exception as exc:
            return response_for(exc)

    endpoint.__name__ = handler.__name__
    return endpoint


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own 404/405 (an unknown route or file), in the app's shape."""
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    if status == 405:
        message = f"{request.method} is not allowed on {request.url.path}"
    else:
        message = f"nothing at {request.url.path}"
    return error_response(status, "not_found", message)


async def _page(request: Request) -> Response:
    index = STATIC_DIR / "index.html"
    if not index.is_file():
        return error_response(404, "not_found", "the page is not installed")
    return FileResponse(index, media_type="text/html")


class _Api:
    def __init__(
        self, oc: adapter.OpenCodeAdapter, threads: Threads, *, max_queue: int, ping: float
    ) -> None:
        self._oc = oc
        self._threads = threads
        self._agents = threads.agents
        self._max_queue = max_queue
        self._ping = ping
        # Frame ids that tell this worker's events from another's (with a store only:
        # without one, no other process serves the threads).
        self._ids = FrameIds() if threads.store is not None else None

    async def _thread(self, request: Request) -> str:
        """The path's thread id, held by this worker: resumed from the store when it is
        not (else 404 ``unknown_thread``)."""
        thread_id = path_thread_id(request)  # 422 outside the id grammar
        return await self._threads.held(thread_id)

    # -- threads ---------------------------------------------------------------------

    async def create_thread(self, request: Request) -> Response:
        body = await read_object(
            request, frozenset({"thread_id", "title", "resume", "model", "agent"})
        )
        thread_id = thread_id_value(body) or f"t_{secrets.token_hex(6)}"
        title = optional_str(body, "title")
        resume = resume_value(body)
        threads = self._threads
        threads.check_free(thread_id)
        model, agent = await checked_choices(self._oc, body)
        await threads.check_unclaimed(thread_id)  # 409 before anything is started
        async with threads.starting(thread_id):  # no await from its check to the start
            # A given cursor may name another worker's running session: the id is claimed
            # first, so a loser never stops it. A new session is started first (the
            # record needs its cursor), and stopped again if the claim fails.
            claimed = resume is not None and threads.store is not None
            if claimed:
                assert resume is not None
                await threads.claim(thread_id, resume, title=title, model=model, agent=agent)
            try:
                info = await self._oc.start_session(
                    thread_id, title=title, resume=resume, model=model
                )
            except adapter.InvalidInputError as exc:
                if claimed:
                    await threads.unclaim(thread_id)
                raise invalid("resume" if resume is not None else "thread_id", str(exc)) from None
            except BaseException:
                if claimed:
                    await threads.unclaim(thread_id)
                raise
            if claimed:
                await threads.claimed(info, agent=agent)
            else:
                await threads.created(info, title=title, model=model, agent=agent)
        _log.info("web.thread_created", thread_id=thread_id, session_id=info.session_id)
        return JsonResponse(info.to_dict(), status_code=201)

    async def fork(self, request: Request) -> Response:
        """``fork_thread``: a new thread on OpenCode's fork of this one's root (its
        directory, model, permission mode and agent); the source is untouched."""
        source = await self._thread(request)
        body = await read_object(request, frozenset({"thread_id"}))
        thread_id = thread_id_value(body) or f"t_{secrets.token_hex(6)}"
        threads = self._threads
        threads.check_free(thread_id)
        await threads.check_unclaimed(thread_id)
        origin = await threads.stored(source)
        async with threads.starting(thread_id):
            info = await self._oc.fork_thread(source, thread_id)
            await threads.created(
                info,
                title=None,
                model=origin.model if origin is not None else None,
                agent=self._agents.get(source),
            )
        _log.info("web.thread_forked", thread_id=thread_id, source=source)
        return JsonResponse(info.to_dict(), status_code=201)

    async def inventory(self, request: Request) -> Response:
        """What the server offers (models, agents, commands, skills, MCP, version); a
        part that could not be read is empty and named in ``errors``."""
        return JsonResponse((await self._oc.inventory()).to_dict())

    async def list_threads(self, request: Request) -> Response:
        return JsonResponse(await self._threads.listing())

    async def get_thread(self, request: Request) -> Response:
        return JsonResponse(self._oc.session_info(await self._thread(request)).to_dict())

    # -- turns and the stop ----------------------------------------------------------

    async def send_turn(self, request: Request) -> Response:
        thread_id = await self._thread(request)
        body = await read_object(request, frozenset({"text", "model", "agent"}))
        text = required_str(body, "text")
        model, agent = await checked_choices(self._oc, body)
        agent = agent or self._agents.get(thread_id)
        try:
            turn = await self._oc.send_turn(thread_id, text, model=model, agent=agent)
        except adapter.InvalidInputError as exc:
            raise invalid(_field_named(str(exc), ("model", "agent"), "text"), str(exc)) from None
        await self._threads.seen(thread_id)
        return JsonResponse({"turn_id": turn.turn_id}, status_code=202)

    async def run_command(self, request: Request) -> Response:
        """``run_command``: the server's slash command ``name`` as a new turn (202, as a
        prompt); an unknown one is 422 naming the server's, one while a turn runs 409."""
        thread_id = await self._thread(request)
        body = await read_object(request, frozenset({"name", "arguments", "model", "agent"}))
        name = required_str(body, "name")
        arguments = body.get("arguments", "")
        if not isinstance(arguments, str):
            raise invalid("arguments", "arguments must be a string")
        model, agent = await checked_choices(self._oc, body)
        busy = ApiError(409, "conflict", f"thread {thread_id!r} has a turn running: stop it first")
        if self._oc.session_info(thread_id).active_turn_id is not None:
            raise busy
        try:
            turn = await self._oc.run_command(
                thread_id, name, arguments, model=model, agent=agent or self._agents.get(thread_id)
            )
        except adapter.InvalidInputError as exc:
            if "has one running" in str(exc):  # a turn began while the inventory was read
                raise busy from None
            raise invalid("name", str(exc)) from None
        await self._threads.seen(thread_id)
        return JsonResponse({"turn_id": turn.turn_id}, status_code=202)

    async def stop(self, request: Request) -> Response:
        """``interrupt_turn``: concurrent calls (double clicks, several tabs) share one
        stop and all get its result; the adapter's timeouts bound it."""
        thread_id = await self._thread(request)
        await read_object(request, frozenset())
        result = await self._oc.interrupt_turn(thread_id)
        await self._threads.seen(thread_id)
        return JsonResponse(result.to_dict())

    async def stop_subagent(self, request: Request) -> Response:
        """``stop_subagent``: one subagent and its subtree; the root and the turn go on.
        The root (the turn's Stop stops it), a malformed id (422) and a session outside
        the thread's tree (404) are refused before anything is sent."""
        thread_id = await self._thread(request)
        session_id = path_session_id(request)
        await read_object(request, frozenset())
        if session_id == self._oc.session_info(thread_id).session_id:
            raise invalid("session_id", f"{session_id} is the thread's root: stop the turn")
        try:
            report = await self._oc.stop_subagent(thread_id, session_id)
        except adapter.InvalidInputError as exc:  # the id and the root were checked above
            raise ApiError(404, "not_found", str(exc)) from None
        if not report.ok:
            _log.warning("web.subagent_stop_failed", session_id=session_id)
            return error_response(
                502, "stop_failed", "the subagent's stop failed", extra={"stop": report.to_dict()}
            )
        return JsonResponse(report.to_dict())

    # -- what a page follows ---------------------------------------------------------

    async def events(self, request: Request) -> Response:
        thread_id = await self._thread(request)
        after = request.headers.get("last-event-id") or request.query_params.get("after")
        if after is not None and not after.strip():
            after = None
        # ``?replay=1``: start with the retained history (a page opened mid-turn); a
        # reconnect's Last-Event-ID wins over it, so nothing is sent twice.
        replay = after is None and request.query_params.get("replay") in ("1", "true")
        oc, max_queue = self._oc, self._max_queue
        lead: Callable[[], dict[str, Any]] | None = None
        if after is not None and self._ids is not None:
            given, after = after, self._ids.local(after)
            if after is None:
                # Another worker's or an earlier process's id: a gap holding the thread
                # as it is, then everything retained of it (its running turn so far).
                replay = True

                def lead() -> dict[str, Any]:
                    return snapshot_gap(oc.session_info(thread_id), given)

        def subscribe() -> adapter.EventStream:
            return oc.events(thread_id, after=after, replay=replay, max_queue=max_queue)

        return event_response(subscribe, thread_id, ping=self._ping, ids=self._ids, lead=lead)

    async def tree(self, request: Request) -> Response:
        tree = await self._oc.session_tree(await self._thread(request))
        return JsonResponse(tree.to_dict())

    # -- permission and question replies ---------------------------------------------

    async def reply(self, request: Request) -> Response:
        thread_id = await self._thread(request)
        request_id: str = request.path_params["request_id"]
        body = await read_object(request, frozenset({"decision", "answers", "reject"}))
        given = [k for k in ("decision", "answers", "reject") if k in body]
        if len(given) != 1:
            raise invalid(
                given[1] if len(given) > 1 else "decision",
                "give exactly one of decision, answers or reject",
            )
        if "decision" in body:
            decision = required_str(body, "decision")
            if decision not in _DECISIONS:
                raise invalid("decision", f"decision must be one of {', '.join(_DECISIONS)}")
            await self._oc.respond_to_request(thread_id, request_id, decision)
        elif "answers" in body:
            answers: Any = body["answers"]
            if not isinstance(answers, dict | list):
                raise invalid("answers", "answers must be an object or an array")
            try:
                await self._oc.respond_to_user_input(thread_id, request_id, answers)
            except adapter.InvalidInputError as exc:
                raise invalid("answers", str(exc)) from None
        else:
            if body["reject"] is not True:
                raise invalid("reject", "reject must be true")
            await self._oc.reject_user_input(thread_id, request_id)
        return JsonResponse({"ok": True})


def _field_named(message: str, fields: tuple[str, ...], default: str) -> str:
    """The field an adapter ``InvalidInputError`` message starts with, else ``default``."""
    return next((f for f in fields if message.startswith(f)), default)
