"""Settling a turn: deciding, from the server's own word, that a turn is over.

Why it exists: a turn must end exactly once, after its last output, and never be
lost or stuck (see :mod:`adapter._turns._running`, which feeds it what the stream
says). The rule (see :mod:`adapter._turns._lifecycle`): a turn settles when every prompt it
sent was echoed, the newest user message of the root in the turn has its answer (or
the run failed or was aborted), no background subagent of the turn is still owed
(:mod:`adapter._turns._background`), and ``/session/status`` confirms the root is
idle. Each turn has a watchdog: a prompt never echoed, a run that went idle without
an answer, a status route that keeps failing, or a silence in which the idle was
lost all end or settle the turn within the bounds of :class:`~adapter.Timeouts`,
with a reason the host can show. After an outage, the stored messages are read and
absorbed: they are the truth for what the stream missed.

Every task here belongs to its turn's scope and is cancelled when the turn ends.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TypeVar

from .._base._ids import observe_message_id
from .._client import OpenCodeClient
from .._client._responses import Message, SessionStatus
from .._exceptions import OpenCodeError
from .._logging import get_logger
from .._stop._partial_collector import PartialCollector
from .._stream._output import Output
from .._stream._turn_diff import prompt_diff
from .._threads._compaction import SUMMARIZED
from .._threads._registry import ThreadRegistry
from .._threads._thread_state import ThreadState
from .._types._events import RuntimeWarningEvent
from ._background import delivered_result, started_child
from ._lifecycle import TURN_STARTS, Turn, TurnEnding, TurnOrigin, TurnPhase, turn_id_for

__all__ = [
    "ABORTED_ELSEWHERE",
    "MESSAGE_ABORTED",
    "STOPPED_AFTER_FAILED_STOP",
    "VANISHED_IN_OUTAGE",
    "Settling",
    "mark_landed",
]

_log = get_logger("adapter.turns")

_T = TypeVar("_T")

ABORTED_ELSEWHERE = "Aborted outside this adapter."
VANISHED_IN_OUTAGE = (
    "The run ended while the event stream was down and left no result "
    "(the server may have restarted)."
)
STOPPED_AFTER_FAILED_STOP = (
    "Interrupted by user. The stop failed for part of the tree, which has since gone idle."
)
MESSAGE_ABORTED = "MessageAbortedError"


class Settling:
    """The settle, the stored-message reconcile and the watchdog of every turn; the
    stream's handlers and the sends (:class:`~adapter._turns._running.Turns`) build on it."""

    def __init__(self, core: ThreadRegistry, output: Output) -> None:
        self._registry = core
        #: Emits output the stream did not deliver, from stored messages.
        self._output = output

    def _begin_turn(
        self, thread: ThreadState, first_message_id: str, origin: TurnOrigin = "sent"
    ) -> Turn:
        """Begin the thread's turn started by the user message ``first_message_id`` (its
        id names the turn: :func:`~adapter._turns._lifecycle.turn_id_for`), with its watchdog."""
        core = self._registry
        turn_id = turn_id_for(first_message_id)
        ledger = thread.ledger
        turn = Turn(
            turn_id=turn_id,
            collector=PartialCollector(
                thread.session_id,
                max_output_bytes=core.limits.max_output_bytes,
                belongs=ledger.output_of(turn_id),
                counts=ledger.spend_of(turn_id),
                context_limit=lambda p, m: thread.client.context_limits.get(p, m),
            ),
            scope=core.tasks.scope(f"turn:{thread.thread_id}"),
            phase=TURN_STARTS[origin],
            origin=origin,
        )
        thread.lifecycle.begin_turn(turn)
        turn.scope.spawn(self._watch(thread, turn), name="watchdog")
        return turn

    def _user_message(self, thread: ThreadState, turn: Turn, message_id: str) -> None:
        mark_landed(thread, message_id)
        # Newest by arrival, not by id: our ids are minted with this machine's clock,
        # the server's with its own.
        if message_id not in turn.users_seen:
            turn.users_seen.add(message_id)
            turn.last_user_id = message_id
        if turn.prompts.get(message_id) is False:
            turn.prompts[message_id] = True
            if turn.phase is TurnPhase.AWAITING_ECHO and turn.all_echoed:
                thread.lifecycle.advance(turn, TurnPhase.STREAMING)

    # -- settling -------------------------------------------------------------------------

    def _schedule_check(self, thread: ThreadState, turn: Turn) -> None:
        turn.scope.spawn(self._settle(thread, turn, outage=False), name="settle")

    def after_stop_failed(
        self, thread: ThreadState, *, root_aborted: bool, walked: frozenset[str]
    ) -> None:
        """A failed stop leaves the turn running. If the root abort itself failed, the
        root may have finished meanwhile: settle. If the root was aborted but the walk
        failed, the turn is held: it does not settle on the root's idle (its tree may
        still run) but ends, aborted, once the whole tree (``walked``: what the walk
        found, and every session the stream announced) is idle, unless the host stops
        it again first."""
        turn = thread.turn
        if turn is None:
            return
        if root_aborted:
            turn.held = True
            turn.held_tree = turn.held_tree | walked
        else:
            turn.scope.spawn(self._settle(thread, turn, outage=False), name="settle")

    def after_outage(self, thread: ThreadState) -> None:
        turn = thread.turn
        if turn is not None:
            turn.missed_events = True
        if turn is not None and thread.interrupts.stop is None:
            turn.scope.spawn(self._settle(thread, turn, outage=True), name="reconcile")

    async def _ask(
        self, thread: ThreadState, call: Callable[[], Awaitable[_T]], what: str
    ) -> _T | None:
        """``call()``, asked until the server answers (backoff, capped), or ``None``
        when it has not answered within ``Timeouts.idle_confirm``: a server that is
        gone must end the turn, never leave it waiting forever."""
        timeouts = self._registry.timeouts
        deadline = time.monotonic() + timeouts.idle_confirm
        delay = 0.1
        while True:
            try:
                return await call()
            except OpenCodeError as exc:
                _log.warning(
                    "adapter.server_unanswered",
                    thread_id=thread.thread_id,
                    what=what,
                    error=str(exc),
                )
                if time.monotonic() + delay > deadline:
                    return None
                await asyncio.sleep(delay)
                delay = min(delay * 2, timeouts.idle_confirm_backoff_max)

    async def _status(self, client: OpenCodeClient, thread: ThreadState) -> SessionStatus | None:
        """The root's status (see :meth:`_ask`)."""
        statuses = await self._ask(thread, client.status, "GET /session/status")
        if statuses is None:
            return None
        return statuses.get(thread.session_id, SessionStatus("idle"))

    def _server_unavailable(self, thread: ThreadState, turn: Turn, what: str) -> None:
        """The server stopped answering while the turn waited on it (it died, or the
        network did): the turn fails, keeping what it produced, and says why."""
        self._fail(
            thread,
            turn,
            "ServerUnavailable",
            f"the server did not answer for {self._registry.timeouts.idle_confirm:g} s "
            f"({what} kept failing)",
        )

    async def _settle(self, thread: ThreadState, turn: Turn, *, outage: bool) -> None:
        """Decide whether the turn is over; the one place a turn ends on its own."""
        if turn.held:
            return
        while True:
            idles = turn.idles
            statuses = await self._ask(thread, thread.client.status, "GET /session/status")
            if thread.turn is not turn or thread.interrupts.stop is not None:
                return
            if statuses is None:
                self._status_unanswered(thread, turn)
                return
            status = statuses.get(thread.session_id, SessionStatus("idle"))
            if not status.is_busy:
                break
            if turn.idles != idles and turn.phase is TurnPhase.SETTLING:
                continue  # a newer idle came during the poll: the answer may predate it
            # Still running after an outage: what the stream missed meanwhile (an echo,
            # output) is only stored, and the idle to come may read nothing (the run
            # looks finished to it): read it now.
            if outage:
                if await self._read_stored(thread, turn) is None:
                    return
                if turn.idles != idles:
                    # The run ended while we asked: its idle came while the turn still
                    # waited for an echo only the stored messages had, so no event will
                    # settle it (the watchdog would, after quiet_check): ask again.
                    continue
            if turn.phase is TurnPhase.SETTLING:
                thread.lifecycle.advance(turn, TurnPhase.STREAMING)
            return
        messages: Sequence[Message] = ()
        if outage or turn.missed_events or not turn.run_finished:
            # The stream may have missed something: the stored messages are the truth.
            read = await self._read_stored(thread, turn)
            if read is None:
                return
            messages = read
        if turn.phase is TurnPhase.AWAITING_ECHO:
            return  # a prompt is on its way: its run is still to come
        if not turn.run_finished:
            if turn.all_echoed and await self._answer_was_cut(thread, turn, messages):
                # The root is idle and its answer stopped midway: the server restarted
                # (after an outage), or another client aborted the run (measured on
                # 1.18.34: a one-level task tree stopped by another adapter leaves the
                # root's newest step unfinished, with no MessageAbortedError).
                reason = VANISHED_IN_OUTAGE if outage or turn.missed_events else ABORTED_ELSEWHERE
                self._end(thread, turn, _aborted(turn, reason))
            elif thread.turn is turn and turn.phase is TurnPhase.STREAMING:
                # Idle before the answer started (a follow-up's second run is still to
                # come): settling, so that the watchdog bounds the wait (Timeouts.echo).
                thread.lifecycle.advance(turn, TurnPhase.SETTLING)
            return
        if self._owes_background(thread, turn, statuses):
            if turn.phase is not TurnPhase.BACKGROUND:
                thread.lifecycle.advance(turn, TurnPhase.BACKGROUND)
            return
        self._end_settled(thread, turn)

    def _owes_background(
        self, thread: ThreadState, turn: Turn, statuses: Mapping[str, SessionStatus]
    ) -> bool:
        """Whether the idle root's turn still waits on background subagents: one of them
        works, a result is owed to its parent, or a session of the tree runs on one.
        A child the status shows idle has ended even if its idle event was lost; a
        result the server never delivered within ``Timeouts.echo`` is given up, with a
        warning, so the turn cannot wait forever."""
        work = turn.background
        if not work.started:
            # An adopted turn can be found with its root idle and part of its tree still
            # working (another client aborted the root alone, say): it waits for them.
            return turn.adopted and any(
                statuses[sid].is_busy
                for sid, born_in in thread.tree.sessions.items()
                if born_in == turn.turn_id and sid in statuses
            )
        for child in list(work.running):
            if not statuses.get(child, SessionStatus("idle")).is_busy:
                work.ended(child)
        overdue = work.overdue(time.monotonic(), self._registry.timeouts.echo)
        for child in overdue:
            work.due.pop(child, None)
            self._warn(
                thread,
                turn,
                f"background subagent {child} ended but its result did not reach its parent "
                f"within {self._registry.timeouts.echo:g} s; the turn ends without it",
            )
        tree_busy = any(statuses[sid].is_busy for sid in thread.tree.sessions if sid in statuses)
        return work.outstanding or tree_busy

    async def _read_stored(self, thread: ThreadState, turn: Turn) -> Sequence[Message] | None:
        """The root's stored messages, absorbed into ``turn``; ``None`` when the server
        did not answer (see :meth:`_ask`; the watchdog looks again) or the turn ended or
        is being stopped meanwhile. Asked like the status: after an outage no event may
        come again, and one failed read left the turn to the watchdog (30 s)."""
        messages = await self._ask(
            thread, lambda: thread.client.messages(thread.session_id), "GET /session/{id}/message"
        )
        if messages is None:
            _log.warning("adapter.reconcile_failed", thread_id=thread.thread_id)
            return None
        if thread.turn is not turn or thread.interrupts.stop is not None:
            return None
        self.absorb_stored(thread, turn, messages)
        return messages

    async def _answer_was_cut(
        self, thread: ThreadState, turn: Turn, messages: Sequence[Message]
    ) -> bool:
        """Whether the answer to the turn's newest message was cut off (the server
        restarted, or another client aborted the run): its newest step exists,
        unfinished, while the root is idle, and still is when read again. No answer at
        all is not a cut: a follow-up that arrived as the last run ended is answered by
        a second run that has not started yet."""
        last = turn.last_user_id

        def cut(stored: Sequence[Message]) -> bool:
            answers = [
                m.info for m in stored if m.info.role == "assistant" and m.info.parent_id == last
            ]
            newest = max(answers, key=lambda a: a.id, default=None)
            return newest is not None and newest.completed is None and newest.error is None

        if last is None or not cut(messages):
            return False
        try:
            status = (await thread.client.status()).get(thread.session_id)
            if status is not None and status.is_busy:
                return False
            again = await thread.client.messages(thread.session_id)
        except OpenCodeError:
            return False  # the watchdog looks again
        return thread.turn is turn and cut(again)

    def absorb_stored(self, thread: ThreadState, turn: Turn, messages: Sequence[Message]) -> None:
        """Bring the turn up to date from the root's stored messages: echoes, answers,
        errors, and the output the stream did not deliver."""
        thread.ledger.place_stored(messages, turn.turn_id, turn.first_prompt_id)
        for message in messages:
            info = message.info
            observe_message_id(info.id)
            if thread.ledger.turn_of(info.id) != turn.turn_id:
                continue
            for part in message.parts:
                if part.type == "compaction":
                    thread.compactions.requested(info.id, auto=part.raw.get("auto") is True)
                elif (result := delivered_result(part)) is not None:
                    turn.background.delivered(result[0])
                elif (child := started_child(part)) is not None:
                    turn.background.start(child, thread.session_id)
            if info.raw.get("summary") is True:
                thread.compactions.summary_message(info.id, info.parent_id)
            if info.role == "user":
                self._user_message(thread, turn, info.id)
                prompt_diff(
                    self._registry, thread, info.id, info.raw
                )  # the stream may have missed it
                continue
            finished = info.completed is not None or info.error is not None
            if info.parent_id is not None:
                turn.answer_seen(info.parent_id, info.id, finished=finished)
            if info.error is not None:
                if info.error.name == MESSAGE_ABORTED:
                    turn.aborted_elsewhere = True
                elif turn.error is None:
                    turn.error = (info.error.name, info.error.message or info.error.name)
                    turn.error_for = info.parent_id
        turn.collector.reconcile(thread.session_id, messages)
        self._output.replay(thread, turn, messages)

    def _end_settled(self, thread: ThreadState, turn: Turn) -> None:
        if turn.aborted_elsewhere:
            ending = _aborted(turn, ABORTED_ELSEWHERE)
        elif thread.compactions.cut_short(turn.last_user_id):
            # A summarize (ours or another client's) ended the run: the agent stopped
            # its work there, so the turn did not complete.
            ending = _aborted(turn, SUMMARIZED)
        elif turn.error is not None and turn.error_for == turn.last_user_id:
            name, message = turn.error
            ending = TurnEnding("failed", error=message, error_name=name)
        else:
            ending = TurnEnding("completed")
        self._end(thread, turn, ending)

    def _end(self, thread: ThreadState, turn: Turn, ending: TurnEnding) -> None:
        thread.lifecycle.end_turn(turn, ending)

    def _fail(self, thread: ThreadState, turn: Turn, name: str, error: str) -> None:
        self._end(thread, turn, TurnEnding("failed", error=error, error_name=name))

    def _warn(self, thread: ThreadState, turn: Turn, message: str) -> None:
        """A ``runtime.warning`` about ``turn``: how it ends is not what the host expects."""
        self._registry.emit(
            RuntimeWarningEvent(thread_id=thread.thread_id, turn_id=turn.turn_id, message=message)
        )

    def _status_unanswered(self, thread: ThreadState, turn: Turn) -> None:
        """Status kept failing for ``idle_confirm`` seconds after an idle: end the turn
        on what the stream said, and say that it could not be confirmed."""
        seconds = self._registry.timeouts.idle_confirm
        self._warn(
            thread,
            turn,
            f"the turn's end could not be confirmed: GET /session/status kept failing for "
            f"{seconds:g} s after the session went idle",
        )
        if turn.run_finished:
            self._end_settled(thread, turn)
        else:
            self._fail(
                thread,
                turn,
                "StatusUnavailable",
                f"the server went idle without answering and its status "
                f"did not answer for {seconds:g} s",
            )

    # -- the watchdog -------------------------------------------------------------------

    async def _watch(self, thread: ThreadState, turn: Turn) -> None:
        """Bounds a turn that waits for something the server may never send."""
        timeouts = self._registry.timeouts
        while thread.turn is turn:
            await asyncio.sleep(timeouts.watchdog)
            if thread.turn is not turn or thread.interrupts.stop is not None:
                continue
            if turn.held:
                await self._release_held(thread, turn)
                continue
            quiet = time.monotonic() - turn.last_activity
            if turn.phase is TurnPhase.AWAITING_ECHO and quiet > timeouts.echo:
                await self._echo_overdue(thread, turn)
            elif (
                quiet > timeouts.quiet_check
                or (turn.phase is TurnPhase.SETTLING and quiet > timeouts.echo)
                or (
                    turn.phase is TurnPhase.BACKGROUND
                    and turn.background.due
                    and quiet > timeouts.echo
                )
            ):
                turn.touch()
                if turn.phase is TurnPhase.SETTLING and turn.all_echoed and not turn.run_finished:
                    await self._unanswered(thread, turn)
                else:
                    await self._settle(thread, turn, outage=False)

    async def _release_held(self, thread: ThreadState, turn: Turn) -> None:
        """A turn held by a failed stop ends once its whole tree is idle: the root was
        aborted, and nothing of the tree runs any more, so nothing is left to stop."""
        statuses = await self._ask(thread, thread.client.status, "GET /session/status")
        if thread.turn is not turn or thread.interrupts.stop is not None or not turn.held:
            return
        if statuses is None:
            self._server_unavailable(thread, turn, "GET /session/status")
            return
        tree = turn.held_tree.union(thread.tree.sessions)
        if any(statuses[sid].is_busy for sid in tree if sid in statuses):
            return
        self._end(
            thread,
            turn,
            _aborted(turn, STOPPED_AFTER_FAILED_STOP),
        )

    async def _echo_overdue(self, thread: ThreadState, turn: Turn) -> None:
        messages = await self._ask(
            thread, lambda: thread.client.messages(thread.session_id), "GET /session/{id}/message"
        )
        if thread.turn is not turn or thread.interrupts.stop is not None:
            return
        if messages is None:
            self._server_unavailable(thread, turn, "GET /session/{id}/message")
            return
        self.absorb_stored(thread, turn, messages)
        if turn.phase is not TurnPhase.AWAITING_ECHO:
            await self._settle(thread, turn, outage=False)
            return
        status = await self._status(thread.client, thread)
        if thread.turn is not turn or thread.interrupts.stop is not None:
            return
        if status is not None and status.is_busy:
            # The root is working (on a run before our prompt, or on it while its
            # message is not readable yet): busy admits the turn for another
            # ``echo`` period; the prompt fails only once the root is idle without it.
            turn.touch()
            return
        missing = [mid for mid, echoed in turn.prompts.items() if not echoed]
        self._fail(
            thread,
            turn,
            "PromptNotStarted",
            (
                f"the server accepted the prompt {missing[0]} but did not start it "
                f"within {self._registry.timeouts.echo:g} s"
            ),
        )

    async def _unanswered(self, thread: ThreadState, turn: Turn) -> None:
        """Idle, every prompt echoed, yet no answer for ``echo`` seconds: re-read, then fail."""
        await self._settle(thread, turn, outage=False)
        if (
            thread.turn is not turn
            or thread.interrupts.stop is not None
            or turn.phase is not TurnPhase.SETTLING
        ):
            return
        self._fail(
            thread,
            turn,
            "NoAnswer",
            (
                "the server went idle without answering the turn's last message "
                f"(waited {self._registry.timeouts.echo:g} s)"
            ),
        )


def mark_landed(thread: ThreadState, message_id: str) -> None:
    """The server has the command being sent: its message was seen."""
    submission = thread.submission
    if submission.landed is not None and submission.command_id == message_id:
        submission.landed.set()


def _aborted(turn: Turn, reason: str) -> TurnEnding:
    """The turn was cut short for ``reason``; it keeps what it produced."""
    return TurnEnding("aborted", reason=reason, partial=turn.collector.result(turn.turn_id))
