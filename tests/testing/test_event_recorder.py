"""``adapter.testing.EventRecorder``: what a host's contract test waits on and reads.

It is the ``opencode_events`` fixture of the pytest plugin (``tests/testing/
test_pytest_plugin.py`` runs that as a user gets it); here each method is pinned
in-process, on the project's own ``oc`` and ``fake`` fixtures.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from adapter import ContentDelta, OpenCodeAdapter, TurnCompleted, TurnEvent
from adapter.testing import EventRecorder
from adapter.testing.fake import FakeOpenCodeServer, Hang, Text

T = "t"


@pytest.fixture
async def recorder(oc: OpenCodeAdapter) -> AsyncIterator[EventRecorder]:
    async with EventRecorder(oc) as recorder:
        yield recorder


async def one_turn(oc: OpenCodeAdapter, fake: FakeOpenCodeServer, text: str = "hello") -> str:
    """Thread ``T`` (started if new) runs one turn answering ``text``: its turn id."""
    fake.script("answer", [Text(text)])
    if not oc.has_session(T):
        await oc.start_session(T)
    return (await oc.send_turn(T, "go [[script:answer]]")).turn_id


async def test_wait_for_a_type_returns_the_first_recorded_event_of_it(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, recorder: EventRecorder
) -> None:
    turn_id = await one_turn(oc, fake)
    done = await recorder.wait_for("turn.completed")
    assert (done.type, done.turn_id, done.state) == ("turn.completed", turn_id, "completed")
    assert await recorder.wait_for("turn.completed") is done  # already recorded: at once


async def test_wait_for_an_event_class_or_a_predicate(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, recorder: EventRecorder
) -> None:
    await one_turn(oc, fake, "first")
    second = await one_turn(oc, fake, "second")
    by_class = await recorder.wait_for(TurnCompleted, lambda e: e.turn_id == second)
    assert isinstance(by_class, TurnCompleted) and by_class.turn_id == second
    by_type = await recorder.wait_for("turn.completed", lambda e: e.turn_id == second)
    assert by_type is by_class
    by_predicate = await recorder.wait_for(
        lambda e: e.turn_id == second and e.type == "turn.started"
    )
    assert by_predicate.type == "turn.started"
    # A base class matches every event of its kind.
    assert (await recorder.wait_for(TurnEvent)).type == "turn.started"


async def test_of_types_of_turn_and_events(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, recorder: EventRecorder
) -> None:
    first = await one_turn(oc, fake, "one")
    await recorder.wait_for("turn.completed")
    second = await one_turn(oc, fake, "two")
    await recorder.wait_for("turn.completed", lambda e: e.turn_id == second)

    assert [e.turn_id for e in recorder.of("turn.completed")] == [first, second]
    assert recorder.of(TurnCompleted) == recorder.of("turn.completed")
    assert recorder.of("turn.completed", thread_id="another") == []
    deltas = recorder.of(ContentDelta)
    assert "".join(d.delta for d in deltas if d.turn_id == first) == "one"
    assert recorder.types() == [e.type for e in recorder.events]
    assert recorder.types()[:2] == ["session.started", "thread.started"]
    assert recorder.types(T) == recorder.types()
    of_first = recorder.of_turn(first)
    assert of_first[0].type == "turn.started" and of_first[-1].type == "turn.completed"
    assert {e.turn_id for e in of_first} == {first}
    assert not {e.event_id for e in of_first} & {e.event_id for e in recorder.of_turn(second)}


async def test_a_timeout_says_what_was_recorded_instead(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, recorder: EventRecorder
) -> None:
    fake.script("hang", [Text("thinking"), Hang()])
    await oc.start_session(T)
    await oc.send_turn(T, "go [[script:hang]]")
    await recorder.wait_for("content.delta")
    with pytest.raises(TimeoutError) as raised:
        await recorder.wait_for("turn.completed", timeout=0.05)
    message = str(raised.value)
    assert "'turn.completed'" in message and "0.05 s" in message
    assert "session.started, thread.started, turn.started" in message
    assert "content.delta" in message


async def test_a_timeout_message_collapses_repeats_and_names_a_predicate(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, recorder: EventRecorder
) -> None:
    fake.script("chunks", [Text("a b c d", chunks=4), Hang()])
    await oc.start_session(T)
    await oc.send_turn(T, "go [[script:chunks]]")
    await recorder.wait_for("content.delta", lambda _: len(recorder.of("content.delta")) >= 4)

    def never(event: object) -> bool:
        return False

    with pytest.raises(TimeoutError, match=r"content\.delta x4") as raised:
        await recorder.wait_for("turn.completed", never, timeout=0.01)
    assert "'turn.completed' matching never" in str(raised.value)


async def test_wait_for_fails_at_once_when_the_stream_ended_without_a_match(
    fake: FakeOpenCodeServer,
) -> None:
    async with OpenCodeAdapter(fake.base_url, transport=fake.transport) as oc:
        recorder = EventRecorder(oc)
        await oc.start_session(T)
        await recorder.wait_for("thread.started")
    await recorder.task  # the adapter closed: its streams end
    async with asyncio.timeout(1):  # not the 60 s asked for
        with pytest.raises(TimeoutError, match="the event stream ended") as raised:
            await recorder.wait_for("turn.completed", timeout=60)
    assert "session.exited" in str(raised.value)
    assert (await recorder.wait_for("thread.started")).thread_id == T  # matches still found
    await recorder.close()


async def test_a_recorder_of_one_thread_and_close(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer
) -> None:
    recorder = EventRecorder(oc, thread_id="other")
    await one_turn(oc, fake)
    await oc.start_session("other")
    assert (await recorder.wait_for("thread.started")).thread_id == "other"
    assert set(e.thread_id for e in recorder.events) == {"other"}
    await recorder.close()
    await recorder.close()  # idempotent
    assert recorder.task.done()


def test_the_project_recorder_is_the_shipped_one() -> None:
    from tests.adapter_support import Recorder

    assert issubclass(Recorder, EventRecorder)
