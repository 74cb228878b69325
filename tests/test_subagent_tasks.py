"""Subagents as tasks: ``task.started``, ``task.updated``, ``task.completed``.

Measured on ``opencode serve`` 1.18.34 (``tests/fixtures/events-parallel-task-abort-1.18.34.jsonl``:
a root whose one model step calls ``task`` twice, one child aborted): each call's ``pending``
part, its child's ``session.created``, its ``running`` part naming the child
(``metadata.sessionId``); a child's ``session.idle`` comes just before its call ends
(``completed`` with ``<task_result>``, or ``error`` ``"Task cancelled"`` when the child alone
was aborted). Every ``task.started`` gets exactly one ``task.completed``, before the end of
the turn that ends it.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Callable

import pytest

from adapter import (
    AnyEvent,
    OpenCodeAdapter,
    SessionUsage,
    TaskCompleted,
    TaskStarted,
    TaskUpdated,
)
from adapter.testing.fake import Fail, FakeOpenCodeServer, Hang, Task, Tasks, Text, Tool
from tests.adapter_support import Recorder, replayed_turn

T = "thread"


def test_the_task_events_are_in_the_union_and_serialise() -> None:
    for cls in (TaskStarted, TaskUpdated, TaskCompleted):
        assert cls in typing.get_args(AnyEvent)
    done = TaskCompleted(
        thread_id=T, session_id="ses_x", status="completed", result="r", usage=SessionUsage(3, 4)
    )
    data = done.to_dict()
    assert data["type"] == "task.completed" and data["status"] == "completed"
    assert data["usage"]["input_tokens"] == 3 and data["usage"]["output_tokens"] == 4
    json.dumps(data)
    started = TaskStarted(thread_id=T, session_id="ses_x", parent_session_id="ses_r")
    assert started.to_dict()["item_id"] is None
    assert TaskUpdated(thread_id=T, session_id="ses_x", tool="bash").to_dict()["tool"] == "bash"


async def count(rec: Recorder, type: str, n: int) -> None:
    """Until ``rec`` holds ``n`` events of ``type``."""
    await rec.wait_for(type, lambda _: len(rec.of(type)) >= n)


async def prompt(fake: FakeOpenCodeServer, session_id: str, text: str) -> None:
    """Another client prompts ``session_id`` (an API child's work)."""
    async with fake.client() as http:
        body = {"parts": [{"type": "text", "text": text}]}
        (await http.post(f"/session/{session_id}/prompt_async", json=body)).raise_for_status()


async def test_a_task_child_is_a_task_from_its_call_to_its_result(
    fake: FakeOpenCodeServer,
) -> None:
    fake.script(
        "child", [Tool("bash", {"command": "ls"}, output="a\n"), Text("the child's answer")]
    )
    fake.script("root", [Task("look around", "child", subagent_type="explore"), Text("done")])
    async with OpenCodeAdapter(fake.base_url, transport=fake.transport) as oc:
        rec = Recorder(oc)
        root = (await oc.start_session(T)).session_id
        turn = await oc.send_turn(T, "go [[script:root]]")
        await rec.wait_for("turn.completed")
        replayed = [e.event_id async for e in replayed_turn(oc, T)]
        await rec.close()
    [child] = rec.of("child.started")
    [started] = rec.of("task.started")
    [done] = rec.of("task.completed")
    call = next(e for e in rec.of("item.started") if e.tool == "task")
    assert started.session_id == child.session_id and started.parent_session_id == root
    assert started.item_id == call.item_id
    assert (started.description, started.agent, started.turn_id) == (
        "look around",
        "explore",
        turn.turn_id,
    )
    assert done.session_id == child.session_id and done.status == "completed"
    assert done.result == "the child's answer" and done.error is None
    assert done.usage is not None and done.usage.output_tokens > 0
    ids = [e.event_id for e in rec.events]
    assert ids.index(child.event_id) < ids.index(started.event_id) < ids.index(done.event_id)
    assert ids.index(done.event_id) < ids.index(rec.of("turn.completed")[0].event_id)
    updates = rec.of("task.updated")
    assert updates and updates[0].session_id == child.session_id and updates[0].tool == "bash"
    for event in (started, done, *updates):
        assert event.event_id in replayed


async def completed_turn(fake: FakeOpenCodeServer) -> Recorder:
    """Every event of one turn running the fake's script ``root`` to its end."""
    async with OpenCodeAdapter(fake.base_url, transport=fake.transport) as oc:
        rec = Recorder(oc)
        await oc.start_session(T)
        await oc.send_turn(T, "go [[script:root]]")
        await rec.wait_for("turn.completed")
        await rec.close()
    return rec


async def test_parallel_children_are_named_by_their_own_calls(fake: FakeOpenCodeServer) -> None:
    fake.script("a", [Text("from a")])
    fake.script("b", [Text("from b")])
    fake.script("root", [Tasks([Task("alpha", "a"), Task("beta", "b")]), Text("done")])
    rec = await completed_turn(fake)
    calls = {
        e.input.get("description"): e.item_id for e in rec.of("item.updated") if e.tool == "task"
    }
    started = {e.description: e for e in rec.of("task.started")}
    assert set(started) == {"alpha", "beta"}
    assert {d: s.item_id for d, s in started.items()} == calls
    results = {e.session_id: e.result for e in rec.of("task.completed")}
    assert results == {started["alpha"].session_id: "from a", started["beta"].session_id: "from b"}


async def test_a_failed_child_is_a_failed_task(fake: FakeOpenCodeServer) -> None:
    fake.script("child", [Fail("APIError", "the provider said no")])
    fake.script("root", [Task("try", "child"), Text("done")])
    rec = await completed_turn(fake)
    [done] = rec.of("task.completed")
    assert done.status == "failed" and done.result is None
    assert done.error.startswith("Subagent failed") and "the provider said no" in done.error


async def test_an_api_child_is_a_task_without_a_call(fake: FakeOpenCodeServer) -> None:
    fake.script("api", [Text("api work done")])
    fake.script("root", [Hang()])
    async with OpenCodeAdapter(fake.base_url, transport=fake.transport) as oc:
        rec = Recorder(oc)
        root = (await oc.start_session(T)).session_id
        await oc.send_turn(T, "go [[script:root]]")
        child = fake.add_session(parent_id=root, title="helper", emit=True)
        started = await rec.wait_for("task.started")
        assert (started.item_id, started.description, started.agent) == (None, "helper", None)
        await prompt(fake, child, "work [[script:api]]")
        done = await rec.wait_for("task.completed")
        await oc.interrupt_turn(T)
        await rec.close()
    assert started.session_id == child and started.parent_session_id == root
    assert (done.status, done.result) == ("completed", "api work done")
    assert len(rec.of("task.completed")) == 1, "the stop does not end it twice"


async def test_a_stop_ends_every_open_task_stopped_before_the_turn_aborts(
    fake: FakeOpenCodeServer,
) -> None:
    fake.script("grand", [Hang()])
    fake.script("child", [Task("deeper", "grand"), Text("never")])
    fake.script("root", [Tasks([Task("one", "child"), Task("two", "grand")]), Text("never")])
    async with OpenCodeAdapter(fake.base_url, transport=fake.transport) as oc:
        rec = Recorder(oc)
        await oc.start_session(T)
        await oc.send_turn(T, "go [[script:root]]")
        await count(rec, "task.started", 3)
        await oc.interrupt_turn(T)
        await rec.close()
    started = {e.session_id for e in rec.of("task.started")}
    done = rec.of("task.completed")
    assert sorted(e.session_id for e in done) == sorted(started) and len(started) == 3
    assert {e.status for e in done} == {"stopped"}
    aborted = rec.of("turn.aborted")[0]
    assert all(rec.events.index(e) < rec.events.index(aborted) for e in done)


async def assert_every_task_completes_once(
    fake: FakeOpenCodeServer,
    how: str,
    exit_server: Callable[[OpenCodeAdapter], None] | None = None,
) -> None:
    """The thread is ended ``how`` while a turn has tasks open (``server_exit``: by
    ``exit_server``): every started task completes exactly once, before the thread ends."""
    fake.script("quick", [Text("quick answer")])
    fake.script("slow", [Hang()])
    ending = Text("root done") if how in ("natural", "stop_subagent") else Hang()
    children = (
        [Task("quick", "quick")] if how == "natural" else [Task("q", "quick"), Task("s", "slow")]
    )
    fake.script("root", [Tasks(children), ending])
    async with OpenCodeAdapter(fake.base_url, transport=fake.transport) as oc:
        rec = Recorder(oc)
        root = (await oc.start_session(T)).session_id
        await oc.send_turn(T, "go [[script:root]]")
        api = fake.add_session(parent_id=root, title="api child", emit=True)
        await rec.wait_for("task.started", lambda e: e.session_id == api)
        if how == "natural":
            await rec.wait_for("turn.completed")
            await oc.stop_session(T)
        elif how == "stop_subagent":  # the slow one alone; the turn then completes
            await count(rec, "task.completed", 1)
            slow = next(e.session_id for e in rec.of("task.started") if e.description == "s")
            await oc.stop_subagent(T, slow)
            await rec.wait_for("turn.completed")
            await oc.stop_session(T)
        else:
            await count(rec, "task.completed", 1)  # the quick one ended
            if how == "interrupt":
                await oc.interrupt_turn(T)
            elif how == "stop_session":
                await oc.stop_session(T)
            else:
                assert exit_server is not None
                exit_server(oc)
        await rec.wait_for("session.exited") if how != "interrupt" else None
        await rec.close()
    started = [e.session_id for e in rec.of("task.started")]
    completed = [e.session_id for e in rec.of("task.completed")]
    assert sorted(started) == sorted(completed) and len(set(started)) == len(started)
    types = rec.types(T)
    last_task = max(i for i, t in enumerate(types) if t == "task.completed")
    end = "turn.aborted" if how == "interrupt" else "session.exited"
    assert last_task < types.index(end)


@pytest.mark.parametrize("how", ["interrupt", "stop_session", "natural", "stop_subagent"])
async def test_every_started_task_completes_exactly_once_however_the_thread_ends(
    fake: FakeOpenCodeServer, how: str
) -> None:
    await assert_every_task_completes_once(fake, how)
