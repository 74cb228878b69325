"""PartialCollector on recorded real streams: what an interrupted turn produced survives the stop.

One scenario per root session of ``events-partial.jsonl`` (tools finished before an abort),
the nested ``task`` trees of ``events-nested.jsonl``, and OpenCode 1.15.13's stopped ``task``
(tests/partial_support.py describes the recordings).
"""

from __future__ import annotations

import pytest

from adapter._stop._partial_collector import PartialCollector
from tests.partial_support import (
    NESTED,
    NESTED_ROOTS,
    PARTIAL,
    PARTIAL_ROOTS,
    TASK_ABORT_1_15,
    Event,
    collect,
    first_user_message,
    replay,
    until_abort,
)

# --------------------------------------------------------------------------
# Recorded partial stream: one scenario per root session
# --------------------------------------------------------------------------


def test_fixture_has_the_five_scenarios() -> None:
    assert set(PARTIAL_ROOTS) == {
        "P1_tool_then_hang",
        "P1b_read_then_hang",
        "P2_parallel_quick_and_slow",
        "P3_mid_tool_args",
        "P4_slow_text",
    }


@pytest.mark.parametrize("title", sorted(PARTIAL_ROOTS))
def test_each_scenario_sees_only_its_own_session(title: str) -> None:
    result = collect(PARTIAL, title)
    root = PARTIAL_ROOTS[title]
    assert list(result.sessions) == [root]
    assert all(call.session_id == root for call in result.tool_calls)
    assert result.root_session_id == root
    assert result.turn_id == "turn-1"
    assert not result.truncated
    # The prompt text of the user message is never reported as assistant text.
    assert "[[script:" not in result.text


def test_finished_bash_and_streamed_text_survive_the_abort() -> None:
    result = collect(PARTIAL, "P1_tool_then_hang")
    (call,) = result.tool_calls
    assert (call.tool, call.status, call.output) == ("bash", "completed", "hi\n")
    assert call.input == {"command": "echo hi", "description": "say hi"}
    assert call.title == "echo hi"
    assert call.error is None
    assert result.text == "partial answer so far"
    assert result.completed_calls == (call,)
    assert result.interrupted_calls == ()


def test_text_streamed_as_deltas_survives_when_result_is_taken_at_the_stop() -> None:
    root = PARTIAL_ROOTS["P1_tool_then_hang"]
    collector = PartialCollector(root, turn_message_ids=[first_user_message(PARTIAL, root)])
    # At the stop the final text snapshot has not arrived: only deltas had.
    replay(until_abort(PARTIAL, root), collector)
    result = collector.result(None)
    assert result.text == "partial answer so far"
    assert [c.status for c in result.tool_calls] == ["completed"]


def test_finished_read_survives() -> None:
    result = collect(PARTIAL, "P1b_read_then_hang")
    (call,) = result.tool_calls
    assert call.tool == "read" and call.status == "completed"
    assert call.output is not None and "1: hello file" in call.output
    assert call.input == {"filePath": "/home/dev/project/hello.txt"}
    assert result.text == ""


def test_parallel_quick_completed_and_killed_slow_bash_is_interrupted_with_output() -> None:
    result = collect(PARTIAL, "P2_parallel_quick_and_slow")
    quick, slow = result.tool_calls
    assert (quick.call_id, quick.status, quick.output) == ("call_5_0", "completed", "quick\n")
    # OpenCode ends a killed bash `completed`; its note says otherwise.
    assert slow.call_id == "call_5_1"
    assert slow.status == "interrupted"
    assert slow.output is not None and "User aborted the command" in slow.output
    assert slow.input["command"] == "sleep 32; echo slow"
    assert result.completed_calls == (quick,)
    assert result.interrupted_calls == (slow,)


def test_slow_bash_still_running_at_the_stop_is_interrupted() -> None:
    root = PARTIAL_ROOTS["P2_parallel_quick_and_slow"]
    collector = PartialCollector(root)
    replay(until_abort(PARTIAL, root), collector)
    quick, slow = collector.result("t").tool_calls
    assert quick.status == "completed" and quick.output == "quick\n"
    assert slow.status == "interrupted"
    assert slow.output == ""  # the running snapshot's metadata.output


def test_tool_aborted_while_arguments_streamed_is_interrupted_with_empty_input() -> None:
    result = collect(PARTIAL, "P3_mid_tool_args")
    (call,) = result.tool_calls
    assert call.status == "interrupted"
    assert call.input == {}
    assert call.error == "Tool execution aborted"
    assert call.output is None


def test_slow_text_keeps_what_was_streamed() -> None:
    result = collect(PARTIAL, "P4_slow_text")
    assert result.text == "a slow strea"
    assert result.tool_calls == ()
    assert result.sessions[PARTIAL_ROOTS["P4_slow_text"]].text == "a slow strea"


def test_without_turn_ids_all_observed_root_messages_count() -> None:
    root = PARTIAL_ROOTS["P1_tool_then_hang"]
    collector = PartialCollector(root)
    replay(PARTIAL, collector)
    assert collector.result("t").text == "partial answer so far"


# --------------------------------------------------------------------------
# Recorded nested stream: task calls link to their subagents' results
# --------------------------------------------------------------------------


def test_nested_task_calls_link_to_child_partials() -> None:
    result = collect(NESTED, "rootN")
    root = NESTED_ROOTS["rootN"]
    root_task, child_task = result.tool_calls
    assert root_task.session_id == root and root_task.tool == "task"
    assert root_task.status == "interrupted" and root_task.error == "Task cancelled"

    child = result.child(root_task)
    assert child is not None
    assert child.parent_id == root
    assert child.tool_calls == (child_task,)
    assert child_task.status == "interrupted"
    assert child_task.error is not None and "Tool execution aborted" in child_task.error

    grandchild = result.child(child_task)
    assert grandchild is not None
    assert grandchild.parent_id == child.session_id
    assert grandchild.text == "grandchild thinking..."
    assert grandchild.tool_calls == ()
    assert list(result.sessions) == [root, child.session_id, grandchild.session_id]
    # The root's extra step after the abort belongs to the turn too.
    assert result.text == "root N done"


def test_nested_child_calls_follow_their_task_call_and_keep_output() -> None:
    result = collect(NESTED, "rootS")
    task, bash = result.tool_calls
    assert task.tool == "task" and bash.tool == "bash"
    child = result.child(task)
    assert child is not None and child.tool_calls == (bash,)
    assert bash.session_id == task.child_session_id
    assert bash.status == "interrupted"
    assert bash.output is not None and "User aborted the command" in bash.output
    assert result.interrupted_calls == (task, bash)


def test_children_are_found_from_task_metadata_without_session_created() -> None:
    events = [e for e in NESTED if e["type"] != "session.created"]
    root = NESTED_ROOTS["rootC"]
    collector = PartialCollector(root)
    replay(events, collector)
    result = collector.result("t")
    (task,) = result.tool_calls
    child = result.child(task)
    assert child is not None and child.text == "child C thinking..."
    assert result.text == "root C continued after child abort"


def test_other_trees_of_the_recording_are_ignored() -> None:
    result = collect(NESTED, "rootC")
    others = {NESTED_ROOTS["rootN"], NESTED_ROOTS["rootS"]}
    assert not others & set(result.sessions)
    assert len(result.sessions) == 2


def test_child_of_a_call_without_child_is_none() -> None:
    result = collect(PARTIAL, "P1_tool_then_hang")
    assert result.child(result.tool_calls[0]) is None


# --------------------------------------------------------------------------
# Other OpenCode releases
# --------------------------------------------------------------------------


def test_a_task_cut_by_the_stop_is_interrupted_even_when_the_release_says_completed() -> None:
    """1.15.13 ends a stopped ``task`` call ``completed`` with the subagent's text so far
    (1.18 ends it ``error`` "Task cancelled"); its aborted subagent tells the truth."""
    task = next(e["properties"]["part"] for e in reversed(TASK_ABORT_1_15) if is_task(e))
    assert task["state"]["status"] == "completed"  # what the release says

    result = collect(TASK_ABORT_1_15, "root-task-abort")
    (call,) = result.tool_calls
    assert call.tool == "task" and call.status == "interrupted"
    assert call.output is not None and "<task_result>\nchild working\n</task_result>" in call.output
    assert result.child(call) is not None
    assert result.child(call).text == "child working"  # type: ignore[union-attr]

    # Without the subagent's abort, the same stream is a finished subagent.
    child = task["state"]["metadata"]["sessionId"]
    unaborted = [e for e in TASK_ABORT_1_15 if not aborted_message(e, child)]
    (call,) = collect(unaborted, "root-task-abort").tool_calls
    assert call.status == "completed"


def is_task(event: Event) -> bool:
    part = event["properties"].get("part", {})
    return bool(event["type"] == "message.part.updated" and part.get("tool") == "task")


def aborted_message(event: Event, session_id: str) -> bool:
    info = event["properties"].get("info", {})
    error = info.get("error") or {}
    return (
        event["type"] == "message.updated"
        and info.get("sessionID") == session_id
        and error.get("name") == "MessageAbortedError"
    )
