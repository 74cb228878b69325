"""What the partial-result tests share: the recorded streams and server-shaped events.

The recorded fixtures are real ``GET /event`` streams of OpenCode 1.18.34
(``{t, event}`` per line): ``events-partial.jsonl`` holds five root sessions,
one scenario each, where tools finish before an abort; ``events-nested.jsonl``
holds root -> child -> grandchild ``task`` trees stopped mid-way;
``events-1.15.13-task-abort.jsonl`` is OpenCode 1.15.13 stopping a root whose
``task`` child was mid-answer. The synthetic events are shaped like the server's,
so a test states only what differs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from adapter import PartialResult
from adapter._client._responses import Message
from adapter._stop._partial_collector import PartialCollector

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
