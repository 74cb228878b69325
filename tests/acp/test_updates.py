"""The event -> ``session/update`` translation on its own (no connection)."""

from __future__ import annotations

from typing import Any

from adapter import ChildStarted, ItemCompleted, ItemStarted, ItemUpdated
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
