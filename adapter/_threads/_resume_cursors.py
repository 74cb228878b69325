"""Resume cursors, and resuming a session into another directory (a fork).

A cursor is ``{"schema": 1, "session_id": "ses_…", "directory": "/abs/path" | None}``:
the session and the directory its thread ran in (normalised; ``None``: the server's
own). The schema stays 1: ``directory`` is an optional addition, so a cursor written
before it (no ``directory``) still resumes, and an older adapter reading a new cursor
ignores the key instead of dropping the cursor as a wrong version.

Resuming into a directory other than the cursor's forks the session: the thread goes
on in a copy that keeps the history, in the new directory, and the original is left
as it was. Two requests do it, because measured on OpenCode 1.18.34
``POST /session/{id}/fork`` puts the fork in the *original's* directory whatever
directory the request names (its runs would use the old directory and its events would
reach the old directory's stream only); ``move-session`` then moves the fork.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._base._ids import is_session_id, observe_message_id
from .._exceptions import (
    InvalidInputError,
    NotFoundError,
    OpenCodeError,
    ProtocolError,
    RequestError,
)
from .._server._directories import normalise_directory
from ._fork_at_turn import copy_permission_rules, discard_fork

if TYPE_CHECKING:
    from .._client import OpenCodeClient
    from .._client._responses import Session

__all__ = [
    "Cursor",
    "Resumed",
    "cursor_of",
    "fork_into",
    "observe_newest_message",
    "parse_cursor",
    "resume_session",
]

SCHEMA = 1


@dataclass(frozen=True, slots=True)
class Cursor:
    session_id: str
    #: Where the session's thread ran (normalised); ``None`` when the cursor does not say.
    directory: str | None

    def forks_into(self, directory: str | None) -> bool:
        """Whether resuming in ``directory`` forks: both are known and differ. A cursor
        without a directory, and a start in the server's own directory, never fork."""
        return self.directory is not None and directory is not None and directory != self.directory


def cursor_of(session_id: str, directory: str | None) -> dict[str, Any]:
    """The cursor :attr:`SessionInfo.resume` carries."""
    return {"schema": SCHEMA, "session_id": session_id, "directory": directory}


def parse_cursor(resume: object) -> Cursor | None:
    """The cursor's session and directory; ``None`` for a malformed or wrong-version
    cursor (a bad ``directory`` included), which the adapter ignores."""
    if not isinstance(resume, Mapping) or resume.get("schema") != SCHEMA:
        return None
    session_id = resume.get("session_id")
    if not isinstance(session_id, str) or not is_session_id(session_id):
        return None
    directory = resume.get("directory")
    if directory is None:
        return Cursor(session_id, None)
    try:
        # Normalised again: spellings of one directory (a symlink, a trailing "/") are one.
        return Cursor(session_id, normalise_directory(directory))
    except InvalidInputError:
        return None


async def fork_into(
    client: OpenCodeClient, original: Session, directory: str, *, teardown: float
) -> Session:
    """Fork ``original`` (history kept) and move the fork to ``directory`` (unless the
    server made it there: 1.14.48 does; 1.15.13 to 1.18.34 fork into the original's).

    The original's permission rules go with it (measured: a fork carries none).
    Raises the fork's error as it is (a :class:`NotFoundError` when the original is
    gone); if anything fails after the fork exists, the fork is deleted (bounded by
    ``teardown`` seconds) and the error raised, so a failed resume leaves nothing behind.
    """
    fork = await client.fork_session(original.id)
    try:
        if _directory_of(fork) != directory:  # measured on 1.14.48: already there
            try:
                await client.move_session(fork.id, directory)
            except (NotFoundError, ProtocolError) as exc:
                # Not "the session is gone": a server without the route answers 404,
                # or (measured on 1.15.13) 200 with its web page.
                raise _cannot_move(fork.id, exc) from exc
            if _directory_of(await client.get_session(fork.id)) != directory:
                raise _cannot_move(fork.id, None)  # accepted, but the fork did not move
        await copy_permission_rules(client, original, fork.id)
    except BaseException:
        await discard_fork(client, fork.id, teardown=teardown)
        raise
    return fork


def _directory_of(session: Session) -> str | None:
    """The session's directory as the cursor holds it (normalised), if usable."""
    if session.directory is None:
        return None
    try:
        return normalise_directory(session.directory)
    except InvalidInputError:
        return None


def _cannot_move(fork_id: str, cause: OpenCodeError | None) -> RequestError:
    return RequestError(
        "move_session",
        "this server cannot move a session to another directory (measured: the "
        "move-session route is in OpenCode 1.17.19 and later, not in 1.15.13); resume "
        "the cursor in its own directory",
        status=cause.status if isinstance(cause, RequestError) else None,
        server_message=cause.server_message if isinstance(cause, RequestError) else None,
        session_id=fork_id,
    )


async def observe_newest_message(client: OpenCodeClient, session_id: str) -> str | None:
    """A resumed session's messages were minted by the server's clock before this
    adapter saw any of them: its newest id is noted, so the first prompt sorts after it
    (OpenCode up to 1.18.3 never answers a prompt that sorts below; see ``_ids``), and
    returned: it and the messages before it are the thread's history. Best effort:
    without it, a server clock ahead of ours could leave that prompt unanswered, as
    before."""
    newest: str | None = None
    with contextlib.suppress(OpenCodeError):
        for message in await client.messages(session_id, limit=1):
            observe_message_id(message.info.id)
            newest = message.info.id
    return newest


@dataclass(frozen=True, slots=True)
class Resumed:
    """What resuming a cursor found: the session the thread goes on in (``None``: start a
    fresh one), a warning for the host when the cursor's session was gone, and the fork
    it goes on in when the cursor's directory differs."""

    session_id: str | None
    warning: str | None = None
    forked: str | None = None
    #: The session's newest message when it was resumed (``None``: none, or unread).
    newest_message_id: str | None = None


async def resume_session(
    client: OpenCodeClient,
    cursor: Cursor,
    directory: str | None,
    rules: Sequence[Mapping[str, str]] | None,
    *,
    teardown: float,
) -> Resumed:
    """The cursor's session, forked into ``directory`` when it ran elsewhere, with the
    thread's permission ``rules`` (native) re-applied; a gone session is a warning."""
    try:
        session = await client.get_session(cursor.session_id)
        forked: str | None = None
        if directory is not None and cursor.forks_into(directory):
            session = await fork_into(client, session, directory, teardown=teardown)
            forked = session.id
        if rules is not None:
            # PATCH appends; a preset starts with a catch-all, so it decides alone.
            await client.add_permission_rules(session.id, rules)
    except NotFoundError:
        warning = f"session {cursor.session_id} no longer exists; started a fresh session"
        return Resumed(None, warning=warning)
    newest = await observe_newest_message(client, session.id)
    return Resumed(session.id, forked=forked, newest_message_id=newest)
