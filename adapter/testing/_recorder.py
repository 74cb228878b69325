"""Every canonical event an adapter emits, recorded in the background of a test.

Why it ships: a host's contract test acts, then waits until the adapter says something
happened ("the turn completed") and reads what it said. Every host author rebuilt this
recorder, and this project's own tests had one (``tests/adapter_support.py``, now a
subclass). It is the ``opencode_events`` fixture of the pytest plugin
(:mod:`adapter.testing.pytest_plugin`) and needs no pytest itself.

A wait that times out says what was recorded instead, so a failing test tells what
happened; a wait on a stream that ended (the adapter closed) fails at once.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Any, TypeVar, overload

# At run time, so ``typing.get_type_hints(EventRecorder.__init__)`` resolves it.
from adapter import OpenCodeAdapter

from .._base._closing import AsyncClosing
from .._stream._hub import EventStream
from .._types._events import Event

__all__ = ["EventRecorder"]

E = TypeVar("E", bound=Event)

#: At most this many (collapsed) entries of the recorded types in a timeout's message.
_SHOWN_TYPES = 60


class EventRecorder(AsyncClosing):
    """Records every canonical event of ``adapter`` (of one thread: ``thread_id``) from
    the moment it is made; ``close()`` (or ``async with``) ends the recording.

    Make it before the test acts, inside a running event loop. ``wait_for`` returns the
    first recorded event that matches, waiting for one if none was recorded yet;
    ``of``, ``types`` and ``of_turn`` read what was recorded so far.
    A match is a type string (``"turn.completed"``), an event class
    (``TurnCompleted``; a base class such as ``TurnEvent`` matches its whole kind), or a
    predicate on the event.
    """

    def __init__(self, adapter: OpenCodeAdapter, thread_id: str | None = None) -> None:
        self.stream: EventStream = adapter.events(thread_id)
        #: Every event recorded, in the order the adapter emitted them.
        self.events: list[Event] = []
        self._changed = asyncio.Event()
        #: The background task reading the stream: it ends when the adapter's stream ends
        #: (the adapter closed) or at ``close()``.
        self.task: asyncio.Task[None] = asyncio.create_task(self._record())

    async def _record(self) -> None:
        try:
            async for event in self.stream:
                self.events.append(event)
                self._changed.set()
        finally:
            self._changed.set()  # a waiter learns that the stream ended

    @overload
    def of(self, match: type[E], thread_id: str | None = None) -> list[E]: ...
    @overload
    def of(self, match: str, thread_id: str | None = None) -> list[Any]: ...
    def of(self, match: str | type[Event], thread_id: str | None = None) -> list[Any]:
        """The recorded events of a type (``"turn.completed"``) or class (``TurnCompleted``),
        of one thread if ``thread_id`` is given. A type string gives ``list[Any]``, so a
        test reads each type's own fields (``done.state``) without a cast."""
        return [
            event
            for event in self.events
            if _is_of(event, match) and (thread_id is None or event.thread_id == thread_id)
        ]

    def types(self, thread_id: str | None = None) -> list[str]:
        """The types of the recorded events in order (of one thread if ``thread_id``)."""
        return [e.type for e in self.events if thread_id is None or e.thread_id == thread_id]

    def of_turn(self, turn_id: str) -> list[Any]:
        """The recorded events of one turn (``event.turn_id``), in order."""
        return [event for event in self.events if event.turn_id == turn_id]

    @overload
    async def wait_for(
        self,
        match: type[E],
        predicate: Callable[[E], bool] | None = None,
        timeout: float = 5.0,
    ) -> E: ...
    @overload
    async def wait_for(
        self,
        match: str | Callable[[Any], bool],
        predicate: Callable[[Any], bool] | None = None,
        timeout: float = 5.0,
    ) -> Any: ...
    async def wait_for(
        self,
        match: str | type[Event] | Callable[[Any], bool],
        predicate: Callable[[Any], bool] | None = None,
        timeout: float = 5.0,
    ) -> Any:
        """The first recorded event that matches ``match`` (a type, an event class or a
        predicate) and ``predicate`` if given, waiting up to ``timeout`` seconds for it.

        Raises:
            TimeoutError: nothing matched in time, or the stream ended (the adapter
                closed) with nothing matched; the message lists the types recorded.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            for event in self.events:
                if _is_of(event, match) and (predicate is None or predicate(event)):
                    return event
            if self.task.done():
                raise TimeoutError(self._missed(match, predicate, "the event stream ended"))
            self._changed.clear()
            try:
                async with asyncio.timeout_at(deadline):
                    await self._changed.wait()
            except TimeoutError:
                raise TimeoutError(self._missed(match, predicate, f"within {timeout} s")) from None

    def _missed(self, match: object, predicate: Callable[[Any], bool] | None, when: str) -> str:
        wanted = _describe(match) + (
            "" if predicate is None else f" matching {_describe(predicate)}"
        )
        return f"no event {wanted} {when}; recorded ({len(self.events)}): {self._summary()}"

    def _summary(self) -> str:
        """The recorded types in order, a run of one type collapsed (``content.delta x4``)."""
        runs = [
            name if count == 1 else f"{name} x{count}"
            for name, count in (
                (name, len(list(group))) for name, group in itertools.groupby(self.types())
            )
        ]
        if not runs:
            return "nothing"
        if len(runs) > _SHOWN_TYPES:
            skipped = len(runs) - _SHOWN_TYPES
            runs = [f"… {skipped} earlier", *runs[-_SHOWN_TYPES:]]
        return ", ".join(runs)

    async def close(self) -> None:
        """Ends the recording (idempotent); what was recorded stays readable."""
        await self.stream.aclose()
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)

    async def aclose(self) -> None:
        await self.close()


def _is_of(event: Event, match: str | type[Event] | Callable[[Any], bool]) -> bool:
    if isinstance(match, type):
        return isinstance(event, match)
    if isinstance(match, str):
        return event.type == match
    return bool(match(event))


def _describe(match: object) -> str:
    if isinstance(match, type):
        return match.__name__
    if isinstance(match, str):
        return repr(match)
    return getattr(match, "__name__", None) or repr(match)
