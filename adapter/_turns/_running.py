"""Turns: sending prompts and slash commands, and following what the server runs for them.

Why it exists: a turn must end exactly once, after its last output, and a
turn must never be lost or stuck. Measured on OpenCode 1.18.34, a prompt sent
from about 60 ms before a run's idle to just after it is echoed *after* that
idle and starts a second run; so an idle alone does not end a turn. This module
starts turns (a prompt, a steer, a command), and turns what the stream says about
the root (its messages, status, idles, errors) and about background subagents into
the turn's state; when that state says the turn may be over, it asks
:mod:`adapter._turns._settling`, which decides (and owns the watchdog).

Every task here belongs to its turn's scope and is cancelled when the turn
ends; nothing checks afterwards whether it is stale.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from .._base._ids import mint_message_id, observe_message_id
from .._client._native import MessageUpdated
from .._client._responses import SessionStatus
from .._exceptions import (
    InvalidInputError,
    NotFoundError,
    OpenCodeError,
    ProtocolError,
    RequestError,
    TurnCancelledError,
)
from .._logging import get_logger
from .._threads._thread_state import ThreadState
from .._types._events import RetryStatus
from .._types._records import TurnStart
from ._adoption import Adoption
from ._lifecycle import Turn, TurnEnding, TurnPhase
from ._prompt_input import Prompt
from ._settling import (
    ABORTED_ELSEWHERE,
    MESSAGE_ABORTED,
    STOPPED_AFTER_FAILED_STOP,
    VANISHED_IN_OUTAGE,
    mark_landed,
)

__all__ = ["ABORTED_ELSEWHERE", "STOPPED_AFTER_FAILED_STOP", "VANISHED_IN_OUTAGE", "Turns"]

_log = get_logger("adapter.turns")

#: How long a command's request may wait for its run to end (the turn's own watchdog
#: bounds the turn; ending the request does not stop the run: measured on 1.18.34).
COMMAND_DEADLINE = 24 * 3600.0


class Turns(Adoption):
    """Sending prompts and commands, and what the stream says about the root and the
    background subagents; when a turn ends is :class:`Settling`'s to decide, and a run
    this adapter did not send becomes a turn through :class:`Adoption`."""

    # -- sending ----------------------------------------------------------------------

    async def send(
        self,
        thread: ThreadState,
        prompt: Prompt,
        model: tuple[str, str] | None,
        agent: str | None,
    ) -> TurnStart:
        """Start a turn, or add a prompt to the running one (a steer)."""
        async with thread.submission.lock:
            await self._wait_for_stop(thread)
            turn = thread.turn
            new_turn = turn is None
            message_id = mint_message_id()
            if turn is None:
                turn = self._begin_turn(thread, message_id)
            self._add_prompt(thread, turn, message_id)
            submission = self._registry.tasks.spawn(
                self._submit(thread, prompt, message_id, model, agent),
                name=f"submit:{thread.thread_id}",
                log_errors=False,
            )
            thread.submission.task = submission
            return await self._accepted(thread, turn, message_id, new_turn, submission, None)

    async def command(
        self,
        thread: ThreadState,
        name: str,
        arguments: str,
        model: tuple[str, str] | None,
        agent: str | None,
    ) -> TurnStart:
        """Start a turn that runs the slash command ``name``; refused while a turn runs.

        ``POST /session/{id}/command`` answers only once the run has ended, so the
        request goes on in the turn's scope: this returns once the server has the
        command's message (its minted id echoed), or raises the request's failure."""
        async with thread.submission.lock:
            await self._wait_for_stop(thread)
            if thread.turn is not None:
                raise InvalidInputError(
                    f"a command starts a turn, and thread {thread.thread_id} has one running "
                    f"({thread.turn.turn_id}): run it once that turn has ended, or interrupt it"
                )
            message_id = mint_message_id()
            turn = self._begin_turn(thread, message_id)
            self._add_prompt(thread, turn, message_id)
            submission = thread.submission
            submission.command_id, submission.landed = message_id, asyncio.Event()
            client = thread.client

            async def call() -> object:
                await client.context_limits.ensure(model)  # the meter's limits, as for a prompt
                return await client.command(
                    thread.session_id,
                    name,
                    arguments,
                    message_id=message_id,
                    model=model,
                    agent=agent,
                    deadline=COMMAND_DEADLINE,
                )

            request = turn.scope.spawn(call(), name="command", log_errors=False)
            assert request is not None  # the turn has just begun
            submission.task = request
            return await self._accepted(thread, turn, message_id, True, request, submission.landed)

    async def _accepted(
        self,
        thread: ThreadState,
        turn: Turn,
        message_id: str,
        new_turn: bool,
        request: asyncio.Task[Any],
        landed: asyncio.Event | None,
    ) -> TurnStart:
        """Wait until the server has what ``request`` sends: a prompt once its request
        answered, a command once its message was seen (``landed``; its request goes on
        until the run ends: the stream and the watchdog judge the run, as for a prompt).
        Refused, a new turn ends aborted and the failure is raised."""
        started = TurnStart(thread_id=thread.thread_id, turn_id=turn.turn_id)
        what = "prompt" if landed is None else "command"
        echo = asyncio.ensure_future(
            landed.wait() if landed is not None else asyncio.Event().wait()
        )
        try:
            await asyncio.wait([request, echo], return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            if landed is None:  # a command cannot be withdrawn so (the server runs it)
                request.cancel()
                self._unsent(thread, turn, message_id, new_turn, "the send was cancelled")
            raise
        finally:
            echo.cancel()
            if thread.submission.task is request:
                thread.submission.task = thread.submission.landed = None
                thread.submission.command_id = None
        if landed is not None and landed.is_set():
            return started
        if request.cancelled():
            self._unsent(thread, turn, message_id, new_turn, "the send was cancelled")
            raise TurnCancelledError(
                f"the {what} was cancelled before the server accepted it "
                "(its turn was interrupted or its session stopped)"
            )
        exc = request.exception()
        if exc is not None:
            if await self._landed_anyway(thread, exc, message_id):
                # The answer was lost, but the server has our message: the turn runs.
                _log.warning(
                    f"adapter.{what}_answer_lost", thread_id=thread.thread_id, error=str(exc)
                )
                return started
            self._unsent(thread, turn, message_id, new_turn, f"The {what} was not accepted: {exc}")
            raise exc
        return started

    def _add_prompt(self, thread: ThreadState, turn: Turn, message_id: str) -> None:
        """A prompt of ``turn`` is being sent with ``message_id``, minted so that its
        echo is known."""
        turn.prompts[message_id] = False
        thread.ledger.claim(message_id, turn.turn_id)
        turn.collector.add_turn_message(message_id)
        if turn.phase is not TurnPhase.AWAITING_ECHO:
            thread.lifecycle.advance(turn, TurnPhase.AWAITING_ECHO)
        turn.touch()

    def _unsent(
        self, thread: ThreadState, turn: Turn, message_id: str, new_turn: bool, reason: str
    ) -> None:
        """A prompt that never reached the server: a new turn ends at once
        (``turn.aborted``); a steer is forgotten (its turn goes on)."""
        if turn.prompts.get(message_id) is False:
            del turn.prompts[message_id]
        if thread.turn is not turn or thread.interrupts.stop is not None:
            return
        if new_turn and not turn.prompts:
            thread.lifecycle.end_turn(turn, TurnEnding("aborted", reason=reason))
        elif turn.phase is TurnPhase.AWAITING_ECHO and turn.all_echoed:
            thread.lifecycle.advance(turn, TurnPhase.STREAMING)
            self._schedule_check(thread, turn)

    async def _landed_anyway(
        self, thread: ThreadState, exc: BaseException, message_id: str
    ) -> bool:
        """After a lost answer, ask the server whether our (minted) message exists."""
        lost = isinstance(exc, ProtocolError) or (
            isinstance(exc, RequestError) and exc.delivered is None
        )
        if not lost:
            return False
        try:
            async with asyncio.timeout(self._registry.timeouts.request):
                await thread.client.message(thread.session_id, message_id)
        except NotFoundError:
            return False
        except (OpenCodeError, TimeoutError):
            # Unknown either way: keep the prompt (the watchdog settles it).
            return thread.turn is not None
        return True

    async def _submit(
        self,
        thread: ThreadState,
        prompt: Prompt,
        message_id: str,
        model: tuple[str, str] | None,
        agent: str | None,
    ) -> None:
        submit = self._registry.timeouts.submit
        # The context meter's limits, before the run can finish a step (read once per
        # client; a failure leaves them unknown and never stops the prompt).
        await thread.client.context_limits.ensure(model)
        try:
            async with asyncio.timeout(submit):
                await thread.client.prompt_async(
                    thread.session_id,
                    prompt.native_parts(),
                    message_id=message_id,
                    model=model,
                    agent=agent,
                    variant=prompt.variant,
                    system=prompt.system,
                    tools=prompt.tools,
                )
        except TimeoutError:
            raise RequestError(
                "prompt_async",
                f"the server did not accept the prompt within {submit} s",
                session_id=thread.session_id,
            ) from None

    async def _wait_for_stop(self, thread: ThreadState) -> None:
        """A send waits for a pending stop: then it goes on, or raises the stop's error."""
        while True:
            if thread.closing:
                raise TurnCancelledError(f"thread {thread.thread_id} was stopped")
            stop = thread.interrupts.stop
            if stop is None:
                return
            closed: asyncio.Future[Any] = asyncio.ensure_future(thread.closed.wait())
            waiting: list[asyncio.Future[Any]] = [stop.future, closed]
            try:
                await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            finally:
                closed.cancel()
            if thread.closing:
                raise TurnCancelledError(
                    f"thread {thread.thread_id} was stopped while a send waited"
                )
            if stop.future.done() and stop.future.exception() is not None:
                raise cast(BaseException, stop.future.exception())

    # -- what the stream says about the root ----------------------------------------

    def root_message(self, thread: ThreadState, event: MessageUpdated) -> None:
        """A message of the root was created or changed."""
        observe_message_id(event.message_id)  # our next prompt's id must sort after it
        mark_landed(thread, event.message_id)
        if (
            event.role == "user"
            and thread.ledger.is_new(event.message_id)
            and self.may_adopt(thread)
        ):
            # Another client prompted the root (another worker, `opencode attach`).
            self.adopt_started(thread, event.message_id)
        entry = thread.ledger.see(
            event.message_id,
            event.role,
            event.parent_id,
            active_turn_id=thread.lifecycle.turn_id,
            stopping=thread.interrupts.stop is not None,
            summary=event.summary,
        )
        turn = thread.turn
        if turn is None or entry.turn_id != turn.turn_id or entry.late or thread.closing:
            return
        turn.touch()
        if event.role == "user":
            self._user_message(thread, turn, event.message_id)
            self._settle_after_overtaking_idle(thread, turn)
            return
        if turn.prompts.get(event.parent_id or "") is False:
            # An answer to our prompt proves the server has it, even if its echo
            # was lost (the answer's parentID is the id we minted).
            self._user_message(thread, turn, cast(str, event.parent_id))
        finished = event.completed is not None or event.error is not None
        was_finished = turn.run_finished
        if event.parent_id is not None:
            turn.answer_seen(event.parent_id, event.message_id, finished=finished)
        error = event.error
        if error is not None and thread.interrupts.stop is None:
            if error.name == MESSAGE_ABORTED:
                # Aborted by someone else (another client, the TUI): decided on the
                # turn's own message, so a late acknowledgement of an earlier stop
                # (a session.error with no message) can never abort a newer turn.
                turn.aborted_elsewhere = True
            else:
                turn.error = (error.name, error.message or error.name)
                turn.error_for = event.parent_id or turn.last_user_id
        if (
            not was_finished
            and turn.run_finished
            and turn.phase is TurnPhase.SETTLING
            and thread.interrupts.stop is None
        ):
            # The answer ended while the root's idle was being checked, or after (the
            # real server's abort sends the root's idle before the step's
            # MessageAbortedError, measured on 1.18.34): look again rather than wait
            # for the watchdog's quiet check.
            self._schedule_check(thread, turn)
        self._settle_after_overtaking_idle(thread, turn)

    def _settle_after_overtaking_idle(self, thread: ThreadState, turn: Turn) -> None:
        """An idle that overtook the echo of its own prompt is the only idle that run
        sends: once the echo and the finished answer are in, ask whether it is over
        (``/session/status`` decides, as for any idle) rather than wait for the
        watchdog's quiet check."""
        if (
            turn.idle_before_echo
            and turn.phase is TurnPhase.STREAMING
            and turn.run_finished
            and thread.interrupts.stop is None
        ):
            turn.idle_before_echo = False
            thread.lifecycle.advance(turn, TurnPhase.SETTLING)
            self._schedule_check(thread, turn)

    def root_status(self, thread: ThreadState, status: SessionStatus, raw: object) -> None:
        turn = thread.turn
        if turn is None:
            if status.is_busy and self.may_adopt(thread):
                self.adopt_busy(thread)  # a run this adapter did not send, maybe
            return
        turn.touch()
        if status.type == "retry":
            retry = RetryStatus(
                attempt=status.attempt or 0,
                message=status.message or "",
                next_at=_epoch_seconds(status.next),
            )
            thread.lifecycle.retrying(turn, retry, raw if isinstance(raw, dict) else {})
        elif status.type == "busy":
            thread.lifecycle.retrying(turn, None, {})
        if status.is_busy:
            turn.idle_before_echo = False  # a run began: its own idle is still to come
        if status.is_busy and turn.phase in (TurnPhase.SETTLING, TurnPhase.BACKGROUND):
            thread.lifecycle.advance(turn, TurnPhase.STREAMING)  # a second run began
        elif status.type == "idle":
            self.root_idle(thread)

    def root_idle(self, thread: ThreadState) -> None:
        turn = thread.turn
        if turn is None or thread.interrupts.stop is not None or thread.closing:
            return  # between turns, or the stop's (or the teardown's) to settle
        turn.touch()
        turn.idles += 1
        if turn.phase is TurnPhase.STREAMING:
            thread.lifecycle.advance(turn, TurnPhase.SETTLING)
            self._schedule_check(thread, turn)
        elif turn.phase is TurnPhase.AWAITING_ECHO:
            # Usually the idle of a run before our prompt (its echo and run come
            # next); sometimes our run's own idle, overtaking its echo.
            turn.idle_before_echo = True

    def root_error(self, thread: ThreadState, name: str, message: str) -> None:
        """``session.error`` of the root (not tied to a message)."""
        stop = thread.interrupts.stop
        if name == MESSAGE_ABORTED:
            if stop is not None:
                stop.acknowledged.set()  # our abort landed
            return  # a turn aborted elsewhere is told by its own message
        turn = thread.turn
        if turn is None or turn.phase is TurnPhase.AWAITING_ECHO or thread.closing:
            return
        if stop is not None:
            # A genuine failure while our stop runs: the turn failed on its own, and
            # says so now (the stop still finishes the tree, but ends no turn).
            thread.lifecycle.end_turn(turn, TurnEnding("failed", error=message, error_name=name))
            return
        turn.error = (name, message)
        turn.error_for = turn.last_user_id

    # -- background subagents (adapter._turns._background) --------------------------------

    def background_started(self, thread: ThreadState, parent: str, child: str) -> None:
        """A ``task`` call of the tree started ``child`` in the background."""
        turn = thread.turn
        if turn is not None and thread.interrupts.stop is None and not thread.closing:
            turn.background.start(child, parent)

    def child_aborted(self, thread: ThreadState, child: str) -> None:
        """OpenCode announced ``child``'s abort: it owes its parent no result."""
        turn = thread.turn
        if turn is not None:
            turn.background.abort_seen(child)

    def child_idle(self, thread: ThreadState, child: str) -> None:
        """A session of the tree other than the root went idle."""
        turn = thread.turn
        if turn is None:
            return
        if turn.background.ended(child) or (turn.adopted and turn.phase is TurnPhase.BACKGROUND):
            self._recheck_background(thread, turn)

    def children_stopped(self, thread: ThreadState, children: frozenset[str]) -> None:
        """The adapter stopped ``children`` alone: no result of theirs is owed."""
        turn = thread.turn
        if turn is not None and turn.background.stopped(children):
            self._recheck_background(thread, turn)

    def result_delivered(self, thread: ThreadState, child: str) -> None:
        """A parent of the tree received the synthetic result of background ``child``."""
        turn = thread.turn
        if turn is not None and turn.background.delivered(child):
            turn.touch()
            self._recheck_background(thread, turn)

    def _recheck_background(self, thread: ThreadState, turn: Turn) -> None:
        if turn.phase is TurnPhase.BACKGROUND and thread.interrupts.stop is None:
            self._schedule_check(thread, turn)


def _epoch_seconds(value: float | None) -> float | None:
    """OpenCode's ``next`` is epoch milliseconds; seconds are what Python hosts use."""
    if value is None:
        return None
    return value / 1000 if value > 1e11 else value
