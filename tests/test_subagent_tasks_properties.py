"""The task tracker alone (``adapter._threads._subagent_tasks``): its throttle, and the
promise that holds whatever the server sends in whatever order — every ``task.started``
gets exactly one ``task.completed``, never before it, and none is left open once the
thread ended."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from typing import Any, TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapter import Event, TaskCompleted, TaskStarted, TaskUpdated
from adapter._client._native import NativeEvent, PartUpdated, parse_native
from adapter._threads import _subagent_tasks
from adapter._threads._subagent_tasks import UPDATE_INTERVAL, SubagentTasks

ROOT = "ses_" + "r" * 26
KIDS = [f"ses_{i}" + "c" * 25 for i in range(4)]
T = "thread"

E = TypeVar("E", bound=Event)
TaskEvent = TaskStarted | TaskUpdated | TaskCompleted


def only(events: Sequence[Event], kind: type[E]) -> list[E]:
    """``events``, each asserted to be a ``kind``."""
    assert all(isinstance(e, kind) for e in events), events
    return [e for e in events if isinstance(e, kind)]


def task_events(events: Sequence[Event]) -> list[TaskEvent]:
    """``events``, each asserted to be a task event."""
    tasks = [e for e in events if isinstance(e, TaskStarted | TaskUpdated | TaskCompleted)]
    assert tasks == list(events), events
    return tasks


def native(type: str, **properties: Any) -> NativeEvent:
    return parse_native({"type": type, "properties": properties})


def assistant(session: str, message: str) -> NativeEvent:
    info = {"id": message, "sessionID": session, "role": "assistant", "time": {"created": 1}}
    return native("message.updated", sessionID=session, info=info)


def tool_part(session: str, message: str, tool: str, status: str, **state: Any) -> PartUpdated:
    part = {
        "id": "prt_" + message[4:],
        "messageID": message,
        "sessionID": session,
        "type": "tool",
        "tool": tool,
        "callID": "call_" + message[4:],
        "state": {"status": status, "input": state.pop("input", {}), **state},
    }
    event = native("message.part.updated", sessionID=session, part=part)
    assert isinstance(event, PartUpdated)
    return event


async def test_updates_are_throttled_to_one_per_interval_per_task_and_only_on_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [100.0]
    monkeypatch.setattr(_subagent_tasks, "_now", lambda: clock[0])
    emitted: list[Event] = []
    shown = asyncio.Event()

    def emit(event: Event) -> None:
        emitted.append(event)
        shown.set()

    tasks = SubagentTasks(T, emit)
    kid = KIDS[0]
    tasks.joined(kid, ROOT, "turn_1", "helper")
    tasks.observe(assistant(kid, "msg_a1"))
    tasks.observe(tool_part(kid, "msg_a1", "bash", "running", title="ls"))
    tasks.observe(tool_part(kid, "msg_a1", "bash", "running", title="ls"))  # no change
    assert [(e.type, getattr(e, "tool", None)) for e in emitted] == [
        ("task.started", None),
        ("task.updated", "bash"),
    ]
    clock[0] += UPDATE_INTERVAL * 0.9  # within the interval: held, then the newest is shown
    shown.clear()
    tasks.observe(tool_part(kid, "msg_a1", "read", "running", title="a.py"))
    tasks.observe(tool_part(kid, "msg_a1", "grep", "running", title="todo"))
    assert len(emitted) == 2
    clock[0] += UPDATE_INTERVAL * 0.1
    await asyncio.wait_for(shown.wait(), 5)
    assert [(e.tool, e.text) for e in only(emitted[2:], TaskUpdated)] == [("grep", "todo")]
    tasks.thread_ended()
    assert emitted[-1].type == "task.completed"


async def test_a_pending_update_is_dropped_when_the_task_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_subagent_tasks, "_now", lambda: 5.0)  # time stands still
    emitted: list[Event] = []
    tasks = SubagentTasks(T, emitted.append)
    tasks.joined(KIDS[0], ROOT, None, None)
    tasks.observe(assistant(KIDS[0], "msg_a1"))
    tasks.observe(tool_part(KIDS[0], "msg_a1", "bash", "running"))
    tasks.observe(tool_part(KIDS[0], "msg_a1", "read", "running"))  # waits for its interval
    tasks.stopped([KIDS[0]])
    await asyncio.sleep(0)
    assert [e.type for e in emitted] == ["task.started", "task.updated", "task.completed"]


# -- any order of anything ------------------------------------------------------------


def _ops() -> st.SearchStrategy[list[tuple[Any, ...]]]:
    kid = st.integers(0, len(KIDS) - 1)
    parent = st.integers(-1, len(KIDS) - 1)
    call = st.integers(0, 3)
    return st.lists(
        st.one_of(
            st.tuples(st.just("join"), kid, parent, st.booleans()),
            st.tuples(st.just("pending"), parent, call),
            st.tuples(st.just("running"), parent, call, kid),
            st.tuples(st.just("end"), parent, call, kid, st.sampled_from(["completed", "error"])),
            st.tuples(st.just("busy"), kid),
            st.tuples(st.just("idle"), kid),
            st.tuples(st.just("error"), kid, st.booleans()),
            st.tuples(st.just("text"), kid),
            st.tuples(st.just("stopped"), st.sets(kid)),
            st.tuples(st.just("turn_ended"), st.sampled_from(["completed", "failed", "stopped"])),
        ),
        max_size=40,
    )


def _session(index: int) -> str:
    return ROOT if index < 0 else KIDS[index]


def _apply(tasks: SubagentTasks, op: tuple[Any, ...]) -> None:
    kind = op[0]
    if kind == "join":
        _, kid, parent, subagent = op
        title = "look (@general subagent)" if subagent else "api"
        if _session(parent) != KIDS[kid]:
            tasks.joined(KIDS[kid], _session(parent), "turn_1", title)
    elif kind == "pending":
        _, parent, call = op
        tasks.call_seen(tool_part(_session(parent), f"msg_{call}x", "task", "pending").part)
    elif kind in ("running", "end"):
        parent, call, kid = op[1:4]
        status = "running" if kind == "running" else op[4]
        extra: dict[str, Any] = {"metadata": {"sessionId": KIDS[kid]}}
        if status == "completed":
            extra["output"] = "done"
        elif status == "error":
            extra["error"] = "Task cancelled"
        event = tool_part(_session(parent), f"msg_{call}x", "task", status, **extra)
        child = tasks.call_seen(event.part)
        if child is not None and _session(parent) != child:
            tasks.joined(child, _session(parent), "turn_1", None)
            tasks.call_ended(event.part, child)
    elif kind == "busy":
        tasks.observe(native("session.status", sessionID=KIDS[op[1]], status={"type": "busy"}))
    elif kind == "idle":
        tasks.observe(native("session.idle", sessionID=KIDS[op[1]]))
    elif kind == "error":
        name = "MessageAbortedError" if op[2] else "APIError"
        error = {"name": name, "data": {"message": "x"}}
        tasks.observe(native("session.error", sessionID=KIDS[op[1]], error=error))
    elif kind == "text":
        tasks.observe(assistant(KIDS[op[1]], "msg_t1"))
        part = {
            "id": "prt_t1",
            "messageID": "msg_t1",
            "sessionID": KIDS[op[1]],
            "type": "text",
            "text": "hello",
        }
        tasks.observe(native("message.part.updated", sessionID=KIDS[op[1]], part=part))
    elif kind == "stopped":
        tasks.stopped(KIDS[i] for i in op[1])
    else:
        tasks.turn_ended("turn_1", op[1])


@settings(max_examples=300, deadline=None)
@given(ops=_ops())
def test_every_started_task_ends_exactly_once_whatever_happens(ops: list[tuple[Any, ...]]) -> None:
    async def play() -> list[Event]:
        emitted: list[Event] = []
        tasks = SubagentTasks(T, emitted.append)
        for op in ops:
            _apply(tasks, op)
            _check(emitted, final=False)
        tasks.thread_ended()
        assert tasks.running == ()
        return emitted

    emitted = asyncio.run(play())
    _check(emitted, final=True)


def _check(emitted: list[Event], *, final: bool) -> None:
    started: Counter[str] = Counter()
    ended: Counter[str] = Counter()
    for event in emitted:
        sid = getattr(event, "session_id", "")
        if event.type == "task.started":
            assert started[sid] == 0, "started twice"
            started[sid] += 1
        elif event.type in ("task.updated", "task.completed"):
            assert started[sid] == 1 and ended[sid] == 0, f"{event.type} outside its task"
            ended[sid] += event.type == "task.completed"
    if final:
        assert started == ended


@pytest.mark.parametrize(
    "output",
    [
        # 1.18.34
        '<task id="ses_x" state="completed">\n<task_result>\nthe answer\n</task_result>\n</task>',
        # 1.14.48 (measured in the release matrix)
        "task_id: ses_x (for resuming to continue this task if needed)\n\n"
        "<task_result>\nthe answer\n</task_result>",
    ],
    ids=["1.18.34", "1.14.48"],
)
async def test_the_result_is_the_childs_answer_in_each_releases_call_output(output: str) -> None:
    emitted: list[Event] = []
    tasks = SubagentTasks(T, emitted.append)
    named = tool_part(ROOT, "msg_c1", "task", "running", metadata={"sessionId": KIDS[0]})
    assert named.part.state is not None
    assert tasks.call_seen(named.part) == KIDS[0]
    tasks.joined(KIDS[0], ROOT, "turn_1", None)
    done = tool_part(
        ROOT, "msg_c1", "task", "completed", output=output, metadata=named.part.state.metadata
    )
    tasks.call_ended(done.part, KIDS[0])
    assert [(e.type, getattr(e, "result", None)) for e in emitted] == [
        ("task.started", None),
        ("task.completed", "the answer"),
    ]


async def test_a_subagent_titled_child_waits_for_its_call_in_any_order() -> None:
    """Its ``session.created`` before any part of its call (pending or running): the call
    that names it still gives ``task.started`` its ``item_id``; a child no call named is
    announced at its turn's end, without a call."""
    emitted: list[Event] = []
    tasks = SubagentTasks(T, emitted.append)
    tasks.joined(KIDS[0], ROOT, "turn_1", "beta (@explore subagent)")
    tasks.joined(KIDS[1], ROOT, "turn_1", "gamma (@general subagent)")
    assert emitted == []
    running = tool_part(
        ROOT,
        "msg_b1",
        "task",
        "running",
        input={"description": "beta", "subagent_type": "explore"},
        metadata={"sessionId": KIDS[0]},
    )
    assert tasks.call_seen(running.part) == KIDS[0]
    [started] = only(emitted, TaskStarted)
    assert (started.session_id, started.item_id, started.description, started.agent) == (
        KIDS[0],
        running.part.call_id,
        "beta",
        "explore",
    )
    tasks.turn_ended("turn_1", "completed")
    unnamed = [e for e in task_events(emitted) if e.session_id == KIDS[1]]
    assert [(e.type, e.item_id, e.description, e.agent) for e in only(unnamed, TaskStarted)] == [
        ("task.started", None, "gamma", "general")
    ]


async def test_a_call_without_a_session_id_names_the_held_child_of_its_description() -> None:
    """A call whose parts carry no ``metadata.sessionId`` still names its child, by the
    child's ``"<description> (@<agent> subagent)"`` title, and its end ends that child; the
    child's own idle does not end it first."""
    emitted: list[Event] = []
    tasks = SubagentTasks(T, emitted.append)
    tasks.joined(KIDS[0], ROOT, "turn_1", "alpha (@general subagent)")
    tasks.joined(KIDS[1], ROOT, "turn_1", "beta (@explore subagent)")
    call_input = {"description": "beta", "subagent_type": "explore"}
    running = tool_part(ROOT, "msg_b1", "task", "running", input=call_input)
    assert tasks.call_seen(running.part) == KIDS[1]
    tasks.observe(native("session.status", sessionID=KIDS[1], status={"type": "busy"}))
    tasks.observe(native("session.idle", sessionID=KIDS[1]))
    output = "<task_result>\nfrom beta\n</task_result>"
    done = tool_part(ROOT, "msg_b1", "task", "completed", input=call_input, output=output)
    child = tasks.call_seen(done.part)
    assert child == KIDS[1]
    tasks.call_ended(done.part, child)
    assert [(e.type, e.session_id, getattr(e, "item_id", None)) for e in task_events(emitted)] == [
        ("task.started", KIDS[1], running.part.call_id),
        ("task.completed", KIDS[1], None),
    ]
    assert only(emitted[-1:], TaskCompleted)[0].result == "from beta"
