"""JSON-ready copies of the adapter's records, for hosts that send them over a wire.

Why its own module: events, stop reports, partial results and session records
all end up as JSON somewhere (a web page, a log line, a queue), and each one
hand-rolling its conversion would drift. :func:`jsonable` is the one rule:
records with their own ``to_dict`` use it, other dataclasses become objects of
their public fields, mappings objects, sequences arrays, exceptions their
message, and anything else its ``str``. The result always passes ``json.dumps``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

__all__ = ["field_values", "jsonable"]


def field_values(record: Any) -> dict[str, Any]:
    """A dataclass record's fields by name, in their order, the values as they are (the
    ``to_dict`` of a record whose fields are already JSON data)."""
    return {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON data (dicts, lists, strings, numbers, booleans, ``None``)."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict) and not isinstance(value, type):
        return to_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: jsonable(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if not f.name.startswith("_")
        }
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if isinstance(value, BaseException):
        return str(value)
    return str(value)
