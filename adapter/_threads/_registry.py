"""The adapter's shared core: what every part of it reads, and nothing else.

The thread registry, the session -> thread map, the clients per directory,
the canonical event fan-out, the owner of every background task, the
settings. Every concept module (:mod:`adapter._stream._pump`,
:mod:`adapter._threads._session_owners`, :mod:`adapter._requests._pending`,
:mod:`adapter._turns._running`, :mod:`adapter._stream._translator`,
:mod:`adapter._stop._interrupt`) imports this module; it imports none of them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from .._base._tasks import TaskOwner
from .._client import OpenCodeClient
from .._exceptions import (
    AdapterClosedError,
    ServerExitedError,
    SessionClosedError,
    UnknownThreadError,
)
from .._logging import get_logger
from .._stream._hub import EventHub
from .._stream._replay_window import DEFAULT_HISTORY_BYTES, DEFAULT_HISTORY_LIMIT
from .._timeouts import Timeouts
from .._types._events import Event, RuntimeErrorEvent
from ._thread_state import ThreadState

__all__ = ["AdapterCore", "BoundedSet", "Limits", "ThreadTable"]

_log = get_logger("adapter")


@dataclass(frozen=True, slots=True)
class Limits:
    stop_concurrency: int = 8
    max_output_bytes: int = 64 * 1024
    max_tree_sessions: int = 10_000
    eager_root_listing: bool = False
    event_history: int = DEFAULT_HISTORY_LIMIT
    event_history_bytes: int = DEFAULT_HISTORY_BYTES


class BoundedSet:
    """A set that forgets its oldest members past ``capacity`` (caches of ids)."""

    def __init__(self, capacity: int = 4096) -> None:
        self._capacity = capacity
        self._items: dict[str, None] = {}

    def add(self, item: str) -> None:
        self._items[item] = None
        if len(self._items) > self._capacity:
            self._items.pop(next(iter(self._items)))

    def __contains__(self, item: object) -> bool:
        return item in self._items

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        self._items.clear()


class ThreadTable(dict[str, ThreadState]):
    """The threads by id, and who waits for one to be registered.

    Why: ``stop_all`` must close a start that is still creating (or reading) its
    session, whose thread is not registered yet. It waits here for that thread
    (:meth:`registered`) and closes it the moment it is registered, before the start
    can finish: the start then sees its thread closing and raises."""

    def __init__(self) -> None:
        super().__init__()
        self._waiters: dict[str, list[asyncio.Future[ThreadState]]] = {}

    def __setitem__(self, thread_id: str, thread: ThreadState) -> None:
        super().__setitem__(thread_id, thread)
        for waiter in self._waiters.pop(thread_id, ()):
            if not waiter.done():
                waiter.set_result(thread)

    async def registered(self, thread_id: str, start: asyncio.Future[Any]) -> ThreadState | None:
        """The thread ``thread_id`` once it is registered, or ``None`` if ``start`` (the
        start that would register it) ended first."""
        if thread_id in self:
            return self[thread_id]
        waiter: asyncio.Future[ThreadState] = asyncio.get_running_loop().create_future()
        waiters = self._waiters.setdefault(thread_id, [])
        waiters.append(waiter)
        try:
            await asyncio.wait([waiter, start], return_when=asyncio.FIRST_COMPLETED)
        finally:
            if waiter in waiters:
                waiters.remove(waiter)
            if not waiters:
                self._waiters.pop(thread_id, None)
            waiter.cancel()
        return waiter.result() if waiter.done() and not waiter.cancelled() else None


class AdapterCore:
    def __init__(
        self,
        *,
        base_url: str | None,
        password: str | None,
        transport: httpx.AsyncBaseTransport | None,
        timeouts: Timeouts,
        limits: Limits,
    ) -> None:
        #: The server's URL: given, or set by the facade once the server it started is up.
        self.base_url = base_url
        self.password = password
        self.transport = transport
        self.timeouts = timeouts
        self.limits = limits
        self.hub = EventHub(limits.event_history, limits.event_history_bytes)
        #: The canonical fan-out (the hub's own method: one call less per event).
        self.emit: Callable[[Event], None] = self.hub.emit
        self.tasks = TaskOwner("opencode-adapter")
        self.clients: dict[str | None, OpenCodeClient] = {}
        self.threads = ThreadTable()
        #: Every session of every thread's tree -> its thread.
        self.owner: dict[str, ThreadState] = {}
        #: Sessions known not to be ours (bounded), so foreign events cost no lookup.
        self.strangers = BoundedSet()
        #: Requests seen answered (bounded): a recovery that listed one before its
        #: answer arrived must not announce it again.
        self.answered = BoundedSet()
        self.closed = False
        self.closing = asyncio.Event()
        self.server_dead = False

    def get(self, thread_id: str, *, allow_closing: bool = False) -> ThreadState:
        if self.closed:
            raise AdapterClosedError("the adapter is closed")
        thread = self.threads.get(thread_id)
        if thread is None:
            raise UnknownThreadError(thread_id)
        if thread.closing and not allow_closing:
            raise SessionClosedError(f"thread {thread_id} is stopping")
        return thread

    def client_for(self, directory: str | None) -> OpenCodeClient:
        """One client per (normalised) directory: ``/p`` and ``/p/`` share it."""
        client = self.clients.get(directory)
        if client is None:
            base_url = self.base_url
            assert base_url is not None
            client = OpenCodeClient(
                base_url,
                password=self.password,
                directory=directory,
                timeout=self.timeouts.request,
                transport=self.transport,
            )
            self.clients[directory] = client
        return client

    def threads_in(self, directory: str | None) -> list[ThreadState]:
        return [t for t in self.threads.values() if t.directory == directory]

    def forget(self, thread: ThreadState) -> None:
        """Drop a thread from the registry and its sessions from the owner map."""
        if self.threads.get(thread.thread_id) is thread:
            del self.threads[thread.thread_id]
        for sid in list(thread.tree.sessions):
            if self.owner.get(sid) is thread:
                del self.owner[sid]
        thread.closed.set()

    def server_exited(self, message: str) -> None:
        """The server the adapter started has exited: every thread ends now, each told
        why (``runtime.error``, then ``session.exited``), its pending stop failed with
        :class:`ServerExitedError`, its tasks cancelled."""
        self.server_dead = True
        for thread in list(self.threads.values()):
            self.emit(
                RuntimeErrorEvent(
                    thread_id=thread.thread_id, turn_id=thread.lifecycle.turn_id, message=message
                )
            )
            thread.lifecycle.begin_close()
            thread.closed.set()
            stop = thread.interrupts.stop
            if stop is not None and not stop.future.done():
                stop.future.set_exception(ServerExitedError(message))
                stop.future.exception()
            if thread.submission.task is not None:
                thread.submission.task.cancel()
            thread.scope.cancel()
            self.forget(thread)
            thread.lifecycle.closed("server exited")
            thread.finished.set()
