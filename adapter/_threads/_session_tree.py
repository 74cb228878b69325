"""The live session tree of a thread: who is in it and who is still running.

Why it exists: a Stop button's page (and any host) wants to draw the tree it is
about to stop and to watch it go idle, without walking ``/children`` itself.
The adapter already knows the tree from the events (every subagent and every
API-created child it adopted); one ``GET /session/status`` adds what each
session is doing now. Frozen, indexable by session id, root first and then
breadth-first, like :class:`~adapter.StopReport`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .._client._models import SessionStatus

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
        return {
            "session_id": self.session_id,
            "parent_id": self.parent_id,
            "depth": self.depth,
            "status": self.status,
            "title": self.title,
            "turn_id": self.turn_id,
        }


@dataclass(frozen=True, slots=True)
class SessionTree:
    thread_id: str
    root_id: str
    sessions: tuple[TreeNode, ...]
    _index: dict[str, TreeNode] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._index.update({n.session_id: n for n in self.sessions})

    @property
    def busy(self) -> tuple[str, ...]:
        """The sessions still running (``busy`` or ``retry``)."""
        return tuple(n.session_id for n in self.sessions if n.status != "idle")

    def __getitem__(self, session_id: str) -> TreeNode:
        return self._index[session_id]

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._index

    def __iter__(self) -> Iterator[TreeNode]:
        return iter(self.sessions)

    def __len__(self) -> int:
        return len(self.sessions)

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
