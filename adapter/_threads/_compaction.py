"""Compactions of a thread's root session: asked for, summarised, announced.

OpenCode compacts a session's history into a summary, automatically when a step
overflows the model's context (if the server has auto-compaction on) or when a
client calls ``POST /session/{id}/summarize``. Measured on 1.18.34, both go the
same way on the wire: a user message with a ``compaction`` part (``auto``
true or false) is stored, an assistant message with ``summary: true`` answers
it with the model's digest, then ``session.compacted``. After an automatic
compaction the server adds a synthetic "continue" message and the agent goes
on in the same run; after a manual one the run ends: the agent's work stops
there (a summarize sent during a tool step ends the run once that step
finished).

The host learns of it as ``thread.compacted`` (:class:`ThreadCompacted`), with
the summary text and whether it was automatic. A turn whose newest user message
is a manual compaction that a summary answered did not finish its work: it ends
``turn.aborted`` with :data:`SUMMARIZED` as its reason (see :mod:`adapter._turns._running`).

This record is fed by the translator (parts and messages of the root) and by
the stored messages read after an outage; it holds ids and text only, and forgets
a compaction once announced.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from .._client import OpenCodeClient
from .._client._responses import Message
from .._exceptions import InvalidInputError

__all__ = [
    "SUMMARIZED",
    "Compaction",
    "CompactionLedger",
    "newest_model",
    "newest_summary",
    "summarize",
]

SUMMARIZED = "summarized: the session was compacted (summarize) and the agent's run ended there"
"""``turn.aborted`` reason of a turn that a manual compaction cut short."""

#: Compaction requests remembered per root (a summary arrives after its request).
_MAX_REMEMBERED = 64


@dataclass(frozen=True, slots=True)
class Compaction:
    """One finished compaction: the summary message, its text, and whether the server
    started it (``auto``) or a client asked for it."""

    request_id: str | None
    summary_id: str
    summary: str
    auto: bool


@dataclass(eq=False, slots=True)
class CompactionLedger:
    """What the root's stream said about compactions, until ``session.compacted``."""

    #: Compaction request messages (user messages with a ``compaction`` part) -> auto.
    requests: dict[str, bool] = field(default_factory=dict)
    #: Summary messages -> the request they answer (their ``parentID``).
    summaries: dict[str, str | None] = field(default_factory=dict)
    #: Summary messages -> their text so far (the newest snapshot of each text part).
    texts: dict[str, dict[str, str]] = field(default_factory=dict)
    #: Manual compaction requests a summary answered.
    summarized: set[str] = field(default_factory=set)
    #: ``summarize_thread`` calls of this adapter under way: their run is no run to adopt.
    own_summaries: int = 0

    @property
    def own_summary(self) -> bool:
        return self.own_summaries > 0

    @contextlib.contextmanager
    def summarizing(self) -> Iterator[None]:
        """While this adapter's own ``summarize`` runs (its run is not another client's)."""
        self.own_summaries += 1
        try:
            yield
        finally:
            self.own_summaries -= 1

    def requested(self, message_id: str, *, auto: bool) -> None:
        self.requests[message_id] = auto
        while len(self.requests) > _MAX_REMEMBERED:
            self.requests.pop(next(iter(self.requests)))

    def summary_message(self, message_id: str, parent_id: str | None) -> None:
        self.summaries.setdefault(message_id, parent_id)
        if parent_id is not None and self.requests.get(parent_id) is False:
            self.summarized.add(parent_id)

    def summary_text(self, message_id: str, part_id: str, text: str) -> None:
        if message_id in self.summaries:
            self.texts.setdefault(message_id, {})[part_id] = text

    def is_summary(self, message_id: str) -> bool:
        return message_id in self.summaries

    def cut_short(self, last_user_id: str | None) -> bool:
        """Whether the turn's newest user message is a manual compaction that a summary
        answered: the agent's run ended there instead of finishing its work."""
        return last_user_id is not None and last_user_id in self.summarized

    def compacted(self) -> Compaction | None:
        """``session.compacted``: the newest summary, announced once."""
        if not self.summaries:
            return None
        summary_id = next(reversed(self.summaries))
        request_id = self.summaries.pop(summary_id)
        text = "".join(self.texts.pop(summary_id, {}).values())
        auto = self.requests.get(request_id, False) if request_id is not None else False
        # Older summaries were announced (or their announcement was lost): forget them.
        for stale in list(self.summaries):
            self.summaries.pop(stale)
            self.texts.pop(stale, None)
        return Compaction(request_id, summary_id, text, auto)


def newest_summary(messages: Sequence[Message]) -> str | None:
    """The text of the newest summary message stored, if any."""
    for message in reversed(messages):
        if message.info.raw.get("summary") is True:
            return "".join(p.text or "" for p in message.parts if p.type == "text")
    return None


def newest_model(messages: Sequence[Message]) -> tuple[str, str] | None:
    """``(provider, model)`` of the newest message that names one: an assistant
    message's ``providerID``/``modelID``, or a user message's ``model``."""
    for message in reversed(messages):
        raw = message.info.raw
        chosen = raw.get("model")
        pair = (
            (chosen.get("providerID"), chosen.get("modelID"))
            if isinstance(chosen, dict)
            else (raw.get("providerID"), raw.get("modelID"))
        )
        if isinstance(pair[0], str) and pair[0] and isinstance(pair[1], str) and pair[1]:
            return pair[0], pair[1]
    return None


async def summarize(
    client: OpenCodeClient, session_id: str, model: tuple[str, str] | None, *, deadline: float
) -> str | None:
    """Compact the root ``session_id`` with ``model`` (else the one its newest message
    used) and return the summary's text, ``None`` if none was written."""
    chosen = model
    if chosen is None:
        chosen = newest_model(await client.messages(session_id))
    if chosen is None:
        raise InvalidInputError(
            "summarize_thread needs a model: pass model='provider/model' (the thread "
            "has none and no message names one)"
        )
    await client.summarize(session_id, chosen, deadline=deadline)
    return newest_summary(await client.messages(session_id))
