"""A frozen tuple of sessions, root first, that is also indexed by session id.

Why its own module: the live tree (:class:`~adapter.SessionTree`) and the stop's
report (:class:`~adapter.StopReport`) are both read that way (``tree[session_id]``,
``session_id in report``, iteration in discovery order), and the reading deserves
one definition. A subclass is a frozen dataclass with the fields ``sessions`` and
``_index`` (``field(default_factory=dict, repr=False, compare=False)``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic, Protocol, TypeVar

__all__ = ["BySession"]


class _OfSession(Protocol):
    @property
    def session_id(self) -> str: ...


S = TypeVar("S", bound=_OfSession)


class BySession(Generic[S]):
    """``sessions`` in order; ``obj[session_id]``, ``in``, ``len`` and iteration."""

    __slots__ = ()

    sessions: tuple[S, ...]
    _index: dict[str, S]

    def __post_init__(self) -> None:
        self._index.update({s.session_id: s for s in self.sessions})

    def __getitem__(self, session_id: str) -> S:
        return self._index[session_id]

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._index

    def __iter__(self) -> Iterator[S]:
        return iter(self.sessions)

    def __len__(self) -> int:
        return len(self.sessions)
