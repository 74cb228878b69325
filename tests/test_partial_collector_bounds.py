"""PartialCollector's bounds: per output, in total, per number of calls, UTF-8 safe,
and a hypothesis property that no event sequence breaks them or raises.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapter import InvalidInputError, PartialResult
from adapter._stop._partial_collector import PartialCollector
from tests.partial_support import (
    CHILD,
    MARKER,
    ROOT,
    body_bytes,
    completed,
    delta_event,
    message_event,
    part_event,
    text_event,
    tool_event,
    turn_collector,
)

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
