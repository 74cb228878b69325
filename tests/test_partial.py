"""PartialCollector / PartialResult: what an interrupted turn produced survives the stop.

The recorded fixtures are real ``GET /event`` streams of OpenCode 1.18.34
(``{t, event}`` per line): ``events-partial.jsonl`` holds five root sessions,
one scenario each, where tools finish before an abort; ``events-nested.jsonl``
holds root -> child -> grandchild ``task`` trees stopped mid-way;
``events-1.15.13-task-abort.jsonl`` is OpenCode 1.15.13 stopping a root whose
``task`` child was mid-answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapter import PartialCollector, PartialResult, ToolCallResult, TurnUsage
from adapter._client._models import Message
from adapter._client._native import parse_native
from adapter._exceptions import InvalidInputError

FIXTURES = Path(__file__).parent / "fixtures"
MARKER = re.compile(r"\n…\[truncated (\d+) bytes\]")

Event = dict[str, Any]


def load(name: str) -> list[Event]:
    with (FIXTURES / name).open(encoding="utf-8") as handle:
        return [json.loads(line)["event"] for line in handle if line.strip()]


def roots(events: list[Event]) -> dict[str, str]:
    """Title -> id of every root session created in a recording."""
    found: dict[str, str] = {}
    for event in events:
        if event["type"] == "session.created":
            info = event["properties"]["info"]
            if not info.get("parentID"):
                found[info["title"]] = info["id"]
    return found


def first_user_message(events: list[Event], session_id: str) -> str:
    for event in events:
        if event["type"] == "message.updated":
            info = event["properties"]["info"]
            if info["sessionID"] == session_id and info["role"] == "user":
                return str(info["id"])
    raise AssertionError(f"no user message in {session_id}")


def replay(events: list[Event], collector: PartialCollector) -> None:
    for event in events:
        collector.observe(event)


def until_abort(events: list[Event], session_id: str) -> list[Event]:
    """The events up to (excluding) the session's first ``session.error``: the moment of Stop."""
    out: list[Event] = []
    for event in events:
        props = event.get("properties", {})
        if event["type"] == "session.error" and props.get("sessionID") == session_id:
            return out
        out.append(event)
    raise AssertionError("no abort in the recording")


PARTIAL = load("events-partial.jsonl")
NESTED = load("events-nested.jsonl")
TASK_ABORT_1_15 = load("events-1.15.13-task-abort.jsonl")
PARTIAL_ROOTS = roots(PARTIAL)
NESTED_ROOTS = roots(NESTED)


def collect(events: list[Event], title: str, **options: Any) -> PartialResult:
    root = roots(events)[title]
    collector = PartialCollector(
        root, turn_message_ids=[first_user_message(events, root)], **options
    )
    replay(events, collector)
    return collector.result("turn-1")


# --------------------------------------------------------------------------
# Synthetic events, shaped like the server's
# --------------------------------------------------------------------------

ROOT = "ses_root"
CHILD = "ses_child"


def message_event(session: str, message: str, role: str, parent: str | None = None) -> Event:
    info: dict[str, Any] = {"id": message, "sessionID": session, "role": role, "time": {}}
    if parent is not None:
        info["parentID"] = parent
    return {
        "id": "evt_m",
        "type": "message.updated",
        "properties": {"sessionID": session, "info": info},
    }


def part_json(session: str, message: str, part: str, **fields: Any) -> dict[str, Any]:
    return {"id": part, "messageID": message, "sessionID": session, **fields}


def part_event(session: str, message: str, part: str, **fields: Any) -> Event:
    return {
        "id": "evt_p",
        "type": "message.part.updated",
        "properties": {"sessionID": session, "part": part_json(session, message, part, **fields)},
    }


def text_event(session: str, message: str, part: str, text: str) -> Event:
    return part_event(session, message, part, type="text", text=text, time={"start": 1})


def delta_event(session: str, message: str, part: str, delta: str) -> Event:
    return {
        "id": "evt_d",
        "type": "message.part.delta",
        "properties": {
            "sessionID": session,
            "messageID": message,
            "partID": part,
            "field": "text",
            "delta": delta,
        },
    }


def tool_event(
    session: str, message: str, part: str, state: dict[str, Any], tool: str = "bash"
) -> Event:
    return part_event(
        session, message, part, type="tool", tool=tool, callID=f"call_{part}", state=state
    )


def completed(output: str, **extra: Any) -> dict[str, Any]:
    return {
        "status": "completed",
        "input": {"command": "x"},
        "output": output,
        "title": "x",
        "metadata": {},
        **extra,
    }


def turn_collector(**options: Any) -> PartialCollector:
    """A root with one turn (user msg_0010) and one assistant message msg_0011."""
    collector = PartialCollector(ROOT, turn_message_ids=["msg_0010"], **options)
    collector.observe(message_event(ROOT, "msg_0010", "user"))
    collector.observe(message_event(ROOT, "msg_0011", "assistant", "msg_0010"))
    return collector


def reconcile_the_answer(collector: PartialCollector, parts: list[dict[str, Any]]) -> None:
    """Reconcile ``collector`` with the stored answer (msg_0011 of ``turn_collector``)."""
    collector.reconcile(ROOT, [stored(ROOT, "msg_0011", "assistant", "msg_0010", parts)])


def body_bytes(value: str) -> int:
    """UTF-8 size of a stored string without its truncation markers."""
    return len(MARKER.sub("", value).encode("utf-8"))


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
# How calls are classified
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ({"status": "pending", "input": {}, "raw": ""}, "interrupted"),
        ({"status": "running", "input": {"command": "x"}}, "interrupted"),
        (completed("fine"), "completed"),
        (
            completed("x\n<shell_metadata>\nUser aborted the command\n</shell_metadata>"),
            "interrupted",
        ),
        ({"status": "error", "input": {}, "error": "Tool execution aborted"}, "interrupted"),
        ({"status": "error", "input": {}, "error": "Task cancelled"}, "interrupted"),
        ({"status": "error", "input": {}, "error": "Aborted"}, "interrupted"),
        (
            {"status": "error", "input": {}, "error": "boom", "metadata": {"interrupted": True}},
            "interrupted",
        ),
        ({"status": "error", "input": {}, "error": "No such file or directory"}, "failed"),
        ({"status": "error", "input": {}, "error": "The user rejected permission"}, "failed"),
    ],
)
def test_classification(state: dict[str, Any], expected: str) -> None:
    collector = turn_collector()
    collector.observe(tool_event(ROOT, "msg_0011", "prt_1", state))
    (call,) = collector.result("t").tool_calls
    assert call.status == expected
    if state["status"] == "error":
        assert call.error == state["error"]


def test_late_running_snapshot_does_not_undo_a_finished_call() -> None:
    collector = turn_collector()
    collector.observe(tool_event(ROOT, "msg_0011", "prt_1", completed("done")))
    collector.observe(tool_event(ROOT, "msg_0011", "prt_1", {"status": "running", "input": {}}))
    (call,) = collector.result("t").tool_calls
    assert (call.status, call.output) == ("completed", "done")


def test_running_output_is_kept_when_the_call_ends_in_an_abort_error() -> None:
    collector = turn_collector()
    running = {
        "status": "running",
        "input": {"command": "make"},
        "metadata": {"output": "step 1\n"},
    }
    collector.observe(tool_event(ROOT, "msg_0011", "prt_1", running))
    aborted = {"status": "error", "input": {"command": "make"}, "error": "Tool execution aborted"}
    collector.observe(tool_event(ROOT, "msg_0011", "prt_1", aborted))
    (call,) = collector.result("t").tool_calls
    assert (call.status, call.output, call.error) == (
        "interrupted",
        "step 1\n",
        "Tool execution aborted",
    )


# --------------------------------------------------------------------------
# Reconcile with the server's stored messages
# --------------------------------------------------------------------------


def stored(
    session: str, message: str, role: str, parent: str | None, parts: list[dict[str, Any]]
) -> Message:
    info: dict[str, Any] = {
        "id": message,
        "sessionID": session,
        "role": role,
        "time": {"created": 1},
    }
    if parent is not None:
        info["parentID"] = parent
    if role == "assistant":
        info["error"] = {"name": "MessageAbortedError", "data": {"message": "Aborted"}}
    return Message.parse({"info": info, "parts": parts})


def test_reconcile_fills_in_a_completed_output_the_stream_missed() -> None:
    root = PARTIAL_ROOTS["P1_tool_then_hang"]
    user = first_user_message(PARTIAL, root)
    # The stream dropped the bash part's final `completed` update.
    events = [
        e
        for e in PARTIAL
        if not (
            e["type"] == "message.part.updated"
            and e["properties"]["part"].get("state", {}).get("status") == "completed"
        )
    ]
    collector = PartialCollector(root, turn_message_ids=[user])
    replay(events, collector)
    assert collector.result("t").tool_calls[0].status == "interrupted"

    bash_part = next(
        e["properties"]["part"]
        for e in PARTIAL
        if e["type"] == "message.part.updated"
        and e["properties"]["part"].get("state", {}).get("status") == "completed"
        and e["properties"]["sessionID"] == root
    )
    message_id = bash_part["messageID"]
    collector.reconcile(
        root,
        [
            stored(
                root, user, "user", None, [part_json(root, user, "prt_u", type="text", text="go")]
            ),
            stored(root, message_id, "assistant", user, [bash_part]),
        ],
    )
    result = collector.result("t")
    (call,) = result.tool_calls
    assert (call.status, call.output) == ("completed", "hi\n")
    assert result.text == "partial answer so far"


def test_reconcile_keeps_longer_streamed_text_and_takes_longer_server_text() -> None:
    collector = turn_collector()
    collector.observe(text_event(ROOT, "msg_0011", "prt_a", ""))
    collector.observe(delta_event(ROOT, "msg_0011", "prt_a", "streamed a lot"))
    collector.observe(text_event(ROOT, "msg_0011", "prt_b", "short"))
    reconcile_the_answer(
        collector,
        [
            part_json(ROOT, "msg_0011", "prt_a", type="text", text="streamed"),
            part_json(ROOT, "msg_0011", "prt_b", type="text", text="short, then more"),
            part_json(ROOT, "msg_0011", "prt_c", type="text", text="only on server"),
        ],
    )
    assert collector.result("t").text == "streamed a lot\nshort, then more\nonly on server"


def test_reconcile_server_snapshot_wins_for_tool_parts_and_adds_children() -> None:
    collector = turn_collector()
    collector.observe(
        tool_event(ROOT, "msg_0011", "prt_1", {"status": "running", "input": {"x": 1}})
    )
    task_state = {
        "status": "error",
        "input": {"description": "sub", "prompt": "p", "subagent_type": "general"},
        "error": "Tool execution aborted",
        "metadata": {"sessionId": CHILD, "interrupted": True},
    }
    reconcile_the_answer(
        collector,
        [
            part_json(
                ROOT,
                "msg_0011",
                "prt_1",
                type="tool",
                tool="bash",
                callID="c1",
                state=completed("ok"),
            ),
            part_json(
                ROOT,
                "msg_0011",
                "prt_2",
                type="tool",
                tool="task",
                callID="c2",
                state=task_state,
            ),
        ],
    )
    assert CHILD in collector.session_ids
    collector.reconcile(
        CHILD,
        [
            stored(
                CHILD,
                "msg_c1",
                "assistant",
                "msg_c0",
                [part_json(CHILD, "msg_c1", "prt_c", type="text", text="child says")],
            )
        ],
    )
    result = collector.result("t")
    bash, task = result.tool_calls
    assert (bash.status, bash.output) == ("completed", "ok")
    assert task.status == "interrupted" and task.child_session_id == CHILD
    child = result.child(task)
    assert child is not None and child.text == "child says" and child.parent_id == ROOT


def test_reconcile_ignores_unknown_sessions_and_foreign_messages() -> None:
    collector = turn_collector()
    other = stored(
        "ses_other",
        "msg_0011",
        "assistant",
        "msg_0010",
        [part_json("ses_other", "msg_0011", "prt_1", type="text", text="x")],
    )
    collector.reconcile("ses_other", [other])
    collector.reconcile(ROOT, [other])
    assert collector.result("t").text == ""
    assert collector.held_bytes == 0


# --------------------------------------------------------------------------
# Turn membership
# --------------------------------------------------------------------------


def test_messages_of_an_earlier_turn_of_the_root_are_excluded() -> None:
    collector = PartialCollector(ROOT, turn_message_ids=["msg_0010"])
    events = [
        message_event(ROOT, "msg_0001", "user"),
        message_event(ROOT, "msg_0002", "assistant", "msg_0001"),
        tool_event(ROOT, "msg_0002", "prt_old", completed("old output")),
        text_event(ROOT, "msg_0002", "prt_oldtext", "old text"),
        message_event(ROOT, "msg_0010", "user"),
        part_event(ROOT, "msg_0010", "prt_prompt", type="text", text="the prompt"),
        message_event(ROOT, "msg_0011", "assistant", "msg_0010"),
        tool_event(ROOT, "msg_0011", "prt_new", completed("new output")),
        text_event(ROOT, "msg_0011", "prt_newtext", "new text"),
    ]
    replay(events, collector)
    result = collector.result("t")
    assert [c.output for c in result.tool_calls] == ["new output"]
    assert result.text == "new text"
    # Parts of the earlier turn and the prompt were not even stored.
    stored_bytes = len("new output") + len("new text") + len('{"command": "x"}') + len("x")
    assert collector.held_bytes == collector._audit() == stored_bytes
    assert b"old" not in json.dumps(result.to_dict()).encode()


def test_reconcile_skips_earlier_turns_without_charging_the_budget() -> None:
    collector = PartialCollector(
        ROOT, turn_message_ids=["msg_0010"], max_output_bytes=100, max_total_bytes=100
    )
    old = [
        stored(
            ROOT,
            f"msg_000{i}",
            "assistant",
            "msg_0000",
            [part_json(ROOT, f"msg_000{i}", f"prt_{i}", type="text", text="o" * 100)],
        )
        for i in range(1, 5)
    ]
    new = stored(
        ROOT,
        "msg_0011",
        "assistant",
        "msg_0010",
        [part_json(ROOT, "msg_0011", "prt_n", type="text", text="fresh")],
    )
    collector.reconcile(ROOT, [*old, new])
    result = collector.result("t")
    assert result.text == "fresh"
    assert not result.truncated
    assert collector.held_bytes == 5


def test_steer_message_and_later_ids_belong_to_the_turn() -> None:
    collector = PartialCollector(ROOT, turn_message_ids=["msg_0010"])
    collector.add_turn_message("msg_0020")  # a steer sent during the turn
    events = [
        message_event(ROOT, "msg_0021", "assistant", "msg_0020"),
        text_event(ROOT, "msg_0021", "prt_a", "after steer"),
        # Role unknown (its message.updated was missed) but its id is in the turn.
        text_event(ROOT, "msg_0030", "prt_b", "later step"),
    ]
    replay(events, collector)
    assert collector.result("t").text == "after steer\nlater step"


def test_belongs_replaces_the_root_rule() -> None:
    """The adapter's one rule of turn membership decides for root messages."""
    events = [
        message_event(ROOT, "msg_0001", "user"),
        message_event(ROOT, "msg_0002", "assistant", "msg_0001"),
        text_event(ROOT, "msg_0002", "prt_old", "earlier turn"),
        message_event(ROOT, "msg_0010", "user"),
        message_event(ROOT, "msg_0011", "assistant", "msg_0010"),
        text_event(ROOT, "msg_0011", "prt_new", "this turn"),
        message_event("ses_child", "msg_0012", "assistant", "msg_0003"),
        text_event("ses_child", "msg_0012", "prt_child", "child text"),
    ]
    asked: list[str] = []

    def only_the_old_one(message_id: str) -> bool:
        asked.append(message_id)
        return message_id == "msg_0002"

    collector = PartialCollector(ROOT, turn_message_ids=["msg_0010"], belongs=only_the_old_one)
    collector.add_session("ses_child", ROOT)
    replay(events, collector)
    result = collector.result("t")
    assert result.text == "earlier turn"  # the ids-based rule would have said "this turn"
    assert result.sessions["ses_child"].text == "child text"  # children: every message
    assert "msg_0012" not in asked and "msg_0001" not in asked  # children, users: not asked
    # User messages and the turn's own prompt never count, whatever belongs says.
    everything = PartialCollector(ROOT, turn_message_ids=["msg_0010"], belongs=lambda m: True)
    replay(events, everything)
    everything.observe(part_event(ROOT, "msg_0010", "prt_p", type="text", text="the prompt"))
    assert everything.result("t").text == "earlier turn\nthis turn"


def test_a_compaction_summary_is_never_the_answer() -> None:
    """Real 1.18.34 recording: a text turn, then ``summarize``; its summary is left out."""
    kinds = load("events-kinds-1.18.34.jsonl")
    session = next(e["properties"]["sessionID"] for e in kinds if e["type"] == "session.compacted")
    for belongs in (None, lambda message_id: True):
        collector = PartialCollector(session, belongs=belongs)
        replay(kinds, collector)
        assert collector.result("t").text == "something worth summarising"
        assert b"Scripted session" not in json.dumps(collector.result().to_dict()).encode()
    # The stored messages say the same (reconcile after a stop).
    final: dict[str, dict[str, Any]] = {}
    parts: dict[str, dict[str, Any]] = {}
    for event in kinds:
        props = event["properties"]
        if event["type"] == "message.updated" and props["info"]["sessionID"] == session:
            final[props["info"]["id"]] = props["info"]
        elif event["type"] == "message.part.updated" and props["part"]["sessionID"] == session:
            parts[props["part"]["id"]] = props["part"]
    messages = [
        Message.parse({"info": info, "parts": [p for p in parts.values() if p["messageID"] == mid]})
        for mid, info in final.items()
    ]
    collector = PartialCollector(session)
    collector.reconcile(session, messages)
    assert collector.result("t").text == "something worth summarising"
    assert collector.held_bytes == len("something worth summarising")


def test_observe_native_gives_the_same_result_as_observe() -> None:
    for title, root in NESTED_ROOTS.items():
        raw = PartialCollector(root, turn_message_ids=[first_user_message(NESTED, root)])
        native = PartialCollector(root, turn_message_ids=[first_user_message(NESTED, root)])
        for event in NESTED:
            raw.observe(event)
            native.observe_native(parse_native(event))
        assert native.result("t") == raw.result("t"), title
        assert native.held_bytes == raw.held_bytes


def test_user_prompt_text_is_not_assistant_text_even_without_its_role() -> None:
    collector = PartialCollector(ROOT)
    # No message.updated at all: a prompt part has no `time`, an answer part has.
    collector.observe(part_event(ROOT, "msg_0010", "prt_p", type="text", text="the prompt"))
    collector.observe(text_event(ROOT, "msg_0011", "prt_a", "the answer"))
    assert collector.result("t").text == "the answer"


# --------------------------------------------------------------------------
# Bounds
# --------------------------------------------------------------------------


def test_output_is_truncated_at_the_bound_with_a_marker() -> None:
    collector = turn_collector(max_output_bytes=100)
    collector.observe(tool_event(ROOT, "msg_0011", "prt_1", completed("a" * 250)))
    result = collector.result("t")
    (call,) = result.tool_calls
    assert call.output == "a" * 100 + "\n…[truncated 150 bytes]"
    assert call.truncated and result.truncated
    assert result.sessions[ROOT].truncated
    assert result.max_output_bytes == 100


@pytest.mark.parametrize(
    ("limit", "kept", "dropped"),
    [(9, "ééé", 12), (10, "ééé😀", 8), (5, "éé", 14), (1, "", 18)],
)
def test_truncation_never_splits_a_multibyte_character(limit: int, kept: str, dropped: int) -> None:
    collector = turn_collector(max_output_bytes=limit)
    # "é" is 2 bytes and "😀" 4: 18 bytes in all.
    collector.observe(tool_event(ROOT, "msg_0011", "prt_1", completed("ééé😀😀😀")))
    (call,) = collector.result("t").tool_calls
    assert call.output == kept + f"\n…[truncated {dropped} bytes]"
    assert call.truncated


def test_streamed_text_is_bounded_and_utf8_safe() -> None:
    collector = turn_collector(max_output_bytes=7)
    collector.observe(text_event(ROOT, "msg_0011", "prt_a", ""))
    for piece in ["ab", "€€", "€", "tail"]:  # € is 3 bytes
        collector.observe(delta_event(ROOT, "msg_0011", "prt_a", piece))
    result = collector.result("t")
    assert result.text == "ab€\n…[truncated 10 bytes]"
    assert result.truncated
    assert collector.held_bytes == 5


def test_session_text_of_many_parts_is_bounded_too() -> None:
    collector = turn_collector(max_output_bytes=10)
    for i in range(5):
        collector.observe(text_event(ROOT, "msg_0011", f"prt_{i}", "x" * 8))
    result = collector.result("t")
    assert body_bytes(result.text) <= 10
    assert MARKER.search(result.text) is not None
    assert result.truncated


def test_max_total_bytes_leaves_later_outputs_as_markers_only() -> None:
    collector = turn_collector(max_output_bytes=100, max_total_bytes=150)
    for i in range(3):
        state = {**completed("z" * 100), "input": {}, "title": None}
        collector.observe(tool_event(ROOT, "msg_0011", f"prt_{i}", state))
    first, second, third = collector.result("t").tool_calls
    assert first.output == "z" * 100 and not first.truncated
    assert second.output == "z" * 50 + "\n…[truncated 50 bytes]"
    assert third.output == "\n…[truncated 100 bytes]"
    assert third.status == "completed"
    assert collector.held_bytes == 150 == collector._audit()


def test_default_total_budget_is_sixteen_outputs() -> None:
    collector = turn_collector(max_output_bytes=10)
    for i in range(20):
        collector.observe(
            tool_event(
                ROOT,
                "msg_0011",
                f"prt_{i:02d}",
                {**completed("y" * 10), "input": {}, "title": None},
            )
        )
    assert collector.held_bytes == 160
    outputs = [c.output for c in collector.result("t").tool_calls]
    assert outputs[:16] == ["y" * 10] * 16
    assert outputs[16:] == ["\n…[truncated 10 bytes]"] * 4


def test_running_output_snapshots_replace_each_other() -> None:
    collector = turn_collector(max_output_bytes=1000, max_total_bytes=1000)
    for size in range(0, 5000, 50):
        running = {"status": "running", "input": {}, "metadata": {"output": "o" * min(size, 900)}}
        collector.observe(tool_event(ROOT, "msg_0011", "prt_1", running))
    assert collector.held_bytes == 900
    (call,) = collector.result("t").tool_calls
    assert call.output == "o" * 900 and call.status == "interrupted"


def test_big_input_is_bounded() -> None:
    collector = turn_collector(max_output_bytes=200)
    state = {**completed("ok"), "input": {"filePath": "/a", "content": "c" * 5000}}
    collector.observe(tool_event(ROOT, "msg_0011", "prt_1", state, tool="write"))
    (call,) = collector.result("t").tool_calls
    assert call.truncated
    assert call.input["filePath"] == "/a"
    assert "truncated" in call.input["content"]
    assert len(json.dumps(call.input, ensure_ascii=False).encode()) <= 200


def test_max_calls_caps_the_number_of_calls() -> None:
    collector = turn_collector(max_calls=3)
    for i in range(5):
        collector.observe(tool_event(ROOT, "msg_0011", f"prt_{i}", completed(str(i))))
    result = collector.result("t")
    assert [c.output for c in result.tool_calls] == ["0", "1", "2"]
    assert result.truncated


def test_invalid_options_are_refused() -> None:
    with pytest.raises(InvalidInputError):
        PartialCollector("not-a-session")
    with pytest.raises(InvalidInputError):
        PartialCollector(ROOT, max_output_bytes=0)
    with pytest.raises(InvalidInputError):
        PartialCollector(ROOT, max_calls=0)
    with pytest.raises(InvalidInputError):
        PartialCollector(ROOT).add_session("../../x", ROOT)
    with pytest.raises(InvalidInputError):
        PartialCollector(ROOT).add_turn_message("nope")


# --------------------------------------------------------------------------
# Rendering: to_prompt, to_dict
# --------------------------------------------------------------------------


def test_to_prompt_mentions_completed_and_interrupted_calls_and_text() -> None:
    prompt = collect(PARTIAL, "P2_parallel_quick_and_slow").to_prompt()
    assert "Finished tool calls" in prompt and "echo quick" in prompt
    assert "result: quick" in prompt
    assert "Interrupted tool calls" in prompt and "sleep 32; echo slow" in prompt
    assert prompt.index("echo quick") < prompt.index("Interrupted tool calls")

    text_prompt = collect(PARTIAL, "P1_tool_then_hang").to_prompt()
    assert "partial answer so far" in text_prompt and "result: hi" in text_prompt


def test_to_prompt_groups_per_subagent() -> None:
    result = collect(NESTED, "rootS")
    prompt = result.to_prompt()
    child = result.tool_calls[0].child_session_id
    assert child is not None
    section = prompt[prompt.index(f"Subagent session {child}") :]
    assert '"child S"' in section
    assert "sleep 31; echo slept" in section
    assert "User aborted the command" in section


@pytest.mark.parametrize("max_chars", [0, 10, 200, 600, 2000])
def test_to_prompt_is_bounded(max_chars: int) -> None:
    collector = turn_collector()
    for i in range(6):
        collector.observe(
            tool_event(ROOT, "msg_0011", f"prt_{i}", completed(f"out{i} " + "w" * 3000))
        )
    collector.observe(
        tool_event(ROOT, "msg_0011", "prt_9", {"status": "running", "input": {"command": "slow"}})
    )
    collector.observe(text_event(ROOT, "msg_0011", "prt_t", "t" * 5000))
    prompt = collector.result("t").to_prompt(max_chars)
    assert len(prompt) <= max_chars
    if max_chars >= 2000:
        # Every call is still listed; outputs were shortened to fit.
        assert prompt.count("- bash") == 7
        assert "Interrupted tool calls" in prompt and "omitted" in prompt


def test_to_prompt_of_an_empty_result() -> None:
    prompt = PartialResult.empty(ROOT, "t").to_prompt()
    assert "Nothing had been produced" in prompt
    with pytest.raises(InvalidInputError):
        PartialResult.empty(ROOT).to_prompt(-1)


def test_empty_result() -> None:
    result = PartialResult.empty(ROOT, "turn-9")
    assert result.is_empty and result.text == "" and result.tool_calls == ()
    assert result.turn_id == "turn-9" and list(result.sessions) == [ROOT]
    assert PartialCollector(ROOT).result("turn-9") == result


@pytest.mark.parametrize(
    ("fixture", "title"),
    [(PARTIAL, "P2_parallel_quick_and_slow"), (NESTED, "rootN"), (NESTED, "rootS")],
)
def test_to_dict_round_trips_through_json(fixture: list[Event], title: str) -> None:
    result = collect(fixture, title)
    data = json.loads(json.dumps(result.to_dict()))
    assert data["root_session_id"] == result.root_session_id
    assert len(data["tool_calls"]) == len(result.tool_calls)
    again = PartialResult.from_dict(data)
    assert again == result
    for call in again.tool_calls:
        assert (again.child(call) is None) == (result.child(call) is None)


def test_from_dict_refuses_foreign_shapes() -> None:
    with pytest.raises(ValueError):
        PartialResult.from_dict({"tool_calls": {}, "sessions": {}})
    good = collect(PARTIAL, "P1_tool_then_hang").to_dict()
    good["tool_calls"][0]["status"] = "exploded"
    with pytest.raises(ValueError):
        PartialResult.from_dict(good)
    with pytest.raises(ValueError):
        ToolCallResult.from_dict({"status": "completed", "input": []})


# --------------------------------------------------------------------------
# Robustness
# --------------------------------------------------------------------------

MALFORMED: list[Any] = [
    None,
    "text",
    [],
    {},
    {"type": 5},
    {"type": "message.part.updated"},
    {"type": "message.part.updated", "properties": []},
    {"type": "message.part.updated", "properties": {"part": "x"}},
    {"type": "message.part.updated", "properties": {"part": {"sessionID": ROOT}}},
    {"type": "message.part.updated", "properties": {"part": {"sessionID": ["unhashable"]}}},
    part_event(ROOT, "msg_0011", "../../etc", type="text", text="x"),
    part_event(ROOT, "msg_0011", "prt_1", type="tool", tool="bash", state={"status": "weird"}),
    part_event(ROOT, "msg_0011", "prt_1", type="tool", tool="bash"),
    part_event(ROOT, "msg_0011", "prt_2", type=None),
    {"type": "message.part.delta", "properties": {"sessionID": ROOT, "delta": 5, "field": "text"}},
    {
        "type": "message.part.delta",
        "properties": {
            "sessionID": ROOT,
            "messageID": "msg_0011",
            "partID": "prt_none",
            "field": "text",
            "delta": "x",
        },
    },
    {
        "type": "message.part.delta",
        "properties": {
            "sessionID": ROOT,
            "messageID": {},
            "partID": [],
            "field": "text",
            "delta": "x",
        },
    },
    {"type": "message.updated", "properties": {"info": None}},
    {"type": "message.updated", "properties": {"info": {"sessionID": ROOT, "id": 7}}},
    {"type": "session.created", "properties": {"info": {"id": "bad id", "parentID": ROOT}}},
    {"type": "session.created", "properties": {"info": {"id": CHILD, "parentID": {"x": 1}}}},
]


def test_malformed_events_are_skipped_without_raising(captured_logs: list[dict[str, Any]]) -> None:
    collector = turn_collector()
    for event in MALFORMED:
        collector.observe(event)
    collector.observe(tool_event(ROOT, "msg_0011", "prt_ok", completed("still works")))
    result = collector.result("t")
    assert [c.output for c in result.tool_calls] == ["still works"]
    assert result.text == ""
    assert list(result.sessions) == [ROOT]
    assert collector.held_bytes == collector._audit()
    skipped = [log for log in captured_logs if log["event"] == "partial.event_skipped"]
    assert skipped and all(log["log_level"] == "debug" for log in skipped)


def test_events_of_unrelated_sessions_are_ignored() -> None:
    collector = turn_collector()
    replay(PARTIAL, collector)
    replay(NESTED, collector)
    collector.observe(message_event("ses_other", "msg_0011", "assistant", "msg_0010"))
    collector.observe(tool_event("ses_other", "msg_0011", "prt_1", completed("not ours")))
    collector.observe(text_event("ses_other", "msg_0011", "prt_2", "not ours"))
    collector.observe(
        {
            "type": "session.created",
            "properties": {"info": {"id": "ses_x", "parentID": "ses_other"}},
        }
    )
    result = collector.result("t")
    assert list(result.usage.by_session) == [ROOT]  # the turn's own message, nothing else
    assert replace(result, usage=TurnUsage()) == PartialResult.empty(ROOT, "t")
    assert collector.session_ids == (ROOT,)
    assert collector.held_bytes == 0


def test_child_created_by_session_created_joins_the_tree() -> None:
    collector = turn_collector()
    collector.observe(
        {
            "type": "session.created",
            "properties": {"sessionID": CHILD, "info": {"id": CHILD, "parentID": ROOT}},
        }
    )
    collector.observe(message_event(CHILD, "msg_c1", "assistant", "msg_c0"))
    collector.observe(tool_event(CHILD, "msg_c1", "prt_1", completed("child out")))
    collector.observe(tool_event(ROOT, "msg_0011", "prt_1", completed("root out")))
    result = collector.result("t")
    # No task call links the child: its calls follow the parent's.
    assert [c.output for c in result.tool_calls] == ["root out", "child out"]
    assert result.sessions[CHILD].parent_id == ROOT


# --------------------------------------------------------------------------
# Property: no event sequence breaks the bounds or raises
# --------------------------------------------------------------------------

SESSIONS = [ROOT, CHILD, "ses_grand", "ses_other"]
MESSAGES = ["msg_0001", "msg_0010", "msg_0011", "msg_0012"]
PARTS = [f"prt_{i}" for i in range(6)]


def sized_text() -> st.SearchStrategy[str]:
    small = st.text(max_size=40)
    big = st.builds(
        lambda ch, n: ch * n, st.sampled_from(["a", "é", "€", "😀"]), st.integers(0, 400)
    )
    return st.one_of(small, big)


@st.composite
def events(draw: st.DrawFn) -> Any:
    session = draw(st.sampled_from(SESSIONS))
    message = draw(st.sampled_from(MESSAGES))
    part = draw(st.sampled_from(PARTS))
    kind = draw(st.sampled_from(["text", "delta", "tool", "message", "session", "junk"]))
    if kind == "text":
        return part_event(
            session,
            message,
            part,
            type=draw(st.sampled_from(["text", "reasoning"])),
            text=draw(sized_text()),
            time={},
        )
    if kind == "delta":
        return delta_event(session, message, part, draw(sized_text()))
    if kind == "tool":
        status = draw(st.sampled_from(["pending", "running", "completed", "error"]))
        state: dict[str, Any] = {
            "status": status,
            "input": draw(st.dictionaries(st.text(max_size=5), sized_text(), max_size=3)),
        }
        if status == "completed":
            state["output"] = draw(sized_text())
        if status == "error":
            state["error"] = draw(st.sampled_from(["Tool execution aborted", "boom", "x" * 300]))
        state["metadata"] = (
            {"output": draw(sized_text())}
            if draw(st.booleans())
            else {"sessionId": draw(st.sampled_from(SESSIONS))}
        )
        state["title"] = draw(st.one_of(st.none(), sized_text()))
        return tool_event(
            session, message, part, state, tool=draw(st.sampled_from(["bash", "task"]))
        )
    if kind == "message":
        return message_event(
            session,
            message,
            draw(st.sampled_from(["user", "assistant"])),
            draw(st.sampled_from([None, *MESSAGES])),
        )
    if kind == "session":
        return {
            "type": "session.created",
            "properties": {"info": {"id": session, "parentID": draw(st.sampled_from(SESSIONS))}},
        }
    return draw(
        st.one_of(
            st.none(),
            st.integers(),
            st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3),
        )
    )


def iter_bodies(result: PartialResult) -> Iterator[str]:
    for session in result.sessions.values():
        yield session.text
        yield session.reasoning
    for call in result.tool_calls:
        for value in (call.output, call.error, call.title):
            if value is not None:
                yield value


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    stream=st.lists(events(), max_size=60),
    max_output=st.integers(1, 64),
    max_total=st.one_of(st.none(), st.integers(0, 300)),
    max_calls=st.integers(1, 4),
    max_chars=st.integers(0, 600),
)
def test_random_event_sequences_stay_within_bounds(
    stream: list[Any], max_output: int, max_total: int | None, max_calls: int, max_chars: int
) -> None:
    collector = PartialCollector(
        ROOT,
        turn_message_ids=["msg_0010"],
        max_output_bytes=max_output,
        max_total_bytes=max_total,
        max_calls=max_calls,
    )
    total = 16 * max_output if max_total is None else max_total
    for event in stream:
        collector.observe(event)
        assert collector.held_bytes <= total
        assert collector.held_bytes == collector._audit()
    result = collector.result("t")
    assert len(result.tool_calls) <= max_calls
    assert len({id(c) for c in result.tool_calls}) == len(result.tool_calls)
    for body in iter_bodies(result):
        assert body_bytes(body) <= max_output
    for call in result.tool_calls:
        assert (
            len(json.dumps(dict(call.input), ensure_ascii=False).encode()) <= max_output
            or call.input == {}
        )
    assert len(result.to_prompt(max_chars)) <= max_chars
    assert PartialResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result


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
    return event["type"] == "message.part.updated" and part.get("tool") == "task"


def aborted_message(event: Event, session_id: str) -> bool:
    info = event["properties"].get("info", {})
    error = info.get("error") or {}
    return (
        event["type"] == "message.updated"
        and info.get("sessionID") == session_id
        and error.get("name") == "MessageAbortedError"
    )
