"""Waiting until an adapter has caught up with the fake: :func:`caught_up`.

Why it exists: a test acts on the fake (an event, a run's script, a released hold) and
then checks what the adapter made of it. The adapter hears the fake through its event
pump, in the background, so the test must first wait until the pump has read and
handled what the fake sent, and until what that handling started (an adoption's read,
a turn's settle check, a recorder taking the canonical events) has run. Spinning
``asyncio.sleep(0)`` a fixed number of times guesses how many loop turns that takes;
a fixed ``asyncio.sleep(0.05)`` guesses how long. This waits for the fact instead.

How: the fake lives in the test's event loop, behind an ``httpx`` transport, so
nothing between the fake and the adapter is I/O. The fake puts each event on the
queue of every ``/event`` stream of its directory as it publishes it; the pump reads
that queue and translates each event without awaiting anything, and all that follows
(the hub handing canonical events to subscribers, a request to the fake and its
answer) are callbacks made runnable by what came before. So once the event loop has
nothing runnable left, every pump is blocked on an empty stream queue, a timer or a
hold: everything published before has been handled, and every follow-up that waited
only on the fake's answers has run. :func:`caught_up` yields to the loop until it is
the only runnable thing there.

What it reads: CPython's event loop keeps its runnable callbacks in ``loop._ready``
(the loop of ``asyncio.run``, of pytest-asyncio, ``asyncio.SelectorEventLoop`` and
``ProactorEventLoop``); no public API tells. On a loop without it (uvloop), it yields
:data:`FALLBACK_ROUNDS` times instead, the old fixed spin. What it does not wait for,
on purpose: timers (a ``Text(delay=...)`` step, the adapter's settle or echo timeouts,
a reconnection's backoff), holds, hung steps, threads and real sockets.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from adapter import OpenCodeAdapter

    from .fake import FakeOpenCodeServer

__all__ = ["FALLBACK_ROUNDS", "caught_up"]

#: Loop turns yielded on an event loop whose runnable callbacks cannot be read.
FALLBACK_ROUNDS = 100
#: At most this many runnable tasks named in a timeout's message.
_SHOWN_TASKS = 8


async def caught_up(
    fake: FakeOpenCodeServer, adapter: OpenCodeAdapter, *, timeout: float = 5.0
) -> None:
    """Wait until ``adapter`` has handled every event ``fake`` published before the call,
    and everything that handling set going has run as far as it can without a timer.

    When it returns: every event the fake had published on the ``/event`` streams
    ``adapter`` has open to it was read and translated, its canonical events were
    published to subscribers (an :class:`~adapter.testing.EventRecorder` has recorded
    them), and every task made runnable since, by the adapter, the fake or the test,
    has run until it waits on something not yet there (a timer, a hold, a hung step).
    The fake's runs go on as far as their scripts go without a delay or a hold. Other
    adapters in the same event loop have caught up too.

    Raises:
        TimeoutError: the event loop still had runnable work after ``timeout`` seconds
            (something runs endlessly); the message names the runnable tasks and gives
            the fake's and the adapter's stream state.
    """
    loop = asyncio.get_running_loop()
    ready = getattr(loop, "_ready", None)
    if not isinstance(ready, deque):
        for _ in range(FALLBACK_ROUNDS):
            await asyncio.sleep(0)
        return
    deadline = loop.time() + timeout
    rounds = 0
    while True:
        # This task is scheduled after every callback runnable now; when it runs again
        # and nothing is queued behind it, nothing else in the loop can run.
        await asyncio.sleep(0)
        rounds += 1
        if not ready:
            return
        if loop.time() >= deadline:
            raise TimeoutError(_still_busy(fake, adapter, ready, timeout, rounds))


def _still_busy(
    fake: FakeOpenCodeServer,
    adapter: OpenCodeAdapter,
    ready: deque[Any],
    timeout: float,
    rounds: int,
) -> str:
    runnable = "1 callback was" if len(ready) == 1 else f"{len(ready)} callbacks were"
    return (
        f"caught_up: waited {timeout} s ({rounds} loop turns) for the adapter to handle "
        "every event the fake published and for the event loop to run out of runnable "
        f"work, but {runnable} still runnable ({_runnable(ready)}); "
        f"{_fake_state(fake)}; {_adapter_state(adapter)}\n{fake.describe_state()}"
    )


def _runnable(ready: deque[Any]) -> str:
    """The tasks (by name) and other callbacks in the loop's ready queue."""
    names: list[str] = []
    others = 0
    for handle in list(ready):
        owner = getattr(getattr(handle, "_callback", None), "__self__", None)
        if isinstance(owner, asyncio.Task):
            names.append(f"task {owner.get_name()!r}")
        else:
            others += 1
    shown = names[:_SHOWN_TASKS]
    if len(names) > _SHOWN_TASKS:
        shown.append(f"{len(names) - _SHOWN_TASKS} more tasks")
    if others:
        shown.append(f"{others} other callbacks")
    return ", ".join(shown)


def _fake_state(fake: FakeOpenCodeServer) -> str:
    """Events published, and per ``/event`` stream the frames its reader has not taken."""
    text = f"the fake published {fake.event_count} events on {fake.stream_count} streams"
    # Diagnostics only: the fake's stream queues are internal, so read defensively.
    subscribers = getattr(getattr(fake, "_bus", None), "_subscribers", None)
    if subscribers:
        streams = [
            f"{getattr(sub, 'directory', '?')}: {sub.queue.qsize()} frames unread"
            for sub in list(subscribers)
            if hasattr(sub, "queue")
        ]
        text += f" ({'; '.join(streams)})"
    return text


def _adapter_state(adapter: OpenCodeAdapter) -> str:
    """Per directory, whether the adapter's pump is connected and what it skipped."""
    pumps = getattr(adapter, "_pumps", None)
    if not pumps:
        return "the adapter has no event stream"
    states = [
        f"{pump.directory or '(server directory)'}: "
        f"{'connected' if pump.connected.is_set() else 'not connected'}, "
        f"{pump.bad_events} events skipped, {pump.reconnects} reconnections"
        for pump in list(pumps.values())
    ]
    return f"the adapter's event streams: {'; '.join(states)}"
