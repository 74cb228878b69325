"""``GET /threads/{id}/events``: one thread's events as SSE, resumable, bounded, leak-free.

Driven through the ASGI interface directly (``tests/web/app_driver.py`` says why).
"""

from __future__ import annotations

import asyncio

import httpx
import pytest

from adapter import OpenCodeAdapter
from adapter.testing.fake import FakeOpenCodeServer, Hang, Task, Text, Tool
from adapter.web import create_app
from tests.adapter_support import Recorder
from tests.web.app_driver import Frame, SseClient, T, open_stream, serves_the_stream, subscribers
from tests.web.conftest import OpenEvents, RunTurn

#: Every test streams thread ``T``, created through the app first.
pytestmark = pytest.mark.usefixtures("thread")


def recorded_ids(rec: Recorder, thread_id: str = T) -> list[str]:
    return [e.event_id for e in rec.events if e.thread_id == thread_id]


def ids(frames: list[Frame]) -> list[str | None]:
    return [f.id for f in frames]


async def completed_turn(run_turn: RunTurn, name: str) -> str:
    return await run_turn(name, [Text(f"{name} says hello in several words")])


@pytest.fixture
async def history(run_turn: RunTurn, rec: Recorder) -> list[str]:
    """The thread's event ids after a first completed turn."""
    await completed_turn(run_turn, "first")
    return recorded_ids(rec)


async def test_each_frame_is_one_event_of_the_thread(
    open_events: OpenEvents, app_client: httpx.AsyncClient, run_turn: RunTurn, rec: Recorder
) -> None:
    sse = await open_events()
    await app_client.post("/threads", json={"thread_id": "other"})  # not this stream's
    turn_id = await completed_turn(run_turn, "hello")
    frames = await sse.until("turn.completed")
    for frame in frames:
        data = frame.json()
        assert frame.id == data["event_id"] and frame.event == data["type"]
        assert data["thread_id"] == T and "raw" not in data
    assert frames[0].event == "turn.started" and frames[-1].json()["turn_id"] == turn_id
    assert "content.delta" in [f.event for f in frames]
    mine = recorded_ids(rec)
    first = frames[0].id
    assert first is not None
    start = mine.index(first)
    assert ids(frames) == mine[start : start + len(frames)]


async def test_the_stream_ends_when_the_thread_exits_and_leaves_nothing_behind(
    open_events: OpenEvents, oc: OpenCodeAdapter
) -> None:
    baseline = subscribers(oc)
    sse = await open_events()
    assert subscribers(oc) == baseline + 1
    await oc.stop_session(T)
    frames = await sse.until("session.exited")
    assert await sse.next() is None and sse.ended
    await sse.finished()
    assert frames[-1].json()["thread_id"] == T
    assert subscribers(oc) == baseline


async def test_a_client_that_goes_away_leaves_no_subscription_or_task(
    open_events: OpenEvents,
    oc: OpenCodeAdapter,
    app_client: httpx.AsyncClient,
    fake: FakeOpenCodeServer,
) -> None:
    fake.script("hang", [Hang()])
    baseline = subscribers(oc)
    sse = await open_events()
    await app_client.post(f"/threads/{T}/turns", json={"text": "[[script:hang]]"})
    assert (await sse.next()) is not None  # streaming
    await sse.disconnect()
    assert subscribers(oc) == baseline
    await asyncio.sleep(0)
    assert [t for t in asyncio.all_tasks() if serves_the_stream(t)] == []
    # the thread goes on: the turn is still running, and a new client can follow it
    assert (await app_client.get(f"/threads/{T}")).json()["status"] == "running"


async def test_last_event_id_resumes_exactly_after_that_event(
    open_events: OpenEvents, run_turn: RunTurn, rec: Recorder, history: list[str]
) -> None:
    resume_after = history[history.index(rec.of("turn.started", T)[0].event_id) + 2]
    sse = await open_events(headers={"Last-Event-ID": resume_after})
    replayed = await sse.until("turn.completed")
    assert ids(replayed) == history[history.index(resume_after) + 1 :]
    # then live, with nothing doubled across the seam
    await completed_turn(run_turn, "second")
    live = await sse.until("turn.completed")
    everything = ids(replayed + live)
    assert len(everything) == len(set(everything))
    assert everything == recorded_ids(rec)[history.index(resume_after) + 1 :]


async def test_the_after_query_resumes_like_the_header(
    open_events: OpenEvents, rec: Recorder, history: list[str]
) -> None:
    started = rec.of("turn.started", T)[0].event_id
    sse = await open_events(f"/threads/{T}/events?after={started}")
    replayed = await sse.until("turn.completed")
    assert ids(replayed) == history[history.index(started) + 1 :]


async def test_replay_draws_the_turn_so_far_and_a_reconnect_id_wins_over_it(
    open_events: OpenEvents, rec: Recorder, history: list[str]
) -> None:
    sse = await open_events(f"/threads/{T}/events?replay=1")
    replayed = await sse.until("turn.completed")
    assert ids(replayed) == history
    assert replayed[0].event == "session.started"
    started = rec.of("turn.started", T)[0].event_id
    again = await open_events(f"/threads/{T}/events?replay=1", headers={"Last-Event-ID": started})
    resumed = await again.until("turn.completed")
    assert ids(resumed) == history[history.index(started) + 1 :]


@pytest.mark.usefixtures("history")
async def test_an_id_outside_the_window_starts_with_a_gap_frame(
    open_events: OpenEvents, rec: Recorder
) -> None:
    sse = await open_events(headers={"Last-Event-ID": "evt_long_gone"})
    gap = await sse.next()
    assert gap is not None and gap.event == "stream.gap"
    data = gap.json()
    assert data["reason"] == "expired" and data["thread_id"] == T
    assert gap.id == data["last_event_id"], "a gap frame carries the last real event's id"
    assert gap.id != data["event_id"]
    retained = await sse.until("turn.completed")
    assert set(ids(retained)) <= set(recorded_ids(rec))
    assert retained[-1].id == rec.of("turn.completed", T)[-1].event_id


async def test_a_client_that_falls_behind_gets_a_gap_then_the_end_and_catches_up(
    oc: OpenCodeAdapter, run_turn: RunTurn, rec: Recorder, streams: list[SseClient]
) -> None:
    app = create_app(oc, max_queue=3, ping=0)
    baseline = subscribers(oc)
    slow = await open_stream(app, oc, streams, slow=True)
    await run_turn(
        "burst", [Text("one two"), Tool("bash", {"command": "ls"}, output="x"), Text("end")]
    )
    mine = recorded_ids(rec)
    assert len(mine) > 10, "the turn must produce more events than the queue holds"
    slow.resume()
    frames = await slow.rest()
    await slow.finished()
    assert subscribers(oc) == baseline, "an overflowed stream is closed"
    *delivered, gap = frames
    assert gap.event == "stream.gap" and gap.json()["reason"] == "overflow"
    assert gap.id == delivered[-1].id == gap.json()["last_event_id"]
    assert len(delivered) < len(mine)
    # EventSource reconnects with the gap's id and catches up from history: a replay
    # larger than the queue comes in chunks of max_queue events, each ended by a gap.
    received, last = list(delivered), gap.id
    for _ in range(len(mine)):
        again = await open_stream(
            app, oc, streams, headers={"Last-Event-ID": str(last)}, wait_subscribed=False
        )
        chunk: list[Frame] = []
        while (frame := await again.next()) is not None:
            chunk.append(frame)
            if frame.event in ("turn.completed", "stream.gap"):
                break
        assert chunk and len([f for f in chunk if f.event != "stream.gap"]) <= 3
        if chunk[-1].event == "stream.gap":
            assert chunk[-1].id == chunk[-2].id
            received += chunk[:-1]
            last = chunk[-1].id
            continue
        received += chunk
        break
    everything = ids(received)
    assert everything[-1] == rec.of("turn.completed", T)[-1].event_id
    assert everything == mine[mine.index(str(delivered[0].id)) :]
    assert len(everything) == len(set(everything))


async def test_a_stop_shows_on_the_stream_as_stopping_then_aborted(
    open_events: OpenEvents, app_client: httpx.AsyncClient, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("hang", [Hang()])
    sse = await open_events()
    turn_id = (
        await app_client.post(f"/threads/{T}/turns", json={"text": "[[script:hang]]"})
    ).json()["turn_id"]
    await rec.wait_for("turn.started")
    assert (await app_client.post(f"/threads/{T}/stop")).status_code == 200
    frames = await sse.until("turn.aborted")
    types = [f.event for f in frames]
    assert types.index("turn.stopping") < types.index("turn.aborted")
    assert frames[types.index("turn.stopping")].json()["turn_id"] == turn_id


async def test_a_head_request_opens_no_subscription(
    app_client: httpx.AsyncClient, oc: OpenCodeAdapter
) -> None:
    before = subscribers(oc)
    response = await app_client.head(f"/threads/{T}/events")
    assert response.status_code == 200 and response.content == b""
    assert subscribers(oc) == before


async def test_frames_carry_server_text_with_lone_surrogates_well_formed(
    open_events: OpenEvents, app_client: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    """A text delta, a tool input and a subagent title holding a lone UTF-16 half (as
    OpenCode writes them): every frame is UTF-8 JSON with U+FFFD in its place, no
    ``\\ud800`` escape a page's ``JSON.parse`` would turn back into a broken string."""
    lone, shown = "cut \ud800 here \u2028\x85", "cut \ufffd here \u2028\x85"
    fake.script("child", [Text(f"child {lone}")])
    fake.script(
        "cut",
        [Text(f"said {lone}"), Tool("bash", {"command": f"echo {lone}"}), Task(lone, "child")],
    )
    sse = await open_events()
    await app_client.post(f"/threads/{T}/turns", json={"text": "[[script:cut]]"})
    frames = await sse.until("turn.completed")
    sse.body.decode("utf-8")  # strict
    assert "\\ud8" not in sse.body.decode().lower()
    data = [f.json() for f in frames]
    assert any(shown in d.get("delta", "") for d in data if d["type"] == "content.delta")
    assert any(d.get("input") == {"command": f"echo {shown}"} for d in data)
    assert any(str(d.get("title")).startswith(shown) for d in data if d["type"] == "child.started")
