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
request is surfaced to the host as a ``runtime.warning`` carrying it. A request
answered (elsewhere) while its lookup runs is dropped, and a lookup left with
nothing to deliver stops: a prompt nobody waits for would be worse than none.

A request whose thread was found is put on :attr:`Ownership.routed`, not handed
back to the translator: the adapter, which owns the translation loop, reads the
queue and translates it like any event of the thread. This module never calls up.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from .._client._native import (
    NativeEvent,
    PermissionAsked,
    PermissionReplied,
    QuestionAsked,
    QuestionRejected,
    QuestionReplied,
)
from .._exceptions import OpenCodeError
from .._logging import get_logger
from .._types._events import ChildStarted, RuntimeWarningEvent
from ._registry import ThreadRegistry
from ._thread_state import ThreadState

__all__ = ["Ownership"]

_log = get_logger("adapter.ownership")

_MAX_DEPTH = 16
_LOOKUP_ATTEMPTS = 4


@dataclass(slots=True)
class _Lookup:
    """The ancestry lookup of one session, and its requests waiting on it (by id)."""

    requests: dict[str, PermissionAsked | QuestionAsked]
    task: asyncio.Task[None] | None = None


class Ownership:
    def __init__(self, core: ThreadRegistry) -> None:
        self._registry = core
        #: Requests whose thread a lookup found, to be translated as that thread's.
        self.routed: asyncio.Queue[PermissionAsked | QuestionAsked] = asyncio.Queue()
        #: The lookups in flight (or waiting for a permit), per session.
        self._lookups: dict[str, _Lookup] = {}
        self._permits = asyncio.Semaphore(2)

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
        if session_id in thread.tree.sessions:
            return
        turn = thread.turn
        thread.tree.sessions[session_id] = turn.turn_id if turn else None
        thread.tree.parents[session_id] = parent_id
        if title:
            thread.tree.titles[session_id] = title
        self._registry.own(session_id, thread)
        if turn is not None:
            turn.collector.add_session(session_id, parent_id)
        if parent_id is not None:
            self._registry.emit(
                ChildStarted(
                    thread_id=thread.thread_id,
                    turn_id=turn.turn_id if turn else None,
                    session_id=session_id,
                    parent_id=parent_id,
                    title=title,
                    raw=raw.raw if raw is not None else None,
                )
            )
            thread.subagents.joined(session_id, parent_id, turn.turn_id if turn else None, title)

    def route_request(self, event: PermissionAsked | QuestionAsked) -> None:
        """A request from a session no thread owns yet: find its thread through its
        ancestry. One lookup per session at a time (later requests of the session
        wait for it), a cache of strangers, at most two lookups at once, so a flood
        of foreign events cannot crowd out the Stop button's requests."""
        session_id = event.session_id
        core = self._registry
        if session_id in core.strangers or core.closed or event.request_id in core.answered:
            return  # a stranger's, or answered already (elsewhere): nothing to announce
        running = self._lookups.get(session_id)
        if running is not None:
            running.requests.setdefault(event.request_id, event)
            return
        lookup = _Lookup({event.request_id: event})
        self._lookups[session_id] = lookup
        lookup.task = core.tasks.spawn(self._route(session_id, lookup), name="route-request")
        lookup.task.add_done_callback(lambda _: self._forget(session_id, lookup))

    def request_answered(
        self, event: PermissionReplied | QuestionReplied | QuestionRejected
    ) -> None:
        """A request of a session no thread owns was answered (elsewhere) or dismissed.

        It may still be announced: its lookup may be retrying, or a recovery may have
        listed it before the answer. So the answer is remembered (``core.answered``,
        which :meth:`route_request` and ``Requests.opened`` consult), and a lookup left
        with no unanswered request stops at once, with no more tries and no warning.
        A known stranger's answers are not remembered: they would only crowd the
        bounded memory."""
        session_id = event.session_id
        if session_id in self._registry.strangers:
            return
        self._registry.answered.add(event.request_id)
        lookup = self._lookups.get(session_id)
        if lookup is None:
            return
        lookup.requests.pop(event.request_id, None)
        if not lookup.requests:
            self._forget(session_id, lookup)  # a request routed from now on starts afresh
            if lookup.task is not None:
                lookup.task.cancel()

    def _forget(self, session_id: str, lookup: _Lookup) -> None:
        if self._lookups.get(session_id) is lookup:
            del self._lookups[session_id]

    async def _route(self, session_id: str, lookup: _Lookup) -> None:
        core = self._registry
        client = next(iter(core.clients.values()), None)
        if client is None:
            self._forget(session_id, lookup)
            return
        chain: list[tuple[str, str | None]] = []
        current: str | None = session_id
        delay = self._registry.timeouts.owner_lookup_retry
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
                            self._forget(session_id, lookup)
                            for event in lookup.requests.values():
                                self._unroutable(event, str(exc))
                            return
                        await asyncio.sleep(delay * 2**attempt)
                chain.append((session.id, session.parent_id))
                current = session.parent_id
        # From here on nothing awaits: a request of the session routed after this
        # point finds it owned (or a stranger), not this lookup.
        self._forget(session_id, lookup)
        if current is None or current not in core.owner:
            for sid, _ in chain:
                core.strangers.add(sid)
            return
        thread = core.owner[current]
        for sid, parent in reversed(chain):
            self.adopt(thread, sid, parent)
        if not core.closed:
            for event in list(lookup.requests.values()):  # the unanswered ones
                self.routed.put_nowait(event)

    def _unroutable(self, event: PermissionAsked | QuestionAsked, error: str) -> None:
        """Never drop a request silently: every thread that could own it hears of it."""
        kind = "permission" if isinstance(event, PermissionAsked) else "question"
        threads = [t for t in self._registry.threads.values() if not t.closing]
        running = [t for t in threads if t.turn is not None]
        for thread in running or threads:
            self._registry.emit(
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
