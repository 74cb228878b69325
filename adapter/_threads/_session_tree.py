"""The live session tree of a thread: who is in it and who is still running.

Why it exists: a Stop button's page (and any host) wants to draw the tree it is
about to stop and to watch it go idle, without walking ``/children`` itself.
The adapter already knows the tree from the events (every subagent and every
API-created child it adopted); one ``GET /session/status`` adds what each
session is doing now. Frozen, indexable by session id, root first and then
breadth-first, like :class:`~adapter.StopReport`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .._base._jsonable import field_values
from .._client._responses import SessionStatus
from .._types._by_session import BySession

__all__ = ["SessionTree", "TreeNode", "build_tree"]

NodeStatus = Literal["busy", "retry", "idle"]


@dataclass(frozen=True, slots=True)
class TreeNode:
    """One session of the tree: ``status`` is the server's (``busy``, ``retry``,
    ``idle``); ``turn_id`` the thread's turn it was born in (``None`` for the root
    or a session adopted between turns)."""

    session_id: str
    parent_id: str | None
    depth: int
    status: NodeStatus
    title: str | None = None
    turn_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return field_values(self)


@dataclass(frozen=True, slots=True)
class SessionTree(BySession[TreeNode]):
    thread_id: str
    root_id: str
    sessions: tuple[TreeNode, ...]
    _index: dict[str, TreeNode] = field(default_factory=dict, repr=False, compare=False)

    @property
    def busy(self) -> tuple[str, ...]:
        """The sessions still running (``busy`` or ``retry``)."""
        return tuple(n.session_id for n in self.sessions if n.status != "idle")

    def to_dict(self) -> dict[str, Any]:
        return {
            "thread_id": self.thread_id,
            "root_id": self.root_id,
            "sessions": [n.to_dict() for n in self.sessions],
        }


def build_tree(
    thread_id: str,
    root_id: str,
    parents: Mapping[str, str | None],
    statuses: Mapping[str, SessionStatus],
    *,
    titles: Mapping[str, str] | None = None,
    born: Mapping[str, str | None] | None = None,
) -> SessionTree:
    """The tree rooted at ``root_id`` from a child -> parent map, breadth-first.

    A session whose parent is not in the map (it cannot happen for adopted
    sessions, but the map is the caller's) is listed after the tree at depth 1.
    """
    titles = titles or {}
    born = born or {}
    kids: dict[str, list[str]] = {}
    for sid, parent in parents.items():
        if parent is not None and sid != root_id:
            kids.setdefault(parent, []).append(sid)

    def node(sid: str, parent: str | None, depth: int) -> TreeNode:
        status = statuses.get(sid)
        return TreeNode(
            session_id=sid,
            parent_id=parent,
            depth=depth,
            status="idle" if status is None else _status(status),
            title=titles.get(sid),
            turn_id=born.get(sid),
        )

    nodes = [node(root_id, None, 0)]
    seen = {root_id}
    level = [root_id]
    depth = 0
    while level:
        depth += 1
        following: list[str] = []
        for parent in level:
            for sid in kids.get(parent, ()):
                if sid not in seen:
                    seen.add(sid)
                    nodes.append(node(sid, parent, depth))
                    following.append(sid)
        level = following
    for sid, parent in parents.items():
        if sid not in seen:
            seen.add(sid)
            nodes.append(node(sid, parent, 1))
    return SessionTree(thread_id=thread_id, root_id=root_id, sessions=tuple(nodes))


def _status(status: SessionStatus) -> NodeStatus:
    if status.type == "retry":
        return "retry"
    return "busy" if status.is_busy else "idle"
