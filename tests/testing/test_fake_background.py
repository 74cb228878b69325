"""The fake's background subagents (``FakeOpenCodeServer(background_subagents=True)``).

Measured on ``opencode serve`` 1.18.34 with ``OPENCODE_EXPERIMENTAL_BACKGROUND_SUBAGENTS=true``
and a scripted model calling ``task`` with ``"background": true``;
``tests/fixtures/events-background-1.18.34.jsonl`` is one such run (a child that runs
``bash`` then answers, the root's answer, the synthetic message, the root's second run).
Children that must end at a given moment wait on a permission request the test answers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapter.testing.fake import Fail, FakeOpenCodeServer, Hang, Permission, Task, Text, Tool
from tests.testing import fake_support as support
from tests.testing.fake_support import JSON, EventLog

RECORDING = Path(__file__).parents[1] / "fixtures" / "events-background-1.18.34.jsonl"

STARTED = (
    '<task id="{child}" state="running">\n'
    "<summary>Background task started</summary>\n"
    "<task_result>\n"
    "The task is working in the background. You will be notified automatically when it "
    "finishes.\n"
    "DO NOT sleep, poll for progress, ask the task for status, or duplicate this task's work "
    "\u2014 avoid working with the same files or topics it is using.\n"
    "Work on non-overlapping tasks, or briefly tell the user what you launched and end your "
    "response.\n"
    "</task_result>\n</task>"
)
COMPLETED = (
    '<task id="{child}" state="completed">\n'
    "<summary>Background task completed: {description}</summary>\n"
    "<task_result>\n{text}\n</task_result>\n</task>"
)
FAILED = (
    '<task id="{child}" state="error">\n'
    "<summary>Background task failed: {description}</summary>\n"
    "<task_error>\nSubagent failed (task_id: {child}): {message}\n</task_error>\n</task>"
)
FLAG_OFF = "Background subagents require OPENCODE_EXPERIMENTAL_BACKGROUND_SUBAGENTS=true"


@pytest.fixture
def fake_options() -> dict[str, Any]:
    return {"background_subagents": True}


def label(event: JSON) -> str:
    """The event's :func:`~tests.testing.fake_support.label`, and what these tests also tell
    apart: a synthetic part (``part:text:synthetic``), a ``session.error``'s name
    (``error:MessageAbortedError``)."""
    kind, props = event["type"], event["properties"]
    if kind == "session.error":
        return f"error:{props['error']['name']}"
    synthetic = kind == "message.part.updated" and props["part"].get("synthetic")
    return support.label(event) + (":synthetic" if synthetic else "")


def labels_of(events: list[JSON], session_id: str) -> list[str]:
    return [label(e) for e in events if e["properties"].get("sessionID") == session_id]


def settled(labels: list[str]) -> tuple[list[str], int]:
    """Labels without ``status:busy``, and how many there were. Measured: where a later
    model step's ``busy`` falls among its ``session.updated``/``session.diff`` is a race
    on the real server (both orders in one recording); everything else is in order."""
    return [x for x in labels if x != "status:busy"], labels.count("status:busy")


def recorded() -> tuple[list[str], list[str]]:
    """The recording's root and child labels."""
    events = [json.loads(line)["event"] for line in RECORDING.read_text().splitlines()]
    root = events[0]["properties"]["sessionID"]
    child = next(e for e in events if e["properties"].get("info", {}).get("parentID") == root)
    child_id = child["properties"]["sessionID"]
    return labels_of(events, root), labels_of(events, child_id)


def count(log: EventLog, session_id: str, kind: str) -> int:
    return sum(1 for e in log.of(session_id) if e["type"] == kind)


async def start(client: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog) -> str:
    """A root running script ``root``; its id once its background child exists."""
    sid = str((await support.new_session(client, title="bg root"))["id"])
    await support.prompt(client, sid, "go [[script:root]]")
    await log.wait_for(lambda e: label(e) == "part:tool:completed" and sid in json.dumps(e))
    return sid


async def reply_to(client: httpx.AsyncClient, log: EventLog, session_id: str) -> None:
    """Answer ``once`` the permission request of ``session_id``."""
    asked = await log.wait_for(
        lambda e: e["type"] == "permission.asked" and e["properties"]["sessionID"] == session_id
    )
    reply = {"reply": "once"}
    response = await client.post(f"/permission/{asked['properties']['id']}/reply", json=reply)
    assert response.json() is True


async def launched(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> tuple[str, str]:
    """A root that launched a background child (hanging in its model call) and went
    idle: the root's and the child's ids."""
    fake.script("root", [*fake_steps_root(), Text("launched")])
    fake.script("child", [Hang()])
    sid = await start(client, fake, log)
    await log.wait_count("session.idle", sid, 1)
    (child,) = fake.sessions[sid].children
    await fake.wait_until(lambda: bool(fake.sessions[child].messages[-1].parts))
    return sid, child


def order_of(log: EventLog, *sessions: str) -> list[tuple[str, str]]:
    """The labels of ``sessions``' events, each with its session, in stream order."""
    return [
        (e["properties"]["sessionID"], label(e))
        for e in log.events
        if e["properties"].get("sessionID") in sessions
    ]


GATE = Permission("bash", ("echo go",))
"""A step that waits until the test answers its permission request."""


def fake_steps_root() -> list[Task]:
    """The root's background call: child script ``child``, then script ``after``."""
    return [Task("bg work", "child", background=True, result_script="after")]


async def test_the_root_answers_at_once_and_runs_again_in_the_recorded_order(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    fake.script("root", [*fake_steps_root(), Text("root answered at once")])
    fake.script("after", [Text("root ran on the result")])
    fake.script("child", [GATE, Text("child done")])
    sid = await start(fake_http, fake, log)
    await log.wait_count("session.idle", sid, 1)
    (child,) = fake.sessions[sid].children
    assert fake.sessions[child].busy  # the root idles while its child works
    await reply_to(fake_http, log, child)
    await log.wait_count("session.idle", sid, 2)
    await log.wait_for(lambda _e: labels_of(log.events, sid)[-1] == "session.diff")
    root_recorded, _ = recorded()
    assert settled(labels_of(log.events, sid)) == settled(root_recorded)
    synthetic, answer = fake.sessions[sid].messages[-2:]
    assert synthetic.info["role"] == "user" and "parentID" not in synthetic.info
    (part,) = synthetic.parts
    text = COMPLETED.format(child=child, description="bg work", text="child done")
    assert (part["type"], part["text"], part["synthetic"]) == ("text", text, True)
    assert answer.info["parentID"] == synthetic.id and answer.text == "root ran on the result"
    # The child said idle before the root heard of it.
    order = order_of(log, sid, child)
    assert order.index((child, "session.idle")) < order.index((sid, "part:text:synthetic"))


async def test_a_background_childs_own_events_are_in_the_recorded_order(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    fake.script("root", [*fake_steps_root(), Text("root answered at once")])
    bash = Tool("bash", {"command": "sleep 1; echo hi", "description": "sleep"}, output="hi\n")
    fake.script("child", [bash, Text("child done")])
    sid = await start(fake_http, fake, log)
    (child,) = fake.sessions[sid].children
    _, child_recorded = recorded()
    await log.wait_for(lambda _e: len(labels_of(log.events, child)) >= len(child_recorded))
    assert settled(labels_of(log.events, child)) == settled(child_recorded)


async def test_the_task_part_completes_at_once_with_the_measured_output(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    fake.script("root", [*fake_steps_root(), Text("launched")])
    fake.script("child", [Hang()])
    sid = await start(fake_http, fake, log)
    (child,) = fake.sessions[sid].children
    assert fake.sessions[child].info["parentID"] == sid
    (part,) = support.tool_parts(fake, sid, "task")
    state = part["state"]
    assert state["status"] == "completed" and state["title"] == "bg work"
    assert state["input"] == {
        "description": "bg work",
        "prompt": "bg work [[script:child]]",
        "subagent_type": "general",
        "background": True,
    }
    assert state["output"] == STARTED.format(child=child)
    model = {"modelID": "fake-model", "providerID": "fake"}
    assert state["metadata"] == {
        "parentSessionId": sid,
        "sessionId": child,
        "model": model,
        "background": True,
        "jobId": child,
        "truncated": False,
    }
    running = [
        e["properties"]["part"]["state"]
        for e in log.of(sid)
        if label(e) == "part:tool:running" and e["properties"]["part"]["tool"] == "task"
    ]
    assert [s["metadata"] for s in running] == [
        {"parentSessionId": sid, "sessionId": child, "model": model, "background": True}
    ] * 2
    await fake_http.post(f"/session/{child}/abort")


async def test_a_failed_child_tells_the_root_with_its_error(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    fake.script("root", [*fake_steps_root(), Text("root answered at once")])
    fake.script("after", [Text("root saw the failure")])
    fake.script("child", [GATE, Fail(message="boom")])
    sid = await start(fake_http, fake, log)
    await log.wait_count("session.idle", sid, 1)
    (child,) = fake.sessions[sid].children
    await reply_to(fake_http, log, child)
    await log.wait_count("session.idle", sid, 2)
    synthetic, answer = fake.sessions[sid].messages[-2:]
    text = FAILED.format(child=child, description="bg work", message="boom")
    assert [p["text"] for p in synthetic.parts] == [text]
    assert answer.text == "root saw the failure"


async def test_a_child_stopped_alone_says_idle_once_more_and_the_root_does_not_run(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    sid, child = await launched(fake_http, fake, log)
    before = len(fake.sessions[sid].messages)
    assert (await fake_http.post(f"/session/{child}/abort")).json() is True
    await log.wait_count("session.idle", child, 3)
    after = labels_of(log.events, child)
    assert after[after.index("error:MessageAbortedError") :] == [
        "error:MessageAbortedError",
        "status:idle",
        "session.idle",
        "message:assistant",
        "status:idle",
        "session.idle",
        "status:idle",  # measured: the third idle pair of a background child
        "session.idle",
    ]
    # The third pair is the child's watcher's last word: nothing can follow it.
    assert len(fake.sessions[sid].messages) == before and not fake.sessions[sid].busy
    assert count(log, sid, "session.idle") == 1


async def test_the_idle_roots_abort_stops_its_background_child_first(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    sid, child = await launched(fake_http, fake, log)
    before = len(fake.sessions[sid].messages)
    assert (await fake_http.post(f"/session/{sid}/abort")).json() is True
    assert not fake.sessions[child].busy
    await log.wait_count("session.idle", sid, 2)
    order = order_of(log, sid, child)
    assert order.index((child, "error:MessageAbortedError")) < len(order) - 2
    assert order[-2:] == [(sid, "status:idle"), (sid, "session.idle")]
    assert count(log, child, "session.idle") == 2  # no third pair: the root stopped it
    assert count(log, sid, "session.error") == 0
    assert len(fake.sessions[sid].messages) == before


async def test_the_busy_roots_abort_stops_its_background_child_first(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    fake.script("root", [*fake_steps_root(), Hang()])
    fake.script("child", [Hang()])
    sid = await start(fake_http, fake, log)
    (child,) = fake.sessions[sid].children
    assert (await fake_http.post(f"/session/{sid}/abort")).json() is True
    await log.wait_count("session.idle", sid, 2)
    errors = [e["properties"]["sessionID"] for e in log.events if e["type"] == "session.error"]
    assert errors == [child, sid]
    assert count(log, child, "session.idle") == 2
    assert not any(p.get("synthetic") for m in fake.sessions[sid].messages for p in m.parts)


async def test_two_children_each_run_the_root_in_the_order_they_end(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    fake.script(
        "root",
        [
            Task("first", "child", background=True, result_script="saw_first"),
            Task("second", "child", background=True, result_script="saw_second"),
            Text("launched two"),
        ],
    )
    fake.script("saw_first", [Text("saw first")])
    fake.script("saw_second", [Text("saw second")])
    fake.script("child", [GATE, Text("child done")])
    sid = await start(fake_http, fake, log)
    await log.wait_count("session.idle", sid, 1)
    first, second = fake.sessions[sid].children
    await reply_to(fake_http, log, second)
    await log.wait_count("session.idle", sid, 2)
    await reply_to(fake_http, log, first)
    await log.wait_count("session.idle", sid, 3)
    texts = [(m.role, m.text.split("\n")[0]) for m in fake.sessions[sid].messages[-4:]]
    assert texts == [
        ("user", f'<task id="{second}" state="completed">'),
        ("assistant", "saw second"),
        ("user", f'<task id="{first}" state="completed">'),
        ("assistant", "saw first"),
    ]


async def test_a_result_that_comes_while_the_root_runs_joins_its_next_step(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    """Measured: the synthetic message is stored at once; the root's next model step
    answers it (``parentID``) and no run of its own follows."""
    fake.script("root", [*fake_steps_root(), GATE, Text("root answered late")])
    fake.script("after", [Text("never")])
    fake.script("child", [Text("child done")])
    sid = await start(fake_http, fake, log)
    await log.wait_for(lambda e: label(e) == "part:text:synthetic")
    assert fake.sessions[sid].busy
    await reply_to(fake_http, log, sid)
    await log.wait_count("session.idle", sid, 1)
    synthetic, answer = fake.sessions[sid].messages[-2:]
    assert synthetic.parts[0]["synthetic"] is True
    assert answer.info["parentID"] == synthetic.id and answer.text == "root answered late"


async def test_without_the_flag_the_call_fails_and_starts_no_child() -> None:
    async with FakeOpenCodeServer() as fake, fake.client() as http:
        fake.script("root", [*fake_steps_root(), Text("no background")])
        sid = (await support.new_session(http))["id"]
        await support.prompt(http, sid, "go [[script:root]]")
        await fake.wait_until(lambda: len(fake.sessions[sid].messages) == 3)
        await fake.wait_until(lambda: not fake.sessions[sid].busy)
        (part,) = support.tool_parts(fake, sid, "task")
        assert part["state"]["status"] == "error" and part["state"]["error"] == FLAG_OFF
        assert part["state"]["input"]["background"] is True
        assert "metadata" not in part["state"] and "title" not in part["state"]
        assert fake.sessions[sid].children == []
        assert fake.sessions[sid].messages[-1].text == "no background"
