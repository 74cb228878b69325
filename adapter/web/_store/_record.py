"""``ThreadRecord``: what the store keeps of one thread, checked like any input.

Why its own module: a record comes back from a database a person may have edited,
or a newer version of this package written, so it is untrusted on the way in as a
request body is. One frozen value holds exactly what a worker needs to serve a
thread it did not start (resume it on the same OpenCode server, with the same
model, agent and permission mode), and one rule set checks it whichever way it
comes: built by the app or read from a row. The rules:

* ``thread_id`` follows the web API's grammar (``adapter.web._body.thread_id_problem``):
  an id the store hands back goes into the same paths and log lines.
* ``base_url`` is where the OpenCode server is, never a credential: the client's
  own check (no user or password, no query or fragment) refuses it otherwise. The
  password reaches the server as it always does, from the host, never the store.
* ``resume`` is the adapter's cursor (``SessionInfo.resume``: schema 1, a session id).
* ``permissions`` is what ``SessionInfo.permissions`` shows: a preset name or rules.
* Times are timezone-aware; every string is UTF-8 encodable (no lone surrogate).
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from typing import Any, get_args

import msgspec

from adapter import InvalidInputError, PermissionRule, ThreadStatus
from adapter._base._ids import is_session_id
from adapter._base._unicode import has_surrogates
from adapter._client._base_url import checked_base_url
from adapter._types._permissions import permission_rules

from .._thread_ids import thread_id_problem

__all__ = ["ThreadRecord"]


@functools.lru_cache(maxsize=64)
def _check_base_url(base_url: str) -> None:
    """``checked_base_url``, once per URL: every record of a store names the same few
    servers, and parsing the URL was 61 % of listing 400 records (benchmarks/web_store.py).
    A refused URL raises each time (exceptions are not cached)."""
    checked_base_url(base_url)


_STATUSES: frozenset[str] = frozenset(get_args(ThreadStatus))


class ThreadRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One thread as the store keeps it. Build one with :meth:`new`, change one with
    :meth:`changed` (a copy; ``updated_at`` is now)."""

    thread_id: str
    #: The OpenCode server's base URL (``http://127.0.0.1:4096``), without credentials.
    base_url: str
    #: The adapter's resume cursor (``SessionInfo.resume``).
    resume: dict[str, Any]
    title: str | None = None
    #: The thread's model, ``provider/model``.
    model: str | None = None
    #: The agent of its turns and commands that name none.
    agent: str | None = None
    #: A preset name (``"ask"``, ``"auto-edit"``, ``"full-access"``), the raw rules, or
    #: ``None`` (the server's configuration).
    permissions: str | tuple[PermissionRule, ...] | None = None
    #: The last status seen (``SessionInfo.status``) and the last turn id.
    status: ThreadStatus | None = None
    turn_id: str | None = None
    created_at: datetime
    updated_at: datetime

    def __post_init__(self) -> None:
        problem = thread_id_problem(self.thread_id)
        if problem is not None:
            raise InvalidInputError(problem)
        _check_base_url(self.base_url)  # its message never repeats the URL
        _check_cursor(self.resume)
        for name in ("title", "model", "agent", "turn_id"):
            value = getattr(self, name)
            if value is not None and (not value or has_surrogates(value)):
                raise InvalidInputError(
                    f"{name} must be a non-empty string without lone surrogates"
                )
        if self.status is not None and self.status not in _STATUSES:
            raise InvalidInputError(f"status must be one of {sorted(_STATUSES)}")
        if self.permissions is not None:
            permission_rules(self.permissions)  # a preset's name, or a non-empty rule list
        for name in ("created_at", "updated_at"):
            if getattr(self, name).tzinfo is None:
                raise InvalidInputError(f"{name} must be timezone-aware")

    @classmethod
    def new(
        cls, thread_id: str, base_url: str, resume: dict[str, Any], **fields: Any
    ) -> ThreadRecord:
        """A record created now (``created_at`` = ``updated_at``), ``fields`` as named."""
        now = datetime.now(UTC)
        return cls(
            thread_id=thread_id,
            base_url=base_url,
            resume=resume,
            **{"created_at": now, "updated_at": now, **fields},
        )

    def changed(self, **fields: Any) -> ThreadRecord:
        """A copy with ``fields`` changed and ``updated_at`` now (checked again)."""
        record = msgspec.structs.replace(self, **{"updated_at": datetime.now(UTC), **fields})
        record.__post_init__()  # replace() builds the copy without running the checks
        return record

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy (lists, times as RFC 3339 strings)."""
        result: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(self))
        return result


def _check_cursor(resume: object) -> None:
    if (
        not isinstance(resume, dict)
        or resume.get("schema") != 1
        or not isinstance(resume.get("session_id"), str)
        or not is_session_id(resume["session_id"])
    ):
        raise InvalidInputError(
            'resume must be a cursor {"schema": 1, "session_id": "ses_..."} as the adapter gives it'
        )
    directory = resume.get("directory")
    if directory is not None and (not isinstance(directory, str) or has_surrogates(directory)):
        raise InvalidInputError("resume.directory must be a string or null")
