"""String fields read out of decoded JSON objects, by every layer that reads one.

Why its own module: the client reads OpenCode's answers, ``_types`` reads a stored
partial result back, and the web layer reads a request body; each needs "this key holds
a string, or is absent" and each reports a wrong one as its own error (a malformed
answer, an invalid input, a 422 naming the field). One reader keeps the rule, what
counts as absent (a missing key or ``null``), the same for all three, and the caller
says what a wrong value raises.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["optional_string", "required_string"]

#: Builds the exception a wrong value raises, from that value.
WrongValue = Callable[[object], Exception]


def optional_string(data: Mapping[str, Any], key: str, wrong: WrongValue) -> str | None:
    """``data[key]`` when it is a string, ``None`` when it is absent or ``null``; any other
    value raises ``wrong(value)``."""
    value = data.get(key)
    if value is None or isinstance(value, str):
        return value
    raise wrong(value)


def required_string(data: Mapping[str, Any], key: str, wrong: WrongValue) -> str:
    """``data[key]`` when it is a string; anything else, absent included, raises
    ``wrong(value)`` (``value`` is then ``None``)."""
    value = optional_string(data, key, wrong)
    if value is None:
        raise wrong(None)
    return value
