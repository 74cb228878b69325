"""The Stop button: interrupting a thread's turn, and tearing a thread down.

``interrupt`` stops the thread's whole session tree (root first, then the
breadth-first walk of :func:`~adapter.stop_tree`), ends the active turn as
``turn.aborted`` with what it had produced, withdraws the tree's open
requests (here and on the server), and returns an
:class:`~adapter.InterruptResult`. Concurrent calls share one stop. While it
runs the thread is ``stopping``: an idle is the stop's to settle, a send
waits, output first seen then is late and suppressed. A failed stop leaves
the turn running (the thread goes back to ``running``) and raises its
:class:`~adapter.TreeStopError` with ``partial``, the turn so far as the events showed it.

``stop_subagent`` stops one subagent and its subtree with the same walk, and
nothing else: the root and the other subagents go on, and so does the turn (its
``task`` call for the subagent ends "Task cancelled", measured on 1.18.34). It
refuses the root and any session outside the thread's tree before sending anything.
A stop of the whole turn wins: one under way is joined (its report is returned),
one that starts meanwhile runs as usual.

``close`` is ``stop_session``: a pending stop completes, then root and tree
are aborted (best effort, bounded) and ``session.exited`` is emitted once.
See ``docs/interrupt.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import cast

from .._base._ids import is_session_id
from .._exceptions import (
    InvalidInputError,
    OpenCodeError,
    RequestError,
    TreeStopError,
    TurnCancelledError,
)
from .._logging import get_logger
from .._requests._pending import Requests
from .._threads._registry import ThreadRegistry
from .._threads._session_owners import Ownership
from .._threads._thread_state import OpenRequest, Stop, ThreadState
from .._turns._lifecycle import Turn, TurnEnding
from .._turns._running import Turns
from .._types._partial_result import PartialResult
from .._types._records import InterruptResult
from .._types._stop_report import StopReport
from ._stop_tree import stop_tree

__all__ = ["INTERRUPTED_BY_USER", "Interrupts"]

_log = get_logger("adapter.interrupt")

INTERRUPTED_BY_USER = "Interrupted by user."
#: How often a stop waiting for a slash command to land reads it back (seconds).
_READ_BACK_EVERY = 0.25


class Interrupts:
    def __init__(
        self, core: ThreadRegistry, ownership: Ownership, requests: Requests, turns: Turns
    ) -> None:
        self._registry = core
        self._ownership = ownership
        self._requests = requests
        self._turns = turns

    # -- interrupt_turn --------------------------------------------------------------

    async def interrupt(self, thread: ThreadState, turn_id: str | None) -> InterruptResult:
        stop = thread.interrupts.stop
        if stop is not None:
            return await asyncio.shield(stop.future)
        active = thread.turn
        if turn_id is not None and (active is None or active.turn_id != turn_id):
            last = thread.interrupts.last
            if last is not None and last.turn_id == turn_id:
                return last
            return InterruptResult(
                turn_id=turn_id, stop=None, partial=PartialResult.empty(thread.session_id, turn_id)
            )
        stop = Stop(turn=active, future=asyncio.get_running_loop().create_future())
        thread.interrupts.stop = stop
        thread.lifecycle.begin_stop()
        self._registry.tasks.spawn(self._run(thread, stop), name=f"stop:{thread.thread_id}")
        return await asyncio.shield(stop.future)

    async def _run(self, thread: ThreadState, stop: Stop) -> None:
        turn = stop.turn
        try:
            result = await self._stop_tree_of(thread, stop)
        except BaseException as exc:
            if thread.interrupts.stop is stop:
                thread.interrupts.stop = None
            if not thread.closing:
                thread.ledger.stop_failed()
                thread.lifecycle.stop_done()  # the turn (if any) runs on
                self._turns.after_stop_failed(
                    thread,
                    root_aborted=not stop.root_abort_failed,
                    walked=(
                        frozenset(s.session_id for s in exc.report)
                        if isinstance(exc, TreeStopError)
                        else frozenset()
                    ),
                )
            error = (
                exc if isinstance(exc, Exception) else TurnCancelledError("the stop was cancelled")
            )
            if isinstance(error, TreeStopError) and error.partial is None:
                # What a host keeps of a failed stop: the turn so far, as the events
                # showed it (the turn runs on, so its stored messages are not final).
                error.partial = (
                    turn.collector.result(turn.turn_id)
                    if turn is not None
                    else PartialResult.empty(thread.session_id, None)
                )
            if not thread.closing:  # else the thread's own ending (session.exited) says it
                thread.lifecycle.stop_failed(stop.turn_id, error)
            if not stop.future.done():
                stop.future.set_exception(error)
                stop.future.exception()
            if not isinstance(exc, Exception):
                raise
            return
        if thread.interrupts.stop is stop:
            thread.interrupts.stop = None
        if stop.future.done():
            return  # the server's death settled it already
        thread.interrupts.last = result
        if result.stop is not None:  # its tasks end before the turn (task.completed first)
            thread.subagents.stopped(
                (s.session_id for s in result.stop if s.outcome != "failed"),
                result.partial.usage.by_session,
            )
        if turn is not None:
            thread.lifecycle.end_turn(
                turn, TurnEnding("aborted", reason=INTERRUPTED_BY_USER, partial=result.partial)
            )
        if not thread.closing:
            thread.lifecycle.stop_done()
            thread.lifecycle.stopped(stop.turn_id, result.stop)
        stop.future.set_result(result)

    async def _stop_tree_of(self, thread: ThreadState, stop: Stop) -> InterruptResult:
        core = self._registry
        timeouts = core.timeouts
        await _withdraw_submission(thread, timeouts.abort)

        # A root abort the server acknowledged before answering: the walk goes on at
        # once, and the request is awaited before the stop returns (a request given up
        # on can still reach the server later and stop the next turn).
        acknowledged_first: list[asyncio.Future[bool]] = []
        deadline = asyncio.get_running_loop().time() + timeouts.abort

        async def root_abort() -> None:
            abort = asyncio.ensure_future(thread.client.abort(thread.session_id))
            ack = asyncio.ensure_future(stop.acknowledged.wait())
            try:
                async with asyncio.timeout_at(deadline):
                    await asyncio.wait([abort, ack], return_when=asyncio.FIRST_COMPLETED)
            except BaseException as exc:
                abort.cancel()
                with contextlib.suppress(asyncio.CancelledError, OpenCodeError):
                    await abort
                if not isinstance(exc, TimeoutError):
                    raise
                stop.root_abort_failed = True
                raise RequestError(
                    "abort",
                    f"the root abort did not finish within {timeouts.abort} s",
                    session_id=thread.session_id,
                ) from None
            finally:
                ack.cancel()
            if not abort.done():
                acknowledged_first.append(abort)
                return
            failed = not abort.cancelled() and abort.exception() is not None
            if failed and not stop.acknowledged.is_set():
                stop.root_abort_failed = True
                raise cast(BaseException, abort.exception())

        try:
            report = await self._walk(
                thread,
                thread.session_id,
                timeout=timeouts.abort + timeouts.tree,
                root_abort=root_abort,
                eager_root_listing=core.limits.eager_root_listing,
            )
        finally:
            for abort in acknowledged_first:
                await _answered_by(abort, deadline, thread.session_id)
        for sid in report.session_ids:
            if sid not in thread.tree.sessions:
                self._ownership.adopt(thread, sid, report[sid].parent_id)
        stopped = [s.session_id for s in report if s.outcome != "failed"]
        withdrawn = self._requests.cancel_in(thread, stopped, stop.turn_id)
        partial, _ = await asyncio.gather(
            self._collect_partial(thread, stop.turn, report),
            self._requests.reject_on_server(thread.client, withdrawn, timeouts.request),
        )
        return InterruptResult(turn_id=stop.turn_id, stop=report, partial=partial)

    async def _collect_partial(
        self, thread: ThreadState, turn: Turn | None, report: StopReport
    ) -> PartialResult:
        if turn is None:
            return PartialResult.empty(thread.session_id, None)
        core = self._registry
        collector = turn.collector
        # The turn's own sessions: the root, and those born during this turn. Finished
        # subagents of earlier turns are stopped too, but hold nothing of this turn.
        mine = [
            s
            for s in report
            if s.outcome != "not_found"
            and (
                s.session_id == thread.session_id
                or thread.tree.sessions.get(s.session_id) == turn.turn_id
            )
        ]
        for s in mine:
            if s.session_id != thread.session_id:
                collector.add_session(s.session_id, s.parent_id)
        permits = asyncio.Semaphore(core.limits.stop_concurrency)

        async def fetch(session_id: str) -> None:
            async with permits:
                try:
                    messages = await thread.client.messages(session_id)
                except OpenCodeError as exc:
                    _log.warning(
                        "adapter.partial_reconcile_failed", session_id=session_id, error=str(exc)
                    )
                    return
                if session_id == thread.session_id:
                    thread.ledger.place_stored(messages, turn.turn_id, turn.first_prompt_id)
                collector.reconcile(session_id, messages)

        try:
            async with asyncio.timeout(core.timeouts.tree):
                async with asyncio.TaskGroup() as tg:
                    for s in mine:
                        tg.create_task(fetch(s.session_id))
        except TimeoutError:
            _log.warning("adapter.partial_reconcile_timeout", thread_id=thread.thread_id)
        return collector.result(turn.turn_id)

    async def _walk(
        self,
        thread: ThreadState,
        root_id: str,
        *,
        timeout: float,
        verify: bool = True,
        root_abort: Callable[[], Awaitable[object]] | None = None,
        eager_root_listing: bool = False,
        abort_bound: float | None = None,
    ) -> StopReport:
        """:func:`stop_tree` of ``root_id`` in ``thread``'s tree, as every walk here runs it
        (the Stop's, ``stop_subagent``'s and the teardown's of ``stop_session`` and
        ``aclose``): one bound of requests in flight, ``stop_concurrency``, and the same
        cap on the tree's size. The tree as the events showed it is aborted right behind
        the root, and the root and its inner sessions again a little later: else OpenCode
        starts one more model step in each session whose subagents are cancelled under it
        (see :mod:`~adapter._stop._stop_tree` and ``docs/interrupt.md``). Those second
        aborts are answered or given up within ``abort_bound`` (default
        ``Timeouts.abort``) of the root's abort."""
        limits = self._registry.limits
        return await stop_tree(
            thread.client,
            root_id,
            concurrency=limits.stop_concurrency,
            max_sessions=limits.max_tree_sessions,
            timeout=timeout,
            verify=verify,
            root_abort=root_abort,
            eager_root_listing=eager_root_listing,
            known=[(sid, parent) for sid, parent in thread.tree.parents.items() if parent],
            abort_root_twice=True,
            second_abort_timeout=abort_bound or self._registry.timeouts.abort,
        )

    # -- stop_subagent ------------------------------------------------------------------

    async def stop_subagent(self, thread: ThreadState, session_id: object) -> StopReport:
        """Stop ``session_id`` (a subagent of ``thread``'s tree) and its subtree only."""
        if not isinstance(session_id, str) or not is_session_id(session_id):
            raise InvalidInputError(f"not a valid session id: {session_id!r:.80}")
        if session_id == thread.session_id:
            raise InvalidInputError(
                f"{session_id} is the root of thread {thread.thread_id}: use interrupt_turn"
            )
        if session_id not in thread.tree.sessions:
            raise InvalidInputError(
                f"{session_id} is not a subagent of thread {thread.thread_id}'s tree"
            )
        turn_stop = thread.interrupts.stop
        if turn_stop is not None:
            # The turn's stop stops this subagent too: its report is the answer.
            result = await asyncio.shield(turn_stop.future)
            assert result.stop is not None  # a stop that ran has its walk's report
            return result.stop
        pending = thread.interrupts.subagent_stops.get(session_id)
        if pending is None:
            pending = asyncio.get_running_loop().create_future()
            thread.interrupts.subagent_stops[session_id] = pending
            self._registry.tasks.spawn(
                self._stop_subagent(thread, session_id, pending), name=f"stop:{session_id}"
            )
        return await asyncio.shield(pending)

    async def _stop_subagent(
        self, thread: ThreadState, session_id: str, done: asyncio.Future[StopReport]
    ) -> None:
        core = self._registry
        try:
            # The turn's tactic, inside the subtree (stop_tree seeds descendants only).
            report = await self._walk(
                thread, session_id, timeout=core.timeouts.abort + core.timeouts.tree
            )
        except BaseException as exc:
            error = exc if isinstance(exc, Exception) else TurnCancelledError("stop cancelled")
            done.set_exception(error)
            done.exception()
            if not isinstance(exc, Exception):
                raise
            return
        finally:
            if thread.interrupts.subagent_stops.get(session_id) is done:
                del thread.interrupts.subagent_stops[session_id]
        if not thread.closing:
            for sid in report.session_ids:
                if sid not in thread.tree.sessions:
                    self._ownership.adopt(thread, sid, report[sid].parent_id)
            stopped = [s.session_id for s in report if s.outcome != "failed"]
            thread.subagents.stopped(stopped)
            # A background subagent stopped alone owes its parent no result (measured:
            # OpenCode writes none and runs nothing again): the turn stops waiting for it.
            self._turns.children_stopped(thread, frozenset(stopped))
            withdrawn = self._requests.cancel_in(thread, stopped, thread.lifecycle.turn_id)
            await self._requests.reject_on_server(thread.client, withdrawn, core.timeouts.request)
        done.set_result(report)

    # -- stop_session -------------------------------------------------------------------

    async def close(
        self, thread: ThreadState, reason: str = "stopped", *, detach: bool = False
    ) -> None:
        """End the thread here: a pending stop completes, then (unless ``detach``) its
        tree is aborted and its open requests withdrawn, here and on the server.

        ``detach`` (the adapter's close with ``detach``) leaves the server alone, for a
        later process to adopt the thread: no abort, no request rejected (they are not
        resolved either: they stay open there), a prompt on its way is given
        ``teardown`` to land; the running turn ends with the thread's
        ``session.exited`` (``reason``), its subagents' tasks say they were detached."""
        if not thread.lifecycle.begin_close():
            await thread.finished.wait()
            return
        thread.closed.set()  # releases sends waiting on a stop: they end as cancelled
        withdrawn: list[OpenRequest] = []
        try:
            if detach:
                await _let_submission_land(thread, self._registry.timeouts.teardown)
            else:
                await _withdraw_submission(thread, self._registry.timeouts.teardown)
            if thread.interrupts.stop is not None:
                await asyncio.wait([thread.interrupts.stop.future])
            if not self._registry.server_dead and not detach:
                await self._teardown(thread)
        finally:
            if detach:
                thread.subagents.detached()
            else:
                withdrawn = [
                    r
                    for r in (
                        self._requests.cancel(thread, rid, thread.lifecycle.turn_id)
                        for rid in list(thread.requests.pending)
                    )
                    if r is not None
                ]
            thread.scope.cancel()
            self._registry.forget(thread)
            thread.lifecycle.closed(reason)
            thread.finished.set()
        if withdrawn and not self._registry.server_dead:
            await self._requests.reject_on_server(
                thread.client, withdrawn, self._registry.timeouts.teardown
            )

    async def _teardown(self, thread: ThreadState) -> None:
        teardown = self._registry.timeouts.teardown

        async def root_abort() -> None:
            try:
                async with asyncio.timeout(teardown):
                    await thread.client.abort(thread.session_id)
            except TimeoutError:
                raise RequestError("abort", f"timed out after {teardown} s") from None

        try:
            # The same walk as a Stop's: no extra model step while the thread closes.
            await self._walk(
                thread,
                thread.session_id,
                timeout=2 * teardown,
                verify=False,
                root_abort=root_abort,
                abort_bound=teardown,
            )
        except (OpenCodeError, TimeoutError) as exc:
            _log.warning("adapter.teardown_incomplete", thread_id=thread.thread_id, error=str(exc))


async def _let_submission_land(thread: ThreadState, wait: float) -> None:
    """A detached thread's prompt still on its way gets ``wait`` s to reach the server
    (its run is then the next process's to adopt), else it is cancelled."""
    task = thread.submission.task
    if task is None or task.done():
        return
    await asyncio.wait([task], timeout=wait)
    if not task.done():
        task.cancel()
        await asyncio.wait([task])


async def _withdraw_submission(thread: ThreadState, wait: float) -> None:
    """Before the root is aborted: a submission still on its way lands first, so that the
    abort ends its run. Given up on, a request already on the wire can still reach the
    server after the abort and start a run nothing stops (measured with a prompt delivered
    1 s late: ``tests/real/test_abort_acknowledgement_real.py``). A prompt's request
    returns once the server has the prompt, so the stop waits for it, at most ``wait`` s,
    and cancels it only then. A slash command's request returns only when its run ends
    (and, cancelled, still runs on the server: measured on 1.18.34, even 50 ms after it
    was sent), so the stop waits, at most ``wait`` s, until the server has its message
    (its echo, or the message read back: the stream may say nothing, as 1.14.48's) or
    the request ended: the abort then ends its run, and the request returns."""
    task, landed = thread.submission.task, thread.submission.landed
    command_id = thread.submission.command_id
    if task is None or task.done():
        return
    if command_id is None:
        await asyncio.wait([task], timeout=wait)
        if task.done():
            return
    if landed is not None and command_id is not None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait):
                while not (landed.is_set() or task.done()):
                    echo = asyncio.ensure_future(landed.wait())
                    try:
                        await asyncio.wait([task, echo], timeout=_READ_BACK_EVERY)
                    finally:
                        echo.cancel()
                    if landed.is_set() or task.done():
                        return
                    with contextlib.suppress(OpenCodeError):  # not there yet, or unknown
                        await thread.client.message(thread.session_id, command_id)
                        return
        if landed.is_set() or task.done():
            return
    task.cancel()
    await asyncio.wait([task])


async def _answered_by(abort: asyncio.Future[bool], deadline: float, session_id: str) -> None:
    """Wait until the server answered ``abort`` (acknowledged already, so its outcome does
    not count), giving up at ``deadline``; a stop cancelled meanwhile gives up at once."""
    try:
        async with asyncio.timeout_at(deadline):
            await asyncio.wait([abort])
    except TimeoutError:
        _log.warning("adapter.abort_unanswered", session_id=session_id)
    finally:
        if not abort.done():
            abort.cancel()
            with contextlib.suppress(asyncio.CancelledError, OpenCodeError):
                await abort
    if not abort.cancelled():
        abort.exception()  # retrieved: a failure after the acknowledgement does not count
