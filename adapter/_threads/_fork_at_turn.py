"""Forking a thread: OpenCode's fork of the thread's root, whole or before one turn.

Why its own module: a host offers "branch from here" on a turn of a conversation
(Codex forks a thread, Claude's SDK resumes at a message): the adapter must find where
that turn starts in the stored messages, counted as ``rollback_thread`` counts turns
(:func:`~._turn_boundaries.turn_starts`: steers and server continuations belong to their
turn), and must not bring back what a rollback reverted. The facade then binds the fork
to a new thread the way ``start_session(resume=...)`` binds any session.

``at_turn`` is the index of a turn in the thread's history, oldest first, from 0: the
fork holds the turns before it (``0``: none). A negative index counts from the end, as
in Python (``-1``: every turn but the last). ``None`` forks every turn.

Measured on 1.18.34 (``tests/real/test_fork_thread_real.py``): ``POST
/session/{id}/fork {messageID}`` copies the messages stored *before* ``messageID``; the
fork is a root session (no ``parentID``, so never adopted into the source's tree) in
the source's directory, titled ``"<title> (fork #1)"``, with none of the source's
permission rules (so they are copied here) and none of its ``revert`` mark (so a
rolled-back thread is forked before the mark). A fork while a run is under way is
answered at once and copies what is stored then, the running step's unfinished
assistant message included; the run goes on in the source only.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Container, Mapping
from typing import TYPE_CHECKING

from .._exceptions import InvalidInputError, OpenCodeError
from ._turn_boundaries import turn_starts, unreverted

if TYPE_CHECKING:
    from .._client import OpenCodeClient
    from .._client._responses import Message, Session

__all__ = [
    "check_free",
    "checked_at_turn",
    "copy_permission_rules",
    "discard_fork",
    "fork_session_at",
]


def check_free(thread_id: object, *in_use: Container[str]) -> None:
    """Refuse a ``new_thread_id`` that is not a non-empty string, or is in ``in_use``."""
    if not isinstance(thread_id, str) or not thread_id:
        raise InvalidInputError("new_thread_id must be a non-empty string")
    if any(thread_id in taken for taken in in_use):
        raise InvalidInputError(f"new_thread_id {thread_id!r:.80} is already in use")


def checked_at_turn(at_turn: object) -> int | None:
    """``at_turn`` as given, or an :class:`InvalidInputError` if it is not an int."""
    if at_turn is not None and (isinstance(at_turn, bool) or not isinstance(at_turn, int)):
        raise InvalidInputError(f"at_turn must be an integer or None, got {at_turn!r:.40}")
    return at_turn


def fork_point(
    messages: tuple[Message, ...],
    known_turns: Mapping[str, str],
    at_turn: int | None,
    revert: object,
) -> str | None:
    """The id of the message the fork stops before (``None``: copy everything).

    ``messages`` are the stored ones without the reverted ones; with ``at_turn=None``
    a ``revert`` mark is where the fork stops (a mark inside a message drops that
    whole message: the server forks at message boundaries only)."""
    if at_turn is None:
        if isinstance(revert, Mapping) and isinstance(revert.get("messageID"), str):
            return str(revert["messageID"])
        return None
    starts = turn_starts(messages, known_turns)
    count = len(starts)
    if not -count <= at_turn < count:
        span = f"from {-count} to {count - 1}" if count else "none"
        noun = "turn" if count == 1 else "turns"
        raise InvalidInputError(
            f"at_turn {at_turn} is out of range: the thread has {count} {noun} ({span})"
        )
    return starts[at_turn].info.id


async def fork_session_at(
    client: OpenCodeClient,
    session_id: str,
    known_turns: Mapping[str, str],
    at_turn: int | None,
    *,
    teardown: float,
) -> Session:
    """Fork ``session_id`` before turn ``at_turn`` (see the module; ``known_turns`` is
    the thread's own record of its prompts), its permission rules copied; an
    out-of-range ``at_turn`` is refused before the fork is asked for. If copying the
    rules fails, the fork is deleted and the error raised."""
    session = await client.get_session(session_id)
    revert = session.raw.get("revert")
    messages = unreverted(await client.messages(session_id), revert)
    before = fork_point(messages, known_turns, at_turn, revert)
    fork = await client.fork_session(session_id, before=before)
    try:
        await copy_permission_rules(client, session, fork.id)
    except BaseException:
        await discard_fork(client, fork.id, teardown=teardown)
        raise
    return fork


async def copy_permission_rules(client: OpenCodeClient, original: Session, fork_id: str) -> None:
    """The original's stored rules, appended to the fork's (measured: a fork has none)."""
    rules = original.raw.get("permission")
    if isinstance(rules, list) and rules:
        await client.add_permission_rules(fork_id, [r for r in rules if isinstance(r, Mapping)])


async def discard_fork(client: OpenCodeClient, fork_id: str, *, teardown: float) -> None:
    """Delete a fork no thread will own (best effort, bounded by ``teardown`` seconds)."""
    with contextlib.suppress(OpenCodeError, TimeoutError):
        async with asyncio.timeout(teardown):
            await client.delete_session(fork_id)
