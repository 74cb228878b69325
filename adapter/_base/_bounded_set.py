"""A set of ids that forgets its oldest members past a capacity.

Why its own module: the caches of ids the adapter keeps for the life of a process
(sessions known not to be its own, requests seen answered) must stay bounded in memory
whatever a server sends; this is the one shape they share.
"""

from __future__ import annotations

__all__ = ["BoundedSet"]


class BoundedSet:
    """A set that forgets its oldest members past ``capacity`` (caches of ids)."""

    def __init__(self, capacity: int = 4096) -> None:
        self._capacity = capacity
        self._items: dict[str, None] = {}

    def add(self, item: str) -> None:
        self._items[item] = None
        if len(self._items) > self._capacity:
            self._items.pop(next(iter(self._items)))

    def __contains__(self, item: object) -> bool:
        return item in self._items

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        self._items.clear()
