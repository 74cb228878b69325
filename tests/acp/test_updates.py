"""The event -> ``session/update`` translation on its own (no connection)."""

from __future__ import annotations

import json
from typing import Any

from acp.utils import serialize_params

from adapter import ChildStarted, ItemCompleted, ItemStarted, ItemUpdated
from adapter.acp._outbound import encode_message, well_formed_value
from adapter.acp._updates import UpdateMapper, task_summary

ROOT = "ses_root"


def item(cls: Any, item_id: str, tool: str, status: str, session: str = ROOT, **kw: Any) -> Any:
    fields: dict[str, Any] = {
        "thread_id": "t",
        "turn_id": "turn",
        "item_id": item_id,
        "item_type": "subagent" if tool == "task" else "other",
        "tool": tool,
        "status": status,
        "title": None,
        "detail": None,
        "session_id": session,
    }
    fields.update(kw)
    return cls(**fields)


def running_task(item_id: str, child: str) -> Any:
    raw = {"properties": {"part": {"state": {"metadata": {"sessionId": child}}}}}
    return item(ItemUpdated, item_id, "task", "running", input={"description": "scan"}, raw=raw)


def contents(updates: list[Any], call_id: str) -> list[str]:
    return [
        u.content[0].content.text
        for u in updates
        if u.session_update == "tool_call_update" and u.tool_call_id == call_id and u.content
    ]


def test_opencodes_session_id_of_a_task_overrides_a_link_guessed_from_titles() -> None:
    """Two parallel tasks with one description: the child is first linked to the first
    by its title, then to the task whose running part names it."""
    mapper = UpdateMapper(ROOT)
    for call in ("c1", "c2"):
        mapper.updates(item(ItemStarted, call, "task", "pending", input={"description": "scan"}))
    mapper.updates(
        ChildStarted(thread_id="t", session_id="ses_b", parent_id=ROOT, title="scan (@general)")
    )
    mapper.updates(running_task("c2", "ses_b"))
    mapper.updates(running_task("c1", "ses_a"))
    updates = mapper.updates(
        item(ItemStarted, "k1", "bash", "running", session="ses_b", input={"command": "ls"})
    )
    assert contents(updates, "c2") == ["- bash ls [in_progress]"]
    assert contents(updates, "c1") == []
    assert updates[0].title == "scan > bash ls"


def test_a_completed_task_shows_its_subagents_answer_under_the_progress() -> None:
    mapper = UpdateMapper(ROOT)
    mapper.updates(item(ItemStarted, "c1", "task", "pending", input={"description": "scan"}))
    mapper.updates(running_task("c1", "ses_a"))
    mapper.updates(
        item(ItemCompleted, "k1", "read", "completed", session="ses_a", input={"filePath": "/a"})
    )
    output = (
        '<task id="ses_a" state="completed">\n<task_result>\nfound 3 files\n</task_result>\n</task>'
    )
    updates = mapper.updates(
        item(ItemCompleted, "c1", "task", "completed", input={"description": "scan"}, detail=output)
    )
    assert contents(updates, "c1") == ["- read /a [completed]\nfound 3 files"]
    assert updates[-1].status == "completed" and updates[-1].raw_output == output


def test_task_summary_is_the_task_result_shortened() -> None:
    assert task_summary("<task_result>\n" + "x" * 1000 + "\n</task_result>").endswith("…")
    assert task_summary("plain output") == "plain output"
    assert task_summary(None) == ""


def test_an_update_built_from_server_text_with_a_lone_surrogate_serialises() -> None:
    """pydantic's JSON dump raises on a key holding a lone half; made well formed first,
    the update is one valid UTF-8 JSON line with U+FFFD in its place."""
    mapper = UpdateMapper(ROOT)
    tool_input = {"command": "ls \ud800", "\udc00": ["x\ud800"]}
    [start] = mapper.updates(item(ItemStarted, "k1", "bash", "running", input=tool_input))
    done = mapper.updates(
        item(ItemCompleted, "k1", "bash", "completed", input=tool_input, detail="out \ud800")
    )
    for update in [start, *done]:
        clean = well_formed_value(update)
        line = encode_message({"method": "session/update", "params": serialize_params(clean)})
        decoded = json.loads(line.decode("utf-8"))
        assert "\ud800" not in json.dumps(decoded, ensure_ascii=False)
    clean_start = well_formed_value(start)
    assert clean_start.title == "bash ls \ufffd"
    assert clean_start.raw_input == {"command": "ls \ufffd", "\ufffd": ["x\ufffd"]}
    assert start.raw_input == tool_input  # the mapper's own state is left as it was
    plain = mapper.updates(item(ItemUpdated, "k2", "read", "running", input={"filePath": "/a"}))
    assert well_formed_value(plain[0]) is plain[0]  # nothing to change: no copy
