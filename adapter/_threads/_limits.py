"""The adapter's limits: how many aborts run at once, and how much it keeps in memory.

Why its own module: every concept reads them through the registry, and the facade builds
them from its keyword arguments; the defaults are stated once, here (``docs/adapter.md``
lists them).
"""

from __future__ import annotations

from dataclasses import dataclass

from .._stream._replay_window import DEFAULT_HISTORY_BYTES, DEFAULT_HISTORY_LIMIT

__all__ = ["Limits"]


@dataclass(frozen=True, slots=True)
class Limits:
    stop_concurrency: int = 8
    max_output_bytes: int = 64 * 1024
    max_tree_sessions: int = 10_000
    eager_root_listing: bool = False
    event_history: int = DEFAULT_HISTORY_LIMIT
    event_history_bytes: int = DEFAULT_HISTORY_BYTES
