"""Subscriptions a web page needs: one thread's events, a replay after the last event it
has, a bounded queue that never blocks anyone, the Stop's progress on the stream, the
live tree, and every event as JSON (``docs/adapter.md``, "Events")."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

import pytest

from adapter import (
    InvalidInputError,
    OpenCodeAdapter,
    StreamGap,
    Timeouts,
    TreeStopError,
    TurnStopFailed,
    TurnStopped,
    TurnStopping,
)
from adapter.testing import caught_up
from adapter.testing.fake import FakeOpenCodeServer, Hang, Step, Task, Text, Tool
from tests.adapter_support import Recorder, drain, start_scripted_turn

A, B = "thread-a", "thread-b"


@pytest.fixture
def timeouts() -> Timeouts:
    return Timeouts(abort=2.0, tree=2.0)


async def one_turn(oc: OpenCodeAdapter, rec: Recorder, thread: str, script: str) -> None:
    turn = await oc.send_turn(thread, f"go [[script:{script}]]")
    await rec.wait_for("turn.completed", lambda e: e.turn_id == turn.turn_id)


async def thread_a_after_one_turn(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder, steps: list[Step]
) -> None:
    """Thread ``A`` started and ran one turn of ``steps`` (script ``s``) to its end."""
    fake.script("s", steps)
    await oc.start_session(A)
    await one_turn(oc, rec, A, "s")


async def a_turn_on_each_thread(oc: OpenCodeAdapter, rec: Recorder, script: str) -> None:
    """Threads ``A`` and ``B`` start, then each runs one turn of ``script``."""
    await oc.start_session(A)
    await oc.start_session(B)
    await one_turn(oc, rec, A, script)
    await one_turn(oc, rec, B, script)


async def test_a_thread_subscription_sees_only_that_thread(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("s", [Text("hello")])
    only_a = oc.events(A)
    everything = oc.events()
    await a_turn_on_each_thread(oc, rec, "s")
    mine = await drain(only_a)
    assert {e.thread_id for e in mine} == {A}
    assert [e.event_id for e in mine] == [
        e.event_id for e in await drain(everything) if e.thread_id == A
    ]
    assert "turn.completed" in [e.type for e in mine]


async def test_after_replays_exactly_what_followed_then_goes_live(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("s", [Text("one two three")])
    await oc.start_session(A)
    first = oc.events(A)
    await one_turn(oc, rec, A, "s")
    seen = await drain(first)
    cut = next(i for i, e in enumerate(seen) if e.type == "turn.started")
    resumed = oc.events(A, after=seen[cut].event_id)
    assert [e.event_id for e in await drain(resumed)] == [e.event_id for e in seen[cut + 1 :]]
    # ...and then the live events, none doubled.
    await one_turn(oc, rec, A, "s")
    live = await drain(resumed)
    assert live and live[0].type == "turn.started"
    assert [e.event_id for e in live] == [e.event_id for e in await drain(first)]


async def test_after_over_every_thread_keeps_emission_order(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("s", [Text("x")])
    everything = oc.events()
    await a_turn_on_each_thread(oc, rec, "s")
    seen = await drain(everything)
    assert [e.event_id for e in await drain(oc.events(after=seen[0].event_id))] == [
        e.event_id for e in seen[1:]
    ]


async def test_an_after_no_longer_retained_starts_with_an_expired_gap(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    await thread_a_after_one_turn(oc, fake, rec, [Text("x")])
    stream = oc.events(A, after="ev_99999999")
    got = await drain(stream)
    assert isinstance(got[0], StreamGap)
    assert got[0].reason == "expired" and got[0].last_event_id is None
    assert got[0].thread_id == A
    assert [e.type for e in got[1:]][:2] == ["session.started", "thread.started"]
    assert "turn.completed" in [e.type for e in got[1:]]
    # Another thread's event id does not resume this thread.
    await oc.start_session(B)
    b_event = (await drain(oc.events(B, replay=True)))[0]  # B's oldest retained event
    assert isinstance((await drain(oc.events(A, after=b_event.event_id)))[0], StreamGap)


async def test_the_window_is_the_current_and_previous_turn(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("s", [Text("x")])
    await oc.start_session(A)
    for _ in range(3):
        await one_turn(oc, rec, A, "s")
    retained = await drain(oc.events(A, replay=True))
    starts = [e for e in retained if e.type == "turn.started"]
    turns = rec.of("turn.started", A)
    assert [e.turn_id for e in starts] == [turns[1].turn_id, turns[2].turn_id]
    assert retained[0] is starts[0]
    assert isinstance((await drain(oc.events(A, after=turns[0].event_id)))[0], StreamGap)


async def test_a_consumer_that_falls_behind_gets_a_gap_and_its_stream_ends(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("s", [Text("a b c d e f g h")])
    await oc.start_session(A)
    slow = oc.events(A, max_queue=3)
    steady = oc.events(A)
    await one_turn(oc, rec, A, "s")
    got = [e async for e in slow]  # ends by itself
    assert len(got) == 4 and isinstance(got[3], StreamGap)
    gap = got[3]
    assert gap.reason == "overflow" and gap.last_event_id == got[2].event_id
    everything = await drain(steady)
    assert len(everything) > 3  # the steady consumer lost nothing
    # Catching up from the gap: exactly the rest.
    rest = await drain(oc.events(A, after=gap.last_event_id))
    assert [e.event_id for e in got[:3] + rest] == [e.event_id for e in everything]


async def test_aclose_from_another_task_ends_a_waiting_consumer(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer
) -> None:
    """A web handler closes a client's stream when the client goes away, while the task
    that forwards it waits for the next event: that task must end, not wait forever."""
    await oc.start_session(A)
    stream = oc.events(A)
    got: list[object] = []

    async def forward() -> None:
        async for event in stream:
            got.append(event)

    forwarding = asyncio.create_task(forward())
    await caught_up(fake, oc)  # the consumer waits on an empty stream
    await stream.aclose()
    async with asyncio.timeout(2):
        await forwarding
    assert got == []
    assert [e async for e in stream] == [], "a closed stream stays ended"


async def test_a_replay_longer_than_the_queue_ends_with_a_gap(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    await thread_a_after_one_turn(oc, fake, rec, [Text("a b c d e f")])
    first = (await drain(oc.events(A, replay=True)))[0]
    got = [e async for e in oc.events(A, after=first.event_id, max_queue=2)]
    gap = got[-1]
    assert isinstance(gap, StreamGap) and len(got) == 3
    assert gap.last_event_id == got[1].event_id


async def test_replay_starts_with_everything_retained_kept_without_raw(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("s", [Text("x"), Tool("bash", {"command": "ls"}, output="a\n")])
    live = oc.events(A)
    await oc.start_session(A)
    await one_turn(oc, rec, A, "s")
    sent = await drain(live)
    replayed = await drain(oc.events(A, replay=True))
    assert [e.event_id for e in replayed] == [e.event_id for e in sent]
    assert any(e.raw is not None for e in sent)  # the live events carry the native event
    assert all(e.raw is None for e in replayed)  # the retained copies do not
    assert [e.to_dict() for e in replayed] == [e.to_dict() for e in sent]


async def test_subscription_arguments_are_checked(oc: OpenCodeAdapter) -> None:
    with pytest.raises(InvalidInputError):
        oc.events(A, after="ev_00000001", replay=True)
    wrong: list[dict[str, Any]] = [  # values of the wrong type on purpose
        {"max_queue": 0},
        {"max_queue": True},
        {"after": ""},
        {"thread_id": ""},
        {"replay": 1},
    ]
    for kwargs in wrong:
        with pytest.raises(InvalidInputError):
            oc.events(**kwargs)


async def test_a_stop_is_announced_before_it_ends(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("grandchild", [Hang()])
    fake.script("child", [Task("deeper", "grandchild")])
    info, turn = await start_scripted_turn(
        oc,
        fake,
        A,
        "root",
        [Tool("bash", {"command": "echo hi"}, output="hi\n"), Task("x", "child")],
    )
    await rec.wait_for("child.started", lambda e: e.parent_id != info.session_id)
    watcher = oc.events(A)
    stops = await asyncio.gather(*(oc.interrupt_turn(A) for _ in range(5)))
    assert all(s is stops[0] for s in stops)
    types = [e.type for e in await drain(watcher)]
    assert types.count("turn.stopping") == 1
    assert types.index("turn.stopping") < types.index("turn.aborted")
    assert types.count("turn.stopped") == 1
    assert types.index("turn.aborted") < types.index("turn.stopped")
    stopping = rec.of("turn.stopping", A)[0]
    assert isinstance(stopping, TurnStopping) and stopping.turn_id == turn.turn_id
    stopped = rec.of("turn.stopped", A)[0]
    assert isinstance(stopped, TurnStopped) and stopped.turn_id == turn.turn_id
    assert stopped.stop is stops[0].stop and stopped.stop is not None and stopped.stop.ok
    assert rec.of("turn.stop_failed", A) == []


async def test_a_stop_without_a_turn_is_announced_and_ends_too(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    info = await oc.start_session(A)
    watcher = oc.events(A)
    result = await oc.interrupt_turn(A)
    got = await drain(watcher)
    assert [e.type for e in got] == ["turn.stopping", "turn.stopped"]
    assert all(e.turn_id is None for e in got)
    stopped = got[1]
    assert isinstance(stopped, TurnStopped) and stopped.stop is result.stop
    assert stopped.stop is not None and stopped.stop.root_id == info.session_id


async def test_a_failed_stop_reaches_the_stream_with_its_report(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("root", [Task("x", "child")])
    fake.script("child", [Hang()])
    info = await oc.start_session(A)
    turn = await oc.send_turn(A, "go [[script:root]]")
    await rec.wait_for("child.started")
    bad = fake.add_session(parent_id=info.session_id, busy=True)
    fake.fail("POST", f"/session/{bad}/abort", status=400, times=None)
    with pytest.raises(TreeStopError):
        await oc.interrupt_turn(A)
    failed = await rec.wait_for("turn.stop_failed")
    assert isinstance(failed, TurnStopFailed)
    assert failed.turn_id == turn.turn_id and failed.first_failure == bad
    assert failed.error_type == "TreeStopError" and failed.error
    assert failed.stop is not None and failed.stop[bad].outcome == "failed"
    assert rec.of("turn.stopped", A) == []
    data = json.loads(json.dumps(failed.to_dict()))
    assert data["stop"]["sessions"][0]["session_id"] == info.session_id
    assert {s["session_id"]: s["outcome"] for s in data["stop"]["sessions"]}[bad] == "failed"
    assert oc.list_sessions()[0].status == "running"


async def test_the_tree_has_every_session_and_its_status(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("grandchild", [Hang()])
    fake.script("child", [Task("deeper", "grandchild")])
    fake.script("root", [Task("explore", "child")])
    info = await oc.start_session(A, title="the root")
    turn = await oc.send_turn(A, "go [[script:root]]")
    await rec.wait_for("child.started", lambda e: e.parent_id != info.session_id)
    api_child = fake.add_session(parent_id=info.session_id, busy=False, emit=True)
    await rec.wait_for("child.started", lambda e: e.session_id == api_child)
    tree = await oc.session_tree(A)
    assert tree.root_id == info.session_id and tree.sessions[0].session_id == info.session_id
    assert [n.depth for n in tree] == sorted(n.depth for n in tree)
    assert max(n.depth for n in tree) == 2 and len(tree) == 4
    assert tree[api_child].status == "idle" and tree[info.session_id].status == "busy"
    assert set(tree.busy) == {n.session_id for n in tree if n.session_id != api_child}
    assert all(n.turn_id == turn.turn_id for n in tree if n.depth > 0)
    data = json.loads(json.dumps(tree.to_dict()))
    assert data["sessions"][0] == {
        "session_id": info.session_id,
        "parent_id": None,
        "depth": 0,
        "status": "busy",
        "title": "the root",
        "turn_id": None,
    }
    await oc.interrupt_turn(A)
    assert (await oc.session_tree(A)).busy == ()


async def test_every_event_and_record_is_json(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("child", [Hang()])
    fake.script(
        "root", [Text("working"), Tool("bash", {"command": "ls"}, output="a\n"), Task("x", "child")]
    )
    info = await oc.start_session(A)
    await oc.send_turn(A, "go [[script:root]]")
    await rec.wait_for("child.started")
    result = await oc.interrupt_turn(A)
    for event in rec.events:
        data = json.loads(json.dumps(event.to_dict()))
        assert "raw" not in data and data["type"] == event.type
        assert data["event_id"] == event.event_id
    aborted = json.loads(json.dumps(rec.of("turn.aborted", A)[0].to_dict()))
    assert aborted["partial"]["text"] == result.partial.text and "usage" in aborted
    body = json.loads(json.dumps(result.to_dict()))
    assert body["turn_id"] == result.turn_id
    assert body["stop"]["sessions"][0]["session_id"] == info.session_id
    assert all(s["outcome"] == "aborted" for s in body["stop"]["sessions"])
    assert body["stop"]["ok"] is True
    assert any(c["output"] == "a\n" for c in body["partial"]["tool_calls"])
    info_data = json.loads(json.dumps(oc.list_sessions()[0].to_dict()))
    assert info_data["status"] == "ready" and info_data["session_id"] == info.session_id


def test_an_event_id_another_process_issued_is_not_this_ones() -> None:
    # Two processes count their events alike; their ids must still differ, or a worker
    # would replay another worker's Last-Event-ID from the wrong event.
    script = (
        "from adapter import RuntimeWarningEvent as W\n"
        "print(W(thread_id='t', message='m').event_id)"
    )
    ids = {
        subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, check=True
        ).stdout.strip()
        for _ in range(2)
    }
    assert len(ids) == 2
    assert all(i.startswith("ev_") for i in ids)
