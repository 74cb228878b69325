"""The event hub and its replay window on their own (``tests/test_event_subscriptions.py``
checks what a subscriber sees through the adapter): the retained history is bounded per
thread and for closed threads, and the hub stops feeding a stream that fell behind or
was closed.

A test of internals: ``EventHistory`` (``adapter._stream._replay_window``) and
``EventHub`` (``adapter._stream._hub``), whose bounds and subscriber count have no
public view.
"""

from __future__ import annotations

from adapter import ContentDelta, SessionExited, SessionStarted, StreamGap, TurnStarted
from adapter._stream._hub import EventHub
from adapter._stream._replay_window import EventHistory

A = "thread-a"


def test_the_history_is_bounded_per_thread_and_for_closed_threads() -> None:
    history = EventHistory(limit=10, keep_closed=2)
    for i in range(25):
        history.record(
            ContentDelta(
                thread_id="t", stream="assistant_text", delta=str(i), item_id="i", session_id="s"
            )
        )
    kept = history.retained("t")
    assert [e.delta for e in kept if isinstance(e, ContentDelta)] == [str(i) for i in range(15, 25)]
    assert len(history) == 10
    assert history.after("t", kept[0].event_id) == kept[1:]
    for name in ("c1", "c2", "c3"):
        history.record(SessionStarted(thread_id=name, session_id="s"))
        history.record(SessionExited(thread_id=name, session_id="s"))
    assert history.retained("c1") == [] and len(history.retained("c3")) == 2
    # A thread id bound again to a new session starts a new history.
    history.record(SessionStarted(thread_id="c3", session_id="s2"))
    assert [e.type for e in history.retained("c3")] == ["session.started"]
    history.record(TurnStarted(thread_id="c3", turn_id="x"))
    assert len(history.retained("c3")) == 2


async def test_the_hub_forgets_a_stream_that_fell_behind_or_was_closed() -> None:
    """How many streams the hub feeds has no public view. A stream that fell behind (its
    gap read) and one its consumer closed are no longer fed (a web client that went away
    costs nothing)."""
    hub = EventHub()
    slow, steady, closed = hub.subscribe(A, max_queue=3), hub.subscribe(A), hub.subscribe(A)
    for i in range(5):
        hub.emit(
            ContentDelta(
                thread_id=A, stream="assistant_text", delta=str(i), item_id="i", session_id="s"
            )
        )
    assert isinstance([e async for e in slow][-1], StreamGap)
    assert hub.subscribers == 2  # steady and closed; the slow one is gone
    await closed.aclose()
    assert hub.subscribers == 1 and steady.backlog == 5
