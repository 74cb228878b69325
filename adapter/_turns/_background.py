"""Background subagents: the work a turn still owes after its root went idle.

Why it exists: with OpenCode's background subagents
(``OPENCODE_EXPERIMENTAL_BACKGROUND_SUBAGENTS=true``, a ``task`` call with
``background: true``), the root's ``task`` call completes at once, the root answers
and goes idle while the child works. Measured on 1.18.34: when the child ends on its
own (completed or failed), OpenCode writes a synthetic user message
``<task id="ses_…" state="completed|error">…`` into the parent and runs the parent
again on it; a child that was aborted gets no such message and nothing runs again.
Ending the turn at the root's first idle lost that second run's output and hid work
still going on, so a turn stays open (``TurnPhase.BACKGROUND``) until every
background child it started has ended and every result it was owed has been answered.

One record per turn, fed by the translator (the ``task`` part that started a child,
the child's abort, its idle, the parent's synthetic message) and read by
:mod:`adapter._turns._running` when it settles. It holds ids only.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from .._client._responses import Part

__all__ = ["BackgroundTasks", "delivered_result", "started_child"]

#: The synthetic message OpenCode writes into the parent when a background child ends.
_RESULT: Final = re.compile(r'\A<task id="(ses_[A-Za-z0-9]{1,64})" state="([a-z_]{1,20})">')
#: A turn remembers at most this many background children (a hostile stream must not
#: grow it without bound; past it, the oldest finished ones are forgotten first).
MAX_BACKGROUND: Final = 256


def started_child(part: Part) -> str | None:
    """The child session a finished background ``task`` call started, else ``None``."""
    state = part.state
    if part.tool != "task" or state is None or state.status != "completed":
        return None
    metadata: Mapping[str, Any] | None = state.metadata
    if not isinstance(metadata, Mapping) or metadata.get("background") is not True:
        return None
    child = metadata.get("sessionId")
    return child if isinstance(child, str) and child.startswith("ses_") else None


def delivered_result(part: Part) -> tuple[str, str] | None:
    """``(child session, state)`` of the synthetic message that hands a background
    child's result to its parent, else ``None``."""
    if part.type != "text" or part.raw.get("synthetic") is not True or part.text is None:
        return None
    match = _RESULT.match(part.text)
    return (match.group(1), match.group(2)) if match is not None else None


@dataclass(slots=True)
class BackgroundTasks:
    """The background children of one turn, by where they are."""

    #: Working: started by a ``task`` call, not ended yet (child -> its parent).
    running: dict[str, str] = field(default_factory=dict)
    #: Ended on their own: the parent is owed the synthetic result message and a run
    #: on it (child -> when it ended, ``time.monotonic()``).
    due: dict[str, float] = field(default_factory=dict)
    #: Children whose abort OpenCode announced (``session.error`` MessageAbortedError):
    #: their idle owes nothing.
    aborted: set[str] = field(default_factory=set)
    #: Every child this turn started in the background (the order they started).
    started: dict[str, str] = field(default_factory=dict)

    @property
    def outstanding(self) -> bool:
        """Whether the turn still owes background work: a child runs, or a result is due."""
        return bool(self.running or self.due)

    def start(self, child: str, parent: str) -> bool:
        """A ``task`` call started ``child`` in the background; ``False`` if known."""
        if child in self.started:
            return False
        if len(self.started) >= MAX_BACKGROUND:
            for old in list(self.started):
                if old not in self.running and old not in self.due:
                    del self.started[old]
                    self.aborted.discard(old)
                    break
            else:
                return False
        self.started[child] = parent
        self.running[child] = parent
        return True

    def abort_seen(self, child: str) -> None:
        if child in self.running:
            self.aborted.add(child)

    def ended(self, child: str) -> bool:
        """``child`` went idle: it owes its parent a result unless it was aborted.
        ``True`` when this changed what the turn waits for."""
        if self.running.pop(child, None) is None:
            return False
        if child in self.aborted:
            self.aborted.discard(child)
        else:
            self.due[child] = time.monotonic()
        return True

    def stopped(self, children: set[str] | frozenset[str]) -> bool:
        """The adapter stopped ``children`` (``stop_subagent``): nothing is owed for them."""
        changed = False
        for child in children:
            changed |= self.running.pop(child, None) is not None
            changed |= self.due.pop(child, None) is not None
        return changed

    def delivered(self, child: str) -> bool:
        """The parent received ``child``'s result; ``True`` if it was awaited."""
        self.running.pop(child, None)  # its idle may come after (or be lost)
        return self.due.pop(child, None) is not None

    def overdue(self, now: float, after: float) -> list[str]:
        """Results due for longer than ``after`` seconds (the server never ran the parent)."""
        return [child for child, since in self.due.items() if now - since > after]
