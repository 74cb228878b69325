"""The thread and turn state machines: the drawings are the tables, the tables are enforced.

``docs/interrupt.md`` draws both machines; these tests fail if a state or an arrow of a
drawing differs from ``adapter/_turns/_lifecycle.py``, and if ``Lifecycle`` allows a move
the tables do not (or emits a turn's ending twice).
"""

from __future__ import annotations

import re
import typing
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from adapter import AnyEvent, Event, ThreadStatus
from adapter._base._ids import mint_message_id
from adapter._base._task_owner import TaskOwner
from adapter._stop._partial_collector import PartialCollector
from adapter._turns._lifecycle import (
    THREAD_TRANSITIONS,
    TURN_STARTS,
    TURN_TRANSITIONS,
    Lifecycle,
    LifecycleError,
    ThreadPhase,
    Turn,
    TurnEnding,
    TurnPhase,
    turn_id_for,
)

DOC = Path(__file__).resolve().parent.parent / "docs" / "interrupt.md"
ARROW = re.compile(r"^\s*(\[\*\]|\w+)\s*-->\s*(\[\*\]|\w+)\s*(?::.*)?$")
ROOT = "ses_" + "a" * 26


def starts(machine: str) -> set[str]:
    """The states a drawing enters from ``[*]``."""
    blocks = re.findall(r"```mermaid\n(.*?)```", DOC.read_text(), flags=re.S)
    [block] = [b for b in blocks if f"%% {machine}" in b]
    found = (ARROW.match(line) for line in block.splitlines())
    return {m.group(2) for m in found if m is not None and m.group(1) == "[*]"}


def drawn(machine: str) -> tuple[set[str], set[tuple[str, str]]]:
    """The states and arrows (between states, ``[*]`` left out) of one drawing."""
    blocks = re.findall(r"```mermaid\n(.*?)```", DOC.read_text(), flags=re.S)
    [block] = [b for b in blocks if f"%% {machine}" in b]
    states: set[str] = set()
    arrows: set[tuple[str, str]] = set()
    for line in block.splitlines():
        match = ARROW.match(line)
        if match is None:
            continue
        source, target = match.groups()
        states.update(s for s in (source, target) if s != "[*]")
        if "[*]" not in (source, target):
            arrows.add((source, target))
    return states, arrows


def table(transitions: typing.Mapping[typing.Any, frozenset[typing.Any]]) -> set[tuple[str, str]]:
    return {(a.value, b.value) for a, targets in transitions.items() for b in targets}


def test_the_thread_drawing_is_the_thread_table() -> None:
    states, arrows = drawn("ThreadPhase")
    assert states == {p.value for p in ThreadPhase}
    assert arrows == table(THREAD_TRANSITIONS)


def test_the_turn_drawing_is_the_turn_table() -> None:
    states, arrows = drawn("TurnPhase")
    assert states == {p.value for p in TurnPhase}
    assert arrows == table(TURN_TRANSITIONS)
    assert starts("TurnPhase") == {p.value for p in TURN_STARTS.values()}


def test_every_thread_phase_is_a_status_a_host_can_see() -> None:
    assert set(typing.get_args(ThreadStatus)) == {p.value for p in ThreadPhase}


@pytest.fixture
async def owner() -> AsyncIterator[TaskOwner]:
    owner = TaskOwner("test")
    yield owner
    await owner.aclose()


def phase(life: Lifecycle) -> ThreadPhase:
    """The thread's phase now (read through a call: each move changes it, which a type
    checker, narrowing ``life.phase`` after an ``assert``, would not see)."""
    return life.phase


@pytest.fixture
def events() -> list[Event]:
    """What ``life`` emitted."""
    return []


@pytest.fixture
def life(events: list[Event]) -> Lifecycle:
    """A thread's lifecycle, still connecting."""
    return Lifecycle("t", ROOT, events.append)


@pytest.fixture
def new_turn(owner: TaskOwner) -> Callable[[], Turn]:
    return lambda: Turn(
        turn_id=turn_id_for(mint_message_id()),
        collector=PartialCollector(ROOT),
        scope=owner.scope("turn"),
    )


@pytest.fixture
def turn(life: Lifecycle, new_turn: Callable[[], Turn]) -> Turn:
    """The turn ``life`` runs, once connected."""
    life.connected()
    turn = new_turn()
    life.begin_turn(turn)
    return turn


async def test_a_turn_ends_once_and_the_thread_is_ready_again(
    life: Lifecycle, events: list[Event], turn: Turn
) -> None:
    assert phase(life) is ThreadPhase.RUNNING and life.turn is turn
    assert life.end_turn(turn, TurnEnding("completed"))
    assert not life.end_turn(turn, TurnEnding("aborted", reason="late"))
    assert phase(life) is ThreadPhase.READY and life.turn is None
    assert turn.phase is TurnPhase.ENDED and turn.scope.cancelled
    assert [e.type for e in events] == [
        "session.started",
        "thread.started",
        "turn.started",
        "turn.completed",
    ]


async def test_moves_the_tables_forbid_are_refused(
    life: Lifecycle, new_turn: Callable[[], Turn]
) -> None:
    with pytest.raises(LifecycleError):
        life.begin_turn(new_turn())  # still connecting
    life.connected()
    turn = new_turn()
    life.begin_turn(turn)
    with pytest.raises(LifecycleError):
        life.begin_turn(new_turn())  # one active turn at a time
    with pytest.raises(LifecycleError):
        life.advance(turn, TurnPhase.SETTLING)  # awaiting an echo cannot settle
    with pytest.raises(LifecycleError):
        life.advance(turn, TurnPhase.ENDED)  # only end_turn ends a turn
    life.closed("stopped")
    with pytest.raises(LifecycleError):
        life.connected()


async def test_a_failed_stop_returns_to_running_with_its_turn(
    life: Lifecycle, events: list[Event], turn: Turn
) -> None:
    life.begin_stop()
    assert phase(life) is ThreadPhase.STOPPING
    life.stop_done()
    assert phase(life) is ThreadPhase.RUNNING and life.turn is turn
    life.begin_stop()
    life.end_turn(turn, TurnEnding("aborted", reason="Interrupted by user."))
    assert phase(life) is ThreadPhase.STOPPING  # the stop, not the turn, ends stopping
    life.stop_done()
    assert phase(life) is ThreadPhase.READY
    assert events[-1].type == "turn.aborted"


async def test_closing_ends_the_turn_silently_and_exits_once(
    life: Lifecycle, events: list[Event], turn: Turn
) -> None:
    assert life.begin_close() and not life.begin_close()
    life.closed("stopped")
    life.closed("stopped")
    assert [e.type for e in events][-1] == "session.exited"
    assert [e.type for e in events].count("session.exited") == 1
    assert events[-1].turn_id == turn.turn_id and turn.phase is TurnPhase.ENDED


def test_every_event_class_has_its_own_type_and_the_union_covers_every_type() -> None:
    members = typing.get_args(AnyEvent)
    defaults = [m.__dataclass_fields__["type"].default for m in members]
    assert len(set(defaults)) == len(members)
    # The type strings hosts already key on keep their values (added to, never renamed).
    assert set(defaults) >= {
        "session.started",
        "thread.started",
        "session.exited",
        "thread.metadata.updated",
        "turn.started",
        "turn.completed",
        "turn.aborted",
        "content.delta",
        "item.started",
        "item.updated",
        "item.completed",
        "child.started",
        "request.opened",
        "request.resolved",
        "user-input.requested",
        "user-input.resolved",
        "runtime.warning",
        "runtime.error",
    }
    assert "turn.retrying" in defaults
