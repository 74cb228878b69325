"""The phases of a thread and of a turn, and the transitions allowed between them.

Why a table: a thread's life (connecting, ready, running a turn, being
stopped, being closed) used to be about twenty booleans, events and
generation counters, and a turn could end in three places. Here each is one
enum, and these tables say which moves are legal; :mod:`adapter._turns._lifecycle`
is the only code that moves them, and refuses any other move. The diagrams
in ``docs/interrupt.md`` are these tables (a test compares them).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Literal

__all__ = ["THREAD_TRANSITIONS", "TURN_STARTS", "TURN_TRANSITIONS", "ThreadPhase", "TurnPhase"]


class ThreadPhase(StrEnum):
    """A thread's phase; its value is ``SessionInfo.status``."""

    CONNECTING = "connecting"  # bound to a session, waiting for the event stream
    READY = "ready"  # no turn running
    RUNNING = "running"  # a turn is active
    STOPPING = "stopping"  # an interrupt is stopping the tree
    CLOSING = "closing"  # stop_session / close: tearing the thread down
    STOPPED = "stopped"  # gone; session.exited was emitted (if it had started)


class TurnPhase(StrEnum):
    """Where a turn is between its first prompt and its end."""

    AWAITING_ECHO = "awaiting_echo"  # a prompt of the turn is not echoed by the server yet
    STREAMING = "streaming"  # every prompt echoed; the server is running the turn
    SETTLING = "settling"  # the root went idle; confirming with /session/status
    BACKGROUND = "background"  # the root is idle; background subagents of the turn work
    ENDED = "ended"  # completed, failed or aborted: emitted exactly once


THREAD_TRANSITIONS: Mapping[ThreadPhase, frozenset[ThreadPhase]] = {
    ThreadPhase.CONNECTING: frozenset(
        {ThreadPhase.READY, ThreadPhase.CLOSING, ThreadPhase.STOPPED}
    ),
    ThreadPhase.READY: frozenset(
        {ThreadPhase.RUNNING, ThreadPhase.STOPPING, ThreadPhase.CLOSING, ThreadPhase.STOPPED}
    ),
    ThreadPhase.RUNNING: frozenset(
        {ThreadPhase.READY, ThreadPhase.STOPPING, ThreadPhase.CLOSING, ThreadPhase.STOPPED}
    ),
    # A stop ends in READY (turn aborted), or back in RUNNING when it failed.
    ThreadPhase.STOPPING: frozenset(
        {ThreadPhase.READY, ThreadPhase.RUNNING, ThreadPhase.CLOSING, ThreadPhase.STOPPED}
    ),
    ThreadPhase.CLOSING: frozenset({ThreadPhase.STOPPED}),
    ThreadPhase.STOPPED: frozenset(),
}

#: The phase a turn begins in, by who started its run: a prompt the adapter sends waits
#: for its echo; a run it adopts (:mod:`adapter._turns._adoption`) is already under way.
TURN_STARTS: Mapping[Literal["sent", "adopted"], TurnPhase] = {
    "sent": TurnPhase.AWAITING_ECHO,
    "adopted": TurnPhase.STREAMING,
}

TURN_TRANSITIONS: Mapping[TurnPhase, frozenset[TurnPhase]] = {
    TurnPhase.AWAITING_ECHO: frozenset({TurnPhase.STREAMING, TurnPhase.ENDED}),
    TurnPhase.STREAMING: frozenset(
        {TurnPhase.AWAITING_ECHO, TurnPhase.SETTLING, TurnPhase.BACKGROUND, TurnPhase.ENDED}
    ),
    # Settling goes back to streaming when the root is busy again (a follow-up
    # the server ran as a second run), or to awaiting an echo on a new steer.
    TurnPhase.SETTLING: frozenset(
        {TurnPhase.AWAITING_ECHO, TurnPhase.STREAMING, TurnPhase.BACKGROUND, TurnPhase.ENDED}
    ),
    # Waiting on background subagents: the root runs again on a child's result (or a
    # steer), or the turn ends once none is left and nothing is owed.
    TurnPhase.BACKGROUND: frozenset(
        {TurnPhase.AWAITING_ECHO, TurnPhase.STREAMING, TurnPhase.ENDED}
    ),
    TurnPhase.ENDED: frozenset(),
}
