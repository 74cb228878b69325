"""Session ownership: which thread each session of the server belongs to.

A thread owns its root and every session spawned below it: a subagent's
child (announced by ``session.created`` with a known parent, or by a running
``task`` call naming it), a child created through the API, and anything the
stop walk finds. An event of a session nobody owns is either a stranger's
(another client's work on the same server: ignored, and remembered so it
costs nothing next time) or of a child whose birth we missed. For a request
(permission, question) from such a session the ancestry is looked up: a
subagent waiting for an approval nobody sees waits forever, so a failed
lookup is retried with backoff and, if the thread still cannot be found, the
request is surfaced to the host as a ``runtime.warning`` carrying it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ._core import AdapterCore
from ._events import ChildStarted, RuntimeWarningEvent
from ._exceptions import OpenCodeError
from ._logging import get_logger
from ._native import NativeEvent, PermissionAsked, QuestionAsked
from ._thread import ThreadState

__all__ = ["Ownership"]

_log = get_logger("adapter.ownership")

_MAX_DEPTH = 16
_LOOKUP_ATTEMPTS = 4


class Ownership:
    def __init__(self, core: AdapterCore, redispatch: Callable[[NativeEvent], None]) -> None:
        self._core = core
        self._redispatch = redispatch
        self._lookups: dict[str, asyncio.Task[None]] = {}
        self._permits = asyncio.Semaphore(2)
        #: Base delay of the lookup's retries (tests shorten it).
        self.retry_delay = 0.2

    def adopt(
        self,
        thread: ThreadState,
        session_id: str,
        parent_id: str | None,
        *,
        title: str | None = None,
        raw: NativeEvent | None = None,
    ) -> None:
        """Make ``session_id`` part of ``thread``'s tree (announced once, as ``child.started``)."""
        if session_id in thread.sessions:
            return
        turn = thread.turn
        thread.sessions[session_id] = turn.turn_id if turn else None
        thread.parents[session_id] = parent_id
        if title:
            thread.titles[session_id] = title
        self._core.owner[session_id] = thread
        if turn is not None:
            turn.collector.add_session(session_id, parent_id)
        if parent_id is not None:
            self._core.emit(
                ChildStarted(
                    thread_id=thread.thread_id,
                    turn_id=turn.turn_id if turn else None,
                    session_id=session_id,
                    parent_id=parent_id,
                    title=title,
                    raw=raw.raw if raw is not None else None,
                )
            )

    def route_request(self, event: PermissionAsked | QuestionAsked) -> None:
        """A request from a session no thread owns yet: find its thread through its
        ancestry. One lookup per session at a time, a cache of strangers, at most
        two lookups at once, so a flood of foreign events cannot crowd out the
        Stop button's requests."""
        session_id = event.session_id
        if session_id in self._core.strangers or self._core.closed:
            return
        running = self._lookups.get(session_id)
        if running is not None:
            running.add_done_callback(lambda _: self._redispatch_if_ours(event))
            return
        task = self._core.tasks.spawn(self._route(event), name="route-request")
        self._lookups[session_id] = task
        task.add_done_callback(lambda _: self._lookups.pop(session_id, None))

    def _redispatch_if_ours(self, event: NativeEvent) -> None:
        if event.session_id in self._core.owner and not self._core.closed:
            self._redispatch(event)

    async def _route(self, event: PermissionAsked | QuestionAsked) -> None:
        core = self._core
        client = next(iter(core.clients.values()), None)
        if client is None:
            return
        chain: list[tuple[str, str | None]] = []
        current: str | None = event.session_id
        delay = self.retry_delay
        async with self._permits:
            for _ in range(_MAX_DEPTH):
                if current is None or current in core.owner or current in core.strangers:
                    break
                for attempt in range(_LOOKUP_ATTEMPTS):
                    try:
                        session = await client.get_session(current)
                        break
                    except OpenCodeError as exc:
                        _log.warning(
                            "adapter.ancestry_failed",
                            session_id=current,
                            attempt=attempt + 1,
                            error=str(exc),
                        )
                        if attempt + 1 == _LOOKUP_ATTEMPTS:
                            self._unroutable(event, str(exc))
                            return
                        await asyncio.sleep(delay * 2**attempt)
                chain.append((session.id, session.parent_id))
                current = session.parent_id
        if current is None or current not in core.owner:
            for sid, _ in chain:
                core.strangers.add(sid)
            return
        thread = core.owner[current]
        for sid, parent in reversed(chain):
            self.adopt(thread, sid, parent)
        self._redispatch_if_ours(event)

    def _unroutable(self, event: PermissionAsked | QuestionAsked, error: str) -> None:
        """Never drop a request silently: every thread that could own it hears of it."""
        kind = "permission" if isinstance(event, PermissionAsked) else "question"
        threads = [t for t in self._core.threads.values() if not t.closing]
        running = [t for t in threads if t.turn is not None]
        for thread in running or threads:
            self._core.emit(
                RuntimeWarningEvent(
                    thread_id=thread.thread_id,
                    turn_id=thread.lifecycle.turn_id,
                    message=(
                        f"a {kind} request ({event.request_id}) of session {event.session_id} "
                        f"could not be routed to its thread: reading its ancestry failed ({error})"
                    ),
                    request_id=event.request_id,
                    session_id=event.session_id,
                    raw=event.raw,
                )
            )
