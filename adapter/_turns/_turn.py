"""One turn of a thread: its prompts, what the server ran for it, and what was emitted.

A turn is everything the server runs for the prompts a host sent while it was
active: the first prompt, steers sent during it, a follow-up that the server
started as a second run because it arrived as the first run went idle, and the
runs the server starts by itself (the continuation after an automatic
compaction). The turn is over when every prompt was echoed, the newest user
message of the root session (ours or the server's) has its answer (or the run
failed), and ``/session/status`` confirms the root is idle. Its phase is
changed only by :mod:`adapter._turns._lifecycle`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

from .._base._tasks import TaskScope
from .._stop._partial_collector import PartialCollector
from .._stream._seen_text import SeenText
from .._types._events import RetryStatus
from ._background import BackgroundTasks
from ._phases import TurnPhase

__all__ = ["Turn", "TurnOrigin", "turn_id_for"]

#: Who started a turn's run: this adapter (``sent``: a prompt or command it sent), or
#: anyone else (``adopted``: another process, ``opencode attach``, a script; or a run
#: found working when the thread was resumed).
TurnOrigin = Literal["sent", "adopted"]


def turn_id_for(message_id: str) -> str:
    """The id of the turn that ``message_id`` (a user message of the root) starts.

    Derived from the message, not drawn at random, so that every process watching
    the thread names the turn alike: the message id is the server's, or the one
    this adapter minted and sent. Opaque to hosts, stable across processes."""
    return "turn_" + message_id.removeprefix("msg_")


@dataclass(eq=False)
class Turn:
    turn_id: str
    collector: PartialCollector
    scope: TaskScope
    phase: TurnPhase = TurnPhase.AWAITING_ECHO
    origin: TurnOrigin = "sent"
    #: Every prompt the host sent in this turn (minted id -> echoed by the server).
    prompts: dict[str, bool] = field(default_factory=dict)
    #: The newest user message of the root in this turn: ours, or one the server
    #: created (the synthetic "continue" after a compaction).
    last_user_id: str | None = None
    users_seen: set[str] = field(default_factory=set)
    #: User messages whose newest assistant answer has finished (completed or errored).
    answered: set[str] = field(default_factory=set)
    #: Each user message's newest assistant answer (ids sort by time): the run's answer
    #: is that one, not a step before it that finished with more steps to come.
    newest_answers: dict[str, str] = field(default_factory=dict)
    #: The run's failure (native error name, message) and the user message it ended.
    error: tuple[str, str] | None = None
    error_for: str | None = None
    aborted_elsewhere: bool = False
    #: A stop aborted the root but failed further down: the turn stays active (the
    #: host can press Stop again) and does not settle on its own.
    held: bool = False
    #: The sessions the failed stop's walk found (``GET /children`` may know children
    #: the stream never announced): a held turn ends only once none of them is busy.
    held_tree: frozenset[str] = frozenset()
    #: An idle came while a prompt's echo was still awaited, and no run began after it
    #: (no busy): it may be the idle of that prompt's own run, which overtook the echo;
    #: then no later idle comes, and the turn settles once its run has finished.
    idle_before_echo: bool = False
    #: Idles of the root seen in this turn: a status poll that answers busy while a
    #: newer idle arrived asks again (that idle found the turn already settling).
    idles: int = 0
    #: The event stream was down during this turn: what it missed is only stored, so the
    #: turn reads the stored messages before it ends (a settle after an idle may run
    #: before the reconnection's own reconcile, with every answer seen).
    missed_events: bool = False
    #: Background subagents the turn started: it stays open until they ended and the
    #: root answered their results (:mod:`adapter._turns._background`).
    background: BackgroundTasks = field(default_factory=BackgroundTasks)
    retry: RetryStatus | None = None
    started_at: float = field(default_factory=time.monotonic)
    last_activity: float = field(default_factory=time.monotonic)
    # Translation bookkeeping: what was emitted of each part, so nothing is sent twice.
    emitted_text: dict[str, SeenText] = field(default_factory=dict)
    part_streams: dict[str, Literal["assistant_text", "reasoning_text"]] = field(
        default_factory=dict
    )
    item_status: dict[str, str] = field(default_factory=dict)
    #: Text parts of an adopted turn that were streaming before the adapter saw them:
    #: what they streamed before is in no event and in no stored snapshot until the
    #: part ends, so their deltas are held back and the part's final text is emitted
    #: whole (:mod:`adapter._stream._output`).
    joined_parts: set[str] = field(default_factory=set)

    @property
    def adopted(self) -> bool:
        return self.origin == "adopted"

    @property
    def first_prompt_id(self) -> str | None:
        return next(iter(self.prompts), None)

    @property
    def all_echoed(self) -> bool:
        return all(self.prompts.values())

    @property
    def run_finished(self) -> bool:
        """Whether what the server ran for this turn has an end (idle still to confirm)."""
        last = self.last_user_id
        if last is None or not self.all_echoed:
            return False
        return last in self.answered or self.error_for == last or self.aborted_elsewhere

    def answer_seen(self, parent_id: str, message_id: str, *, finished: bool) -> None:
        """An assistant message answering ``parent_id`` was created or changed. A newer
        step that has not finished means the answer is not finished, whatever the steps
        before it did (measured on 1.18.34: a step ending ``tool-calls`` completes before
        the next one begins; a run aborted elsewhere can leave its newest step unfinished,
        with no error, and the run idle)."""
        newest = self.newest_answers.get(parent_id)
        if newest is not None and message_id < newest:
            return  # an older step's late update
        self.newest_answers[parent_id] = message_id
        if finished:
            self.answered.add(parent_id)
        else:
            self.answered.discard(parent_id)

    def touch(self) -> None:
        self.last_activity = time.monotonic()
