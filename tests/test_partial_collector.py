"""PartialCollector on server-shaped events: how calls are classified, reconcile with the
stored messages, which messages belong to the turn, and events it must skip without raising.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from adapter import Message, PartialResult, TurnUsage
from adapter._client._native import parse_native
from adapter._stop._partial_collector import PartialCollector
from tests.partial_support import (
    CHILD,
    NESTED,
    NESTED_ROOTS,
    PARTIAL,
    PARTIAL_ROOTS,
    ROOT,
    completed,
    delta_event,
    first_user_message,
    load,
    message_event,
    part_event,
    part_json,
    reconcile_the_answer,
    replay,
    stored,
    text_event,
    tool_event,
    turn_collector,
)

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
