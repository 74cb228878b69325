"""The fake's state: its sessions, their statuses, messages and parts, pending requests.

Why a module: what the fake knows must change the way the real server changes it,
with the events the real server emits for each change (a stored part is a
``message.part.updated``, a status a ``session.status``, a changed session a
``session.updated``). :class:`FakeState` is the one place that does both, so the
runner and the routes never store without announcing, or announce without storing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from .event_bus import EventBus
from .files import ProjectFiles
from .id_minting import IdMinter
from .session_data import FakeMessage, FakeSession, PendingRequest, Run
from .wire import IDLE, JSON, OPENCODE_VERSION, now_ms, sum_usage, zero_usage


class FakeState:
    """Sessions (live and deleted-but-busy), statuses, pending requests and their events."""

    def __init__(self, ids: IdMinter, bus: EventBus, directory_of: dict[str, str]) -> None:
        self._ids = ids
        self.bus = bus
        """Where the state's changes are announced."""
        self._emit = bus.emit
        self.closed = False
        """The server was closed: nothing runs any more."""
        self.sessions: dict[str, FakeSession] = {}
        self.deleted: dict[str, FakeSession] = {}
        """Sessions deleted while busy: they still run and can be aborted."""
        self.non_idle: dict[str, JSON] = {}
        self.directory_of = directory_of
        """Session id -> directory, deleted sessions too (the event bus reads it)."""
        self.requests_pending: dict[str, PendingRequest] = {}
        self.always: set[tuple[str, str]] = set()
        """(permission, pattern) pairs replied ``always``: approved project-wide."""
        self.files = ProjectFiles()
        """The project's files as the ``write``/``edit`` tools left them (snapshots on)."""

    def session(self, session_id: str) -> FakeSession:
        try:
            return self.sessions[session_id]
        except KeyError:
            raise KeyError(f"unknown session {session_id!r}") from None

    def find(self, session_id: str) -> FakeSession | None:
        """A live session, or one deleted while busy."""
        return self.sessions.get(session_id) or self.deleted.get(session_id)

    def create_session(
        self,
        parent_id: str | None,
        title: str | None,
        directory: str,
        *,
        emit: bool = True,
        agent: str | None = None,
        permission: list[Any] | None = None,
    ) -> FakeSession:
        now = now_ms()
        session_id = self._ids.new("ses", descending=True)
        if title is None:
            iso = datetime.fromtimestamp(now / 1000, UTC).isoformat(timespec="milliseconds")
            kind = "Child session" if parent_id else "New session"
            title = f"{kind} - {iso.replace('+00:00', 'Z')}"
        slug = self._ids.slug()
        # Fields and their order as GET /session/{id} shows them on 1.18.34; ``summary``,
        # ``agent`` and ``model`` appear with the first prompt (see the runner's enqueue).
        info: JSON = {
            "id": session_id,
            "slug": slug,
            "projectID": "global",
            "directory": directory,
            "path": directory.lstrip("/"),
        }
        if parent_id is not None:
            info["parentID"] = parent_id
        info["cost"] = 0
        info["tokens"] = zero_usage()
        info["title"] = title
        if agent is not None:
            info["agent"] = agent
        info["version"] = OPENCODE_VERSION
        info["time"] = {"created": now, "updated": now}
        if agent is not None:
            info["permission"] = []  # a task child gets its agent's (empty) rule set
        elif permission is not None:
            info["permission"] = permission
        session = FakeSession(session_id, parent_id, info)
        self.sessions[session_id] = session
        self.directory_of[session_id] = directory
        parent = self.sessions.get(parent_id) if parent_id is not None else None
        if parent is not None:
            parent._children[session_id] = None
        if emit:
            # Measured: ``session.created`` only (a prompt's events follow with its own
            # ``session.updated`` pair).
            self._emit("session.created", {"sessionID": session_id, "info": info})
        return session

    def touch(self, session: FakeSession, **changes: Any) -> None:
        """Apply ``changes`` to the session's info (``None`` deletes a field), bump
        ``time.updated`` and emit ``session.updated``."""
        info = dict(session.info)
        for key, value in changes.items():
            if value is None:
                info.pop(key, None)
            else:
                info[key] = value
        info["time"] = {**info["time"], "updated": now_ms()}
        session.info = info
        self._emit("session.updated", {"sessionID": session.id, "info": info})

    def add_usage(self, session: FakeSession, tokens: Mapping[str, Any], cost: float) -> None:
        """A finished model step adds its tokens and cost to the session (measured: the
        session's ``tokens`` is the sum of its steps' ``tokens`` without ``total``).
        No event: the real server publishes the new totals with the ``session.updated``
        that precedes the next ``session.diff`` (see :meth:`announce_diff`)."""
        session.info = {
            **session.info,
            "cost": session.info.get("cost", 0) + cost,
            "tokens": sum_usage(session.info.get("tokens", zero_usage()), tokens, sign=1),
        }

    def announce_diff(self, session: FakeSession, prompt_id: str | None = None) -> None:
        """``session.updated`` (with the diff ``summary``) then ``session.diff``, and with
        snapshots on (:attr:`files`) the prompt's diff summary on its user message.

        Measured: the pair follows each new assistant message (the start of each model
        step) and the final idle of a run that did not fail; ``session.diff`` is ``[]``
        in 1.18.34 whatever changed (its summarize publishes ``[]`` first, then, with
        snapshots on, writes the turn's diff on the prompt: ``message.updated``).
        """
        summary = session.info.get("summary") or {"additions": 0, "deletions": 0, "files": 0}
        self.touch(session, summary=summary)
        self._emit("session.diff", {"sessionID": session.id, "diff": []})
        diffs = self.files.summary(prompt_id) if prompt_id is not None else None
        prompt = session._messages.get(prompt_id) if prompt_id is not None else None
        if diffs is not None and prompt is not None and prompt.info.get("role") == "user":
            summary_of = prompt.info.get("summary")
            kept = summary_of if isinstance(summary_of, dict) else {}
            self.store_message(
                session, prompt, {**prompt.info, "summary": {**kept, "diffs": diffs}}
            )

    def set_status(self, session: FakeSession, status: JSON, *, emit: bool = True) -> None:
        session.status = status
        if status["type"] == "idle":
            self.non_idle.pop(session.id, None)
        else:
            self.non_idle[session.id] = status
        if emit:
            self._emit("session.status", {"sessionID": session.id, "status": status})
        else:
            self.bus.notify()

    def set_idle(self, session: FakeSession) -> None:
        self.set_status(session, IDLE)
        self._emit("session.idle", {"sessionID": session.id})

    def store_part(self, message: FakeMessage, part: JSON) -> None:
        message._parts[part["id"]] = part
        self._emit(
            "message.part.updated",
            {"sessionID": part["sessionID"], "part": part, "time": now_ms()},
        )

    def store_message(self, session: FakeSession, message: FakeMessage, info: JSON) -> None:
        message.info = info
        session._messages[message.id] = message
        self._emit("message.updated", {"sessionID": session.id, "info": info})

    async def park(self, run: Run) -> None:
        """Wait for the abort that cancels ``run`` (a :class:`Hang`, an endless tool),
        marked parked meanwhile so that ``fake.wait_hanging`` sees it."""
        run.parked = True
        self.bus.notify()
        try:
            await asyncio.get_running_loop().create_future()
        finally:
            run.parked = False

    def forget_request(self, request_id: str) -> PendingRequest | None:
        pending = self.requests_pending.pop(request_id, None)
        if pending is not None:
            owner = self.find(pending.session_id)
            if owner is not None:
                owner._pending.discard(request_id)
        return pending

    def in_directory(self, pending: PendingRequest, directory: str | None) -> bool:
        return directory is None or self.directory_of.get(pending.session_id) == directory

    def apply_revert(self, session: FakeSession) -> None:
        """The prompt after a revert removes what it hid: ``message.removed`` for each
        later message, ``message.part.removed`` for the parts of a partly reverted one,
        then ``session.updated`` without ``revert`` and with their tokens taken off."""
        revert = session.info.get("revert")
        if revert is None:
            return
        ids = list(session._messages)
        message_id, part_id = revert["messageID"], revert.get("partID")
        start = ids.index(message_id) if message_id in ids else len(ids)
        tokens: JSON = session.info.get("tokens", zero_usage())
        cost = session.info.get("cost", 0)
        for mid in ids[start + 1 if part_id else start :]:
            removed = session._messages.pop(mid)
            if removed.role == "assistant":
                tokens = sum_usage(tokens, removed.info.get("tokens", {}), sign=-1)
                cost -= removed.info.get("cost", 0)
            self._emit("message.removed", {"sessionID": session.id, "messageID": mid})
        kept = session._messages.get(message_id) if part_id else None
        if kept is not None and part_id in kept._parts:
            part_ids = list(kept._parts)
            for pid in part_ids[part_ids.index(part_id) :]:
                del kept._parts[pid]
                self._emit(
                    "message.part.removed",
                    {"sessionID": session.id, "messageID": message_id, "partID": pid},
                )
        self.touch(session, revert=None, tokens=tokens, cost=cost)
