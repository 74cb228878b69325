"""``stop_tree``: stop a session and every session it spawned.

Why a walk: aborting a root session cancels the subagents its ``task`` tool
is running, but not children created through the API, and a nested tree's
root can start one more model step after its children were cancelled. So
the root is aborted first (it can no longer add children), then the tree is
walked through ``GET /session/{id}/children``, then ``GET /session/status``
is checked for tree members that are (again) busy.

See ``docs/stop-tree.md`` for the algorithm and its guarantees.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from ._exceptions import (
    InvalidInputError,
    NotFoundError,
    OpenCodeError,
    ProtocolError,
    TreeStopError,
)
from ._ids import is_session_id
from ._logging import get_logger
from ._stop_report import Outcome, SessionStop, Step, StopReport

if TYPE_CHECKING:
    from ._client import OpenCodeClient
    from ._models import Session

__all__ = ["SessionStop", "StopReport", "stop_tree"]

_log = get_logger("adapter.stop")


@dataclass(slots=True)
class _Node:
    session_id: str
    parent_id: str | None
    depth: int
    outcome: Outcome | None = None
    error: BaseException | None = None
    failed_step: Step | None = None
    started: float | None = None
    ended: float | None = None
    reaborts: int = 0

    def freeze(self, timed_out: bool) -> SessionStop:
        outcome = self.outcome
        error = self.error
        step = self.failed_step
        if outcome is None or (timed_out and self.ended is None):
            outcome = "failed"
            error = error or TimeoutError(
                "the stop ran out of time before this session was stopped"
            )
            step = step or "abort"
        return SessionStop(
            session_id=self.session_id,
            parent_id=self.parent_id,
            depth=self.depth,
            outcome=outcome,
            error=error,
            failed_step=step,
            started=self.started,
            ended=self.ended,
            reaborts=self.reaborts,
        )


_Job = tuple[Literal["abort", "children", "reabort", "prelist"], _Node]


class _Walk:
    """The scheduler: a FIFO of requests, one semaphore, work-conserving."""

    def __init__(
        self,
        client: OpenCodeClient,
        root_id: str,
        concurrency: int,
        max_sessions: int,
        root_abort: Callable[[], Awaitable[object]] | None,
        progress: Callable[[int, int], None] | None = None,
    ) -> None:
        self.client = client
        self.progress = progress
        self.settled = 0
        self.root_id = root_id
        self.max_sessions = max_sessions
        self.root_abort = root_abort
        self.concurrency = concurrency
        self.permits = asyncio.Semaphore(concurrency)
        self.queue: deque[_Job] = deque()
        self.changed = asyncio.Event()
        self.active = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.requests = 0
        self.t0 = time.perf_counter()
        root = _Node(root_id, None, 0)
        self.nodes: dict[str, _Node] = {root_id: root}  # insertion order = BFS discovery order
        self.overflow: OpenCodeError | None = None

    def now(self) -> float:
        return time.perf_counter() - self.t0

    async def drain(self) -> None:
        """Run queued jobs until none is queued or running; a free permit never idles.

        ``concurrency`` long-lived workers share the FIFO: a worker that finished a
        request takes the next queued job in the same step, with no hand-off through
        another task, so a permit is never idle while work is queued.
        """
        async with asyncio.TaskGroup() as tg:
            for _ in range(self.concurrency):
                tg.create_task(self._worker())

    async def _worker(self) -> None:
        queue = self.queue
        while True:
            if queue:
                job = queue.popleft()
                self.active += 1
                async with self.permits:  # uncontended: as many workers as permits
                    await self._run(job)
                self.active -= 1
                if queue or self.active == 0:
                    self.changed.set()
                continue
            if self.active == 0:
                self.changed.set()
                return
            self.changed.clear()
            await self.changed.wait()

    async def _run(self, job: _Job) -> None:
        kind, node = job
        self.in_flight += 1
        self.requests += 1
        if self.in_flight > self.max_in_flight:
            self.max_in_flight = self.in_flight
        try:
            if kind == "children":
                await self._list(node)
            elif kind == "prelist":
                await self._prelist(node)
            else:
                await self._abort(node, again=kind == "reabort")
        finally:
            self.in_flight -= 1

    async def _abort(self, node: _Node, *, again: bool) -> None:
        if not again:
            node.started = self.now()
        try:
            if node.session_id == self.root_id and self.root_abort is not None and not again:
                await self.root_abort()
            else:
                await self.client.abort(node.session_id)
        except NotFoundError:
            if not again:
                node.outcome = "not_found"
                node.ended = self.now()
                self.settled += 1
                if self.progress is not None:
                    self.progress(self.settled, len(self.nodes))
            return  # a session that is gone has no children left to stop
        except OpenCodeError as exc:
            if not (again and node.outcome == "failed"):  # keep the original failure
                node.outcome = "failed"
                node.error = exc
                node.failed_step = "verify" if again else "abort"
            _log.warning("stop.abort_failed", session_id=node.session_id, error=str(exc))
        else:
            if again:
                node.reaborts += 1
                if node.failed_step == "abort":
                    # A later abort that lands supersedes the failed one.
                    node.outcome, node.error, node.failed_step = "aborted", None, None
            else:
                node.outcome = "aborted"
        if not again:
            node.ended = self.now()
            self.settled += 1
            if self.progress is not None:
                self.progress(self.settled, len(self.nodes))
        # Listed after its abort settled, so it cannot add children behind our back.
        self.queue.append(("children", node))

    async def _list(self, node: _Node) -> None:
        try:
            children = await self.client.children(node.session_id)
        except NotFoundError:
            return
        except ProtocolError as exc:
            # Hostile entries are refused, the valid siblings are still stopped.
            valid = exc.partial if isinstance(exc.partial, list) else []
            self._discover(node, valid)
            if node.outcome != "failed":
                node.outcome = "failed"
                node.error = exc
                node.failed_step = "children"
            _log.warning("stop.children_failed", session_id=node.session_id, error=str(exc))
            return
        except OpenCodeError as exc:
            if node.outcome != "failed":
                node.outcome = "failed"
                node.error = exc
                node.failed_step = "children"
            _log.warning("stop.children_failed", session_id=node.session_id, error=str(exc))
            return
        self._discover(node, children)

    async def _prelist(self, node: _Node) -> None:
        """An early listing while the node's abort is in flight: it only speeds things up.

        Its failures do not count; the listing after the abort settled is the one that
        cannot miss a child, and it still runs.
        """
        try:
            children = await self.client.children(node.session_id)
        except ProtocolError as exc:
            children = exc.partial if isinstance(exc.partial, list) else []
        except OpenCodeError as exc:
            _log.debug("stop.prelist_failed", session_id=node.session_id, error=str(exc))
            return
        self._discover(node, children)

    def _discover(self, node: _Node, children: list[Session]) -> None:
        for child in children:
            if child.id in self.nodes:
                continue  # shared child or cycle: each session is stopped once
            if len(self.nodes) >= self.max_sessions:
                self.overflow = self.overflow or OpenCodeError(
                    f"the tree has more than {self.max_sessions} sessions; refusing to walk further"
                )
                return
            child_node = _Node(child.id, node.session_id, node.depth + 1)
            self.nodes[child.id] = child_node
            self.queue.append(("abort", child_node))

    async def busy_members(self) -> list[str]:
        """Tree members that ``/session/status`` reports busy (one request, under a permit)."""
        async with self.permits:
            self.in_flight += 1
            self.requests += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                statuses = await self.client.status()
            finally:
                self.in_flight -= 1
        return [sid for sid, st in statuses.items() if st.is_busy and sid in self.nodes]


async def stop_tree(
    client: OpenCodeClient,
    root_id: str,
    *,
    concurrency: int = 8,
    timeout: float = 10.0,
    verify: bool = True,
    max_verify_rounds: int = 3,
    max_sessions: int = 10_000,
    root_abort: Callable[[], Awaitable[object]] | None = None,
    progress: Callable[[int, int], None] | None = None,
    eager_root_listing: bool = False,
) -> StopReport:
    """Stop ``root_id`` and every session reachable from it through ``children``.

    The root is aborted first and awaited; then the tree is walked
    breadth-first, each discovered session aborted and then listed, with at
    most ``concurrency`` requests in flight for the whole walk. 404 counts as
    already gone. Every abort is attempted even when some fail, and the call
    returns only when every request has finished. With ``verify``, tree members
    that ``/session/status`` still (or again) reports busy are aborted and
    listed again, for at most ``max_verify_rounds`` rounds.

    ``root_abort`` replaces the root's ``client.abort`` (the adapter uses it to
    race the abort against the server's acknowledgement). ``progress`` is
    called with (sessions settled, sessions discovered) after each abort.

    With ``eager_root_listing`` the root's children are also listed while the
    root abort is in flight, and stopped at once; the root is listed again
    once its abort settled, so a child created meanwhile is still found. On a
    real server, whose abort returns only after the session's tools had time
    to finish, this saves most of that wait for the rest of the tree.

    Returns the :class:`StopReport`; raises :class:`TreeStopError` (carrying the
    report) if any request failed, the tree stayed busy, or ``timeout`` expired.
    """
    if not is_session_id(root_id):
        raise InvalidInputError(f"not a valid session id: {root_id!r:.80}")
    if concurrency < 1:
        raise InvalidInputError("concurrency must be at least 1")
    if timeout <= 0:
        raise InvalidInputError("timeout must be positive")
    if max_verify_rounds < 0 or max_sessions < 1:
        raise InvalidInputError("max_verify_rounds must be >= 0 and max_sessions >= 1")

    walk = _Walk(client, root_id, concurrency, max_sessions, root_abort, progress)
    rounds = 0
    still_busy: list[str] = []
    timed_out = False
    verify_error: OpenCodeError | None = None
    _log.info("stop.start", root_id=root_id, concurrency=concurrency)
    try:
        async with asyncio.timeout(timeout):
            walk.queue.append(("abort", walk.nodes[root_id]))
            if eager_root_listing:
                walk.queue.append(("prelist", walk.nodes[root_id]))
            await walk.drain()
            while verify and rounds < max_verify_rounds:
                rounds += 1
                try:
                    still_busy = await walk.busy_members()
                except OpenCodeError as exc:
                    verify_error = exc
                    break
                if not still_busy:
                    break
                # Abort again, and list again, whatever went busy after the walk.
                walk.queue.extend(("reabort", walk.nodes[sid]) for sid in still_busy)
                await walk.drain()
            if verify and still_busy and verify_error is None:
                # The last round re-aborted them; one more look says whether it held.
                try:
                    still_busy = await walk.busy_members()
                except OpenCodeError as exc:
                    verify_error = exc
    except TimeoutError:
        timed_out = True

    report = StopReport(
        root_id=root_id,
        sessions=tuple(node.freeze(timed_out) for node in walk.nodes.values()),
        max_in_flight=walk.max_in_flight,
        verify_rounds=rounds,
        elapsed=walk.now(),
        requests=walk.requests,
        concurrency=concurrency,
        still_busy=tuple(still_busy),
    )
    first = next((s for s in report.sessions if s.outcome == "failed"), None)
    cause: BaseException | None = None
    message: str | None = None
    if timed_out:
        cause = TimeoutError(f"stop_tree did not finish within {timeout} s")
        message = f"stopping the tree of {root_id} timed out after {timeout} s"
    elif first is not None:
        cause = first.error
        message = f"could not stop {first.session_id} ({first.failed_step}): {first.error}"
    elif walk.overflow is not None:
        cause = walk.overflow
        message = str(walk.overflow)
    elif verify_error is not None:
        cause = verify_error
        message = f"could not verify the tree of {root_id} stopped: {verify_error}"
    elif still_busy:
        message = f"sessions still busy after {rounds} verify rounds: {', '.join(still_busy)}"
    if message is not None:
        _log.warning("stop.failed", root_id=root_id, error=message, sessions=len(report))
        raise TreeStopError(message, report=report, first_failure=first, cause=cause)
    _log.info(
        "stop.done",
        root_id=root_id,
        sessions=len(report),
        max_in_flight=report.max_in_flight,
        elapsed_ms=round(report.elapsed * 1000, 2),
    )
    return report
