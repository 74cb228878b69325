"""The stored status of the threads a worker holds, kept current from its adapter's events.

Why: a request writes a thread's status and turn id when it changes them (a turn
sent, a Stop), but a turn that ends by itself ends in the background: without a
follower the store says ``running`` until the next request for that thread, and
every worker that does not hold it lists it so (``GET /threads`` lists the store).

One :class:`StatusFollower` per app: one subscription to all of the adapter's events
(``oc.events()``), made synchronously in :meth:`StatusFollower.start`, so nothing
emitted after it is missed. ``turn.started``, ``turn.completed``, ``turn.aborted`` and
``session.exited`` mark their thread as changed; the changes are written once the
stream has nothing more queued, so a burst of events costs one write per thread
(coalesced: a thread's write reads its state at that moment). The bounds:

* the changed threads are at most :data:`MAX_PENDING` (past it the oldest is dropped
  and logged); the subscription's queue is ``max_queue`` events: a follower that falls
  further behind (a slow store) gets the hub's overflow gap, subscribes again and
  marks every thread this adapter holds as changed (their live state is read then);
* a write that fails (the store down or locked) is logged ``web.status_write_failed``
  and retried on the next change, or after a delay that doubles from
  :data:`RETRY_DELAY` to :data:`MAX_RETRY_DELAY` when nothing changes; it never ends
  the follower. Anything else unexpected is logged and ends it; the next request
  starts a new one.

It ends with the adapter (its event stream ends when the adapter closes) or with
:meth:`StatusFollower.aclose` (the app's lifespan shutdown).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

import adapter
from adapter._logging import get_logger

from ._store import StoreError

__all__ = ["MAX_PENDING", "MAX_RETRY_DELAY", "RETRY_DELAY", "StatusFollower", "Write"]

_log = get_logger("adapter.web")

#: Threads with a change not written yet, at most.
MAX_PENDING = 10_000
#: Seconds before a failed write is tried again when nothing else changes (doubling).
RETRY_DELAY = 1.0
MAX_RETRY_DELAY = 30.0
#: Events the follower may have unread before it subscribes again (and re-reads all).
MAX_QUEUE = 10_000

#: Writes one thread's status: as this adapter holds it now, after ``event``, the last
#: change seen of it (a turn's start or end, or the ``session.exited`` that ended it
#: here; ``None`` after an overflow: the live state only). Raises :class:`StoreError`
#: when it fails.
Write = Callable[[str, adapter.Event | None], Awaitable[None]]

_CHANGES = (adapter.TurnStarted, adapter.TurnCompleted, adapter.TurnAborted)


class StatusFollower:
    """Follows ``oc``'s events and writes the changed threads' status with ``write``."""

    def __init__(
        self,
        oc: adapter.OpenCodeAdapter,
        write: Write,
        *,
        max_queue: int = MAX_QUEUE,
        max_pending: int = MAX_PENDING,
        retry_delay: float = RETRY_DELAY,
    ) -> None:
        self._oc = oc
        self._write = write
        self._max_queue = max_queue
        self._max_pending = max_pending
        self._retry_delay = retry_delay
        self._pending: dict[str, adapter.Event | None] = {}
        self._task: asyncio.Task[None] | None = None
        self._ended = False  # the adapter closed, or aclose(): never started again

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Subscribe now and follow in a task (idempotent; needs the running loop)."""
        if self._ended or self.running:
            return
        stream = self._oc.events(max_queue=self._max_queue)
        self._task = asyncio.get_running_loop().create_task(
            self._follow(stream), name="web-status-follower"
        )

    async def aclose(self) -> None:
        """Stop following (the subscription is closed); what was not written stays so."""
        self._ended = True
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _follow(self, stream: adapter.EventStream) -> None:
        try:
            while True:
                overflowed = await self._read(stream)
                if not overflowed:
                    break
                _log.warning("web.status_follower_overflow", held=len(self._oc.list_sessions()))
                stream = self._oc.events(max_queue=self._max_queue)
                for info in self._oc.list_sessions():  # what the gap hid: read live
                    self._note(info.thread_id, None)
            self._ended = True  # the adapter closed: its stream ended
            await self._flush()  # the exits it emitted on the way (best effort)
        except Exception as exc:
            _log.error("web.status_follower_failed", error=str(exc), error_type=type(exc).__name__)

    async def _read(self, stream: adapter.EventStream) -> bool:
        """Follow ``stream`` to its end; whether it ended by an overflow."""
        delay = self._retry_delay
        async with stream:
            while True:
                try:
                    async with asyncio.timeout(delay if self._pending else None):
                        event = await anext(stream)
                except TimeoutError:
                    event = None  # a retry of what failed, nothing new
                except StopAsyncIteration:
                    return False
                if isinstance(event, adapter.StreamGap) and event.reason == "overflow":
                    return True
                if isinstance(event, (*_CHANGES, adapter.SessionExited)):
                    self._note(event.thread_id, event)
                if self._pending and not stream.backlog:
                    failed = await self._flush()
                    delay = min(delay * 2, MAX_RETRY_DELAY) if failed else self._retry_delay

    def _note(self, thread_id: str, event: adapter.Event | None) -> None:
        self._pending.pop(thread_id, None)  # the newest change last (the oldest first out)
        self._pending[thread_id] = event
        if len(self._pending) > self._max_pending:
            dropped = next(iter(self._pending))
            del self._pending[dropped]
            _log.warning("web.status_write_dropped", thread_id=dropped, pending=self._max_pending)

    async def _flush(self) -> bool:
        """Write every pending change; whether one failed (it stays pending, unless a
        newer change of its thread came meanwhile)."""
        batch, self._pending = self._pending, {}
        failed = False
        for thread_id, event in batch.items():
            try:
                await self._write(thread_id, event)
            except StoreError as exc:
                failed = True
                _log.warning(
                    "web.status_write_failed",
                    thread_id=thread_id,
                    error=str(exc),
                    error_type=type(exc).__name__,
                )
                if thread_id not in self._pending:
                    self._note(thread_id, event)
        return failed
