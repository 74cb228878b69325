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
* on close: no task left, nothing in flight.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

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
    InterruptResult,
    OpenCodeAdapter,
    RequestError,
    SessionClosedError,
    TreeStopError,
    TurnCancelledError,
    TurnStart,
    UnknownThreadError,
)
from adapter.testing.fake import Fail, FakeOpenCodeServer, Hang, Hook, Step, Task, Text, Tool
from tests.adapter_support import Recorder
from tests.faults.support import (
    FAST,
    assert_consistent,
    check_event_invariants,
    root_of,
    settle,
)

R = TypeVar("R")

THREADS = st.sampled_from(["a", "b"])
SCRIPTS: dict[str, list[Step]] = {
    "quick": [Text("ok")],
    "hang": [Text("working"), Hang()],
    "tree": [Text("delegating"), Task("sub", "child")],
    "tools": [Tool("bash", {"command": "ls"}, output="x", duration=0.01), Text("done")],
    "fail": [Text("oops"), Fail("APIError", "boom")],
    "child": [Tool("bash", {"command": "sleep"}, duration=float("inf"))],
}
TURN_SCRIPTS = st.sampled_from(["quick", "hang", "tree", "tools", "fail"])
TRANSIENT_ROUTES = st.sampled_from(
    [
        ("GET", "/session/{id}/children"),
        ("POST", "/session/{id}/abort"),
        ("GET", "/session/status"),
        ("GET", "/session/{id}/message"),
    ]
)
CLOSED = (UnknownThreadError, SessionClosedError, TurnCancelledError)


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

    def run(self, coro: Coroutine[Any, Any, R], timeout: float = 10.0) -> R:
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
                self.fake.base_url, transport=self.fake.transport, timeouts=FAST
            )
            await self.oc.__aenter__()
            self.rec = Recorder(self.oc)
            for thread in ("a", "b"):  # most steps should find a live thread
                self.roots.add((await self.oc.start_session(thread)).session_id)
                self.live.add(thread)

        self.run(setup())

    # -------------------------------------------------------------- helpers

    def hits(self, hooks: list[Hook]) -> int:
        """Injected one-shot failures consumed so far."""
        return sum(min(h.calls, 1) for h in hooks)

    def root(self, thread: str) -> str | None:
        return next((i.session_id for i in self.oc.list_sessions() if i.thread_id == thread), None)

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
        event("send: accepted")

    @rule(thread=THREADS)
    def interrupt(self, thread: str) -> None:
        before = self.hits(self.permanent)
        try:
            result = self.run(self.oc.interrupt_turn(thread))
        except UnknownThreadError:
            assert thread not in self.live
            return
        except TreeStopError:
            assert self.hits(self.permanent) > before, "a stop failed without a fault"
            event("interrupt: failed on an injected fault")
            return
        assert isinstance(result, InterruptResult) and thread in self.live
        event(f"interrupt: {'a turn' if result.turn_id else 'turnless'}")
        if result.stop is not None:
            assert result.stop.ok
            assert all(not self.fake.sessions[s].busy for s in result.stop.session_ids)

    @rule(thread=THREADS)
    def stop(self, thread: str) -> None:
        try:
            self.run(self.oc.stop_session(thread))
        except UnknownThreadError:
            assert thread not in self.live
            return
        self.live.discard(thread)
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

        outcomes = self.run(together())
        allowed = (*CLOSED, TreeStopError, RequestError)
        for op, outcome in zip(ops, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                assert isinstance(outcome, allowed), (op, outcome)
            event(f"race {op}: {type(outcome).__name__}")
        self.live = {i.thread_id for i in self.oc.list_sessions()}
        self.roots.update(i.session_id for i in self.oc.list_sessions())

    @rule()
    def let_time_pass(self) -> None:
        self.run(asyncio.sleep(0.02))

    # -------------------------------------------------------------- server events and faults

    @rule(route=TRANSIENT_ROUTES, status=st.sampled_from([502, 503, 429]))
    def transient_fault(self, route: tuple[str, str], status: int) -> None:
        # Two failures in a row, never more: within the client's retry budget (4 attempts).
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
        self.run(settle())
        assert_consistent(self.oc, self.rec.events)
        check_event_invariants(self.rec.events, closed=False)
        for request in self.fake.requests:
            if request.session_id is not None:
                assert root_of(self.fake, request.session_id) in self.roots, request
        assert self.fake.sessions[self.stranger].busy

    def teardown(self) -> None:
        try:
            if hasattr(self, "oc"):
                self.closed = True

                async def close() -> None:
                    await self.oc.aclose()
                    await settle()
                    assert self.fake.in_flight == 0
                    await self.rec.task
                    await self.fake.aclose()
                    await settle()

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
