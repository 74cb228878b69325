"""The turn lifecycle's races on a real ``opencode serve`` 1.18.34.

* A follow-up sent around the end of a run, at many timings: OpenCode merges a prompt
  sent well before the run's idle into the running loop and starts a second run for
  one sent later (even one accepted a little before the idle). Either way its output
  is emitted, every turn ends exactly once after its last output, the thread says
  ``ready`` only while the server is idle, and ``interrupt_turn`` stops the second run.
* An automatic compaction mid-turn: the continuation's text and tool calls are the
  turn's output, the summary is not, and the turn ends once after the continuation.

The timing is driven by the scripted model: the first answer streams 30 one-character
chunks 10 ms apart, so the server's idle falls a known time after the model request
starts (measured on this machine: 364-458 ms, ``RUN_TO_IDLE``); the aim follows the
median of the tries so far, as the delay drifts with the machine's load.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import statistics
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from adapter import ContentDelta, Event, OpenCodeAdapter, OpenCodeClient, TurnStart
from adapter.testing import RealOpenCodeServer, ScriptedModelServer
from adapter.testing.model import Hang, ModelRequest, Step, Text, ToolCall, ToolCalls, script_marker
from tests.adapter_support import Recorder
from tests.faults.harness import TERMINAL, TURN_OUTPUT, check_event_invariants
from tests.real.conftest import directory_http
from tests.real.test_infrastructure import chat_body, deltas, read_sse, stream_chat
from tests.real.waits import holds_for

pytestmark = pytest.mark.real

TRIES = 32
#: Seconds from the first model request's start to the server's ``session.idle`` for
#: ``SLOW_ANSWER`` (the median of 8 measured runs; they spread over about +-45 ms): the
#: first aim.
RUN_TO_IDLE = 0.43
SLOW_ANSWER = Text("x" * 30, chunk_size=1, delay=0.01)
#: Where the follow-ups are aimed, relative to the expected idle: -150 ms ... +50 ms.
OFFSETS = [-0.15 + 0.2 * i / (TRIES - 1) for i in range(TRIES)]


@dataclass
class RawEvents:
    """The server's own event stream, timestamped on arrival (``time.monotonic()``):
    where the real idle fell and when a follow-up was echoed, independent of the
    adapter under test."""

    events: list[tuple[float, dict[str, Any]]] = field(default_factory=list)

    async def record(self, server: RealOpenCodeServer, connected: asyncio.Event) -> None:
        async with (
            directory_http(server, timeout=None) as client,
            client.stream("GET", "/event") as response,
        ):
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    self.events.append((time.monotonic(), json.loads(line[5:])))
                    connected.set()

    def of(self, session_id: str, type_: str) -> list[tuple[float, dict[str, Any]]]:
        found = []
        for t, event in self.events:
            props = event.get("properties", {})
            owner = props.get("sessionID") or props.get("info", {}).get("sessionID")
            if event.get("type") == type_ and owner == session_id:
                found.append((t, props))
        return found

    async def caught_up(self, session_id: str, *, echoes: int, timeout: float = 10) -> None:
        """Until this connection delivered the session's idle and ``echoes`` user
        messages: the adapter's own connection (or the Stop's status check) can be
        ahead of this one under load. Gives up silently: the asserts then say what
        is missing."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while not (
                    self.of(session_id, "session.idle")
                    and len(self.user_echoes(session_id)) >= echoes
                ):
                    await asyncio.sleep(0.01)

    def first_idle(self, session_id: str) -> float:
        return self.of(session_id, "session.idle")[0][0]

    def user_echoes(self, session_id: str) -> list[tuple[float, str]]:
        """Each user message of the session, at its first ``message.updated``."""
        seen: dict[str, float] = {}
        for t, props in self.of(session_id, "message.updated"):
            info = props["info"]
            if info.get("role") == "user":
                seen.setdefault(str(info["id"]), t)
        return sorted((t, message_id) for message_id, t in seen.items())


@pytest.fixture
async def raw_events(real_server: RealOpenCodeServer) -> AsyncIterator[RawEvents]:
    raw = RawEvents()
    connected = asyncio.Event()
    task = asyncio.create_task(raw.record(real_server, connected))
    async with asyncio.timeout(10):
        await connected.wait()  # server.connected: nothing later is missed
    yield raw
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def server_busy(server: RealOpenCodeServer) -> set[str]:
    async with OpenCodeClient(server.base_url, directory=str(server.directory)) as client:
        return set(await client.status())


def text_of(events: list[Event], thread_id: str) -> str:
    return "".join(
        e.delta for e in events if isinstance(e, ContentDelta) and e.thread_id == thread_id
    )


def assert_turns_end_once_after_their_output(events: list[Event], thread_id: str) -> None:
    """Every turn of the thread ends exactly once, and no output of it follows its end."""
    log = [e for e in events if e.thread_id == thread_id]
    ends = Counter(e.turn_id for e in log if e.type in TERMINAL)
    started = [e.turn_id for e in log if e.type == "turn.started"]
    assert started and all(ends[t] == 1 for t in started), (started, ends)
    for turn_id in started:
        last_output = max(
            (i for i, e in enumerate(log) if e.type in TURN_OUTPUT and e.turn_id == turn_id),
            default=-1,
        )
        end = next(i for i, e in enumerate(log) if e.type in TERMINAL and e.turn_id == turn_id)
        assert last_output < end, f"{thread_id}: output of {turn_id} after its end"
    assert all(e.turn_id is not None for e in log if e.type in TURN_OUTPUT), log


async def wait_ready(oc: OpenCodeAdapter, thread_id: str, timeout: float = 15.0) -> float:
    """Poll until the thread says ``ready``; the time it first did."""
    async with asyncio.timeout(timeout):
        while True:
            info = next(i for i in oc.list_sessions() if i.thread_id == thread_id)
            if info.status == "ready":
                return time.monotonic()
            await asyncio.sleep(0.005)


async def wait_text(rec: Recorder, thread_id: str, text: str, timeout: float = 15.0) -> None:
    async with asyncio.timeout(timeout):
        while text not in text_of(rec.events, thread_id):
            await asyncio.sleep(0.01)


@dataclass(frozen=True)
class Try:
    aimed: float
    offset: float  # the follow-up's send time minus the server's first idle
    merged: bool  # echoed before that idle: OpenCode ran it in the same loop
    same_turn: bool  # send_turn returned the running turn's id
    interrupted: bool


async def test_a_follow_up_around_the_run_end_is_never_lost(
    real_server: RealOpenCodeServer,
    scripted_model: ScriptedModelServer,
    raw_events: RawEvents,
    unique_name: str,
) -> None:
    tries: list[Try] = []
    run_to_idle = [RUN_TO_IDLE]
    async with OpenCodeAdapter(real_server.base_url, directory=str(real_server.directory)) as oc:
        rec = Recorder(oc)
        # A fresh server's first runs are slower: warm it up so the aim is true.
        scripted_model.script(f"{unique_name}-warm", [Text("warm")])
        await oc.start_session("warm", title="warm-up")
        await oc.send_turn("warm", "go " + script_marker(f"{unique_name}-warm"))
        await rec.wait_for("turn.completed", timeout=30)
        for i, aimed in enumerate(OFFSETS):
            thread, answer = f"f{i}", f"answer {i} of the follow-up"
            interrupted = i % 2 == 1  # every other follow-up hangs and is stopped
            name = f"{unique_name}-{i}"
            scripted_model.script(
                name, [SLOW_ANSWER, Hang(answer) if interrupted else Text(answer)]
            )
            session_id = (await oc.start_session(thread, title="follow-up")).session_id
            first = await oc.send_turn(thread, "go " + script_marker(name))

            def model_started(rs: list[ModelRequest], s: str = session_id) -> list[float]:
                return [r.started_at for r in rs if r.session_id == s]

            def answer_closed(rs: list[ModelRequest], s: str = session_id) -> bool:
                return any(r.session_id == s and r.step == 1 and not r.open for r in rs)

            started = await scripted_model.wait_for_async(model_started, 30)
            await asyncio.sleep(
                max(0.0, started[0] + statistics.median(run_to_idle) + aimed - time.monotonic())
            )
            sent_at = time.monotonic()
            follow = await oc.send_turn(thread, "and then?")

            if interrupted:
                await wait_text(rec, thread, answer)
                info = next(i for i in oc.list_sessions() if i.thread_id == thread)
                assert (info.status, info.active_turn_id) == ("running", follow.turn_id)
                result = await oc.interrupt_turn(thread, turn_id=follow.turn_id)
                assert result.turn_id == follow.turn_id and result.stop is not None
                assert answer in result.partial.text
                assert session_id not in await server_busy(real_server)
                await scripted_model.wait_for_async(answer_closed, timeout=3)
            else:
                await wait_ready(oc, thread)
                # ready: the server must be idle, and the follow-up answered and emitted
                assert session_id not in await server_busy(real_server), f"try {i}"
                assert answer in text_of(rec.events, thread), f"try {i}: the follow-up is lost"

            await raw_events.caught_up(session_id, echoes=2)
            idle = raw_events.first_idle(session_id)
            run_to_idle.append(idle - started[0])
            echoes = raw_events.user_echoes(session_id)
            assert len(echoes) == 2, echoes
            tries.append(
                Try(
                    aimed=aimed,
                    offset=sent_at - idle,
                    merged=echoes[1][0] < idle,
                    same_turn=follow.turn_id == first.turn_id,
                    interrupted=interrupted,
                )
            )

        def every_follow_up_shown_once_and_ready() -> bool:
            for i in range(TRIES):
                assert f"answer {i} of the follow-up" in text_of(rec.events, f"f{i}")
                assert_turns_end_once_after_their_output(rec.events, f"f{i}")
                info = next(x for x in oc.list_sessions() if x.thread_id == f"f{i}")
                assert (info.status, info.active_turn_id) == ("ready", None)
            return True

        # anything late would arrive in this window
        await holds_for(0.3, every_follow_up_shown_once_and_ready, "every follow-up ready")
        assert not await server_busy(real_server) & {
            i.session_id for i in oc.list_sessions() if i.thread_id.startswith("f")
        }
    await rec.close()
    check_event_invariants(rec.events, closed=True)

    report = ", ".join(
        f"{t.offset * 1000:+.0f}ms:{'M' if t.merged else 'R'}{'s' if t.same_turn else 'n'}"
        for t in tries
    )
    print(  # the measured distribution (run with -s to see it)
        f"\n{sum(t.merged for t in tries)} merged into the run, "
        f"{sum(not t.merged for t in tries)} started a second run; "
        f"{sum(t.same_turn for t in tries)} kept the running turn; offsets: {report}"
    )
    # the tries did straddle the server's idle
    assert min(t.offset for t in tries) < -0.08 and max(t.offset for t in tries) > 0.0
    assert any(not t.merged and t.interrupted for t in tries)  # a second run was stopped


# ------------------------------------------------------------------ compaction


@pytest.fixture(scope="module")
def compacting_server(scripted_model: ScriptedModelServer) -> Iterator[RealOpenCodeServer]:
    """A server with automatic compaction on (only this module's compaction test uses it):
    a step reporting more prompt tokens than the model's 128000 triggers it."""
    with RealOpenCodeServer(
        scripted_model.base_url,
        extra_env={"OPENCODE_DISABLE_AUTOCOMPACT": "0"},
        config_overrides={"compaction": {"auto": True}},
    ) as server:
        yield server


def bash(command: str, text: str = "", prompt_tokens: int | None = None) -> ToolCalls:
    call = ToolCall("bash", {"command": command, "description": command})
    return ToolCalls([call], text=text, prompt_tokens=prompt_tokens)


def test_a_bound_session_answers_unmarked_requests_with_its_script(
    scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    """``bind_session``: what the compaction tests rely on. A marker still wins; an
    unmarked request of another session gets the default text."""
    scripted_model.script(unique_name, [Text("zero"), Text("one")])
    scripted_model.script(f"{unique_name}-other", [Text("marked")])
    bound, unbound = f"ses_{unique_name}_bound", f"ses_{unique_name}_free"
    scripted_model.bind_session(bound, unique_name)

    def answer(session_id: str, body: dict[str, Any]) -> str:
        with stream_chat(scripted_model, body, session_id) as response:
            return "".join(d.get("content") or "" for d in deltas(read_sse(response)))

    assert answer(bound, chat_body("What did we do so far?", 1)) == "one"
    assert answer(bound, chat_body("go " + script_marker(f"{unique_name}-other"))) == "marked"
    assert answer(unbound, chat_body("What did we do so far?")) == scripted_model.default_text


@asynccontextmanager
async def a_turn_that_compacts(
    server: RealOpenCodeServer, model: ScriptedModelServer, name: str, last: Step, title: str
) -> AsyncIterator[tuple[OpenCodeAdapter, Recorder, str, TurnStart]]:
    """Thread ``t``'s turn whose step 0 overflows the context: the server runs its tool,
    compacts, then continues with the session's bound script (``echo continued``, ``last``)."""
    model.script(name, [bash("echo one", "before ", prompt_tokens=200_000)])
    continuation = f"{name}-continue"
    model.script(continuation, [Text("never used"), bash("echo continued", "continuing "), last])
    async with OpenCodeAdapter(server.base_url, directory=str(server.directory)) as oc:
        rec = Recorder(oc)
        session_id = (await oc.start_session("t", title=title)).session_id
        model.bind_session(session_id, continuation)
        turn = await oc.send_turn("t", "go " + script_marker(name))
        yield oc, rec, session_id, turn


async def test_the_continuation_after_an_automatic_compaction_is_the_turns_output(
    compacting_server: RealOpenCodeServer, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    # Step 0 overflows the context: the server runs its tool, compacts (the summary is
    # the model's title answer), then continues with a request whose first user message
    # is its own, so the marker is gone and the session's bound script answers it
    # (step 1: the summary is its one assistant message).
    async with a_turn_that_compacts(
        compacting_server, scripted_model, unique_name, Text("the answer"), "compaction"
    ) as (_oc, rec, session_id, turn):
        ended = await rec.wait_for("turn.completed", timeout=60)
        assert ended.turn_id == turn.turn_id
        async with OpenCodeClient(
            compacting_server.base_url, directory=str(compacting_server.directory)
        ) as client:
            quiet_until = time.monotonic() + 0.5  # anything late would arrive meanwhile
            while True:
                assert session_id not in await client.status()
                if time.monotonic() >= quiet_until:
                    break
                await asyncio.sleep(0.05)
            messages = await client.messages(session_id)
    await rec.close()

    # the server did compact mid-turn and continued
    summary = [m for m in messages if m.info.raw.get("summary") is True]
    assert len(summary) == 1, [m.info.raw for m in messages]
    summary_text = "".join(p.text or "" for p in summary[0].parts)
    assert summary_text  # the title answer, "Scripted session"
    assert any(p.type == "compaction" for m in messages for p in m.parts)

    assert text_of(rec.events, "t") == "before continuing the answer"
    assert summary_text not in text_of(rec.events, "t")
    # the host is told: an automatic compaction, with its summary, in this turn
    [compacted] = rec.of("thread.compacted", "t")
    assert compacted.auto is True and compacted.summary == summary_text
    assert compacted.turn_id == turn.turn_id
    completed_tools = [
        e.input.get("command") for e in rec.of("item.completed", "t") if e.tool == "bash"
    ]
    assert completed_tools == ["echo one", "echo continued"]
    assert [e.turn_id for e in rec.of("turn.started", "t")] == [turn.turn_id]
    assert_turns_end_once_after_their_output(rec.events, "t")
    check_event_invariants(rec.events, closed=True)


async def test_a_turn_stopped_after_an_automatic_compaction_keeps_the_summary_out(
    compacting_server: RealOpenCodeServer, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    """Stopped during the continuation, the turn's partial result holds the work before
    and after the compaction, and not the summary (the model's title answer)."""
    async with a_turn_that_compacts(
        compacting_server, scripted_model, unique_name, Hang("still going"), "compaction stop"
    ) as (oc, rec, session_id, turn):
        await wait_text(rec, "t", "still going", timeout=60)
        result = await oc.interrupt_turn("t", turn_id=turn.turn_id)
        assert result.stop is not None and result.stop.ok
        await rec.wait_for("turn.aborted", timeout=10)
        await holds_for(  # anything late would arrive in this window
            0.3,
            lambda: text_of(rec.events, "t") == "before continuing still going",
            "no text after the stop",
        )
    await rec.close()

    summary = scripted_model.title_text
    assert text_of(rec.events, "t") == "before continuing still going"
    assert "before" in result.partial.text and "still going" in result.partial.text
    assert summary not in result.partial.text
    root_calls = [c for c in result.partial.tool_calls if c.session_id == session_id]
    assert [c.input.get("command") for c in root_calls] == ["echo one", "echo continued"]
    assert_turns_end_once_after_their_output(rec.events, "t")
    check_event_invariants(rec.events, closed=True)
