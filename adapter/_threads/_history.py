"""A thread's history as the host reads and rewinds it: its messages, a rollback, its tree.

Why its own module: these read the server's stored state of one thread and change
nothing the adapter holds but the server's revert marker, so they need no other concept;
the facade (:mod:`adapter._adapter`) keeps only their checks of the caller's input.
OpenCode keeps reverted messages stored (marked by the session's ``revert``) until the
next prompt removes them, so every read here cuts them (:func:`unreverted`).
"""

from __future__ import annotations

from .._exceptions import InvalidInputError
from .._types._records import ThreadHistory
from ._session_tree import SessionTree, build_tree
from ._thread_state import ThreadState
from ._turn_boundaries import turn_starts, unreverted

__all__ = ["live_tree", "read_history", "roll_back"]


async def read_history(thread: ThreadState) -> ThreadHistory:
    """The thread's messages, without those a rollback reverted."""
    session = await thread.client.get_session(thread.session_id)
    messages = await thread.client.messages(thread.session_id)
    return ThreadHistory(
        thread_id=thread.thread_id,
        session_id=thread.session_id,
        messages=unreverted(messages, session.raw.get("revert")),
    )


async def roll_back(thread: ThreadState, num_turns: int) -> ThreadHistory:
    """Revert the last ``num_turns`` turns (all of them if there are fewer); the history
    after it. Refused while a turn runs or a stop is under way."""
    if thread.turn is not None or thread.interrupts.stop is not None:
        raise InvalidInputError("cannot roll back while a turn is running")
    messages = (await read_history(thread)).messages
    starts = turn_starts(messages, thread.ledger.user_turns())
    if starts:
        target = starts[max(0, len(starts) - num_turns)]
        await thread.client.revert(thread.session_id, target.info.id)
    return await read_history(thread)


async def live_tree(thread: ThreadState) -> SessionTree:
    """The thread's tree as adopted so far, each session's status read from the server now."""
    statuses = await thread.client.status()
    root = thread.session_id
    titles = dict(thread.tree.titles)
    if thread.title:
        titles.setdefault(root, thread.title)
    return build_tree(
        thread.thread_id,
        root,
        {root: None, **thread.tree.parents},
        statuses,
        titles=titles,
        born=thread.tree.sessions,
    )
