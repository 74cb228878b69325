"""Which turn a message of the root session belongs to: the one rule, shared.

Why it exists: the translator (what is emitted live) and the partial-result
collector (what a stopped turn produced) must agree on which output is the
turn's. Attributing output by ``parentID`` alone (an answer to one of the
turn's own prompts) lost everything the server ran by itself: after an
automatic compaction the agent answers a synthetic "continue" message the
server created. The rule:

* a prompt the adapter sent belongs to the turn that sent it;
* any other message belongs to the turn of its ``parentID`` when that is known
  (a late answer of a stopped turn stays that turn's, and is suppressed); an
  answer to the active turn first seen while a stop of it is under way is late
  too: it is a model step OpenCode started during the stop (measured on
  1.18.34: the step after a ``task`` call whose subagent the stop cancelled);
* otherwise to the turn that was active when it was first seen; first seen
  while a stop was under way, it is *late* (the extra step OpenCode starts as
  it is aborted) and belongs to no turn's output;
* a compaction summary (``summary: true``) belongs to its turn but is never
  its answer.

Stored messages the stream never showed (read back after a stop or an outage)
are placed by the same rule, in order, with "sorts after the turn's first
prompt" standing in for "first seen while it was active".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from .._client._responses import Message

__all__ = ["MessageLedger", "RootMessage"]

Role = Literal["user", "assistant"]


@dataclass(slots=True)
class RootMessage:
    role: Role
    parent_id: str | None
    turn_id: str | None
    late: bool = False
    summary: bool = False
    finished: bool = False
    by_stop: bool = False  # late only because first seen during a stop (undone if it fails)


class MessageLedger:
    """The root session's messages: id -> role, parent, turn (bounded, oldest dropped)."""

    def __init__(self, capacity: int = 10_000) -> None:
        self._capacity = capacity
        self._entries: dict[str, RootMessage] = {}
        #: The newest message the session had when the thread was resumed: it and
        #: every message before it are history, never a new run.
        self._history_until: str | None = None

    def history_until(self, message_id: str | None) -> None:
        """The session's messages up to ``message_id`` (its newest when resumed) are
        history: a later event about one of them starts nothing."""
        if message_id is not None and message_id > (self._history_until or ""):
            self._history_until = message_id

    def is_new(self, message_id: str) -> bool:
        """Whether ``message_id`` is news to this adapter: newer than every message it
        sent, saw or was resumed with (ids sort by time), so it can start a new run."""
        return message_id not in self._entries and message_id > (self._history_until or "")

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, message_id: str) -> RootMessage | None:
        return self._entries.get(message_id)

    def _put(self, message_id: str, entry: RootMessage) -> RootMessage:
        if len(self._entries) >= self._capacity:
            self._entries.pop(next(iter(self._entries)))
        self._entries[message_id] = entry
        self.history_until(message_id)
        return entry

    def claim(self, message_id: str, turn_id: str) -> None:
        """A prompt the adapter is sending (with an id it minted) for ``turn_id``."""
        self._put(message_id, RootMessage("user", None, turn_id))

    def see(
        self,
        message_id: str,
        role: Role,
        parent_id: str | None,
        *,
        active_turn_id: str | None,
        stopping: bool,
        summary: bool = False,
    ) -> RootMessage:
        """Record a message the stream announced; a known one keeps its turn."""
        entry = self._entries.get(message_id)
        if entry is not None:
            entry.role = role
            entry.parent_id = parent_id if parent_id is not None else entry.parent_id
            entry.summary = entry.summary or summary
            return entry
        parent = self._entries.get(parent_id) if parent_id is not None else None
        if parent is not None:
            started_by_stop = (
                stopping
                and role == "assistant"
                and active_turn_id is not None
                and parent.turn_id == active_turn_id
            )
            return self._put(
                message_id,
                RootMessage(
                    role,
                    parent_id,
                    parent.turn_id,
                    late=parent.late or started_by_stop,
                    summary=summary,
                    by_stop=started_by_stop and not parent.late,
                ),
            )
        return self._put(
            message_id,
            RootMessage(
                role,
                parent_id,
                active_turn_id,
                late=stopping and active_turn_id is not None,
                summary=summary,
            ),
        )

    def stop_failed(self) -> None:
        """A stop failed and its turn runs on: answers first seen during it are its again."""
        for entry in self._entries.values():
            if entry.by_stop:
                entry.late = entry.by_stop = False

    def turn_of(self, message_id: str) -> str | None:
        """The turn whose output this message is (``None``: no turn's, or late)."""
        entry = self._entries.get(message_id)
        if entry is None or entry.late:
            return None
        return entry.turn_id

    def output_of(self, turn_id: str) -> Callable[[str], bool]:
        """Whether a message's output is ``turn_id``'s (the collector's ``belongs``)."""
        return lambda message_id: self.turn_of(message_id) == turn_id

    def spend_of(self, turn_id: str) -> Callable[[str], bool]:
        """Whether a root message's spend is ``turn_id``'s (the collector's ``counts``):
        its turn's even when its output is late (the step OpenCode starts as it is
        stopped costs tokens too)."""

        def counts(message_id: str) -> bool:
            entry = self._entries.get(message_id)
            return entry is not None and entry.turn_id == turn_id

        return counts

    def place_stored(
        self, messages: Sequence[Message], turn_id: str, first_prompt_id: str | None
    ) -> None:
        """Place stored messages the stream never showed (after a stop or an outage)."""
        for message in messages:
            info = message.info
            if info.id in self._entries:
                continue
            parent = self._entries.get(info.parent_id) if info.parent_id else None
            if parent is not None:
                turn, late = parent.turn_id, parent.late
            elif first_prompt_id is not None and info.id >= first_prompt_id:
                turn, late = turn_id, False
            else:
                turn, late = None, False
            self._put(
                info.id,
                RootMessage(
                    info.role,
                    info.parent_id,
                    turn,
                    late=late,
                    summary=info.raw.get("summary") is True,
                ),
            )

    def claim_run(self, messages: Sequence[Message], turn_id: str, start_id: str) -> None:
        """An adopted run: the stored messages from its first one on are ``turn_id``'s,
        also those the stream showed before the turn began (placed then in no turn)."""
        for message in messages:
            info = message.info
            entry = self._entries.get(info.id)
            if info.id < start_id or (entry is not None and entry.turn_id is not None):
                continue
            self._put(
                info.id,
                RootMessage(
                    info.role, info.parent_id, turn_id, summary=info.raw.get("summary") is True
                ),
            )

    def user_turns(self) -> dict[str, str]:
        """User message id -> turn id, for every user message whose turn is known
        (the prompts the adapter sent, and server-written ones seen during a turn)."""
        return {
            mid: entry.turn_id
            for mid, entry in self._entries.items()
            if entry.role == "user" and entry.turn_id is not None
        }
