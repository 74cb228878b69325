"""What a test server has only once it is started (its port, its process...).

Why its own module: the scripted model server and the real OpenCode server both
refuse, in the same words, to report what they do not have yet.
"""

from __future__ import annotations

from typing import TypeVar

__all__ = ["started"]

T = TypeVar("T")


def started(value: T | None, server: object) -> T:
    """``value``, or ``RuntimeError`` when ``server`` has not set it yet (not started)."""
    if value is None:
        raise RuntimeError(f"{type(server).__name__} is not started")
    return value
