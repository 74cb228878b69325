"""``stop_tree``: stop a session and every session it spawned.

Why a walk: aborting a root session cancels the subagents its ``task`` tool
is running, but not children created through the API, and a nested tree's
root can start one more model step after its children were cancelled. So
the root is aborted first (it can no longer add children), then the tree is
walked through ``GET /session/{id}/children``, then ``GET /session/status``
is checked for tree members that are (again) busy.

Why the extra model step, and how a caller avoids it (OpenCode 1.18.34, read
from its source and measured): an abort first cancels the session's running
``task`` subagents and waits for them to wind down (a tool gets 250 ms), and
only then interrupts the session itself; but a cancelled subagent's ``task``
tool returns at once, so meanwhile the session goes on with a new model step.
A second abort of the same session that arrives in that window finds the
subagents already cancelled and interrupts the session at once. So the
``known`` descendants are aborted right behind the root, while its abort is in
flight, and with ``abort_root_twice`` the root and every known session with
known children are aborted again 5 and 25 ms after the root's abort began
(``ECHO_DELAYS``). Those second aborts only speed things up: their outcome does
not count. The walk still waits for their answer, as for every request it sends: a
request the client gave up on may still reach the server later (a real test that
delivers the root's second aborts 1 s late, as a loaded server reads them, saw the
next turn stopped), so when the walk returns, no abort of it is left to land.

See ``docs/stop-tree.md`` for the algorithm and its guarantees.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from .._base._ids import is_session_id
from .._exceptions import (
    InvalidInputError,
    NotFoundError,
    OpenCodeError,
    ProtocolError,
    TreeStopError,
)
from .._logging import get_logger
from .._types._stop_report import Outcome, SessionStop, Step, StopReport

if TYPE_CHECKING:
    from .._client import OpenCodeClient
    from .._client._responses import Session

__all__ = ["SessionStop", "StopReport", "stop_tree"]

_log = get_logger("adapter.stop")

# Event-loop turns a seeded abort or a second abort waits after the root's abort
# began, so that the root's request goes out first (the adapter's root abort starts
# its request in a task of its own).
DISPATCH_TURNS = 3
# When, after the root's abort began, the second aborts (``abort_root_twice``) go out.
# OpenCode starts the extra step 35-80 ms after a session's subagents were cancelled;
# a second abort that arrives before the first one has cancelled them waits on them
# too, so one goes out early and one later (measured: docs/interrupt.md).
ECHO_DELAYS = (0.005, 0.025)


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
    echoes: int = 0  # second aborts scheduled so far (their delays: ECHO_DELAYS)
    seeded: bool = False  # known beforehand: aborted while the root's abort is in flight

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


_Job = tuple[Literal["abort", "children", "reabort", "prelist", "echo"], _Node]


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
        self.root_started = asyncio.Event()
        self.root_started_at = 0.0
        #: How long after the root's abort began a second abort may wait for its answer.
        self.second_abort_timeout: float | None = None

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
            elif kind == "echo":
                await self._echo(node)
            else:
                await self._abort(node, again=kind == "reabort")
        finally:
            self.in_flight -= 1

    async def _after_root(self) -> None:
        """Until the root's abort has begun and had ``DISPATCH_TURNS`` loop turns to go out."""
        await self.root_started.wait()
        for _ in range(DISPATCH_TURNS):
            await asyncio.sleep(0)

    async def _abort(self, node: _Node, *, again: bool) -> None:
        if node.seeded and not again:
            await self._after_root()
        if not again:
            node.started = self.now()
        try:
            if node.session_id == self.root_id and not again:
                self.root_started_at = self.now()
                self.root_started.set()
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

    async def _echo(self, node: _Node) -> None:
        """A second abort of a session whose first is in flight: it only speeds things up.

        It goes out at the next of ``ECHO_DELAYS`` after the root's abort began. Its
        outcome does not count (the first abort's does, and the verification pass re-aborts a
        session that is busy again); a failure is logged. Its answer is awaited all the
        same (see the module docstring).
        """
        await self._after_root()
        delay = ECHO_DELAYS[min(node.echoes, len(ECHO_DELAYS) - 1)]
        node.echoes += 1
        wait = self.root_started_at + delay - self.now()
        if wait > 0:
            await asyncio.sleep(wait)
        bound = self.second_abort_timeout
        left = None if bound is None else max(self.root_started_at + bound - self.now(), 0)
        try:
            async with asyncio.timeout(left):
                await self.client.abort(node.session_id)
        except TimeoutError:
            _log.warning("stop.second_abort_unanswered", session_id=node.session_id)
        except OpenCodeError as exc:
            _log.debug("stop.echo_failed", session_id=node.session_id, error=str(exc))

    def seed(self, known: Iterable[tuple[str, str]]) -> list[_Node]:
        """Add descendants the caller already knows, as (session, parent) pairs.

        A pair is taken only if its parent is the root or another taken pair
        (in any order), so a seed is always inside the tree. The walk lists
        seeded sessions as it lists discovered ones.
        """
        pending = [
            (sid, parent)
            for sid, parent in known
            if is_session_id(sid) and sid not in self.nodes and sid != parent
        ]
        taken: list[_Node] = []
        while pending:
            rest = []
            for sid, parent in pending:
                parent_node = self.nodes.get(parent)
                if sid in self.nodes:
                    continue
                if parent_node is None:
                    rest.append((sid, parent))
                    continue
                if len(self.nodes) >= self.max_sessions:
                    return taken  # the walk reports the overflow if the tree is that big
                node = _Node(sid, parent, parent_node.depth + 1, seeded=True)
                self.nodes[sid] = node
                taken.append(node)
            if len(rest) == len(pending):
                break
            pending = rest
        taken.sort(key=lambda n: n.depth)
        return taken

    async def _list(self, node: _Node) -> None:
        try:
            children = await self.client.children(node.session_id)
        except NotFoundError:
            return
        except OpenCodeError as exc:
            if isinstance(exc, ProtocolError):
                # Hostile entries are refused, the valid siblings are still stopped.
                self._discover(node, exc.partial if isinstance(exc.partial, list) else [])
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
    known: Iterable[tuple[str, str]] = (),
    abort_root_twice: bool = False,
    second_abort_timeout: float | None = None,
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

    ``known`` names descendants the caller already knows, as (session, parent)
    pairs (a pair whose parent is neither the root nor another known session is
    ignored): they are aborted right behind the root, while its abort is in
    flight, and then listed like any other. With ``abort_root_twice`` the root
    and every known session with known children are aborted again, 5 and 25 ms
    after the root's abort began; only each session's first abort counts.
    Together they keep OpenCode from starting an extra model step in a stopped
    ``task`` tree (see the module docstring); measured in ``docs/interrupt.md``.
    A second abort's answer is awaited like any other, at most
    ``second_abort_timeout`` seconds from the root's abort's start when given
    (then it is given up and logged: the first abort's outcome is what counts).

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
    if second_abort_timeout is not None and second_abort_timeout <= 0:
        raise InvalidInputError("second_abort_timeout must be positive")

    walk = _Walk(client, root_id, concurrency, max_sessions, root_abort, progress)
    walk.second_abort_timeout = second_abort_timeout
    rounds = 0
    still_busy: list[str] = []
    timed_out = False
    verify_error: OpenCodeError | None = None
    _log.info("stop.start", root_id=root_id, concurrency=concurrency)
    try:
        async with asyncio.timeout(timeout):
            walk.queue.append(("abort", walk.nodes[root_id]))
            walk.queue.extend(("abort", node) for node in walk.seed(known))
            if abort_root_twice:
                seeded = [n for n in walk.nodes.values() if n.seeded]
                inner = {n.parent_id for n in seeded}
                again = [walk.nodes[root_id], *(n for n in seeded if n.session_id in inner)]
                for _ in ECHO_DELAYS:
                    walk.queue.extend(("echo", n) for n in again)
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
