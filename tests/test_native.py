"""parse_native: each native event read once into a typed record, or refused.

The events are real: ``events-kinds-1.18.34.jsonl`` was recorded from
``opencode serve`` 1.18.34 driven by the scripted model (a permission asked
and replied, a question replied, one rejected, a manual compaction, a revert
that removes messages, a model retry, a deleted session, a heartbeat);
``events-nested.jsonl`` holds task trees stopped mid-way, ``events-todo-1.18.34.jsonl``
the ``todo.updated`` of a root and of its subagent, ``events-diff-1.18.34.jsonl``
turns that change files with snapshots on (and a revert). A malformed event
of a known type must raise :class:`NativeEventError` and nothing else, or one
hostile event would stop the adapter's pump.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapter import Part, ProtocolError, ToolState
from adapter._base._ids import checked_id
from adapter._client._native import (
    MessageRemoved,
    MessageUpdated,
    NativeEvent,
    PartDelta,
    PartUpdated,
    PermissionAsked,
    PermissionReplied,
    QuestionAsked,
    QuestionRejected,
    QuestionReplied,
    ServerConnected,
    ServerHeartbeat,
    SessionCompacted,
    SessionCreated,
    SessionDeleted,
    SessionErrored,
    SessionIdle,
    SessionStatusChanged,
    SessionUpdated,
    TodoUpdated,
    UnknownEvent,
    Usage,
    parse_native,
    session_of,
)
from adapter._client._sse_payloads import decode_json as _decode_json
from adapter._exceptions import NativeEventError

FIXTURES = Path(__file__).parent / "fixtures"
Event = dict[str, Any]


def load(name: str) -> list[Event]:
    with (FIXTURES / name).open(encoding="utf-8") as handle:
        return [json.loads(line)["event"] for line in handle if line.strip()]


KINDS = load("events-kinds-1.18.34.jsonl")
NESTED = load("events-nested.jsonl")
RECORDED = (
    KINDS
    + NESTED
    + load("events-partial.jsonl")
    + load("events-1.15.13-task-abort.jsonl")
    + load("events-todo-1.18.34.jsonl")
    + load("events-diff-1.18.34.jsonl")
)

RECORDS: dict[str, type[Any]] = {
    "server.connected": ServerConnected,
    "server.heartbeat": ServerHeartbeat,
    "session.status": SessionStatusChanged,
    "session.idle": SessionIdle,
    "session.error": SessionErrored,
    "session.created": SessionCreated,
    "session.updated": SessionUpdated,
    "session.deleted": SessionDeleted,
    "session.compacted": SessionCompacted,
    "message.updated": MessageUpdated,
    "message.removed": MessageRemoved,
    "message.part.updated": PartUpdated,
    "message.part.delta": PartDelta,
    "permission.asked": PermissionAsked,
    "permission.replied": PermissionReplied,
    "question.asked": QuestionAsked,
    "question.replied": QuestionReplied,
    "question.rejected": QuestionRejected,
    "todo.updated": TodoUpdated,
}


def first(kind: str, where: Callable[[Event], bool] = lambda e: True) -> Event:
    return next(e for e in RECORDED if e["type"] == kind and where(e))


def expected_session(event: Event) -> str | None:
    """The session a recorded event is about, read the long way round."""
    props = event["properties"]
    for source in (props, props.get("part") or {}, props.get("info") or {}):
        if "sessionID" in source:
            return str(source["sessionID"])
    info = props.get("info")
    return str(info["id"]) if isinstance(info, dict) and "id" in info else None


# --------------------------------------------------------------------------- real events


def test_the_recordings_hold_every_modelled_type() -> None:
    assert set(RECORDS) <= {e["type"] for e in RECORDED}


def test_every_recorded_event_parses_to_its_record() -> None:
    for event in RECORDED:
        record = parse_native(event)
        assert type(record) is RECORDS.get(event["type"], UnknownEvent), event
        assert record.type == event["type"]
        assert record.raw is event
        assert session_of(record) == record.session_id == expected_session(event), event


def test_session_status_keeps_the_retry_details() -> None:
    raw = first("session.status", lambda e: e["properties"]["status"]["type"] == "retry")
    record = parse_native(raw)
    assert isinstance(record, SessionStatusChanged)
    assert record.status.type == "retry"
    assert record.status.attempt == 1
    assert record.status.message == "scripted error"
    assert record.status.next == raw["properties"]["status"]["next"]


def test_session_error_names_the_abort() -> None:
    record = parse_native(first("session.error"))
    assert isinstance(record, SessionErrored)
    assert record.error is not None
    assert (record.error.name, record.error.message) == ("MessageAbortedError", "Aborted")


def test_session_info_records_carry_parent_and_title() -> None:
    child = first("session.created", lambda e: bool(e["properties"]["info"].get("parentID")))
    record = parse_native(child)
    assert isinstance(record, SessionCreated)
    assert record.parent_id == child["properties"]["info"]["parentID"]
    assert record.title == child["properties"]["info"]["title"]
    assert record.info is child["properties"]["info"]
    deleted = parse_native(first("session.deleted"))
    assert isinstance(deleted, SessionDeleted)
    assert (deleted.parent_id, deleted.title) == (None, "revert")


def test_assistant_message_has_parent_finish_and_usage() -> None:
    def finished(e: Event) -> bool:
        info = e["properties"]["info"]
        return bool(info["role"] == "assistant" and info.get("finish") == "stop")

    raw = first("message.updated", finished)
    info = raw["properties"]["info"]
    record = parse_native(raw)
    assert isinstance(record, MessageUpdated)
    assert (record.role, record.parent_id, record.finish) == ("assistant", info["parentID"], "stop")
    assert record.completed == info["time"]["completed"]
    assert record.summary is False and record.error is None
    tokens = info["tokens"]
    assert record.usage == Usage(
        input=tokens["input"],
        output=tokens["output"],
        reasoning=tokens["reasoning"],
        cache_read=tokens["cache"]["read"],
        cache_write=tokens["cache"]["write"],
        cost=float(info["cost"]),
    )
    assert record.usage.input > 0


def test_a_user_message_is_no_summary_and_has_no_usage() -> None:
    raw = first("message.updated", lambda e: e["properties"]["info"]["role"] == "user")
    record = parse_native(raw)
    assert isinstance(record, MessageUpdated)
    assert (record.role, record.parent_id, record.summary) == ("user", None, False)
    assert record.usage == Usage()


def test_the_compaction_summary_message_is_marked() -> None:
    summaries = [r for r in map(parse_native, KINDS) if isinstance(r, MessageUpdated) and r.summary]
    assert summaries, "the recording holds a compaction"
    assert all(r.role == "assistant" for r in summaries)
    assert {r.raw["properties"]["info"]["agent"] for r in summaries} == {"compaction"}
    compacted = parse_native(first("session.compacted"))
    assert compacted.session_id == summaries[0].session_id


def test_parts_and_deltas() -> None:
    tool = first("message.part.updated", lambda e: e["properties"]["part"]["type"] == "tool")
    record = parse_native(tool)
    assert isinstance(record, PartUpdated)
    assert record.part.state is not None
    assert (record.session_id, record.message_id) == (
        record.part.session_id,
        record.part.message_id,
    )
    delta = first("message.part.delta")
    parsed = parse_native(delta)
    assert isinstance(parsed, PartDelta)
    props = delta["properties"]
    assert (parsed.message_id, parsed.part_id, parsed.field, parsed.delta) == (
        props["messageID"],
        props["partID"],
        "text",
        props["delta"],
    )


def test_message_removed() -> None:
    raw = first("message.removed")
    record = parse_native(raw)
    assert isinstance(record, MessageRemoved)
    assert record.message_id == raw["properties"]["messageID"]


def test_permission_asked_and_replied() -> None:
    asked = parse_native(first("permission.asked"))
    assert isinstance(asked, PermissionAsked)
    assert (asked.permission, asked.patterns) == ("bash", ("echo allowed",))
    assert asked.request_id.startswith("per_")
    assert asked.tool_message_id is not None and asked.tool_message_id.startswith("msg_")
    assert asked.tool_call_id is not None and asked.tool_call_id.startswith("call_")
    replied = parse_native(first("permission.replied"))
    assert isinstance(replied, PermissionReplied)
    assert (replied.request_id, replied.reply) == (asked.request_id, "once")


def test_questions_asked_replied_and_rejected() -> None:
    asked = [r for r in map(parse_native, KINDS) if isinstance(r, QuestionAsked)]
    assert [q["question"] for q in asked[0].questions] == ["Which one?"]
    replied = parse_native(first("question.replied"))
    assert isinstance(replied, QuestionReplied)
    assert (replied.request_id, replied.answers) == (asked[0].request_id, (("A",),))
    rejected = parse_native(first("question.rejected"))
    assert isinstance(rejected, QuestionRejected)
    assert rejected.request_id == asked[1].request_id


def test_unknown_types_keep_their_session() -> None:
    diff = parse_native(first("session.diff"))
    assert isinstance(diff, UnknownEvent)
    assert diff.session_id == first("session.diff")["properties"]["sessionID"]
    other = parse_native({"type": "something.new", "properties": {"sessionID": "../../x"}})
    assert isinstance(other, UnknownEvent) and other.session_id is None
    bare = parse_native({"type": "something.new"})
    assert (bare.type, bare.session_id) == ("something.new", None)


def test_records_are_immutable() -> None:
    record = parse_native(first("session.idle"))
    with pytest.raises(AttributeError):
        record.session_id = "ses_other"  # type: ignore[misc]


def test_records_compare_and_hash_by_their_typed_fields_not_raw() -> None:
    raw = first("message.part.updated", lambda e: e["properties"]["part"]["type"] == "tool")
    other = copy.deepcopy(raw)
    other["id"] = "evt_another_delivery"
    one, two = parse_native(raw), parse_native(other)
    assert one == two
    assert not one != two  # noqa: SIM202 -- __ne__ is defined apart from __eq__
    assert one.raw is raw and two.raw is other
    assert "raw" not in repr(one) and repr(one).startswith("PartUpdated(session_id=")
    idle = parse_native(first("session.idle"))
    again = parse_native({**first("session.idle"), "id": "evt_again"})
    assert idle == again and hash(idle) == hash(again)  # hashable where the fields are
    assert isinstance(idle, SessionIdle) and idle != one
    assert idle != SessionCompacted(idle.session_id, idle.raw)
    changed = copy.deepcopy(raw)
    changed["properties"]["part"]["state"]["status"] = "error"
    assert parse_native(changed) != one


def test_parsed_parts_are_the_parts_their_constructor_builds() -> None:
    raw = first("message.part.updated", lambda e: e["properties"]["part"]["type"] == "tool")
    part = parse_native(raw).part  # type: ignore[union-attr]
    assert part.state is not None
    rebuilt = Part(
        id=part.id,
        message_id=part.message_id,
        session_id=part.session_id,
        type=part.type,
        text=part.text,
        tool=part.tool,
        call_id=part.call_id,
        state=ToolState(**{f.name: getattr(part.state, f.name) for f in fields(ToolState)}),
        raw=part.raw,
    )
    assert part == rebuilt and repr(part) == repr(rebuilt)
    with pytest.raises(AttributeError):
        part.id = "prt_other"  # type: ignore[misc]


def test_remembered_ids_are_only_ids_that_matched_and_only_for_their_kind() -> None:
    assert checked_id("ses", "ses_remembered") == "ses_remembered"
    assert checked_id("ses", "ses_remembered") == "ses_remembered"
    with pytest.raises(ValueError):
        checked_id("msg", "ses_remembered")
    for _ in range(2):
        with pytest.raises(ValueError):
            checked_id("ses", "ses_../../global")
    with pytest.raises(ValueError):
        checked_id("ses", ["ses_a"])


def test_descriptive_fields_are_taken_as_far_as_valid() -> None:
    raw = copy.deepcopy(first("permission.asked"))
    raw["properties"]["patterns"] = ["ok", 3, None]
    raw["properties"]["permission"] = 7
    raw["properties"]["tool"] = "not an object"
    record = parse_native(raw)
    assert isinstance(record, PermissionAsked)
    assert (record.patterns, record.permission, record.tool_call_id) == (("ok",), None, None)


# --------------------------------------------------------------------------- malformed


def _set(path: str, value: object) -> Callable[[Event], None]:
    def change(event: Event) -> None:
        target: Any = event
        keys = path.split(".")
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value

    return change


def _drop(path: str) -> Callable[[Event], None]:
    def change(event: Event) -> None:
        target: Any = event
        keys = path.split(".")
        for key in keys[:-1]:
            target = target[key]
        del target[keys[-1]]

    return change


MALFORMED: list[tuple[str, Callable[[Event], None]]] = [
    ("server.connected", _set("properties", [])),
    ("server.heartbeat", _drop("properties")),
    ("session.status", _drop("properties.sessionID")),
    ("session.status", _set("properties.status.type", "paused")),
    ("session.idle", _set("properties.sessionID", "ses_../../global")),
    ("session.error", _set("properties.error", "boom")),
    ("session.error", _set("properties.sessionID", 42)),
    ("session.created", _drop("properties.info")),
    ("session.created", _set("properties.info.parentID", "msg_notasession")),
    ("session.updated", _set("properties.info.id", None)),
    ("session.deleted", _set("properties.info", "gone")),
    ("session.compacted", _drop("properties.sessionID")),
    ("message.updated", _set("properties.info.role", "system")),
    ("message.updated", _set("properties.info.id", "prt_wrongkind")),
    ("message.updated", _set("properties.info.parentID", {"id": "msg_x"})),
    ("message.updated", _set("properties.info.time", {"completed": "soon"})),
    ("message.removed", _drop("properties.messageID")),
    ("message.part.updated", _set("properties.part.id", "")),
    ("message.part.updated", _set("properties.part", None)),
    ("message.part.delta", _set("properties.delta", None)),
    ("message.part.delta", _set("properties.partID", "prt_a/b")),
    ("permission.asked", _set("properties.id", "que_wrongkind")),
    ("permission.replied", _drop("properties.requestID")),
    ("question.asked", _set("properties.sessionID", ["ses_x"])),
    ("question.replied", _set("properties.requestID", "per_wrongkind")),
    ("question.rejected", _drop("properties.sessionID")),
    ("todo.updated", _set("properties.todos", {"content": "x"})),
    ("todo.updated", _set("properties.todos", [{"content": None}])),
]


def test_every_known_type_has_a_malformed_case() -> None:
    assert {kind for kind, _ in MALFORMED} == set(RECORDS)


@pytest.mark.parametrize(("kind", "change"), MALFORMED, ids=[k for k, _ in MALFORMED])
def test_malformed_events_of_known_types_raise_native_event_error(
    kind: str, change: Callable[[Event], None]
) -> None:
    event = copy.deepcopy(first(kind))
    change(event)
    with pytest.raises(NativeEventError) as caught:
        parse_native(event)
    assert caught.value.event_type == kind
    assert isinstance(caught.value, ProtocolError)


@pytest.mark.parametrize(
    "event", [None, [], "session.idle", 3, {"properties": {}}, {"type": 5, "properties": {}}]
)
def test_what_is_no_event_at_all_raises_native_event_error(event: object) -> None:
    with pytest.raises(NativeEventError) as caught:
        parse_native(event)
    assert caught.value.event_type is None


# --------------------------------------------------------------------------- any JSON

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=25,
)


def _parses_or_refuses(event: object) -> None:
    try:
        record = parse_native(event)
    except NativeEventError:
        return
    assert isinstance(record, NativeEvent)
    assert record.session_id is None or record.session_id.startswith("ses_")


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_parse_native_raises_nothing_else_on_arbitrary_json(value: object) -> None:
    _parses_or_refuses(value)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(sorted(RECORDS)), st.dictionaries(st.text(max_size=12), JSON, max_size=6))
def test_known_types_with_arbitrary_properties_parse_or_raise_native_event_error(
    kind: str, properties: dict[str, Any]
) -> None:
    _parses_or_refuses({"type": kind, "properties": properties})


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_real_events_with_one_value_replaced_parse_or_raise_native_event_error(
    data: st.DataObject,
) -> None:
    """Near-misses of real events: the hardest inputs for a parser that trusts shapes."""
    event = copy.deepcopy(data.draw(st.sampled_from(RECORDED)))
    path = data.draw(st.sampled_from(_paths(event)))
    target: Any = event
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = data.draw(JSON)
    _parses_or_refuses(event)


# --------------------------------------------------------------------------- decoding

JSON_TEXT = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)  # not JSON: refused (_event_wire)
    | st.text(max_size=8)
    | st.sampled_from(["\ud83d", "\udc00x", "é"]),  # lone surrogates: a delta cut in a pair
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(JSON_TEXT, st.booleans())
def test_the_event_decoder_reads_exactly_what_json_reads(value: object, ascii_only: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    assert _decode_json(text) == json.loads(text)


@pytest.mark.parametrize("text", ['{"n": 123456789012345678901234567890}', '"\\ud800"'])
def test_the_event_decoder_falls_back_where_the_fast_one_refuses(text: str) -> None:
    assert repr(_decode_json(text)) == repr(json.loads(text))


# -- todo.updated (the plan of a turn: tests/test_plan_events.py) ------------------------


def test_the_recorded_todo_events_parse_into_their_record() -> None:
    events = load("events-todo-1.18.34.jsonl")
    first = parse_native(events[0])
    assert isinstance(first, TodoUpdated)
    assert first.session_id == events[0]["properties"]["sessionID"]
    assert [(t.content, t.status, t.priority) for t in first.todos] == [
        ("look around", "in_progress", "high"),
        ("write it", "pending", "low"),
    ]
    cleared = parse_native(events[-1])
    assert isinstance(cleared, TodoUpdated) and cleared.todos == ()


def todo_event(todos: object, session: object = "ses_" + "a" * 26) -> dict[str, Any]:
    return {"type": "todo.updated", "properties": {"sessionID": session, "todos": todos}}


@pytest.mark.parametrize(
    "event",
    [
        todo_event([], session="ses_../../x"),
        todo_event("not a list"),
        todo_event([{"content": 5, "status": "pending", "priority": "high"}]),
        todo_event(["a string"]),
        todo_event([{"status": "pending", "priority": "high"}]),
        todo_event([{"content": "x" * 100_000, "status": "pending", "priority": "high"}]),
        todo_event([{"content": "x", "status": "pending", "priority": "high"}] * 10_000),
    ],
    ids=["bad-session", "not-a-list", "content-type", "item-type", "no-content", "huge", "many"],
)
def test_a_malformed_todo_event_raises_native_event_error(event: dict[str, Any]) -> None:
    with pytest.raises(NativeEventError) as caught:
        parse_native(event)
    assert caught.value.event_type == "todo.updated"


def test_status_and_priority_are_kept_as_given_when_they_are_strings() -> None:
    # A release may add a status: shown as it is, not refused.
    event = parse_native(todo_event([{"content": "x", "status": "cancelled", "priority": "?"}]))
    assert isinstance(event, TodoUpdated)
    assert (event.todos[0].status, event.todos[0].priority) == ("cancelled", "?")
