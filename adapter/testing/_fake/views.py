"""The fake seen in domain terms: a tool's status, a hanging run, a tree, the open requests.

Why a module: a host's contract test waits for things a user of OpenCode names ("the
``bash`` call is running", "the child hangs", "the permission is asked"), not for wire
shapes. Without these, every test writes its own predicate over raw events
(``e["properties"]["part"]["state"]["status"]``) or over the fake's private state.
:class:`FakeViews` answers them from the state and the event bus; the facade
(:class:`~.server.FakeOpenCodeServer`) exposes each as one thin method.
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Iterator
from typing import Literal

from .event_bus import EventBus
from .session_data import FakeSession
from .state import FakeState
from .wire import JSON

TOOL_STATUSES = ("pending", "running", "completed", "error")
"""A tool part's ``state.status`` values, as on the wire."""


class FakeViews:
    """Waits and read-only views over the fake's state (copies: changing them changes nothing)."""

    def __init__(self, state: FakeState, bus: EventBus) -> None:
        self._state = state
        self._bus = bus

    async def wait_for_tool(
        self, name: str, status: str, session_id: str | None, since: int, timeout: float
    ) -> JSON:
        """The first tool part of ``name`` that reached ``status`` (see the facade)."""
        if status not in TOOL_STATUSES:
            raise ValueError(f"status must be one of {', '.join(TOOL_STATUSES)}: {status!r}")

        def is_wanted(part: object) -> bool:
            return (
                isinstance(part, dict)
                and part.get("type") == "tool"
                and part.get("tool") == name
                and (session_id is None or part.get("sessionID") == session_id)
                and isinstance(part.get("state"), dict)
                and part["state"].get("status") == status
            )

        if since <= 0 and self._bus.seq > len(self._bus.events):
            # Older events fell out of the kept history: a part stored in that state
            # still counts as reached.
            for part in self._stored_parts():
                if is_wanted(part):
                    return copy.deepcopy(part)
        try:
            event = await self._bus.wait_for_event(
                "message.part.updated",
                lambda event: is_wanted(event["properties"].get("part")),
                timeout=timeout,
                since=since,
            )
        except TimeoutError:
            where = "" if session_id is None else f" in {session_id}"
            raise TimeoutError(
                f"no {name!r} tool part{where} reached {status!r} within {timeout}s"
            ) from None
        return copy.deepcopy(event["properties"]["part"])

    def _stored_parts(self) -> Iterator[JSON]:
        for session in self._state.sessions.values():
            for message in session.messages:
                yield from message.parts

    async def wait_hanging(self, session_id: str, timeout: float) -> None:
        """Return once the run of ``session_id`` waits for nothing but an abort."""
        session = self._state.find(session_id)
        if session is None:
            raise KeyError(f"unknown session {session_id!r}")
        try:
            await self._bus.wait_until(lambda: _parked(session), timeout)
        except TimeoutError:
            raise TimeoutError(f"session {session_id} did not hang within {timeout}s") from None

    def tree(self, root_id: str) -> list[str]:
        """``root_id`` and its descendants' ids, breadth-first, children in creation order."""
        sessions = self._state.sessions
        order = [self._state.session(root_id).id]
        queue = deque(order)
        while queue:
            for child_id in sessions[queue.popleft()].children:
                if child_id in sessions:
                    order.append(child_id)
                    queue.append(child_id)
        return order

    def pending(
        self, kind: Literal["permission", "question"], session_id: str | None
    ) -> list[JSON]:
        """The open requests of ``kind`` as ``GET /permission`` / ``GET /question`` list
        them, every directory's, oldest first; of ``session_id`` only if given."""
        return [
            copy.deepcopy(request.payload)
            for request in self._state.requests_pending.values()
            if request.kind == kind and session_id in (None, request.session_id)
        ]


def _parked(session: FakeSession) -> bool:
    run = session._run
    return run is not None and run.parked
