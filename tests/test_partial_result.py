"""PartialResult, what a stop hands back: its prompt rendering (bounded) and its JSON form."""

from __future__ import annotations

import json

import pytest

from adapter import InvalidInputError, PartialResult, ToolCallResult
from adapter._stop._partial_collector import PartialCollector
from tests.partial_support import (
    NESTED,
    PARTIAL,
    ROOT,
    Event,
    collect,
    completed,
    text_event,
    tool_event,
    turn_collector,
)

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
