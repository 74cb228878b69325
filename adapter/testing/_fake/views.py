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
from collections.abc import Callable, Iterator
from typing import Literal

from .event_bus import EventBus
from .session_data import FakeSession
from .state import FakeState
from .wire import JSON

TOOL_STATUSES = ("pending", "running", "completed", "error")
"""A tool part's ``state.status`` values, as on the wire."""


class FakeViews:
    """Waits and read-only views over the fake's state (copies: changing them changes nothing)."""

    def __init__(self, state: FakeState, bus: EventBus, report: Callable[[], str]) -> None:
        self._state = state
        self._bus = bus
        self._report = report
        """The fake's state as a failed wait shows it (:func:`.failure_report.render_state`)."""

    def timed_out(self, what: str, timeout: float) -> TimeoutError:
        """The error of a wait for ``what`` that ended after ``timeout`` seconds."""
        return TimeoutError(f"{what} within {timeout}s\n{self._report()}")

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
            raise self.timed_out(
                f"no {name!r} tool part{where} reached {status!r}", timeout
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
            raise self.timed_out(f"session {session_id} did not hang", timeout) from None

    async def wait_for_tree(
        self, root_id: str | None, sessions: int, hanging: bool, timeout: float
    ) -> list[str]:
        """The tree of ``root_id`` (any root's, oldest first, if ``None``) once it holds
        ``sessions`` sessions, its deepest hanging if ``hanging`` (see the facade)."""
        if sessions < 1:
            raise ValueError(f"a tree holds at least 1 session, not {sessions}")
        if root_id is not None:
            self._state.session(root_id)
        found: list[str] = []

        def shaped() -> bool:
            roots = (
                [root_id]
                if root_id is not None
                else [s.id for s in self._state.sessions.values() if s.parent_id is None]
            )
            for root in roots:
                if root not in self._state.sessions:
                    continue
                tree = self.tree(root)
                if len(tree) == sessions and (
                    not hanging or _parked(self._state.sessions[tree[-1]])
                ):
                    found[:] = tree
                    return True
            return False

        try:
            await self._bus.wait_until(shaped, timeout)
        except TimeoutError:
            under = "" if root_id is None else f" under {root_id}"
            deepest = " whose deepest session hangs" if hanging else ""
            raise self.timed_out(
                f"no tree of {sessions} sessions{under}{deepest}", timeout
            ) from None
        return found

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
