"""Adoption: a run on the thread's root that this adapter did not start becomes its turn.

Why it exists: every production host restarts, and most run more than one process. A
run started by another process (another worker, ``opencode attach``, a script), or one
still working when a restarted host resumes the thread, used to be invisible: the thread
said ``ready`` while its tree worked, and its output, and a Stop's partial, were lost.

When a run is adopted:

* **at attach**: ``start_session(resume=...)`` finds the root, or a session of its tree,
  ``busy`` or ``retry`` (``GET /session/status``; a busy session's ancestry is read to
  tell whether it is of this tree);
* **live**: the root gets a user message this adapter did not send (nor saw before the
  thread was resumed), or reports ``busy`` while the thread has no turn and its newest
  run does not belong to a turn this adapter already knows (a late step of a stopped
  turn is no new run).

The run's first user message names the turn (:func:`~adapter._turns._lifecycle.turn_id_for`),
as in the process that sent it: the last turn start of the stored history
(:func:`~adapter._threads._turn_boundaries.turn_starts`). ``turn.started`` carries
``origin="adopted"``. The run's output from its start is read back from the stored
messages (the root's, then its tree's breadth-first: each child named by a ``task`` call
of the run, working now, or created since the run began) and emitted through the same
translation as live events (:mod:`adapter._stream._output`), so output that the stream
also delivers is emitted once. A text part that was streaming before the adapter saw it
is emitted whole when it ends: its beginning is in no event the adapter received and in
no stored snapshot until then. From there the turn ends by the rules of every turn
(:mod:`adapter._turns._settling`); found with its root idle, it also waits for the rest
of its tree.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping, Sequence
from typing import TypeVar

from .._client._responses import Message, MessageInfo, Session, SessionStatus
from .._exceptions import OpenCodeError
from .._logging import get_logger
from .._stream._output import Output
from .._threads._registry import ThreadRegistry
from .._threads._session_owners import Ownership
from .._threads._thread_state import ThreadState
from .._threads._turn_boundaries import turn_starts
from .._types._events import RuntimeWarningEvent
from ._lifecycle import SERVER_UNREACHABLE, ThreadPhase, Turn
from ._settling import Settling

__all__ = ["Adoption"]

_log = get_logger("adapter.adoption")

_T = TypeVar("_T")

#: How far up a busy session's ancestry is read to find whether it is of the tree.
_MAX_DEPTH = 16
#: Busy sessions whose ancestry is read at attach (the rest are another host's load).
_MAX_BUSY_LOOKUPS = 32
#: Parents remembered (bounded memory: about 100 bytes each).
_MAX_PARENTS = 10_000
#: The root's newest messages read first to find the run to adopt (widened as needed).
_FIRST_WINDOW = 64


class Adoption(Settling):
    """Adopting runs this adapter did not send, at attach and live."""

    def __init__(self, core: ThreadRegistry, output: Output, ownership: Ownership) -> None:
        super().__init__(core, output)
        self._ownership = ownership
        #: Threads whose "busy without a turn" is being looked into (one look at a time).
        self._looking: set[str] = set()
        #: The status read in flight per client, shared by the adoptions that need one
        #: meanwhile: it lists every busy session of the server, so a read per thread
        #: made resuming N threads at once cost N² parses.
        self._status_reads: dict[int, asyncio.Task[dict[str, SessionStatus] | None]] = {}
        #: Sessions' parents read so far (a parent never changes): resuming many threads
        #: at once reads each busy session's ancestry once, not once per thread.
        self._parents: dict[str, str | None] = {}

    # -- at attach ----------------------------------------------------------------------

    async def attached(self, thread: ThreadState, newest_message_id: str | None) -> None:
        """A resumed thread is connected: its messages up to ``newest_message_id`` are
        history, and a run of its tree found working becomes its turn, read back before
        this returns (each read bounded by ``Timeouts.request``)."""
        thread.ledger.history_until(newest_message_id)
        statuses = await self._statuses(thread)
        if statuses is None or not await self._tree_busy(thread, statuses):
            return
        task = await self._adopt(thread, statuses)
        if task is not None:
            await asyncio.wait([task])  # cancelled here, the read-back still finishes

    async def _tree_busy(self, thread: ThreadState, statuses: Mapping[str, SessionStatus]) -> bool:
        """Whether the root or a session below it works, at attach, when the tree is not
        known yet: read up each busy session's ancestry (``GET /session/{id}``, a read of
        its parent link only; known strangers and other threads' sessions are skipped)."""
        busy = [sid for sid, status in statuses.items() if status.is_busy]
        if thread.session_id in busy:
            return True
        unknown = [
            sid
            for sid in busy
            if self._registry.owner.get(sid, thread) is thread
            and sid not in self._registry.strangers
        ]
        for sid in unknown[:_MAX_BUSY_LOOKUPS]:
            current: str | None = sid
            for _ in range(_MAX_DEPTH):
                if current is None or current == thread.session_id:
                    break
                current = await self._parent(thread, current)
            if current == thread.session_id:
                return True
        return False

    async def _parent(self, thread: ThreadState, session_id: str) -> str | None:
        """``session_id``'s parent (``None``: a root, or unreadable), read once."""
        if session_id in self._parents:
            return self._parents[session_id]
        session = await self._read(
            thread, thread.client.get_session(session_id), "GET /session/{id}"
        )
        if session is None:
            return None
        if len(self._parents) >= _MAX_PARENTS:
            self._parents.pop(next(iter(self._parents)))
        self._parents[session_id] = session.parent_id
        return session.parent_id

    # -- live ---------------------------------------------------------------------------

    def may_adopt(self, thread: ThreadState) -> bool:
        """Whether a run may become the thread's turn now: it has none, and no stop, no
        close and no send of this adapter is under way."""
        return (
            thread.turn is None
            and thread.lifecycle.phase is ThreadPhase.READY
            and thread.interrupts.stop is None
            and thread.submission.task is None
            and not thread.compactions.own_summary
        )

    def adopt_started(self, thread: ThreadState, message_id: str) -> None:
        """The root got user message ``message_id``, which this adapter did not send: it
        starts a run, the thread's turn from now on (its events follow, live)."""
        turn = self._begin_turn(thread, message_id, "adopted")
        self._claim_start(thread, turn, message_id)

    def adopt_busy(self, thread: ThreadState, *, after_outage: bool = False) -> None:
        """The root works while the thread has no turn: whose run it is is read from the
        stored messages (one look at a time per thread).

        ``after_outage``: the event stream is back after an outage, so the whole tree is
        looked at, and a run whose turn this adapter ended meanwhile (the server was
        unreachable, but the run went on) is adopted again, under the same turn id."""
        if thread.thread_id in self._looking:
            return
        self._looking.add(thread.thread_id)

        async def look() -> None:
            try:
                statuses = await self._statuses(thread)
                if statuses is None:
                    return
                root = statuses.get(thread.session_id)
                # After an outage the thread's tree is known: no session outside it is read.
                tree_busy = any(
                    statuses[sid].is_busy for sid in thread.tree.sessions if sid in statuses
                )
                if after_outage and tree_busy:
                    await self._adopt(thread, statuses, rejoin=True)
                elif root is not None and root.is_busy:
                    await self._adopt(thread, statuses)
            finally:
                self._looking.discard(thread.thread_id)

        thread.scope.spawn(look(), name="adopt-busy")

    def after_outage(self, thread: ThreadState) -> None:
        """The stream is back: a turn is reconciled (:class:`Settling`); a thread without
        one adopts a run of its tree that works (started meanwhile, or gone on)."""
        super().after_outage(thread)
        if self.may_adopt(thread):
            self.adopt_busy(thread, after_outage=True)

    # -- adopting -------------------------------------------------------------------------

    async def _adopt(
        self, thread: ThreadState, statuses: Mapping[str, SessionStatus], *, rejoin: bool = False
    ) -> asyncio.Task[None] | None:
        """Begin the adopted turn of the root's newest run and start reading it back;
        ``None`` when there is nothing to adopt (a turn began meanwhile, the newest run
        is a turn this adapter knows already, unless ``rejoin``)."""
        found = await self._newest_run(thread)
        if found is None or not self.may_adopt(thread):
            return None
        messages, start = found
        known = thread.ledger.get(start.id)
        if (
            known is not None
            and known.turn_id is not None
            and not self._rejoins(thread, known.turn_id, rejoin)
        ):
            return None  # a step of a turn this adapter knows (a stopped turn's late step)
        turn = self._begin_turn(thread, start.id, "adopted")
        self._claim_start(thread, turn, start.id)
        return turn.scope.spawn(
            self._read_back(thread, turn, messages, statuses, start.created), name="read-back"
        )

    async def _newest_run(self, thread: ThreadState) -> tuple[list[Message], MessageInfo] | None:
        """The root's newest messages, from the first of its newest run on, and that first
        message; ``None`` when unreadable or the root has no run. Read newest first,
        :data:`_FIRST_WINDOW` messages, widened while the window may start inside the run
        (its first user message starts the window's only turn): a long thread's whole
        history is not read to adopt its last turn."""
        limit = _FIRST_WINDOW
        while True:
            what = "GET /session/{id}/message"
            messages = await self._read(
                thread, thread.client.messages(thread.session_id, limit=limit), what
            )
            if messages is None:
                return None
            starts = turn_starts(messages, thread.ledger.user_turns())
            complete = len(messages) < limit  # the whole history is in the window
            if not starts:
                if complete:
                    return None
            elif complete or starts[-1] is not next(m for m in messages if m.info.role == "user"):
                start = starts[-1].info
                return [m for m in messages if m.info.id >= start.id], start
            limit *= 4

    @staticmethod
    def _rejoins(thread: ThreadState, turn_id: str, after_outage: bool) -> bool:
        """Whether the run of ``turn_id``, a turn this adapter ended, is followed again:
        only after an outage, and only if that turn ended because the server was
        unreachable (the run went on there): a stopped or finished turn stays ended."""
        last = thread.lifecycle.last_ended
        return (
            after_outage
            and last is not None
            and last[0] == turn_id
            and last[1].error_name == SERVER_UNREACHABLE
        )

    def _claim_start(self, thread: ThreadState, turn: Turn, message_id: str) -> None:
        """The run's first message is the turn's, as a prompt already echoed."""
        turn.prompts[message_id] = True
        thread.ledger.claim(message_id, turn.turn_id)
        turn.collector.add_turn_message(message_id)
        turn.users_seen.add(message_id)
        turn.last_user_id = message_id

    async def _read_back(
        self,
        thread: ThreadState,
        turn: Turn,
        messages: Sequence[Message],
        statuses: Mapping[str, SessionStatus],
        started: float | None,
    ) -> None:
        """Emit what the run produced before it was adopted: the root's stored output,
        then its tree's, breadth-first; then let the turn settle as any turn."""
        start = turn.first_prompt_id
        if start is not None:
            thread.ledger.claim_run(messages, turn.turn_id, start)
        self.absorb_stored(thread, turn, messages)
        frontier = [thread.session_id]
        permits = asyncio.Semaphore(self._registry.limits.stop_concurrency)

        async def bounded(call: Awaitable[_T], what: str) -> _T | None:
            async with permits:
                return await self._read(thread, call, what)

        while frontier and thread.turn is turn:
            listed = await asyncio.gather(
                *(
                    bounded(thread.client.children(sid), "GET /session/{id}/children")
                    for sid in frontier
                )
            )
            joined: list[str] = []
            for parent, children in zip(frontier, listed, strict=True):
                for child in children or ():
                    if thread.turn is turn and self._of_run(thread, turn, child, statuses, started):
                        self._ownership.adopt(thread, child.id, parent, title=child.title)
                        joined.append(child.id)
            stored = await asyncio.gather(
                *(
                    bounded(thread.client.messages(sid), "GET /session/{id}/message")
                    for sid in joined
                )
            )
            for sid, child_messages in zip(joined, stored, strict=True):
                if child_messages is None or thread.turn is not turn:
                    continue
                turn.collector.reconcile(sid, child_messages)
                for message in child_messages:
                    for part in message.parts:
                        self._output.part(thread, part, None)
            frontier = joined
        if thread.turn is turn and thread.interrupts.stop is None:
            # Whatever the status said before the read, the root may have gone idle
            # since, with its idle event before the turn began: the settle asks.
            self._schedule_check(thread, turn)

    def _of_run(
        self,
        thread: ThreadState,
        turn: Turn,
        child: Session,
        statuses: Mapping[str, SessionStatus],
        started: float | None,
    ) -> bool:
        """Whether a child belongs to the adopted run: a ``task`` call of the run named
        it, it works now, or it was created since the run began. The finished children
        of earlier turns are left out (a Stop still walks them: ``GET /children``)."""
        if child.id in thread.tree.sessions:
            return thread.tree.sessions[child.id] == turn.turn_id
        status = statuses.get(child.id)
        if status is not None and status.is_busy:
            return True
        return started is not None and child.created >= started

    async def _statuses(self, thread: ThreadState) -> dict[str, SessionStatus] | None:
        """``GET /session/status`` of the thread's client: the read in flight, if one is,
        else a new one (see :attr:`_status_reads`)."""
        key = id(thread.client)
        read = self._status_reads.get(key)
        if read is None:
            what = "GET /session/status"
            read = self._registry.tasks.spawn(
                self._read(thread, thread.client.status(), what), name="adoption-status"
            )
            self._status_reads[key] = read
            read.add_done_callback(lambda done: self._forget_status(key, done))
        return await asyncio.shield(read)

    def _forget_status(self, key: int, read: asyncio.Task[object]) -> None:
        if self._status_reads.get(key) is read:
            del self._status_reads[key]

    async def _read(self, thread: ThreadState, call: Awaitable[_T], what: str) -> _T | None:
        """One read of the server, bounded by ``Timeouts.request``; a failure is told
        to the host as a ``runtime.warning`` (the turn goes on with the live events)."""
        try:
            async with asyncio.timeout(self._registry.timeouts.request):
                return await call
        except (OpenCodeError, TimeoutError) as exc:
            _log.warning("adapter.adoption_read_failed", thread_id=thread.thread_id, what=what)
            self._registry.emit(
                RuntimeWarningEvent(
                    thread_id=thread.thread_id,
                    turn_id=thread.lifecycle.turn_id,
                    message=f"reading the thread's run back failed ({what}): {exc}",
                )
            )
            return None
