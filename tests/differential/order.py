"""Event matchers and the partial-order constraints checked on both targets' streams.

Event streams of two implementations never match event for event (the real server
announces ``busy`` several times, interleaves ``session.diff``...). What the adapter
relies on is an *order* between some events; each scenario states those orders as
constraints, and every constraint must hold on the fake and on the real server.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

JSON: TypeAlias = dict[str, Any]

ANY = object()
"""A ``where`` value that matches any present value."""
ABSENT = object()
"""A ``where`` value that matches a missing key."""


def lookup(obj: Any, dotted: str) -> Any:
    """``obj["a"]["b"]`` for ``"a.b"``; :data:`ABSENT` when a key is missing."""
    for key in dotted.split("."):
        if not isinstance(obj, Mapping) or key not in obj:
            return ABSENT
        obj = obj[key]
    return obj


def event_sessions(event: Mapping[str, Any]) -> set[str]:
    """Every session id an event is about (``sessionID``, ``info``, ``part``)."""
    props = event.get("properties")
    if not isinstance(props, Mapping):
        return set()
    found: set[str] = set()
    for path in ("sessionID", "info.sessionID", "part.sessionID"):
        value = lookup(props, path)
        if isinstance(value, str):
            found.add(value)
    if str(event.get("type", "")).startswith("session."):
        value = lookup(props, "info.id")
        if isinstance(value, str):
            found.add(value)
    return found


@dataclass(frozen=True)
class On:
    """Matches events of ``type`` about session ``session`` (an alias) whose
    properties have the ``where`` values (dotted paths; :data:`ANY`, :data:`ABSENT`)."""

    type: str
    session: str | None = None
    where: Mapping[str, Any] = field(default_factory=dict)

    def matches(self, event: Mapping[str, Any], ids: Mapping[str, str]) -> bool:
        if event.get("type") != self.type:
            return False
        if self.session is not None:
            sid = ids.get(self.session)
            if sid is None or sid not in event_sessions(event):
                return False
        props = event.get("properties", {})
        for path, expected in self.where.items():
            value = lookup(props, path)
            if expected is ANY:
                if value is ABSENT:
                    return False
            elif value is not expected and value != expected:
                return False
        return True

    def __str__(self) -> str:
        conds = []
        for path, expected in self.where.items():
            shown = "*" if expected is ANY else "absent" if expected is ABSENT else repr(expected)
            conds.append(f"{path}={shown}")
        who = f"[{self.session}]" if self.session else ""
        return f"{self.type}{who}" + (f"{{{', '.join(conds)}}}" if conds else "")


def positions(on: On, events: Sequence[Mapping[str, Any]], ids: Mapping[str, str]) -> list[int]:
    """Indexes of the events ``on`` matches."""
    return [i for i, event in enumerate(events) if on.matches(event, ids)]


@dataclass(frozen=True)
class Before:
    """The ``nth`` ``first`` event comes before the ``then_nth`` ``then`` event (both occur)."""

    first: On
    then: On
    nth: int = 1
    then_nth: int = 1

    def violations(self, events: Sequence[JSON], ids: Mapping[str, str]) -> Iterator[str]:
        a, b = positions(self.first, events, ids), positions(self.then, events, ids)
        if len(a) < self.nth:
            yield f"{self}: only {len(a)} '{self.first}' event(s)"
        if len(b) < self.then_nth:
            yield f"{self}: only {len(b)} '{self.then}' event(s)"
        if (
            len(a) >= self.nth
            and len(b) >= self.then_nth
            and a[self.nth - 1] > b[self.then_nth - 1]
        ):
            yield f"{self}: came at #{a[self.nth - 1]}, after #{b[self.then_nth - 1]}"

    def __str__(self) -> str:
        return f"#{self.nth} {self.first} before #{self.then_nth} {self.then}"


@dataclass(frozen=True)
class Occurs:
    """At least ``times`` (and at most ``at_most``, if given) events match."""

    event: On
    times: int = 1
    at_most: int | None = None

    def violations(self, events: Sequence[JSON], ids: Mapping[str, str]) -> Iterator[str]:
        n = len(positions(self.event, events, ids))
        if n < self.times or (self.at_most is not None and n > self.at_most):
            yield f"{self}: {n} found"

    def __str__(self) -> str:
        bound = f"{self.times}..{self.at_most}" if self.at_most is not None else f">= {self.times}"
        return f"{bound} x {self.event}"


def Never(event: On) -> Occurs:
    """No event matches."""
    return Occurs(event, 0, 0)


@dataclass(frozen=True)
class InOrder:
    """From the ``nth`` event ``steps[0]`` matches, each later step matches an event after
    the one the step before it found: the order of one run (its echo, busy, assistant
    message, parts, idle) told from an earlier run of the same session."""

    steps: tuple[On, ...]
    nth: int = 1

    def violations(self, events: Sequence[JSON], ids: Mapping[str, str]) -> Iterator[str]:
        first = positions(self.steps[0], events, ids)
        if len(first) < self.nth:
            yield f"{self}: only {len(first)} '{self.steps[0]}' event(s)"
            return
        at = first[self.nth - 1]
        for step in self.steps[1:]:
            later = [i for i in positions(step, events, ids) if i > at]
            if not later:
                yield f"{self}: no '{step}' after #{at}"
                return
            at = later[0]

    def __str__(self) -> str:
        return f"from #{self.nth} " + " then ".join(str(step) for step in self.steps)


@dataclass(frozen=True)
class CreatedFirst:
    """``session.created`` is the first event that mentions the session ``session``."""

    session: str

    def violations(self, events: Sequence[JSON], ids: Mapping[str, str]) -> Iterator[str]:
        sid = ids.get(self.session)
        if sid is None:
            yield f"{self}: no such session"
            return
        for index, event in enumerate(events):
            if sid in event_sessions(event):
                if event.get("type") != "session.created":
                    yield f"{self}: first event about it is #{index} {event.get('type')}"
                return
        yield f"{self}: no event about it"

    def __str__(self) -> str:
        return f"session.created[{self.session}] is its first event"


@dataclass(frozen=True)
class PartsAfterMessage:
    """Every ``message.part.updated`` comes after a ``message.updated`` of its message."""

    def violations(self, events: Sequence[JSON], ids: Mapping[str, str]) -> Iterator[str]:
        announced: set[Any] = set()
        for index, event in enumerate(events):
            props = event.get("properties", {})
            if event.get("type") == "message.updated":
                announced.add(lookup(props, "info.id"))
            elif event.get("type") in ("message.part.updated", "message.part.delta"):
                message = lookup(props, "part.messageID")
                if message is ABSENT:
                    message = lookup(props, "messageID")
                if message not in announced:
                    yield f"{self}: #{index} {event.get('type')} of an unannounced message"
                    return

    def __str__(self) -> str:
        return "every part event follows a message.updated of its message"


Constraint: TypeAlias = Before | Occurs | InOrder | CreatedFirst | PartsAfterMessage


def check(
    constraints: Sequence[Constraint], events: Sequence[JSON], ids: Mapping[str, str]
) -> list[str]:
    """Every violation of ``constraints`` in ``events`` (aliases resolved by ``ids``)."""
    return [v for c in constraints for v in c.violations(events, ids)]
