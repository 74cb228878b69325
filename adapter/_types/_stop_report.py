"""The stop's report: what happened to each session of a stopped tree.

Why its own module: the report is data that every layer hands around (the
walk builds it, ``TreeStopError`` carries it, the adapter and the CLI read
it), so it lives at the bottom where the exceptions module can import it
without importing the walk. Frozen and indexable by session id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from .._base._jsonable import field_values
from ._by_session import BySession

__all__ = ["Outcome", "SessionStop", "Step", "StopReport"]

Outcome = Literal["aborted", "not_found", "failed"]
Step = Literal["abort", "children", "verify"]


@dataclass(frozen=True, slots=True)
class SessionStop:
    """What happened to one session of the tree.

    ``started`` and ``ended`` are seconds since the walk began (``ended`` is
    ``None`` when the walk ran out of time first). ``failed_step`` says which
    request failed: the session's own ``abort``, the listing of its
    ``children`` (its subtree may be unreached), or the ``verify`` pass.
    """

    session_id: str
    parent_id: str | None
    depth: int
    outcome: Outcome
    error: BaseException | None = None
    failed_step: Step | None = None
    started: float | None = None
    ended: float | None = None
    reaborts: int = 0

    @property
    def duration(self) -> float | None:
        if self.started is None or self.ended is None:
            return None
        return self.ended - self.started

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy (``error`` as its message; times in seconds since the walk began)."""
        return {**field_values(self), "error": None if self.error is None else str(self.error)}


@dataclass(frozen=True, slots=True)
class StopReport(BySession[SessionStop]):
    """The full account of one ``stop_tree`` call."""

    root_id: str
    sessions: tuple[SessionStop, ...]
    max_in_flight: int
    verify_rounds: int
    elapsed: float
    requests: int
    concurrency: int
    still_busy: tuple[str, ...] = ()
    _index: dict[str, SessionStop] = field(default_factory=dict, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy: the sessions in discovery order (root first) and the figures."""
        return {
            "root_id": self.root_id,
            "ok": self.ok,
            "sessions": [s.to_dict() for s in self.sessions],
            "elapsed": self.elapsed,
            "max_in_flight": self.max_in_flight,
            "concurrency": self.concurrency,
            "requests": self.requests,
            "verify_rounds": self.verify_rounds,
            "still_busy": list(self.still_busy),
        }

    @property
    def ok(self) -> bool:
        return not self.still_busy and all(s.outcome != "failed" for s in self.sessions)

    @property
    def failures(self) -> tuple[SessionStop, ...]:
        return tuple(s for s in self.sessions if s.outcome == "failed")

    @property
    def session_ids(self) -> tuple[str, ...]:
        return tuple(s.session_id for s in self.sessions)

    def count(self, outcome: Outcome) -> int:
        return sum(1 for s in self.sessions if s.outcome == outcome)

    def summary(self) -> str:
        rounds = f"{self.verify_rounds} verify round{'s' if self.verify_rounds != 1 else ''}"
        line = (
            f"{len(self.sessions)} sessions: {self.count('aborted')} aborted, "
            f"{self.count('not_found')} already gone, {self.count('failed')} failed; "
            f"max {self.max_in_flight} of {self.concurrency} requests in flight, "
            f"{self.requests} requests, {rounds}, {self.elapsed * 1000:.1f} ms"
        )
        if self.still_busy:
            line += f"; still busy: {', '.join(self.still_busy)}"
        return line

    def tree_lines(self) -> list[str]:
        """The tree, one line per session, children under their parent."""
        kids: dict[str | None, list[SessionStop]] = {}
        for s in self.sessions:
            kids.setdefault(s.parent_id if s.session_id != self.root_id else None, []).append(s)
        lines: list[str] = []

        def describe(s: SessionStop) -> str:
            text = s.outcome.replace("_", " ")
            if s.error is not None:
                text += f" ({s.failed_step}: {s.error})"
            if s.duration is not None:
                text += f"  {s.duration * 1000:.1f} ms"
            if s.reaborts:
                text += f"  re-aborted {s.reaborts}x"
            return f"{s.session_id}  {text}"

        # An explicit stack, not recursion: a hostile server can make the tree deep.
        stack: list[tuple[SessionStop, str, bool, bool]] = [
            (root, "", True, True) for root in reversed(kids.get(None, []))
        ]
        while stack:
            s, prefix, last, top = stack.pop()
            lines.append(
                describe(s) if top else f"{prefix}{'└── ' if last else '├── '}{describe(s)}"
            )
            children = kids.get(s.session_id, [])
            child_prefix = "" if top else prefix + ("    " if last else "│   ")
            for i in range(len(children) - 1, -1, -1):
                stack.append((children[i], child_prefix, i == len(children) - 1, False))
        return lines

    def __str__(self) -> str:
        return "\n".join([*self.tree_lines(), self.summary()])
