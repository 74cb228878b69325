"""Caller misuse: unknown threads, calls after a stop or after close, closing mid-stop."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import pytest

from adapter import (
    AdapterClosedError,
    InvalidInputError,
    OpenCodeAdapter,
    OpenCodeError,
    UnknownRequestError,
    UnknownThreadError,
)
from adapter.testing import caught_up
from adapter.testing.fake import FakeOpenCodeServer, Hang, Text
from tests.adapter_support import held_abort
from tests.faults.harness import Harness, aborts, fast, wait_any

T = "thread-1"

PerThreadCall = Callable[[OpenCodeAdapter, str], Awaitable[object]]
PER_THREAD_CALLS: dict[str, PerThreadCall] = {
    "send_turn": lambda oc, t: oc.send_turn(t, "hello"),
    "interrupt_turn": lambda oc, t: oc.interrupt_turn(t),
    "stop_session": lambda oc, t: oc.stop_session(t),
    "read_thread": lambda oc, t: oc.read_thread(t),
    "rollback_thread": lambda oc, t: oc.rollback_thread(t, 1),
    "respond_to_request": lambda oc, t: oc.respond_to_request(t, "per_x", "accept"),
    "respond_to_user_input": lambda oc, t: oc.respond_to_user_input(t, "que_x", ["a"]),
}


@pytest.mark.parametrize("call", PER_THREAD_CALLS.values(), ids=PER_THREAD_CALLS.keys())
async def test_every_call_on_an_unknown_thread_raises_without_a_request(
    fake: FakeOpenCodeServer, call: PerThreadCall, h: Harness
) -> None:
    await h.oc.start_session("somebody-else")
    fake.reset_stats()
    with pytest.raises(UnknownThreadError) as caught:
        await call(h.oc, "no-such-thread")
    assert caught.value.thread_id == "no-such-thread"
    assert [r for r in fake.requests if r.path != "/event"] == []
    await h.consistent()


@pytest.mark.parametrize("call", PER_THREAD_CALLS.values(), ids=PER_THREAD_CALLS.keys())
async def test_every_call_after_stop_session_raises_unknown_thread_without_a_request(
    fake: FakeOpenCodeServer, call: PerThreadCall, h: Harness
) -> None:
    await h.oc.start_session(T)
    await h.oc.stop_session(T)
    fake.reset_stats()
    with pytest.raises(UnknownThreadError):
        await call(h.oc, T)
    assert fake.requests == []
    await caught_up(fake, h.oc)
    assert h.rec.types(T)[-1] == "session.exited"


async def test_a_stopped_thread_id_can_be_started_again_with_a_fresh_session(
    fake: FakeOpenCodeServer, h: Harness
) -> None:
    fake.script("ok", [Text("second life")])
    first = await h.oc.start_session(T)
    await h.oc.stop_session(T)
    second = await h.oc.start_session(T)
    assert second.session_id != first.session_id
    await h.oc.send_turn(T, "go [[script:ok]]")
    done = await h.rec.wait_for("turn.completed")
    assert h.rec.types(T).count("session.exited") == 1
    assert done.thread_id == T
    await h.consistent()


async def test_unknown_request_ids_are_refused_without_a_request(
    fake: FakeOpenCodeServer, h: Harness
) -> None:
    await h.oc.start_session(T)
    fake.reset_stats()
    with pytest.raises(UnknownRequestError):
        await h.oc.respond_to_request(T, "per_unknown", "accept")
    with pytest.raises(UnknownRequestError):
        await h.oc.respond_to_user_input(T, "que_unknown", {"q": "a"})
    assert fake.requests == []


@pytest.mark.parametrize("thread_id", ["", None, 42])
async def test_a_malformed_thread_id_is_invalid_input(
    fake: FakeOpenCodeServer, thread_id: object, h: Harness
) -> None:
    with pytest.raises(InvalidInputError):
        await h.oc.start_session(thread_id)  # type: ignore[arg-type]
    assert fake.requests == [] or all(r.path == "/event" for r in fake.requests)


@pytest.mark.parametrize(
    "call",
    [
        *PER_THREAD_CALLS.values(),
        lambda oc, t: oc.start_session(t),
    ],
    ids=[*PER_THREAD_CALLS.keys(), "start_session"],
)
async def test_every_call_after_close_raises_adapter_closed(
    fake: FakeOpenCodeServer, call: PerThreadCall, h: Harness
) -> None:
    await h.oc.start_session(T)
    await h.oc.aclose()
    fake.reset_stats()
    with pytest.raises(AdapterClosedError):
        await call(h.oc, T)
    assert fake.requests == []
    assert h.oc.list_sessions() == []
    await h.oc.aclose()  # idempotent
    assert [e async for e in h.oc.events()] == [], "a late subscriber ends at once"


async def test_an_adapter_used_without_async_with_refuses_and_cannot_be_entered_twice(
    fake: FakeOpenCodeServer,
) -> None:
    oc = OpenCodeAdapter(fake.base_url, transport=fake.transport)
    with pytest.raises(AdapterClosedError, match="async with"):
        await oc.start_session(T)
    async with oc:
        with pytest.raises(RuntimeError):
            await oc.__aenter__()
    assert fake.requests == []


async def test_closing_the_adapter_while_a_stop_runs_lets_the_stop_finish_first(
    fake: FakeOpenCodeServer, h: Harness
) -> None:
    fake.script("hang", [Text("kept"), Hang()])
    info = await h.oc.start_session(T)
    kid = fake.add_session(parent_id=info.session_id, busy=True)
    turn = await h.oc.send_turn(T, "go [[script:hang]]")
    await h.rec.wait_for("content.delta")
    hold, press = await held_abort(fake, kid, h.oc.interrupt_turn(T))
    closing = asyncio.create_task(h.oc.aclose())
    await caught_up(fake, h.oc)  # the close has run as far as it can: up to the stop
    assert not closing.done(), "close waits for the pending stop"
    hold.release()
    result = await press
    await closing
    assert result.turn_id == turn.turn_id and "kept" in result.partial.text
    types = h.rec.types(T)
    assert types.index("turn.aborted") < types.index("session.exited")
    assert types.count("session.exited") == 1
    assert not fake.sessions[kid].busy and not fake.sessions[info.session_id].busy


async def test_closing_the_adapter_while_a_stop_hangs_is_bounded(
    fake: FakeOpenCodeServer,
) -> None:
    fake.script("hang", [Hang()])
    async with Harness(fake, timeouts=fast(abort=0.2, tree=0.2, teardown=0.1)) as h:
        info = await h.oc.start_session(T)
        await h.oc.send_turn(T, "go [[script:hang]]")
        abort = fake.hold("POST", f"/session/{info.session_id}/abort")  # never released
        press = asyncio.create_task(h.oc.interrupt_turn(T))
        await abort.wait_started()
        started = time.perf_counter()
        await h.oc.aclose()
        assert time.perf_counter() - started < 2.0
        with pytest.raises(OpenCodeError):
            await press
        assert h.rec.types(T)[-1] == "session.exited"
        assert aborts(fake, info.session_id) >= 1


async def test_stop_all_with_many_threads_stops_each_once(
    fake: FakeOpenCodeServer, h: Harness
) -> None:
    fake.script("hang", [Hang()])
    threads = [f"t{i}" for i in range(20)]
    for t in threads:
        await h.oc.start_session(t)
        await h.oc.send_turn(t, "go [[script:hang]]")
    await asyncio.gather(h.oc.stop_all(), h.oc.stop_all())
    await caught_up(fake, h.oc)
    assert h.oc.list_sessions() == []
    for t in threads:
        assert h.rec.types(t).count("session.exited") == 1
    assert not any(s.busy for s in fake.sessions.values())


async def test_a_start_racing_a_stop_of_the_same_thread_exits_the_old_session_first(
    fake: FakeOpenCodeServer, h: Harness
) -> None:
    first = await h.oc.start_session(T)
    _, second = await asyncio.gather(h.oc.stop_session(T), h.oc.start_session(T))
    await caught_up(fake, h.oc)
    lifecycle = [
        (e.type, getattr(e, "session_id", None))
        for e in h.rec.events
        if e.type in ("session.started", "session.exited")
    ]
    assert lifecycle == [
        ("session.started", first.session_id),
        ("session.exited", first.session_id),
        ("session.started", second.session_id),
    ]


@pytest.mark.parametrize("how", ["aclose", "stop_session"])
async def test_closing_releases_a_start_that_is_still_connecting_at_once(
    fake: FakeOpenCodeServer, how: str
) -> None:
    async with Harness(fake, timeouts=fast(connect=1.0)) as h:
        hold = fake.hold("GET", "/event")  # the event stream never connects
        start = asyncio.create_task(h.oc.start_session(T))
        await hold.wait_started()
        await caught_up(fake, h.oc)
        send = asyncio.create_task(h.oc.send_turn(T, "queued behind the start"))
        await caught_up(fake, h.oc)
        started = time.perf_counter()
        await (h.oc.aclose() if how == "aclose" else h.oc.stop_session(T))
        outcomes = await asyncio.gather(start, send, return_exceptions=True)
        elapsed = time.perf_counter() - started
        hold.release()
        assert all(isinstance(o, OpenCodeError) for o in outcomes), outcomes
        assert elapsed < 0.5, f"waiters were released after {elapsed:.2f} s"


async def test_a_cancelled_send_does_not_leave_a_turn_that_can_never_end(
    fake: FakeOpenCodeServer, h: Harness
) -> None:
    fake.script("ok", [Text("fine")])
    await h.oc.start_session(T)
    hold = fake.hold("POST", "/session/{id}/prompt_async")
    send = asyncio.create_task(h.oc.send_turn(T, "go [[script:ok]]"))
    await hold.wait_started()
    send.cancel()  # e.g. the host's request handler timed out
    with pytest.raises(asyncio.CancelledError):
        await send
    hold.release()
    await h.consistent()
    ended = await wait_any(h.rec, ["turn.completed", "turn.aborted"], timeout=1.0)
    assert ended.thread_id == T
    assert h.oc.list_sessions()[0].status == "ready"
