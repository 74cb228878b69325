"""The thread registry: the adapter's threads, and what every part of it reads.

The threads by id and who waits for one (:class:`ThreadTable`), and the registry
(:class:`ThreadRegistry`): the session -> thread map, the clients per directory, the
canonical event fan-out, the owner of every background task, the settings. Every
concept module (:mod:`adapter._stream._pump`,
:mod:`adapter._threads._session_owners`, :mod:`adapter._requests._pending`,
:mod:`adapter._turns._running`, :mod:`adapter._stream._translator`,
:mod:`adapter._stop._interrupt`) imports this module; it imports none of them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx

from .._base._bounded_set import BoundedSet
from .._base._task_owner import TaskOwner
from .._client import OpenCodeClient
from .._exceptions import (
    AdapterClosedError,
    ServerExitedError,
    SessionClosedError,
    UnknownThreadError,
)
from .._logging import get_logger
from .._stream._hub import EventHub
from .._timeouts import Timeouts
from .._types._events import Event, RuntimeErrorEvent
from ._limits import Limits
from ._thread_state import ThreadState

__all__ = ["ThreadRegistry", "ThreadTable"]

_log = get_logger("adapter")


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


class ThreadRegistry:
    """The threads of one adapter, the session -> thread map, and what every concept shares.

    It owns registration: a thread enters through :meth:`register` and leaves through
    :meth:`forget`; a session of a thread's tree is mapped through :meth:`own`. The
    rest (the clients per directory, the event hub, the task owner, the settings) is
    read by every concept module and changed by none."""

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

    def register(self, thread: ThreadState) -> None:
        """Add a thread (its root session mapped to it); a new root can make sessions
        that were strangers ours, so that cache starts over."""
        self.threads[thread.thread_id] = thread
        self.owner[thread.session_id] = thread
        self.strangers.clear()

    def own(self, session_id: str, thread: ThreadState) -> None:
        """Map a session of ``thread``'s tree to it."""
        self.owner[session_id] = thread

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
