"""Well-formed text out of OpenCode's UTF-16 strings.

Why its own module: OpenCode is JavaScript. It cuts strings by UTF-16 code units
(a text delta, a truncated tool output, a title), and ``JSON.stringify`` writes a
lone half of a surrogate pair as the escape ``\\ud800``. Python reads that escape
into a ``str`` holding a lone surrogate, a string that no UTF-8 encoder accepts:
``"\\ud800".encode()`` raises. Every face that writes text out (a JSON body, an SSE
frame, an ACP message, a log line, the terminal) would fail on it.

The rules, one place for all of them:

* The adapter keeps what the server sent: a pair cut between two deltas is two
  lone halves until the deltas are joined, and joined they are whole again.
* Text leaves the process well formed: :func:`well_formed` joins the halves of a
  pair that stand side by side into the one character they encode, and replaces
  each half that has no partner with U+FFFD (the replacement character), as a
  UTF-16 decoder does.
* Text going in is not repaired: a caller's string that holds a surrogate cannot
  be encoded for the server, so :func:`surrogate_path` finds it and the caller is
  told which field (an ``InvalidInputError``, a 422, a JSON-RPC error).
* Strings without a surrogate (all but a few) are returned as they are, after
  one linear scan, so the rule costs nothing on the usual path.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "SURROGATE_REFUSAL",
    "has_surrogates",
    "surrogate_path",
    "well_formed",
    "well_formed_data",
]

_SURROGATE = re.compile("[\ud800-\udfff]")

#: How a caller is told that a string of theirs cannot be sent (after the field's name).
SURROGATE_REFUSAL = "holds a UTF-16 surrogate code point: it is not valid Unicode text"


def has_surrogates(text: str) -> bool:
    """Whether ``text`` holds a surrogate code point (paired or lone)."""
    return _SURROGATE.search(text) is not None


def well_formed(text: str) -> str:
    """``text`` with adjacent surrogate halves joined and lone ones as U+FFFD."""
    if _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def well_formed_data(value: Any) -> Any:
    """A JSON-like value (dicts, lists, strings, scalars) with every string, keys
    included, made :func:`well_formed`. Containers are copied only when needed."""
    if isinstance(value, str):
        return well_formed(value)
    if isinstance(value, Mapping):
        return {
            (well_formed(k) if isinstance(k, str) else k): well_formed_data(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [well_formed_data(v) for v in value]
    if isinstance(value, tuple):
        return tuple(well_formed_data(v) for v in value)
    return value


def surrogate_path(value: Any, path: str = "") -> str | None:
    """Where the first string holding a surrogate is in a JSON-like value (keys
    included), as ``parts[0].text``; ``None`` when every string encodes. No
    recursion: a caller's value may be nested deeper than Python's stack."""
    pending: list[tuple[Any, str]] = [(value, path)]
    while pending:
        item, where = pending.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item) is not None:
                return where or "the value"
        elif isinstance(item, Mapping):
            for key, child in reversed(list(item.items())):
                name = f"{where}.{key}" if where else str(key)
                if isinstance(key, str) and _SURROGATE.search(key) is not None:
                    return f"a key of {where}" if where else "a key"
                pending.append((child, name))
        elif isinstance(item, list | tuple):
            pending.extend((child, f"{where}[{i}]") for i, child in reversed(list(enumerate(item))))
    return None
