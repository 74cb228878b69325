"""``OpenCodeAdapter.fork_thread``: a new thread on OpenCode's fork of a thread's root,
whole or up to the start of one of its turns (counted as ``rollback_thread`` counts
them), with the source's directory, model and permission mode; the source untouched.

The fake's fork route is what 1.18.34 answers (``tests/real/test_fork_thread_real.py``
measures it): a new root session, the messages before ``messageID`` copied.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from adapter import InvalidInputError, OpenCodeAdapter, RequestError, UnknownThreadError
from adapter.testing import FakeOpenCodeServer, caught_up
from adapter.testing.fake import Hang, Text
from tests.adapter_support import Recorder

T = "source"
F = "fork"


def user_texts(fake: FakeOpenCodeServer, session_id: str) -> list[str]:
    return [m.text for m in fake.sessions[session_id].messages if m.role == "user"]


def forks(fake: FakeOpenCodeServer) -> int:
    return sum(1 for r in fake.requests if r.method == "POST" and r.path.endswith("/fork"))


def of_turn(turn_id: str) -> Callable[[Any], bool]:
    """Matches the events of the turn ``turn_id``."""
    return lambda event: bool(event.turn_id == turn_id)


async def finished_turns(oc: OpenCodeAdapter, rec: Recorder, *texts: str) -> None:
    """``texts`` sent as turns of ``T``, one after the other, each completed."""
    for text in texts:
        turn = await oc.send_turn(T, text)
        await rec.wait_for("turn.completed", of_turn(turn.turn_id))


async def test_a_fork_is_a_new_thread_with_the_history_and_the_source_is_untouched(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    source = await oc.start_session(
        T, directory="/p", model="fake/fake-model", permissions="ask", title="work"
    )
    await finished_turns(oc, rec, "one", "two")
    before = [m.to_json() for m in fake.sessions[source.session_id].messages]

    info = await oc.fork_thread(T, F)

    assert info.thread_id == F and info.session_id != source.session_id
    assert info.status == "ready" and info.directory == "/p"
    assert info.permissions == "ask"
    assert info.resume == {"schema": 1, "session_id": info.session_id, "directory": "/p"}
    assert user_texts(fake, info.session_id) == ["one", "two"]
    native_rules = fake.sessions[source.session_id].info["permission"]
    assert fake.sessions[info.session_id].info["permission"] == native_rules
    assert fake.sessions[info.session_id].info.get("parentID") is None
    assert [m.info.id for m in (await oc.read_thread(F)).messages] == [
        m.id for m in fake.sessions[info.session_id].messages
    ]
    seen: list[dict[str, object]] = []

    async def capture(request: httpx.Request) -> None:
        seen.append(json.loads(request.content))

    fake.on("POST", "/session/{id}/prompt_async", capture)
    turn = await oc.send_turn(F, "three")
    done = await rec.wait_for("turn.completed", lambda e: e.turn_id == turn.turn_id)
    assert done.thread_id == F
    assert seen[0]["model"] == {"providerID": "fake", "modelID": "fake-model"}
    assert user_texts(fake, info.session_id) == ["one", "two", "three"]
    assert [m.to_json() for m in fake.sessions[source.session_id].messages] == before
    assert oc.session_info(T).status == "ready"
    assert oc.session_info(T).session_id == source.session_id
    assert {s.thread_id for s in oc.list_sessions()} == {T, F}
    assert [e.thread_id for e in rec.of("turn.started")].count(F) == 1


@pytest.mark.parametrize(
    ("at_turn", "kept"),
    [(0, []), (1, ["one"]), (2, ["one", "two"]), (-1, ["one", "two"]), (-3, [])],
)
async def test_at_turn_forks_before_that_turn_counted_from_zero_or_from_the_end(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder, at_turn: int, kept: list[str]
) -> None:
    await oc.start_session(T)
    await finished_turns(oc, rec, "one", "two", "three")

    info = await oc.fork_thread(T, F, at_turn=at_turn)

    assert user_texts(fake, info.session_id) == kept
    assert len(fake.sessions[info.session_id].messages) == 2 * len(kept)


async def test_a_steered_turn_is_one_turn_for_at_turn_as_for_rollback(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("slow", [Text("working on it", chunks=4, delay=0.05)])
    await oc.start_session(T)
    await finished_turns(oc, rec, "first")
    second = await oc.send_turn(T, "second [[script:slow]]")
    await rec.wait_for("content.delta", lambda e: e.turn_id == second.turn_id)
    await oc.send_turn(T, "and a steer")
    await rec.wait_for("turn.completed", lambda e: e.turn_id == second.turn_id)
    await finished_turns(oc, rec, "third")

    info = await oc.fork_thread(T, F, at_turn=2)

    assert user_texts(fake, info.session_id) == ["first", "second [[script:slow]]", "and a steer"]


@pytest.mark.parametrize("at_turn", [2, -3, 10, True, 1.0, "1"])
async def test_an_at_turn_out_of_range_or_not_an_int_is_refused_before_any_fork(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder, at_turn: object
) -> None:
    await oc.start_session(T)
    await finished_turns(oc, rec, "one", "two")

    with pytest.raises(InvalidInputError, match="at_turn"):
        await oc.fork_thread(T, F, at_turn=at_turn)  # type: ignore[arg-type]

    assert forks(fake) == 0 and not oc.has_session(F)


async def test_a_thread_without_turns_forks_whole_but_has_no_turn_to_fork_at(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer
) -> None:
    await oc.start_session(T)
    with pytest.raises(InvalidInputError, match="0 turns"):
        await oc.fork_thread(T, F, at_turn=0)
    info = await oc.fork_thread(T, F)
    assert fake.sessions[info.session_id].messages == []


@pytest.mark.parametrize("new_thread_id", [T, "other", "", None, 7])
async def test_a_new_thread_id_in_use_or_invalid_is_refused_before_any_fork(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, new_thread_id: object
) -> None:
    await oc.start_session(T)
    await oc.start_session("other")
    with pytest.raises(InvalidInputError, match="new_thread_id"):
        await oc.fork_thread(T, new_thread_id)  # type: ignore[arg-type]
    assert forks(fake) == 0


async def test_an_unknown_source_thread_is_refused(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer
) -> None:
    with pytest.raises(UnknownThreadError):
        await oc.fork_thread("nobody", F)
    assert forks(fake) == 0


async def test_a_fork_after_a_rollback_does_not_bring_the_reverted_turns_back(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    await oc.start_session(T)
    await finished_turns(oc, rec, "one", "two", "three")
    await oc.rollback_thread(T, 2)

    whole = await oc.fork_thread(T, F)
    at_end = await oc.fork_thread(T, "at-end", at_turn=-1)

    assert user_texts(fake, whole.session_id) == ["one"]
    assert user_texts(fake, at_end.session_id) == []
    with pytest.raises(InvalidInputError, match="1 turn"):
        await oc.fork_thread(T, "beyond", at_turn=1)


async def test_a_fork_while_a_turn_runs_copies_what_is_stored_and_the_turn_goes_on(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("long", [Text("working"), Hang()])
    await oc.start_session(T)
    await finished_turns(oc, rec, "one")
    running = await oc.send_turn(T, "two [[script:long]]")
    await rec.wait_for("content.delta", lambda e: e.turn_id == running.turn_id)

    info = await oc.fork_thread(T, F)
    before_running = await oc.fork_thread(T, "before", at_turn=-1)

    assert user_texts(fake, info.session_id) == ["one", "two [[script:long]]"]
    assert user_texts(fake, before_running.session_id) == ["one"]
    assert oc.session_info(T).active_turn_id == running.turn_id
    assert oc.session_info(F).status == "ready"
    result = await oc.interrupt_turn(T)
    assert result.stop is not None
    assert [s.session_id for s in result.stop.sessions] == [oc.session_info(T).session_id]


async def test_stopping_the_source_never_touches_the_fork(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("long", [Hang()])
    await oc.start_session(T)
    await finished_turns(oc, rec, "one")
    info = await oc.fork_thread(T, F)
    running = await oc.send_turn(F, "go on [[script:long]]")
    await rec.wait_for("turn.started", lambda e: e.turn_id == running.turn_id)

    await oc.stop_session(T)

    aborted = [r.path for r in fake.requests if r.path.endswith("/abort")]
    assert all(info.session_id not in path for path in aborted)
    assert fake.sessions[info.session_id].busy
    assert oc.session_info(F).active_turn_id == running.turn_id
    await rec.wait_for("session.exited", lambda e: e.thread_id == T)
    await caught_up(fake, oc)
    assert [e.thread_id for e in rec.of("session.exited")] == [T]
    tree = await oc.session_tree(F)
    assert [node.session_id for node in tree.sessions] == [info.session_id]


def deleted(fake: FakeOpenCodeServer) -> list[str]:
    return [r.session_id or "" for r in fake.requests if r.method == "DELETE"]


async def test_a_fork_whose_thread_cannot_start_is_deleted_and_the_error_raised(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    await oc.start_session(T)
    await finished_turns(oc, rec, "one")

    async def then_fail_the_binding(request: httpx.Request) -> None:
        fake.fail("GET", "/session/{id}", status=400)  # the new thread's read of its fork

    fake.on("POST", "/session/{id}/fork", then_fail_the_binding)
    with pytest.raises(RequestError):
        await oc.fork_thread(T, F)

    assert not oc.has_session(F)
    [fork_id] = deleted(fake)
    assert fork_id != oc.session_info(T).session_id and fork_id not in fake.sessions
    assert oc.session_info(T).status == "ready"


async def test_a_new_thread_id_taken_while_forking_is_refused_and_the_fork_deleted(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer
) -> None:
    await oc.start_session(T)
    taken: list[str] = []

    async def start_it_meanwhile(request: httpx.Request) -> None:
        taken.append((await oc.start_session(F)).session_id)

    fake.on("POST", "/session/{id}/fork", start_it_meanwhile)
    with pytest.raises(InvalidInputError, match="in use"):
        await oc.fork_thread(T, F)

    assert oc.session_info(F).session_id == taken[0]
    assert len(deleted(fake)) == 1 and deleted(fake)[0] not in (
        taken[0],
        oc.session_info(T).session_id,
    )
