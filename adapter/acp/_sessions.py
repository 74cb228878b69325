"""``session/list``'s pages: the server's root sessions of a ``cwd`` as ACP ``SessionInfo``.

Why its own module: the cursor a client sends back is hostile input. It is the position
after the last session of the previous page (its update time and id, the order OpenCode
lists in), so a page is stable when sessions are added meanwhile, and a cursor that is
not one this agent gives is ``invalid params``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime

from acp.schema import ListSessionsResponse, SessionInfo

from adapter import Session

from ._extensions import invalid

__all__ = ["PAGE_SIZE", "session_page"]

#: Sessions per ``session/list`` page.
PAGE_SIZE = 50
_CURSOR = re.compile(r"(\d{1,16}):(ses_[A-Za-z0-9]{1,80})")


def _key(session: Session) -> tuple[float, str]:
    # Most recently updated first; on a tie the id decides (OpenCode's ids count down).
    return (-(session.updated or session.created), session.id)


def _iso(ms: float) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


def session_page(sessions: Sequence[Session], cwd: str, cursor: str | None) -> ListSessionsResponse:
    """One page of ``sessions`` after ``cursor`` (``None``: the first page)."""
    ordered = sorted(sessions, key=_key)
    if cursor is not None:
        match = _CURSOR.fullmatch(cursor) if isinstance(cursor, str) else None
        if match is None:
            raise invalid("not a cursor of this agent's session/list", cursor=str(cursor)[:80])
        after = (-float(match.group(1)), match.group(2))
        ordered = [s for s in ordered if _key(s) > after]
    page = ordered[:PAGE_SIZE]
    last = page[-1] if len(ordered) > PAGE_SIZE else None
    return ListSessionsResponse(
        sessions=[
            SessionInfo(
                session_id=s.id,
                cwd=s.directory or cwd,
                title=s.title or None,
                updated_at=_iso(s.updated or s.created),
            )
            for s in page
        ],
        next_cursor=f"{int(-_key(last)[0])}:{last.id}" if last is not None else None,
    )
