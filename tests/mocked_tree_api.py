"""A respx-mocked session-tree API for contract tests of the client and ``stop_tree``.

It serves exactly the three routes the walk may use (abort, children, status)
and records every request, the number in flight and its peak. respx rejects
any other request, so a test fails if the walk touches anything else.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import httpx
import respx

from adapter import OpenCodeClient

BASE = "http://opencode.test"

Hook = Callable[[str], Awaitable[httpx.Response | None]]


def session_json(session_id: str, parent_id: str | None, created: float) -> dict[str, object]:
    data: dict[str, object] = {
        "id": session_id,
        "title": f"title of {session_id}",
        "directory": "/project",
        "time": {"created": created, "updated": created},
    }
    if parent_id is not None:
        data["parentID"] = parent_id
    return data


@dataclass
class TreeApi:
    """Children of each session, plus hooks to hold, fail or slow any request."""

    router: respx.MockRouter
    children: dict[str, list[str]] = field(default_factory=dict)
    busy: set[str] = field(default_factory=set)
    latency: Callable[[str, str], float] | None = None
    abort_hooks: dict[str, Hook] = field(default_factory=dict)
    children_hooks: dict[str, Hook] = field(default_factory=dict)
    status_hook: Callable[[], Awaitable[httpx.Response | None]] | None = None
    calls: list[tuple[str, str]] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    created: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.router.post(path__regex=r"^/session/(?P<sid>[^/]+)/abort$").mock(
            side_effect=self._abort
        )
        self.router.get(path__regex=r"^/session/(?P<sid>[^/]+)/children$").mock(
            side_effect=self._children
        )
        self.router.get(path="/session/status").mock(side_effect=self._status)

    @property
    def aborts(self) -> list[str]:
        return [sid for kind, sid in self.calls if kind == "abort"]

    @property
    def listings(self) -> list[str]:
        return [sid for kind, sid in self.calls if kind == "children"]

    async def _enter(self, kind: str, sid: str) -> None:
        self.calls.append((kind, sid))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        if self.latency is not None:
            await asyncio.sleep(self.latency(kind, sid))

    async def _serve(
        self,
        kind: str,
        sid: str,
        hook: Callable[[], Awaitable[httpx.Response | None]] | None,
        answer: Callable[[], httpx.Response],
    ) -> httpx.Response:
        """One request, counted while in flight: the hook's response if it gives one,
        else ``answer()``."""
        await self._enter(kind, sid)
        try:
            if hook is not None and (response := await hook()) is not None:
                return response
            return answer()
        finally:
            self.in_flight -= 1

    async def _abort(self, request: httpx.Request, sid: str) -> httpx.Response:
        def aborted() -> httpx.Response:
            self.busy.discard(sid)
            return httpx.Response(200, json=True)

        hook = self.abort_hooks.get(sid)
        return await self._serve(
            "abort", sid, None if hook is None else functools.partial(hook, sid), aborted
        )

    async def _children(self, request: httpx.Request, sid: str) -> httpx.Response:
        def listed() -> httpx.Response:
            if sid not in self.children and not any(sid in v for v in self.children.values()):
                return not_found(sid)
            kids = self.children.get(sid, [])
            body = [
                session_json(k, sid, self.created.get(k, 1000.0 + i)) for i, k in enumerate(kids)
            ]
            return httpx.Response(200, json=body)

        hook = self.children_hooks.get(sid)
        return await self._serve(
            "children", sid, None if hook is None else functools.partial(hook, sid), listed
        )

    async def _status(self, request: httpx.Request) -> httpx.Response:
        def statuses() -> httpx.Response:
            return httpx.Response(200, json={sid: {"type": "busy"} for sid in sorted(self.busy)})

        return await self._serve("status", "", self.status_hook, statuses)


def session_calls(client: OpenCodeClient, session_id: str) -> list[Coroutine[Any, Any, object]]:
    """Each call of ``client`` that names one session in its path (a test adds its own)."""
    return [
        client.abort(session_id),
        client.children(session_id),
        client.get_session(session_id),
        client.messages(session_id),
    ]


def not_found(sid: str) -> httpx.Response:
    return httpx.Response(
        404, json={"name": "NotFoundError", "data": {"message": f"Session not found: {sid}"}}
    )


def error(status: int, message: str = "boom") -> httpx.Response:
    return httpx.Response(
        status, content=json.dumps({"name": "UnknownError", "data": {"message": message}})
    )


class Gate:
    """Hold requests until released; ``started`` is set when the first one arrives."""

    def __init__(self, response: httpx.Response | None = None) -> None:
        self.started = asyncio.Event()
        self.released = asyncio.Event()
        self.response = response
        self.count = 0

    async def __call__(self, sid: str) -> httpx.Response | None:
        self.count += 1
        self.started.set()
        await self.released.wait()
        return self.response

    def release(self) -> None:
        self.released.set()
