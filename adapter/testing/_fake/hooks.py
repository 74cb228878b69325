"""Fault injection: hooks that answer, fail or hold requests before the fake routes them.

Why a module: tests reproduce what a network and a busy server do to a client (a
request that fails, hangs, or arrives while a run is ending) by putting a hook in
front of the routes. :class:`HookChain` runs them in order; :class:`Hold` and
:class:`RunEndHold` keep a request or a run's end waiting until the test releases it.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

import httpx

from .session_data import RecordedRequest
from .wire import json_response

HookHandler: TypeAlias = Callable[[httpx.Request], Awaitable[httpx.Response | None]]
"""A fault-injection handler: return a response to short-circuit, ``None`` to fall through."""


def _compile_pattern(pattern: str) -> re.Pattern[str]:
    """``{name}`` matches one path segment, ``*`` anything, the rest itself."""
    out = []
    for piece in re.split(r"(\{[^/{}]*\}|\*)", pattern):
        if piece == "*":
            out.append(".*")
        elif piece.startswith("{") and piece.endswith("}"):
            out.append("[^/]+")
        else:
            out.append(re.escape(piece))
    return re.compile("".join(out))


class RequestPattern:
    """A method (``"*"``: any) and a path pattern, as :meth:`FakeOpenCodeServer.on` takes
    them: ``{name}`` matches one path segment, ``*`` anything."""

    def __init__(self, method: str, pattern: str) -> None:
        self.method = method.upper()
        self.pattern = pattern
        self._regex = _compile_pattern(pattern)

    def matches(self, method: str, path: str) -> bool:
        """Whether a request with ``method`` and ``path`` matches."""
        return (self.method in ("*", method)) and self._regex.fullmatch(path) is not None


class Hook(RequestPattern):
    """A registered fault-injection handler (see :meth:`FakeOpenCodeServer.on`).

    Like a respx route, it keeps what went through it: :attr:`calls`, every matching
    request in order (also those its handler let through), and :attr:`call_count`.
    """

    def __init__(
        self,
        owner: HookChain,
        method: str,
        pattern: str,
        handler: HookHandler,
    ) -> None:
        super().__init__(method, pattern)
        self.handler = handler
        self.calls: list[RecordedRequest] = []
        """The requests that matched this hook, oldest first (the records of
        ``fake.requests``: ``status`` is set once each was answered)."""
        self._owner = owner

    @property
    def call_count(self) -> int:
        """How many requests matched this hook."""
        return len(self.calls)

    @property
    def called(self) -> bool:
        """Whether any request matched this hook."""
        return bool(self.calls)

    def remove(self) -> None:
        """Unregister the hook (idempotent)."""
        with contextlib.suppress(ValueError):
            self._owner.hooks.remove(self)


class HookChain:
    """The registered hooks, in order, and the holds to release when the server closes."""

    def __init__(self) -> None:
        self.hooks: list[Hook] = []
        self.holds: list[Hold] = []

    def add(self, method: str, path_pattern: str, handler: HookHandler) -> Hook:
        hook = Hook(self, method, path_pattern, handler)
        self.hooks.append(hook)
        return hook

    async def answer(
        self, request: httpx.Request, record: RecordedRequest
    ) -> httpx.Response | None:
        """The first response a matching hook gives, else ``None``."""
        for hook in list(self.hooks):
            if hook.matches(record.method, record.path):
                hook.calls.append(record)
                response = await hook.handler(request)
                if response is not None:
                    return response
        return None

    def release_holds(self) -> None:
        for hold in self.holds:
            hold.release()


def failure(status: int, times: int | None, body: Any) -> HookHandler:
    """A handler answering the next ``times`` requests (``None``: all) with ``status``
    and ``body`` (see :meth:`FakeOpenCodeServer.fail`)."""
    remaining = [times]

    async def handler(request: httpx.Request) -> httpx.Response | None:
        if remaining[0] is not None:
            if remaining[0] <= 0:
                return None
            remaining[0] -= 1
        if body is None:
            return json_response(
                status,
                {"name": "UnknownError", "data": {"message": f"injected failure ({status})"}},
            )
        if isinstance(body, bytes | str):
            content = body.encode() if isinstance(body, str) else body
            return httpx.Response(
                status, content=content, headers={"content-type": "application/json"}
            )
        return json_response(status, body)

    return handler


class Hold:
    """Holds matching requests until :meth:`release` (see :meth:`FakeOpenCodeServer.hold`).

    ``started`` is set when the first matching request arrives; ``requests`` lists
    every held request. After :meth:`release`, held and later requests proceed
    normally (call ``hook.remove()`` to stop matching entirely).
    """

    def __init__(self, what: str = "the hold", report: Callable[[], str] | None = None) -> None:
        self.started = asyncio.Event()
        self.requests: list[httpx.Request] = []
        self.hook: Hook | None = None
        self._released = asyncio.Event()
        self._what = what
        """How a failed :meth:`wait_started` names this hold (``fake.hold('POST', ...)``)."""
        self._report = report
        """The fake's state, as a failed :meth:`wait_started` shows it."""

    @property
    def calls(self) -> list[RecordedRequest]:
        """The requests that matched this hold, oldest first (its hook's ``calls``;
        none for a :class:`RunEndHold`, which holds runs, not requests)."""
        return [] if self.hook is None else self.hook.calls

    @property
    def call_count(self) -> int:
        """How many requests matched this hold."""
        return len(self.calls)

    @property
    def released(self) -> bool:
        """Whether :meth:`release` was called."""
        return self._released.is_set()

    def release(self) -> None:
        """Let every held (and future) request through."""
        self._released.set()

    async def wait_started(self, timeout: float = 5.0) -> None:
        """Wait until a request (a run, for :class:`RunEndHold`) is held.

        Raises ``TimeoutError`` after ``timeout`` seconds, naming the hold and showing
        the fake's state (``fake.describe_state()``).
        """
        try:
            async with asyncio.timeout(timeout):
                await self.started.wait()
        except TimeoutError:
            state = "" if self._report is None else "\n" + self._report()
            raise TimeoutError(f"{self._what} held nothing within {timeout}s{state}") from None

    async def _handle(self, request: httpx.Request) -> httpx.Response | None:
        self.requests.append(request)
        self.started.set()
        await self._released.wait()
        return None


class RunEndHold(Hold):
    """Holds runs in their finishing window (see :meth:`FakeOpenCodeServer.hold_run_end`).

    ``started`` is set when the first matching run has finished its last step;
    ``session_ids`` lists the sessions held there (``requests`` stays empty). A prompt
    sent while a run is held is echoed after that run's idle and starts a second run,
    as on the real server. :meth:`release` lets every held (and later) run end.
    """

    def __init__(
        self, session_id: str | None = None, report: Callable[[], str] | None = None
    ) -> None:
        what = "fake.hold_run_end(" + ("" if session_id is None else repr(session_id)) + ")"
        super().__init__(what, report)
        self.session_id = session_id
        """The session whose runs are held; ``None``: every session's."""
        self.session_ids: list[str] = []

    async def _reached(self, session_id: str) -> None:
        if self.released or self.session_id not in (None, session_id):
            return
        self.session_ids.append(session_id)
        self.started.set()
        await self._released.wait()
