"""``adapter.testing.caught_up``: after it, the adapter has handled what the fake sent.

Each test acts on the fake and checks, right after the wait, what the adapter made of
it: without the wait (or with a fixed spin of ``sleep(0)``) the check fails.
"""

from __future__ import annotations

import asyncio

import pytest

from adapter import OpenCodeAdapter
from adapter.testing import EventRecorder, FakeOpenCodeServer, caught_up
from adapter.testing.fake import Hang, Text, Tool


async def test_an_event_published_right_before_is_recorded_right_after(
    opencode_fake: FakeOpenCodeServer,
    opencode_adapter: OpenCodeAdapter,
    opencode_events: EventRecorder,
) -> None:
    info = await opencode_adapter.start_session("t")
    error = {"name": "UnknownError", "data": {"message": "boom"}}
    opencode_fake.emit("session.error", {"sessionID": info.session_id, "error": error})
    await caught_up(opencode_fake, opencode_adapter)
    [event] = opencode_events.of("runtime.error")
    assert (event.thread_id, event.message) == ("t", "boom")


async def test_a_turn_whose_script_never_waits_has_ended_after_it(
    opencode_fake: FakeOpenCodeServer,
    opencode_adapter: OpenCodeAdapter,
    opencode_events: EventRecorder,
) -> None:
    # A run of several model steps takes more loop turns than the 20 or 30 rounds of
    # sleep(0) the project's tests used to spin: the wait follows it to its end.
    steps = [step for n in range(12) for step in (Text(f"{n}"), Tool("bash", {"command": "true"}))]
    opencode_fake.script("steps", [*steps, Text("end")])
    await opencode_adapter.start_session("t")
    turn = await opencode_adapter.send_turn("t", "go [[script:steps]]")
    await caught_up(opencode_fake, opencode_adapter)
    [done] = opencode_events.of("turn.completed")
    assert (done.turn_id, done.state) == (turn.turn_id, "completed")
    assert opencode_adapter.session_info("t").status == "ready"


async def test_a_child_the_fake_announces_is_adopted_after_it(
    opencode_fake: FakeOpenCodeServer,
    opencode_adapter: OpenCodeAdapter,
    opencode_events: EventRecorder,
) -> None:
    opencode_fake.script("hang", [Hang()])
    info = await opencode_adapter.start_session("t")
    await opencode_adapter.send_turn("t", "go [[script:hang]]")
    child = opencode_fake.add_session(parent_id=info.session_id, emit=True)
    await caught_up(opencode_fake, opencode_adapter)
    assert [e.session_id for e in opencode_events.of("child.started")] == [child]


async def test_it_returns_while_a_step_hangs(
    opencode_fake: FakeOpenCodeServer,
    opencode_adapter: OpenCodeAdapter,
    opencode_events: EventRecorder,
) -> None:
    opencode_fake.script("hang", [Text("before"), Hang()])
    await opencode_adapter.start_session("t")
    await opencode_adapter.send_turn("t", "go [[script:hang]]")
    await caught_up(opencode_fake, opencode_adapter, timeout=2.0)
    assert opencode_adapter.session_info("t").status == "running"
    assert "".join(e.delta for e in opencode_events.of("content.delta")) == "before"
    assert opencode_events.of("turn.completed") == []


async def test_every_adapter_on_the_fake_has_caught_up(
    opencode_fake: FakeOpenCodeServer, opencode_adapter: OpenCodeAdapter
) -> None:
    async with (
        OpenCodeAdapter(opencode_fake.base_url, transport=opencode_fake.transport) as other,
        EventRecorder(other) as other_events,
    ):
        info = await other.start_session("u")
        error = {"name": "UnknownError", "data": {"message": "boom"}}
        opencode_fake.emit("session.error", {"sessionID": info.session_id, "error": error})
        await caught_up(opencode_fake, opencode_adapter)
        assert [e.thread_id for e in other_events.of("runtime.error")] == ["u"]


async def test_a_loop_that_never_runs_out_of_work_times_out_saying_what_runs(
    opencode_fake: FakeOpenCodeServer, opencode_adapter: OpenCodeAdapter
) -> None:
    await opencode_adapter.start_session("t")
    opencode_fake.emit("server.heartbeat", {})

    async def spin() -> None:
        while True:
            await asyncio.sleep(0)

    spinner = asyncio.create_task(spin(), name="spinner")
    try:
        with pytest.raises(TimeoutError) as failed:
            await caught_up(opencode_fake, opencode_adapter, timeout=0.2)
    finally:
        spinner.cancel()
    message = str(failed.value)
    assert message.startswith("caught_up: waited 0.2 s (")
    assert "task 'spinner'" in message
    assert "the fake published " in message and "frames unread" in message
    assert "connected, 0 events skipped, 0 reconnections" in message
    assert "\nthe fake's state:\n  sessions (1):" in message  # as the fake's own waits show it
