"""What the translator has emitted of one streamed text part, in bounded memory.

Why its own module: a part's text reaches the adapter twice, as deltas
(``message.part.delta``) and as snapshots of the whole text so far
(``message.part.updated``), and the host must get each character once. The
translator used to remember the whole emitted text and rebuild it on every delta:
quadratic time (2,000 deltas of 10 KB blocked the event loop for 6-22 s) and, for
as long as the turn ran, memory as large as the answer. :class:`SeenText` keeps
what the decision needs and no more: how many characters were emitted, the first
and the last :data:`EDGE` of them. A snapshot continues what was emitted when it
starts with the head and holds the tail where the emitted text ends; then only
what follows is new. Each delta costs at most ``2 * EDGE`` characters of work,
whatever its size, and a part costs at most that much memory, whatever its length.

A snapshot that changed the middle of the text but kept both edges would be taken
as a continuation: OpenCode's snapshots are the concatenation of its deltas, so
the check guards against a part id reused for other text, not against every edit.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._base._unicode import well_formed

__all__ = ["EDGE", "SeenText"]

#: Characters kept of each end of a part's emitted text (at most 4 bytes each).
EDGE = 256


@dataclass(slots=True)
class SeenText:
    """How much of one part's text was emitted, and its first and last characters."""

    length: int = 0
    head: str = ""
    tail: str = ""

    def extend(self, delta: str) -> None:
        """Record that ``delta`` was emitted after what was emitted so far."""
        if (
            delta[:1]
            and "\udc00" <= delta[0] <= "\udfff"
            and "\ud800" <= self.tail[-1:] <= "\udbff"
        ):
            # OpenCode cut a surrogate pair between two deltas; its snapshots hold
            # the pair as one character, so count it as one.
            if len(self.head) == self.length:
                self.head = self.head[:-1]
            delta = well_formed(self.tail[-1] + delta[0]) + delta[1:]
            self.tail = self.tail[:-1]
            self.length -= 1
        if len(self.head) < EDGE:
            self.head += delta[: EDGE - len(self.head)]
        self.tail = (self.tail + delta[-EDGE:])[-EDGE:]
        self.length += len(delta)

    def new_in(self, snapshot: str) -> str | None:
        """What a snapshot of the whole text adds to what was emitted: the rest of it
        (``""`` if nothing), or ``None`` when it is not a continuation (it diverged)."""
        seen = self.length
        if len(snapshot) < seen:
            # Shorter than what was emitted (the server may store less): nothing to
            # add; diverged unless it is a prefix, as far as the head tells.
            known = min(len(snapshot), len(self.head))
            return "" if snapshot[:known] == self.head[:known] else None
        if not snapshot.startswith(self.head):
            return None
        if snapshot[seen - len(self.tail) : seen] != self.tail:
            return None
        return snapshot[seen:]
