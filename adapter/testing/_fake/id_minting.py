"""Ids and slugs minted the way OpenCode mints them, from one seeded generator.

Why a module: every part of the fake mints ids (sessions, messages, parts, events,
requests), and a seeded fake must be deterministic, so they all draw from one
random generator in one order. OpenCode's ids sort by creation time (session ids
count down, so the newest lists first); ``clock_skew_ms`` shifts that clock as a
remote server's can run ahead or behind.
"""

from __future__ import annotations

import random

from .wire import now_ms

_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_MASK48 = (1 << 48) - 1
_SLUG_ADJECTIVES = (
    "kind", "clever", "quick", "calm", "crisp", "silent", "misty", "proud", "curious",
    "brave", "gentle", "bright", "swift", "quiet", "eager", "lucky",
)  # fmt: skip
_SLUG_NOUNS = (
    "engine", "canyon", "circuit", "knight", "squid", "panda", "meadow", "eagle", "moon",
    "river", "falcon", "harbor", "forest", "comet", "lantern", "otter",
)  # fmt: skip


class IdMinter:
    """Mints ``<prefix>_<12 hex of the clock><14 base62>`` ids, strictly increasing."""

    __slots__ = ("_last", "clock_skew_ms", "rng")

    def __init__(self, seed: int | None) -> None:
        self.rng = random.Random(seed)
        self.clock_skew_ms = 0
        self._last = 0

    def new(self, prefix: str, *, descending: bool = False) -> str:
        value = max((now_ms() + self.clock_skew_ms) * 0x1000 + 1, self._last + 1)
        self._last = value
        if descending:
            value = ~value
        suffix = "".join(self.rng.choices(_BASE62, k=14))
        return f"{prefix}_{value & _MASK48:012x}{suffix}"

    def slug(self) -> str:
        return f"{self.rng.choice(_SLUG_ADJECTIVES)}-{self.rng.choice(_SLUG_NOUNS)}"
