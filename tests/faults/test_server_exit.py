"""A server process the adapter owns dies (or never comes up).

A small stand-in for ``opencode serve`` (``harness.write_stub_binary``) makes this cheap: the
adapter really starts, watches and reaps a child process, without a model or the real server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from adapter import (
    OpenCodeAdapter,
    OpenCodeError,
    ServerExitedError,
    Timeouts,
    TurnCancelledError,
)
from tests.adapter_support import Recorder
from tests.faults.harness import check_event_invariants, write_stub_binary

T = "thread-1"


@dataclass
class Stub:
    binary: Path
    pidfile: Path
    monkeypatch: pytest.MonkeyPatch

    def mode(self, mode: str) -> None:
        self.monkeypatch.setenv("FAULTS_STUB_MODE", mode)

    async def info(self) -> dict[str, Any]:
        found: dict[str, Any] | None = None
        async with asyncio.timeout(5):
            while (found := self._read()) is None:  # the stub writes it as it starts
                await asyncio.sleep(0.01)
        return found

    def _read(self) -> dict[str, Any] | None:
        try:
            return dict(json.loads(self.pidfile.read_text()))
        except (FileNotFoundError, ValueError):
            return None

    async def kill(self) -> int:
        pid = int((await self.info())["pid"])
        os.kill(pid, signal.SIGKILL)
        return pid


@pytest.fixture
def stub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Stub]:
    pidfile = tmp_path / "stub.json"
    monkeypatch.setenv("FAULTS_STUB_PIDFILE", str(pidfile))
    monkeypatch.delenv("FAULTS_STUB_MODE", raising=False)
    yield Stub(write_stub_binary(tmp_path), pidfile, monkeypatch)


async def until(condition: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    """Poll ``condition`` (a real process: nothing to await) until it holds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, f"not within {timeout} s: {what}"
        await asyncio.sleep(0.01)


def pending_since(before: set[asyncio.Task[Any]]) -> list[asyncio.Task[Any]]:
    current = asyncio.current_task()
    return [t for t in asyncio.all_tasks() - before if not t.done() and t is not current]


def stop_tasks() -> list[str]:
    """The adapter's pending tasks (by name) but its request router, which lives on."""
    return [
        name
        for t in asyncio.all_tasks()
        if not t.done()
        and (name := t.get_name()).startswith("opencode-adapter:")
        and name != "opencode-adapter:routed-requests"
    ]


def sockets_of(pid: int) -> set[str] | None:
    """The sockets process ``pid`` has open (Linux's ``/proc``; ``None`` where it cannot tell)."""
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return None
    found = set()
    for fd in fds:
        with contextlib.suppress(OSError):
            if (target := os.readlink(fd)).startswith("socket:"):
                found.add(target)
    return found


async def held_connection(pid: int, known: set[str] | None) -> None:
    """Until the stub holds a connection besides ``known`` (its listener and event stream)
    through two polls: a request it answers is closed at once, one it hangs stays."""
    seen: set[str] = set()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 5.0
    while known is not None:
        now = sockets_of(pid)
        if now is None:
            return  # cannot tell: go on
        if seen & (now - known):
            return
        seen = now - known
        assert loop.time() < deadline, "no request of the adapter held by the stub within 5 s"
        await asyncio.sleep(0.02)


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def test_an_owned_server_killed_mid_turn_ends_the_thread_and_releases_every_waiter(
    stub: Stub,
) -> None:
    stub.mode("hang-abort")
    before = asyncio.all_tasks()
    oc = OpenCodeAdapter(binary=str(stub.binary), timeouts=Timeouts(server_ready=5.0, abort=5.0))
    async with oc:
        rec = Recorder(oc)
        await oc.start_session(T)
        turn = await oc.send_turn(T, "go")
        press = asyncio.create_task(oc.interrupt_turn(T))  # the stub never answers the abort
        await until(lambda: oc.session_info(T).status == "stopping", "the stop has begun")
        send = asyncio.create_task(oc.send_turn(T, "queued behind the stop"))
        await asyncio.sleep(0)  # the send's first step: it waits for the stop
        assert not send.done()
        pid = await stub.kill()
        started = time.perf_counter()
        outcomes = await asyncio.gather(press, send, return_exceptions=True)
        assert time.perf_counter() - started < 3.0, "waiters are released at once"
        assert isinstance(outcomes[0], ServerExitedError), outcomes
        assert isinstance(outcomes[1], (TurnCancelledError, ServerExitedError)), outcomes
        exited = await rec.wait_for("session.exited")
        assert exited.reason == "server exited" and exited.turn_id == turn.turn_id
        [error] = rec.of("runtime.error", T)
        assert "exited" in error.message and error.turn_id == turn.turn_id
        assert oc.list_sessions() == []
        with pytest.raises(ServerExitedError):
            await oc.start_session("another")
        with pytest.raises(OpenCodeError):
            await oc.interrupt_turn(T)
    await rec.task
    await until(lambda: not pending_since(before), "every task of the adapter ended")
    assert gone(pid), "the dead server was reaped"
    check_event_invariants(rec.events, closed=True)
    types = rec.types(T)
    assert types.count("session.exited") == 1 and types[-1] == "session.exited"


async def test_an_owned_server_dying_while_a_stop_collects_its_partial_crashes_no_task(
    stub: Stub, captured_logs: list[dict[str, Any]]
) -> None:
    stub.mode("hang-messages")
    async with OpenCodeAdapter(binary=str(stub.binary), timeouts=Timeouts(server_ready=5.0)) as oc:
        await oc.start_session(T)
        await oc.send_turn(T, "go")
        pid = int((await stub.info())["pid"])
        idle = sockets_of(pid)  # its listener and the event stream
        press = asyncio.create_task(oc.interrupt_turn(T))
        async with asyncio.timeout(5):
            while not any(log["event"] == "stop.done" for log in captured_logs):
                await asyncio.sleep(0.01)
        await held_connection(pid, idle)  # the partial's GET /message is in flight, and hangs
        await stub.kill()
        with pytest.raises(ServerExitedError):
            await press
        async with asyncio.timeout(5):  # the stop task's own reads fail after their retries
            while not any(
                log["event"] == "adapter.partial_reconcile_failed" for log in captured_logs
            ):
                await asyncio.sleep(0.01)
        # every task the stop set going has ended on its own (a crash is logged, not
        # hidden by the close's cancelling): the adapter's long-lived router is left
        await until(lambda: stop_tasks() == [], "the stop's tasks ended")
    failed = [log for log in captured_logs if log["event"] == "adapter.task_failed"]
    assert failed == []


async def test_a_server_that_exits_during_start_up_is_a_typed_error(stub: Stub) -> None:
    stub.mode("exit-at-start")
    before = asyncio.all_tasks()
    oc = OpenCodeAdapter(binary=str(stub.binary), timeouts=Timeouts(server_ready=5.0))
    with pytest.raises(ServerExitedError, match="exited during start-up"):
        await oc.__aenter__()
    await until(lambda: not pending_since(before), "the failed start-up left no task")


async def test_a_server_that_never_gets_ready_is_killed_after_the_ready_timeout(
    stub: Stub,
) -> None:
    stub.mode("never-ready")
    oc = OpenCodeAdapter(binary=str(stub.binary), timeouts=Timeouts(server_ready=0.5))
    started = time.perf_counter()
    with pytest.raises(ServerExitedError, match="did not become ready"):
        await oc.__aenter__()
    assert time.perf_counter() - started < 5.0
    pid = int((await stub.info())["pid"])
    assert gone(pid), "the unready server was stopped and reaped"


async def test_a_missing_binary_is_a_typed_error(tmp_path: Path) -> None:
    oc = OpenCodeAdapter(binary=str(tmp_path / "no-such-opencode"))
    with pytest.raises(ServerExitedError, match="not found"):
        await oc.__aenter__()
