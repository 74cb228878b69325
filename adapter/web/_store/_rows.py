"""A record as a table row and back: the one place that reads what a database held.

Both stores keep a record in the columns of :data:`COLUMNS` (``_schema``), the
cursor and the permission rules as JSON text. A row is read back through
:class:`~adapter.web._store._record.ThreadRecord`'s own checks, so a row that was
hand-edited (bad JSON, a wrong type, an id outside the grammar, a URL with a
password) is refused as :class:`CorruptRecordError` naming the thread and the
field, never returned half-valid and never raised as anything else.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import msgspec

from adapter import InvalidInputError
from adapter._logging import get_logger

from ._errors import CorruptRecordError
from ._record import ThreadRecord
from ._store import Listing

__all__ = ["COLUMNS", "listing_of", "record_of", "row_of"]

_log = get_logger("adapter.web.store")

#: The columns of ``threads``, in the order rows are written and read.
COLUMNS = (
    "thread_id",
    "base_url",
    "resume",
    "title",
    "model",
    "agent",
    "permissions",
    "status",
    "turn_id",
    "created_at",
    "updated_at",
)
_JSON = frozenset({"resume", "permissions"})
_TIMES = frozenset({"created_at", "updated_at"})


def row_of(record: ThreadRecord, *, times_as_text: bool) -> tuple[Any, ...]:
    """``record``'s values in :data:`COLUMNS` order: JSON columns as text, times as
    RFC 3339 text (SQLite) or ``datetime`` (PostgreSQL's ``timestamptz``)."""
    values: list[Any] = []
    for name in COLUMNS:
        value = getattr(record, name)
        if name in _JSON:
            value = None if value is None else msgspec.json.encode(value).decode()
        elif name in _TIMES and times_as_text:
            value = _text_time(value)
        values.append(value)
    return tuple(values)


def record_of(row: Sequence[Any]) -> ThreadRecord:
    """The record a row holds; :class:`CorruptRecordError` when it does not parse."""
    thread_id = row[0] if isinstance(row[0], str) else repr(row[0])
    fields: dict[str, Any] = {}
    for name, value in zip(COLUMNS, row, strict=True):
        if name in _JSON and isinstance(value, str | bytes):
            try:
                value = msgspec.json.decode(value)
            except msgspec.DecodeError as exc:
                raise CorruptRecordError(thread_id, f"{name} is not valid JSON ({exc})") from None
        if value is not None:  # a NULL column is the field's default, or its absence
            fields[name] = value
    try:
        # Not strict: SQLite hands times back as text, which becomes a ``datetime``.
        return msgspec.convert(fields, ThreadRecord, strict=False)
    except (msgspec.ValidationError, InvalidInputError) as exc:
        raise CorruptRecordError(thread_id, str(exc)) from None


def listing_of(rows: Sequence[Sequence[Any]]) -> Listing:
    """Every row's record; a corrupt one is logged and reported, the others load."""
    records: list[ThreadRecord] = []
    corrupt: list[CorruptRecordError] = []
    for row in rows:
        try:
            records.append(record_of(row))
        except CorruptRecordError as exc:
            _log.warning("store.corrupt_record", thread_id=exc.thread_id, reason=exc.reason)
            corrupt.append(exc)
    return Listing(tuple(records), tuple(corrupt))


def _text_time(value: datetime) -> str:
    text: str = msgspec.to_builtins(value)
    return text
