"""A stateful property test: any sequence (and any race) of start / send / interrupt / stop,
server events and injected faults keeps the adapter's promises.

Each example drives its own event loop (the machine's rules are synchronous). Invariants,
checked after every step:

* at most one active turn per thread, and ``list_sessions()`` agrees with the events;
* every ``turn.started`` ends in exactly one of ``turn.completed`` / ``turn.aborted`` or the
  session's exit (checked for all turns once the adapter is closed);
* no event for a thread after its ``session.exited`` (until it is started again);
* no request to a session outside our threads' trees (a stranger's busy session is never
  touched);
* every prompt's output is emitted: once a thread is ``ready``, the text of every
  assistant message the server stored in its root session (whatever prompt it answers:
  one sent at a random point, a follow-up right after another, one accepted inside a
  run's end window held open with ``fake.hold_run_end``, which the server runs as a
  second run) is in the thread's deltas; only messages stored before the end of an
  interrupt, a stop or a lost event stream are exempt (aborted or late output);
* no turn stays running: at the end, every thread that runs nothing endless gets
  ``ready`` within ``TURN_ENDS_WITHIN`` (10 s, for a loaded machine) once status answers again;
* ``SessionInfo.status`` is the thread's phase: between the machine's steps (no
  ``interrupt_turn`` is running) it is ``ready`` or ``running``, ``running`` iff a turn
  is active, and ``retry`` is only set on a running thread; ``turn.retrying`` only
  for the active turn;
* status outages (``GET /session/status`` failing for a while) and OpenCode's retry
  statuses (``Fail(retries=...)``) change none of the above;
* on close: no task of the adapter left (its tasks are named ``opencode-adapter:...``),
  nothing in flight.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import httpx
import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from adapter import (
    ContentDelta,
    InterruptResult,
    OpenCodeAdapter,
    RequestError,
    SessionClosedError,
    TreeStopError,
    TurnCancelledError,
    TurnStart,
    UnknownThreadError,
)
from adapter.testing import caught_up
from adapter.testing.fake import (
    Fail,
    FakeOpenCodeServer,
    Hang,
    Hook,
    RunEndHold,
    Step,
    Task,
    Text,
    Tool,
)
from tests.adapter_support import Recorder
from tests.faults.harness import (
    assert_consistent,
    check_event_invariants,
    fast,
    root_of,
)

R = TypeVar("R")

THREADS = st.sampled_from(["a", "b"])
SCRIPTS: dict[str, list[Step]] = {
    "quick": [Text("ok")],
    "hang": [Text("working"), Hang()],
    "tree": [Text("delegating"), Task("sub", "child")],
    "tools": [Tool("bash", {"command": "ls"}, output="x", duration=0.01), Text("done")],
    "fail": [Text("oops"), Fail("APIError", "boom")],
    "retry": [Text("trying"), Fail("APIError", "overloaded", retries=2, retry_delay=0.01)],
    "child": [Tool("bash", {"command": "sleep"}, duration=float("inf"))],
}
TURN_SCRIPTS = st.sampled_from(["quick", "hang", "tree", "tools", "fail", "retry"])
TRANSIENT_ROUTES = st.sampled_from(
    [
        ("GET", "/session/{id}/children"),
        ("POST", "/session/{id}/abort"),
        ("GET", "/session/status"),
        ("GET", "/session/{id}/message"),
    ]
)
CLOSED = (UnknownThreadError, SessionClosedError, TurnCancelledError)
#: The idle confirmation retries status every 0.1 s at most (an outage here lasts <= 0.4 s).
TIMEOUTS = fast(idle_confirm=5.0, idle_confirm_backoff_max=0.1)
#: Seconds a thread running nothing endless has, at the end, to get ready.
TURN_ENDS_WITHIN = 10.0
#: What the ``let_time_pass`` rule lets pass, in seconds: the wall clock moving on is the
#: action itself (timers, backoffs and watchdogs fire between the other rules' steps).
TIME_PASSING = 0.02
#: The names of the adapter's background tasks start so (``asyncio.Task.get_name``).
ADAPTER_TASK_PREFIX = "opencode-adapter:"


def adapter_tasks() -> list[asyncio.Task[Any]]:
    """The adapter's background tasks still pending in the running loop, by their name."""
    return [
        t
        for t in asyncio.all_tasks()
        if not t.done() and t.get_name().startswith(ADAPTER_TASK_PREFIX)
    ]


class AdapterMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.live: set[str] = set()  # threads started and not stopped
        self.roots: set[str] = set()
        self.permanent: list[Hook] = []
        self.prompt_faults: list[Hook] = []
        self.transient: dict[tuple[str, str], Hook] = {}
        self.closed = False
        self.answers = 0  # prompts given an answer of their own so far
        # root session -> (its stored messages, recorded events) when output stopped being
        # owed: what was stored before an interrupt, stop or stream loss may be missing
        self.owed_from: dict[str, tuple[int, int]] = {}
        self.status_down_until = 0.0  # loop time until which GET /session/status fails
        # threads whose turn never ends by itself: a hang or a task child was sent, or a
        # failed interrupt left the turn held until the host stops it again
        self.unending: set[str] = set()
        # what ran when (loop time): for the message of a timing failure that hypothesis
        # cannot replay (it then prints no steps of its own)
        self.steps: list[str] = []

    def run(self, coro: Coroutine[Any, Any, R], timeout: float = 10.0) -> R:
        self.steps.append(f"{getattr(coro, '__qualname__', coro)}@{self.loop.time():.3f}")

        async def bounded() -> R:
            async with asyncio.timeout(timeout):  # a hang is a failure, not a stuck run
                return await coro

        return self.loop.run_until_complete(bounded())

    @initialize()
    def setup(self) -> None:
        async def setup() -> None:
            self.fake = FakeOpenCodeServer(seed=1)
            for name, steps in SCRIPTS.items():
                self.fake.script(name, steps)
            self.stranger = self.fake.add_session(busy=True)
            self.oc = OpenCodeAdapter(
                self.fake.base_url, transport=self.fake.transport, timeouts=TIMEOUTS
            )
            self.fake.on("GET", "/session/status", self._status_outage)
            await self.oc.__aenter__()
            self.rec = Recorder(self.oc)
            for thread in ("a", "b"):  # most steps should find a live thread
                self.roots.add((await self.oc.start_session(thread)).session_id)
                self.live.add(thread)

        self.run(setup())

    # -------------------------------------------------------------- helpers

    def hits(self, hooks: list[Hook]) -> int:
        """Injected one-shot failures consumed so far."""
        return sum(1 for h in hooks if h.called)

    def root(self, thread: str) -> str | None:
        return next((i.session_id for i in self.oc.list_sessions() if i.thread_id == thread), None)

    def status_of(self, thread: str) -> str | None:
        return next((i.status for i in self.oc.list_sessions() if i.thread_id == thread), None)

    def at_rest(self, check: Callable[[], None]) -> None:
        """Run ``check`` once the adapter has caught up with the fake and the recorder has
        every event emitted so far (``caught_up``), in the same step of the loop: once the
        loop stopped, a timer of its last round may let the adapter move on (a settle
        ending a turn), so phases read after ``run`` could be ahead of the events."""

        async def caught_up_then_check() -> None:
            await caught_up(self.fake, self.oc)
            check()  # nothing else ran since caught_up found the loop idle

        self.run(caught_up_then_check())

    async def _status_outage(self, request: httpx.Request) -> httpx.Response | None:
        if asyncio.get_running_loop().time() < self.status_down_until:
            return httpx.Response(503, json={"name": "UnknownError", "data": {"message": "x"}})
        return None

    def forgive_output(self, *threads: str) -> None:
        """An interrupt, a stop or a lost stream came: output stored so far may rightly
        be missing (aborted, suppressed as late); what is stored later is owed."""
        for thread in threads or tuple(self.live):
            root = self.root(thread)
            if root is not None:
                stored = len(self.fake.sessions[root].messages)
                self.owed_from[root] = (stored, len(self.rec.events))

    async def send_answered(self, thread: str) -> bool:
        """Send a prompt whose script answers with text of its own (a merged prompt is
        answered by the running script's next step instead, as on the real server)."""
        self.answers += 1
        name, answer = f"answer-{self.answers}", f"answer {self.answers}."
        self.fake.script(name, [Text(answer)])
        before = self.hits(self.prompt_faults)
        try:
            await self.oc.send_turn(thread, f"go [[script:{name}]]")
        except UnknownThreadError:
            assert thread not in self.live
            return False
        except RequestError:
            assert self.hits(self.prompt_faults) > before, "a send failed without a fault"
            return False
        return True

    # -------------------------------------------------------------- actions

    @rule(thread=THREADS)
    def start(self, thread: str) -> None:
        info = self.run(self.oc.start_session(thread))
        assert info.thread_id == thread and info.status in ("ready", "running")
        self.live.add(thread)
        self.roots.add(info.session_id)

    @rule(thread=THREADS, script=TURN_SCRIPTS)
    def send(self, thread: str, script: str) -> None:
        before = self.hits(self.prompt_faults)
        try:
            result = self.run(self.oc.send_turn(thread, f"go [[script:{script}]]"))
        except UnknownThreadError:
            assert thread not in self.live
            return
        except RequestError:
            assert self.hits(self.prompt_faults) > before, "a send failed without a fault"
            return
        assert isinstance(result, TurnStart) and thread in self.live
        if script in ("hang", "tree"):
            self.unending.add(thread)
        event("send: accepted")

    @rule(thread=THREADS)
    def interrupt(self, thread: str) -> None:
        before = self.hits(self.permanent)
        status_down = self.loop.time() < self.status_down_until
        try:
            result = self.run(self.oc.interrupt_turn(thread))
        except UnknownThreadError:
            assert thread not in self.live
            return
        except TreeStopError:
            # the stop verifies the tree with GET /session/status: an outage fails it
            assert status_down or self.hits(self.permanent) > before, "failed without a fault"
            event("interrupt: failed on an injected fault")
            self.forgive_output(thread)  # it may have aborted the run all the same
            # by design the turn is held (running) until the host stops it again
            self.unending.add(thread)
            return
        self.forgive_output(thread)
        assert isinstance(result, InterruptResult) and thread in self.live
        event(f"interrupt: {'a turn' if result.turn_id else 'turnless'}")
        if result.stop is not None:
            assert result.stop.ok
            assert all(not self.fake.sessions[s].busy for s in result.stop.session_ids)
        self.unending.discard(thread)

    @rule(thread=THREADS)
    def stop(self, thread: str) -> None:
        try:
            self.run(self.oc.stop_session(thread))
        except UnknownThreadError:
            assert thread not in self.live
            return
        self.live.discard(thread)
        self.unending.discard(thread)
        assert not self.oc.has_session(thread)

    @rule(
        thread=THREADS,
        ops=st.lists(
            st.sampled_from(["start", "send", "interrupt", "stop"]),
            min_size=2,
            max_size=4,
        ),
    )
    def race(self, thread: str, ops: list[str]) -> None:
        calls: dict[str, Callable[[], Coroutine[Any, Any, object]]] = {
            "start": lambda: self.oc.start_session(thread),
            "send": lambda: self.oc.send_turn(thread, "go [[script:hang]]"),
            "interrupt": lambda: self.oc.interrupt_turn(thread),
            "stop": lambda: self.oc.stop_session(thread),
        }

        async def together() -> list[Any]:
            tasks = [asyncio.ensure_future(calls[op]()) for op in ops]
            return await asyncio.gather(*tasks, return_exceptions=True)

        if "send" in ops:
            self.unending.add(thread)
        outcomes = self.run(together())
        self.forgive_output(thread)
        allowed = (*CLOSED, TreeStopError, RequestError)
        for op, outcome in zip(ops, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                assert isinstance(outcome, allowed), (op, outcome)
            if isinstance(outcome, TreeStopError):
                self.unending.add(thread)  # held until the host stops it again
            event(f"race {op}: {type(outcome).__name__}")
        self.live = {i.thread_id for i in self.oc.list_sessions()}
        self.roots.update(i.session_id for i in self.oc.list_sessions())

    @rule()
    def let_time_pass(self) -> None:
        self.run(asyncio.sleep(TIME_PASSING))

    @rule(thread=THREADS)
    def send_with_an_answer(self, thread: str) -> None:
        """A prompt at a random point: into a running turn, or a turn of its own."""
        if self.run(self.send_answered(thread)):
            event(f"answered send: while {self.status_of(thread)}")

    @rule(thread=THREADS, pause=st.sampled_from([0.0, 0.001, 0.005, 0.02]))
    def follow_up(self, thread: str, pause: float) -> None:
        """A second prompt right after the first: merged, steered or a turn of its own."""

        async def two() -> None:
            if await self.send_answered(thread):
                await asyncio.sleep(pause)
                await self.send_answered(thread)

        self.run(two())

    @rule(thread=THREADS)
    def follow_up_at_run_end(self, thread: str) -> None:
        """A follow-up accepted between the run's last step and its idle: the server
        echoes it after the idle and starts a second run (as measured on the real one)."""
        root = self.root(thread)
        if root is None or self.status_of(thread) != "ready":
            return
        hold: RunEndHold = self.fake.hold_run_end(root)

        async def inside_the_window() -> None:
            try:
                if not await self.send_answered(thread):
                    return
                try:
                    async with asyncio.timeout(1.0):
                        await hold.started.wait()
                except TimeoutError:
                    event("run end: the run never reached its end (a fault came between)")
                    return
                if await self.send_answered(thread):
                    event("run end: a follow-up inside the window")
            finally:
                hold.release()

        self.run(inside_the_window())

    @rule(seconds=st.sampled_from([0.05, 0.15, 0.4]))
    def status_outage(self, seconds: float) -> None:
        """``GET /session/status`` answers 503 for a while (longer than the client's
        retries): the idle confirmation must keep asking until it answers."""
        self.status_down_until = self.loop.time() + seconds
        self.steps.append(f"OUTAGE {seconds}@{self.loop.time():.3f}")

    # -------------------------------------------------------------- server events and faults

    @rule(route=TRANSIENT_ROUTES, status=st.sampled_from([502, 503, 429]))
    def transient_fault(self, route: tuple[str, str], status: int) -> None:
        # Two failures in a row: within the client's retry budget (4 attempts). Two of these
        # steps in a row can exceed it for a request retrying across them (a turn's reads
        # of status and stored messages are asked again; found by this test).
        previous = self.transient.pop(route, None)
        if previous is not None:
            previous.remove()
        self.transient[route] = self.fake.fail(route[0], route[1], status=status, times=2)

    @rule()
    def failing_listing(self) -> None:
        self.permanent.append(self.fake.fail("GET", "/session/{id}/children", status=400, times=1))

    @rule()
    def failing_prompt(self) -> None:
        self.prompt_faults.append(
            self.fake.fail("POST", "/session/{id}/prompt_async", status=503, times=1)
        )

    @rule()
    def drop_event_streams(self) -> None:
        self.forgive_output()
        self.steps.append(f"DROP@{self.loop.time():.3f}")
        self.fake.drop_event_streams()

    @precondition(lambda self: bool(self.live))
    @rule(thread=THREADS)
    def stale_idle(self, thread: str) -> None:
        root = self.root(thread)
        if root is not None:
            self.fake.emit("session.idle", {"sessionID": root})

    @precondition(lambda self: bool(self.live))
    @rule(thread=THREADS)
    def child_appears(self, thread: str) -> None:
        root = self.root(thread)
        if root is not None:
            self.fake.add_session(parent_id=root, busy=True, emit=True)

    @rule()
    def stranger_event(self) -> None:
        self.fake.emit("session.idle", {"sessionID": self.stranger})
        self.fake.emit("session.created", {"sessionID": "ses_nobody", "info": {"id": "x"}})

    # -------------------------------------------------------------- invariants

    @invariant()
    def promises_hold(self) -> None:
        if self.closed or not hasattr(self, "oc"):
            return
        self.at_rest(self.check_promises)

    def check_promises(self) -> None:
        assert_consistent(self.oc, self.rec.events)
        check_event_invariants(self.rec.events, closed=False)
        for request in self.fake.requests:
            if request.session_id is not None:
                assert root_of(self.fake, request.session_id) in self.roots, request
        assert self.fake.sessions[self.stranger].busy

    @invariant()
    def status_is_the_phase(self) -> None:
        if self.closed or not hasattr(self, "oc"):
            return
        self.at_rest(self.check_status)

    def check_status(self) -> None:
        for info in self.oc.list_sessions():
            # no interrupt_turn runs between steps: never "stopping" here
            assert info.status in ("ready", "running"), info
            assert self.oc.session_info(info.thread_id) == info
            assert info.retry is None or info.status == "running", info
        active: dict[str, str | None] = {}
        for e in self.rec.events:
            if e.type == "turn.started":
                active[e.thread_id] = e.turn_id
            elif e.type in ("turn.completed", "turn.aborted", "session.exited"):
                active[e.thread_id] = None
            elif e.type == "turn.retrying":
                assert e.turn_id is not None and e.turn_id == active.get(e.thread_id), e

    @invariant()
    def every_output_is_emitted(self) -> None:
        if self.closed or not hasattr(self, "oc"):
            return
        self.at_rest(self.check_output)

    def check_output(self) -> None:
        for info in self.oc.list_sessions():
            if info.status != "ready":
                continue  # still running: not due yet
            stored, seen = self.owed_from.get(info.session_id, (0, 0))
            owed = [
                m.text
                for m in self.fake.sessions[info.session_id].messages[stored:]
                if m.role == "assistant" and not m.info.get("summary") and m.text
            ]
            said = "".join(
                e.delta
                for e in self.rec.events[seen:]
                if isinstance(e, ContentDelta) and e.thread_id == info.thread_id
            )
            lost = [text for text in owed if said.count(text) < owed.count(text)]
            assert not lost, (
                f"thread {info.thread_id} is ready but never said {lost}: {said!r}; events: "
                f"{[(e.type, e.turn_id) for e in self.rec.events if e.thread_id == info.thread_id]}"
                f"; steps: {self.steps[-12:]}"
            )
            if owed:
                event(f"output checked: {min(len(owed), 3)} answers")

    async def turns_end(self) -> None:
        """Every thread running nothing that never ends gets ready soon after any
        status outage is over: no turn stays running."""
        self.status_down_until = 0.0
        for thread in list(self.live):
            if thread in self.unending:
                continue
            try:
                # generous for a loaded machine, and below Timeouts.echo (30 s): a turn
                # that only the watchdog would end still fails here
                async with asyncio.timeout(TURN_ENDS_WITHIN):
                    while self.status_of(thread) != "ready":
                        await asyncio.sleep(0.01)
            except TimeoutError:
                raise AssertionError(f"thread {thread}: its turn stays running") from None

    def teardown(self) -> None:
        try:
            if hasattr(self, "oc"):
                self.run(self.turns_end(), timeout=2 * TURN_ENDS_WITHIN + 5.0)
                self.every_output_is_emitted()
                self.closed = True

                async def close() -> None:
                    self.status_down_until = 0.0
                    await self.oc.aclose()
                    assert adapter_tasks() == [], "aclose awaits every task it started"
                    await caught_up(self.fake, self.oc)
                    assert self.fake.in_flight == 0
                    await self.rec.task
                    await self.fake.aclose()
                    await caught_up(self.fake, self.oc)

                self.run(close())
                check_event_invariants(self.rec.events, closed=True)
                assert self.oc.list_sessions() == []
                pending = [t for t in asyncio.all_tasks(self.loop) if not t.done()]
                assert pending == [], pending
        finally:
            self.loop.close()


AdapterMachine.TestCase.settings = settings(
    max_examples=100,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
class TestAdapterStateMachine(AdapterMachine.TestCase):  # type: ignore[misc, valid-type]
    """Runs the machine (hypothesis drives examples and shrinks failures)."""
