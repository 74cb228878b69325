"""The threads the app serves: the adapter's, and with a store every worker's.

Why its own module: with a :class:`~adapter.web._store.ThreadStore`, a thread is no
longer what one process holds. Any worker may be asked about any thread, so a
thread id this worker's adapter does not hold is looked up in the store and
resumed here (``start_session(resume=...)``: a running turn is adopted, its output
so far emitted) before the request is served; and every change a later request,
on any worker, depends on is written to the store before the answer.

The rules (``docs/web.md``, "Deploying: workers, hosts and restarts"):

* **Creating** claims the id in the store (its primary key: of two workers, one
  wins, the other answers 409). A new thread's session is started first (the
  record needs its cursor) and, if the claim fails (409, or 503: the store is
  down), stopped again: the loser leaves no session running and no thread held.
  A thread made from a given ``resume`` cursor is claimed first instead, so a
  loser never stops a session that may be the winner's; a start that then fails
  gives the claim back.
* **Resuming** happens once per id and worker however many requests ask at once
  (a lock per id; the adapter also joins concurrent starts). A cursor whose
  session is gone comes back as a fresh session (the adapter says so with a
  ``runtime.warning``): the record is pointed at it before the answer, so the
  other workers resume the same session, not one each. If that write fails the
  thread is let go here and the request answers 503: nothing diverges.
* **After a turn is sent or stopped**, its status and turn id are written before
  the answer. The turn runs (or was stopped) whatever the store says, so a write
  that fails then is logged (``web.store_write_failed``), not answered 503: a 503
  would invite a retry that sends the prompt twice.
* **In the background**, the threads this worker holds have their status and turn
  id written as their turns start and end and as they exit here
  (:class:`~adapter.web._follow.StatusFollower`, started by the first request that
  asks about a thread): a turn that ends by itself is ``ready`` in the store for
  every worker. A write is only ever of a record that still names the session this
  worker holds; a thread detached here (the tree goes on) is not written. A thread
  resumed here whose record says otherwise than the server (a turn that ended while
  no worker followed it) is written at its resume.
* **Without a store** nothing of this runs: the threads are the adapter's.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any, cast

import adapter
from adapter._logging import get_logger

from ._errors import ApiError
from ._follow import StatusFollower
from ._store import CorruptRecordError, StoreError, ThreadRecord, ThreadStore

__all__ = ["Threads"]

_log = get_logger("adapter.web")


class Threads:
    """What the routes ask about threads: held here, resumed from the store, created."""

    def __init__(self, oc: adapter.OpenCodeAdapter, store: ThreadStore | None) -> None:
        self._oc = oc
        self._store = store
        # Ids being created or forked by a request of this worker (no await between the
        # check and the add, so two requests of one worker never start one id twice).
        self._starting: set[str] = set()
        # One lock per id being resumed: concurrent requests for it resume it once.
        self._resuming: dict[str, asyncio.Lock] = {}
        # The agent a thread was made with: its turns' and commands' agent when they
        # name none. The adapter keeps a thread's model, not its agent.
        self.agents: dict[str, str] = {}
        self._follower = StatusFollower(oc, self._write_status) if store is not None else None

    @property
    def store(self) -> ThreadStore | None:
        return self._store

    def follow(self) -> None:
        """Start following the adapter's events (with a store; idempotent)."""
        if self._follower is not None:
            self._follower.start()

    async def aclose(self) -> None:
        """Stop following (the app's shutdown); the store and adapter are the host's."""
        if self._follower is not None:
            await self._follower.aclose()

    # -- holding a thread ------------------------------------------------------------

    async def held(self, thread_id: str) -> str:
        """``thread_id``, held by this worker's adapter: resumed from the store when it
        is not (404 ``unknown_thread`` when the store has no such record either)."""
        self.follow()
        if self._oc.has_session(thread_id):
            return thread_id
        if self._store is None or thread_id in self._starting:
            raise adapter.UnknownThreadError(thread_id)
        lock = self._resuming.setdefault(thread_id, asyncio.Lock())
        try:
            async with lock:
                if not self._oc.has_session(thread_id):  # else another request resumed it
                    await self._resume(self._store, thread_id)
        finally:
            if not lock.locked() and self._resuming.get(thread_id) is lock:
                del self._resuming[thread_id]
        return thread_id

    async def _resume(self, store: ThreadStore, thread_id: str) -> None:
        record = await store.get(thread_id)  # CorruptRecordError: 502; down: 503
        if record is None:
            raise adapter.UnknownThreadError(thread_id)
        self._check_server(record)
        info = await self._oc.start_session(
            thread_id,
            resume=dict(record.resume),
            model=record.model,
            permissions=_permissions(record.permissions),
        )
        if record.agent is not None:
            self.agents[thread_id] = record.agent
        if info.session_id == record.resume.get("session_id"):
            if _differs(record, self._oc.session_info(thread_id)):
                await self.seen(thread_id)  # e.g. a turn that ended while no one followed
            return
        # The stored session is gone (a fresh one was started) or was forked into the
        # cursor's directory: every worker must now resume this one.
        _log.warning(
            "web.thread_session_replaced",
            thread_id=thread_id,
            old=record.resume.get("session_id"),
            new=info.session_id,
        )
        try:
            await store.update(record.changed(resume=dict(info.resume), **_seen(info, record)))
        except StoreError:
            await self._let_go(thread_id)
            raise

    def _check_server(self, record: ThreadRecord) -> None:
        here = self._oc.base_url
        if here is not None and record.base_url.rstrip("/") != here.rstrip("/"):
            raise ApiError(
                409,
                "conflict",
                f"thread {record.thread_id!r} belongs to another OpenCode server "
                f"({record.base_url}); this backend serves {here}",
            )

    async def _let_go(self, thread_id: str) -> None:
        """Stop holding ``thread_id`` here (its session was started by this request and
        is idle: the stop aborts nothing that runs)."""
        with contextlib.suppress(adapter.OpenCodeError):
            await self._oc.stop_session(thread_id)
        self.agents.pop(thread_id, None)

    # -- creating ----------------------------------------------------------------------

    def check_free(self, thread_id: str) -> None:
        """409 when this worker holds, creates or resumes ``thread_id`` now."""
        self.follow()
        if (
            self._oc.has_session(thread_id)
            or thread_id in self._starting
            or thread_id in self._resuming
        ):
            raise ApiError(409, "conflict", f"thread {thread_id!r} already exists")

    async def check_unclaimed(self, thread_id: str) -> None:
        """409 when the store holds ``thread_id`` already (before anything is started)."""
        if self._store is None:
            return
        try:
            taken = await self._store.get(thread_id) is not None
        except CorruptRecordError:
            taken = True  # a record that does not parse still holds the id
        if taken:
            raise ApiError(409, "conflict", f"thread {thread_id!r} already exists")

    @contextlib.asynccontextmanager
    async def starting(self, thread_id: str) -> AsyncIterator[None]:
        """The id is being made by this request (``check_free`` refuses it meanwhile)."""
        self.check_free(thread_id)
        self._starting.add(thread_id)
        try:
            yield
        finally:
            self._starting.discard(thread_id)

    async def created(
        self, info: adapter.SessionInfo, *, title: str | None, model: str | None, agent: str | None
    ) -> None:
        """Claim a thread just started (by ``start_session`` or ``fork_thread``) in the
        store; if the claim fails the thread is let go here and the error raised."""
        if agent is not None:
            self.agents[info.thread_id] = agent
        if self._store is None:
            return
        try:
            await self._store.create(self.record_of(info, title=title, model=model, agent=agent))
        except BaseException:
            await self._let_go(info.thread_id)
            raise

    async def claim(
        self,
        thread_id: str,
        resume: dict[str, Any],
        *,
        title: str | None,
        model: str | None,
        agent: str | None,
    ) -> None:
        """Claim ``thread_id`` with a cursor the client gave, before its start (the
        record holds it; :meth:`claimed` writes what the start found)."""
        if self._store is not None:
            record = ThreadRecord.new(
                thread_id, self._base_url(), resume, title=title, model=model, agent=agent
            )
            await self._store.create(record)

    async def claimed(self, info: adapter.SessionInfo, *, agent: str | None) -> None:
        """A claimed thread started: its cursor (a fresh session if the given one was
        gone), status and permissions are written."""
        if agent is not None:
            self.agents[info.thread_id] = agent
        await self.seen(info.thread_id)

    async def stored(self, thread_id: str) -> ThreadRecord | None:
        """The store's record of ``thread_id`` (``None`` without a store or record)."""
        return None if self._store is None else await self._store.get(thread_id)

    async def unclaim(self, thread_id: str) -> None:
        """Give back a claim whose start failed (best effort: a store down keeps it,
        and a later request resumes from its cursor)."""
        if self._store is not None:
            with contextlib.suppress(StoreError):
                await self._store.delete(thread_id)

    def record_of(
        self,
        info: adapter.SessionInfo,
        *,
        title: str | None,
        model: str | None,
        agent: str | None,
    ) -> ThreadRecord:
        return ThreadRecord.new(
            info.thread_id,
            self._base_url(),
            dict(info.resume),
            title=title,
            model=model,
            agent=agent,
            permissions=info.permissions,
            **_seen(info),
        )

    def _base_url(self) -> str:
        base_url = self._oc.base_url
        if base_url is None:  # only before the adapter is entered
            raise ApiError(503, "store_unavailable", "the adapter has no server yet")
        return base_url

    # -- what later requests depend on ---------------------------------------------

    async def seen(self, thread_id: str) -> None:
        """Write the thread's status, turn id and cursor as this worker sees them now
        (after a turn was sent or stopped). A failure is logged, not raised."""
        if self._store is None or not self._oc.has_session(thread_id):
            return
        try:
            record = await self._store.get(thread_id)
            if record is None or not self._oc.has_session(thread_id):
                return  # a thread the host made through the adapter: not the store's
            # Read after the lookup, right before the write: never older than a write
            # the follower made meanwhile.
            info = self._oc.session_info(thread_id)
            await self._store.update(
                record.changed(resume=dict(info.resume), **_seen(info, record))
            )
        except StoreError as exc:
            _log.warning(
                "web.store_write_failed",
                thread_id=thread_id,
                error=str(exc),
                error_type=type(exc).__name__,
            )

    async def _write_status(self, thread_id: str, event: adapter.Event | None) -> None:
        """The follower's write: the status and turn id of ``thread_id`` as this worker
        holds it now (the turn id of ``event`` when the turn already ended), or ``ready``
        after it exited here (not when it was detached: its tree goes on). Only a record
        naming the same session is written."""
        store = self._store
        if store is None:
            return
        exited = event if isinstance(event, adapter.SessionExited) else None
        if exited is None and not self._oc.has_session(thread_id):
            return  # its exit follows (or came first and was written)
        if exited is not None and (exited.reason or "").startswith("detached"):
            return
        try:
            record = await store.get(thread_id)
        except CorruptRecordError:
            return  # not this worker's to repair
        if record is None:
            return
        seen_turn = getattr(event, "turn_id", None)
        if exited is None:
            if not self._oc.has_session(thread_id):
                return
            info = self._oc.session_info(thread_id)
            if info.session_id != record.resume.get("session_id"):
                return
            fields = _seen(info, record)
            fields["turn_id"] = info.active_turn_id or seen_turn or record.turn_id
        else:
            if exited.session_id != record.resume.get("session_id"):
                return  # e.g. a losing create's own session: the record is the winner's
            fields = {"status": "ready", "turn_id": seen_turn or record.turn_id}
        if (record.status, record.turn_id) != (fields["status"], fields["turn_id"]):
            await store.update(record.changed(**fields))

    # -- listing -----------------------------------------------------------------------

    async def listing(self) -> list[dict[str, Any]]:
        """Every thread: the store's (this worker's live view of those it holds, the
        stored one of the others; a record that does not parse as ``status:
        "corrupt"``), then those the host made through the adapter directly."""
        live = {info.thread_id: info for info in self._oc.list_sessions()}
        if self._store is None:
            return [info.to_dict() for info in live.values()]
        stored = await self._store.list()
        answer: list[dict[str, Any]] = []
        for record in stored.records:
            info = live.pop(record.thread_id, None)
            answer.append(info.to_dict() if info is not None else _stored_view(record))
        for error in stored.corrupt:
            live.pop(error.thread_id, None)
            answer.append(
                {"thread_id": error.thread_id, "status": "corrupt", "error": error.reason}
            )
        answer.extend(info.to_dict() for info in live.values())
        return answer


def _seen(info: adapter.SessionInfo, record: ThreadRecord | None = None) -> dict[str, Any]:
    """The status and turn id to store: the last turn's id stays once it ended."""
    status = info.status if info.status != "connecting" else "ready"
    last = record.turn_id if record is not None else None
    return {"status": status, "turn_id": info.active_turn_id or last}


def _differs(record: ThreadRecord, info: adapter.SessionInfo) -> bool:
    seen = _seen(info, record)
    return (record.status, record.turn_id) != (seen["status"], seen["turn_id"])


def _permissions(
    value: str | tuple[adapter.PermissionRule, ...] | None,
) -> adapter.Permissions | None:
    # A stored preset name was checked as one when the record was read.
    return cast("adapter.Permissions | None", list(value) if isinstance(value, tuple) else value)


def _stored_view(record: ThreadRecord) -> dict[str, Any]:
    """A thread no worker here holds, as the store last saw it (``SessionInfo``'s keys)."""
    resume = record.to_dict()["resume"]
    running = record.status in ("running", "stopping")
    return {
        "thread_id": record.thread_id,
        "session_id": resume["session_id"],
        "status": record.status or "ready",
        "resume": resume,
        "directory": resume.get("directory"),
        "active_turn_id": record.turn_id if running else None,
        "last_error": None,
        "retry": None,
        "permissions": record.to_dict()["permissions"],
    }
