"""The subagent task tracker on recorded streams of the real server, and the tasks a
server exit ends (``tests/test_subagent_tasks.py`` checks the task events through the
adapter).

A test of internals: ``SubagentTasks`` (``adapter._threads._subagent_tasks``) is fed the
parsed native events (``adapter._client._native``) as the translator feeds it, and a
server exit is told to the thread registry (``oc._registry.server_exited``) as the
owned server's watcher tells it: a server on the in-process fake cannot exit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from adapter._client._native import PartUpdated, SessionCreated, parse_native
from adapter._threads._subagent_tasks import SubagentTasks
from adapter.testing.fake import FakeOpenCodeServer
from tests.test_subagent_tasks import T, assert_every_task_completes_once

FIXTURE = Path(__file__).parent / "fixtures" / "events-parallel-task-abort-1.18.34.jsonl"


def tracked(fixture: Path) -> list[Any]:
    """A recorded stream of the real server, fed to the tracker as the translator does:
    what it emitted (the root is the session the task calls are made in)."""
    emitted: list[Any] = []
    tasks = SubagentTasks(T, emitted.append)
    with fixture.open(encoding="utf-8") as handle:
        events = [parse_native(json.loads(line)["event"]) for line in handle if line.strip()]
    root = next(
        e.session_id for e in events if isinstance(e, PartUpdated) and e.part.tool == "task"
    )
    for event in events:
        if isinstance(event, SessionCreated) and event.parent_id == root:
            tasks.joined(event.session_id, root, "turn_1", event.title)
        elif isinstance(event, PartUpdated) and event.part.tool == "task":
            child = tasks.call_seen(event.part)
            if child is not None:
                tasks.joined(child, root, "turn_1", None)
                tasks.call_ended(event.part, child)
        elif event.session_id != root:
            tasks.observe(event)
    tasks.turn_ended("turn_1", "completed")
    return emitted


async def test_the_recorded_parallel_stop_maps_to_one_stopped_and_one_completed_task() -> None:
    emitted = tracked(FIXTURE)
    kinds = [(e.type, getattr(e, "description", None), getattr(e, "status", None)) for e in emitted]
    starts = [e for e in emitted if e.type == "task.started"]
    assert [s.description for s in starts] == ["alpha", "beta"]
    assert all(s.item_id and s.item_id.startswith("call_") for s in starts)
    ends = {e.session_id: e for e in emitted if e.type == "task.completed"}
    alpha, beta = (s.session_id for s in starts)
    assert (ends[alpha].status, ends[alpha].error) == ("stopped", "Task cancelled"), kinds
    assert ends[beta].status == "completed" and ends[beta].result.startswith("b answer")


async def test_a_call_completed_after_its_child_was_aborted_is_a_stopped_task() -> None:
    """OpenCode 1.15.13 (``tests/fixtures/events-1.15.13-task-abort.jsonl``): the aborted
    child's ``MessageAbortedError``, then its call ``completed`` with what it had written."""
    emitted = tracked(FIXTURE.parent / "events-1.15.13-task-abort.jsonl")
    [done] = [e for e in emitted if e.type == "task.completed"]
    assert (done.status, done.result) == ("stopped", "child working")


async def test_every_started_task_completes_exactly_once_when_the_server_exits(
    fake: FakeOpenCodeServer,
) -> None:
    await assert_every_task_completes_once(
        fake,
        "server_exit",
        lambda oc: oc._registry.server_exited("the OpenCode server exited (code -9)"),
    )
