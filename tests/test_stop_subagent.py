"""``stop_subagent``: stop one subagent and its subtree, and nothing else.

Measured on ``opencode serve`` 1.18.34 (two parallel ``task`` children, one aborted with
``POST /session/{A}/abort``; ``tests/fixtures/events-parallel-task-abort-1.18.34.jsonl``): A
is idle at once, the sibling B and the root stay busy, the root's call for A ends ``error``
"Task cancelled", B finishes and the root answers. With a child of A (depth 2) the abort of A
stops it too (A's own call for it ends "Tool execution aborted"). The fake does the same.

The sibling B here waits on a permission request the test answers once the stop returned:
so "B still runs" is a fact of the test, not of timing.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from adapter import InvalidInputError, OpenCodeAdapter, StopReport, TreeStopError
from adapter.testing import caught_up
from adapter.testing.fake import FakeOpenCodeServer, Hang, Permission, Task, Tasks, Text
from tests.adapter_support import Recorder

T = "thread"


def script_parallel(fake: FakeOpenCodeServer, *, depth: int) -> None:
    """Root: tasks ``alpha`` (hangs; with ``depth`` 2 it first spawns ``deeper``, which
    hangs) and ``beta`` (asks a bash permission, then answers), then the root's answer."""
    fake.script("hang", [Hang()])
    fake.script("alpha", [Task("deeper", "hang"), Text("never")] if depth == 2 else [Hang()])
    fake.script("beta", [Permission("bash", patterns=("ls",)), Text("beta's answer")])
    fake.script(
        "root", [Tasks([Task("alpha", "alpha"), Task("beta", "beta")]), Text("root answer")]
    )


async def started_tasks(rec: Recorder, n: int) -> dict[str, Any]:
    """Once ``n`` tasks started and the sibling asked its permission: tasks by description."""
    await rec.wait_for("task.started", lambda _: len(rec.of("task.started")) >= n)
    await rec.wait_for("request.opened")
    return {e.description: e for e in rec.of("task.started")}


async def running(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder, depth: int
) -> tuple[str, dict[str, str]]:
    """The parallel turn (:func:`script_parallel`) running, every task started: the root's
    id and the tasks' sessions by description."""
    script_parallel(fake, depth=depth)
    root = (await oc.start_session(T)).session_id
    await oc.send_turn(T, "go [[script:root]]")
    tasks = await started_tasks(rec, depth + 1)
    return root, {description: e.session_id for description, e in tasks.items()}


def aborted(fake: FakeOpenCodeServer) -> list[str]:
    return [
        r.session_id
        for r in fake.requests
        if r.method == "POST" and r.path.endswith("/abort") and r.session_id is not None
    ]


@pytest.mark.parametrize("depth", [1, 2])
async def test_one_subagent_stops_and_the_sibling_the_root_and_the_turn_go_on(
    fake: FakeOpenCodeServer, oc: OpenCodeAdapter, rec: Recorder, depth: int
) -> None:
    root, tasks = await running(oc, fake, rec, depth)
    alpha, beta = tasks["alpha"], tasks["beta"]
    report = await oc.stop_subagent(T, alpha)
    assert isinstance(report, StopReport) and report.root_id == alpha
    subtree = {alpha} | ({tasks["deeper"]} if depth == 2 else set())
    assert set(report.session_ids) == subtree
    assert {s.outcome for s in report} == {"aborted"}
    assert set(aborted(fake)) == subtree, "nothing outside the subtree was aborted"
    assert not any(fake.sessions[sid].busy for sid in subtree)
    assert fake.sessions[beta].busy and fake.sessions[root].busy
    assert oc.session_info(T).status == "running"
    stopped = await rec.wait_for("task.completed", lambda e: e.session_id == alpha)
    assert stopped.status == "stopped"
    [request] = rec.of("request.opened")
    await oc.respond_to_request(T, request.request_id, "accept")
    completed = await rec.wait_for("turn.completed")
    assert completed.state == "completed"
    assert "root answer" in "".join(e.delta for e in rec.of("content.delta"))
    ends = {e.session_id: e for e in rec.of("task.completed")}
    assert {sid: ends[sid].status for sid in subtree} == dict.fromkeys(subtree, "stopped")
    assert (ends[beta].status, ends[beta].result) == ("completed", "beta's answer")
    assert len(rec.of("task.completed")) == len(rec.of("task.started")) == depth + 1
    call = next(
        e
        for e in rec.of("item.completed")
        if e.session_id == root and e.input.get("description") == "alpha"
    )
    assert (call.status, call.detail) == ("error", "Task cancelled")
    assert rec.of("turn.aborted") == []


async def test_the_root_and_sessions_outside_the_tree_are_refused_with_nothing_sent(
    fake: FakeOpenCodeServer, oc: OpenCodeAdapter, rec: Recorder
) -> None:
    other_root = (await oc.start_session("other")).session_id
    other_child = fake.add_session(parent_id=other_root, title="theirs", emit=True)
    stranger = fake.add_session(title="nobody's", busy=True)
    root, _ = await running(oc, fake, rec, 1)
    await rec.wait_for("child.started", lambda e: e.session_id == other_child)
    fake.reset_stats()
    for refused in (root, other_child, other_root, stranger, "ses_" + "z" * 26, "nope", 7):
        with pytest.raises(InvalidInputError):
            await oc.stop_subagent(T, refused)  # type: ignore[arg-type]
    assert fake.requests == [], "nothing was sent"
    assert fake.sessions[stranger].busy


async def test_a_turn_stop_under_way_is_joined_and_its_report_returned(
    fake: FakeOpenCodeServer, oc: OpenCodeAdapter, rec: Recorder
) -> None:
    root, tasks = await running(oc, fake, rec, 1)
    hold = fake.hold("POST", f"/session/{root}/abort")
    press = asyncio.create_task(oc.interrupt_turn(T))
    await hold.wait_started()
    joined = asyncio.create_task(oc.stop_subagent(T, tasks["alpha"]))
    await caught_up(fake, oc)
    assert not joined.done()
    hold.release()
    result = await press
    report = await joined
    assert report is result.stop and report.root_id == root
    assert tasks["alpha"] in report.session_ids
    assert_each_task_ended_once_before_the_turn_aborted(rec)


async def test_a_turn_stop_that_starts_meanwhile_wins_and_both_calls_return(
    fake: FakeOpenCodeServer, oc: OpenCodeAdapter, rec: Recorder
) -> None:
    root, tasks = await running(oc, fake, rec, 2)
    hold = fake.hold("POST", f"/session/{tasks['alpha']}/abort")
    one = asyncio.create_task(oc.stop_subagent(T, tasks["alpha"]))
    await hold.wait_started()
    press = asyncio.create_task(oc.interrupt_turn(T))
    await rec.wait_for("turn.stopping")
    hold.release()
    result = await press
    report = await one
    assert report.root_id == tasks["alpha"]
    assert result.stop is not None and result.stop.root_id == root
    assert_each_task_ended_once_before_the_turn_aborted(rec)
    assert {e.status for e in rec.of("task.completed")} == {"stopped"}


def assert_each_task_ended_once_before_the_turn_aborted(rec: Recorder) -> None:
    assert len(rec.of("turn.aborted")) == 1 and rec.of("turn.completed") == []
    started = sorted(e.session_id for e in rec.of("task.started"))
    assert sorted(e.session_id for e in rec.of("task.completed")) == started
    types = rec.types(T)
    last = max(i for i, t in enumerate(types) if t == "task.completed")
    assert last < types.index("turn.aborted")


async def test_concurrent_calls_share_one_walk_and_a_failure_is_a_tree_stop_error(
    fake: FakeOpenCodeServer, oc: OpenCodeAdapter, rec: Recorder
) -> None:
    _, tasks = await running(oc, fake, rec, 1)
    alpha = tasks["alpha"]
    failing = fake.fail("POST", f"/session/{alpha}/abort", status=500, times=None)
    calls = [asyncio.create_task(oc.stop_subagent(T, alpha)) for _ in range(3)]
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    assert all(isinstance(o, TreeStopError) for o in outcomes), outcomes
    error = outcomes[0]
    assert isinstance(error, TreeStopError) and error.report[alpha].outcome == "failed"
    assert len({id(o) for o in outcomes}) == 1, "one walk, one error"
    assert error.partial is None  # it ends no turn: nothing of its own to keep
    failing.remove()
    await oc.interrupt_turn(T)
