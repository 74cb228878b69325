"""The fake reproduces the turn-lifecycle behaviours measured on a real OpenCode 1.18.34.

A follow-up sent as a run ends starts a second run after the idle; an automatic
compaction inserts a summary and a synthetic "continue" message mid-run; a failing
model call is retried with ``retry`` statuses; a restarted server forgets its runs
silently; ``GET /session/status`` can fail for a while. Each test drives the fake over
HTTP and reads ``GET /event`` like a client (the measured sequences are in
``docs/testing.md``).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from adapter.testing.fake import (
    COMPACTION_CONTINUE,
    Compact,
    Fail,
    FakeOpenCodeServer,
    Permission,
    Task,
    Text,
    Tool,
)
from tests.testing.fake_support import JSON, EventLog


def brief(event: JSON) -> str:
    """An event as ``type`` plus what tells it apart in the measured sequences."""
    kind, props = event["type"], event["properties"]
    if kind == "session.status":
        return f"status {props['status']['type']}"
    if kind == "message.updated":
        info = props["info"]
        done = "+" if "completed" in info["time"] else ""
        return f"{info['role']}{done}"
    if kind == "message.part.updated":
        part = props["part"]
        if part["type"] == "tool":
            return f"tool {part['state']['status']}"
        if part["type"] == "step-finish":
            return f"finish {part['reason']}"
        return str(part["type"])
    return str(kind)


def briefs(stream: EventLog, session_id: str) -> list[str]:
    return [brief(e) for e in stream.of(session_id)]


@pytest.fixture
def fake_options() -> dict[str, Any]:
    return {"seed": 11}


@pytest.fixture
def stream(log: EventLog) -> EventLog:
    """The fake's event log (``tests/testing/conftest.py``), by the name these tests read it."""
    return log


async def new_session(client: httpx.AsyncClient) -> str:
    response = await client.post("/session", json={"title": "t"})
    assert response.status_code == 200
    return str(response.json()["id"])


async def prompt(client: httpx.AsyncClient, session_id: str, text: str) -> None:
    body = {"parts": [{"type": "text", "text": text}]}
    response = await client.post(f"/session/{session_id}/prompt_async", json=body)
    assert response.status_code == 204


async def messages(client: httpx.AsyncClient, session_id: str) -> list[JSON]:
    response = await client.get(f"/session/{session_id}/message")
    assert response.status_code == 200
    body: list[JSON] = response.json()
    return body


# ------------------------------------------------------------ follow-up at the end of a run


async def test_prompt_in_the_finishing_window_starts_a_second_run_after_the_idle(
    fake: FakeOpenCodeServer, fake_http: httpx.AsyncClient, stream: EventLog
) -> None:
    fake.script("first", [Text("first answer")])
    fake.script("second", [Text("second answer")])
    sid = await new_session(fake_http)
    hold = fake.hold_run_end(sid)
    await prompt(fake_http, sid, "go [[script:first]]")
    await hold.wait_started()
    assert hold.session_ids == [sid]
    await prompt(fake_http, sid, "follow up [[script:second]]")
    # Held between the last step and the idle: the follow-up is not echoed yet.
    assert [m["info"]["role"] for m in await messages(fake_http, sid)] == ["user", "assistant"]
    assert "session.idle" not in [e["type"] for e in stream.of(sid)]
    hold.release()
    await stream.wait_count("session.idle", sid, 2)
    await fake.wait_until(lambda: not fake.sessions[sid].busy)

    stored = await messages(fake_http, sid)
    assert [m["info"]["role"] for m in stored] == ["user", "assistant", "user", "assistant"]
    first_prompt, first_answer, follow_up, second_answer = (m["info"] for m in stored)
    assert first_answer["parentID"] == first_prompt["id"]
    assert second_answer["parentID"] == follow_up["id"]
    assert [p["text"] for p in stored[3]["parts"] if p["type"] == "text"] == ["second answer"]

    sequence = briefs(stream, sid)
    first_idle = sequence.index("session.idle")
    # Measured: the first run ends (busy, idle, diff pair) before the follow-up's echo,
    # which starts a run of its own: busy, the assistant message, ..., idle.
    assert sequence[first_idle - 5 : first_idle + 1] == [
        "finish stop",
        "assistant+",
        "assistant+",
        "status busy",
        "status idle",
        "session.idle",
    ]
    after = sequence[first_idle + 1 :]
    echo = after.index("user")
    assert after[:echo] == ["session.updated", "session.diff"]
    assert after[echo : echo + 2] == ["user", "text"]
    second = after[after.index("status busy") :]
    assert second[:2] == ["status busy", "assistant"]
    assert second[-5:] == [
        "status busy",
        "status idle",
        "session.idle",
        "session.updated",
        "session.diff",
    ]
    follow_up_events = [
        e
        for e in stream.of(sid)
        if e["type"] == "message.updated" and e["properties"]["info"]["id"] == follow_up["id"]
    ]
    assert stream.events.index(follow_up_events[0]) > stream.events.index(
        next(e for e in stream.of(sid) if e["type"] == "session.idle")
    )


async def test_a_prompt_during_a_step_joins_the_next_step_without_an_idle(
    fake: FakeOpenCodeServer, fake_http: httpx.AsyncClient, stream: EventLog
) -> None:
    fake.script("slow", [Text("first answer", chunks=3, delay=0.02)])
    sid = await new_session(fake_http)
    await prompt(fake_http, sid, "go [[script:slow]]")
    await stream.wait_for(lambda e: e["type"] == "message.part.delta")
    await prompt(fake_http, sid, "more")
    await stream.wait_count("session.idle", sid, 1)
    await fake.wait_until(lambda: not fake.sessions[sid].busy)
    stored = await messages(fake_http, sid)
    assert [m["info"]["role"] for m in stored] == ["user", "assistant", "user", "assistant"]
    assert stored[3]["info"]["parentID"] == stored[2]["info"]["id"]
    assert [e["type"] for e in stream.of(sid)].count("session.idle") == 1


async def test_a_blocking_prompt_in_the_window_answers_with_its_own_run(
    fake: FakeOpenCodeServer, fake_http: httpx.AsyncClient, stream: EventLog
) -> None:
    fake.script("second", [Text("second answer")])
    sid = await new_session(fake_http)
    hold = fake.hold_run_end()
    await prompt(fake_http, sid, "go")
    await hold.wait_started()
    body = {"parts": [{"type": "text", "text": "again [[script:second]]"}]}
    blocking = asyncio.create_task(fake_http.post(f"/session/{sid}/message", json=body))
    await fake.wait_until(
        lambda: bool(fake.calls("POST", f"/session/{sid}/message")),
        description="the blocking prompt reached the fake",
    )
    # A later request's whole round trip: the prompt, received first, has been routed.
    await fake_http.get("/session/status")
    assert not blocking.done()
    hold.release()
    answer = (await blocking).json()
    assert answer["info"]["role"] == "assistant"
    assert [p["text"] for p in answer["parts"] if p["type"] == "text"] == ["second answer"]
    stored = await messages(fake_http, sid)
    assert answer["info"]["parentID"] == stored[2]["info"]["id"]


async def test_a_hold_on_another_session_does_not_hold_this_one(
    fake: FakeOpenCodeServer, fake_http: httpx.AsyncClient, stream: EventLog
) -> None:
    held, free = await new_session(fake_http), await new_session(fake_http)
    hold = fake.hold_run_end(held)
    await prompt(fake_http, free, "go")
    await stream.wait_count("session.idle", free, 1)
    assert not hold.started.is_set()


async def test_an_abort_in_the_window_still_runs_the_follow_up(
    fake: FakeOpenCodeServer, fake_http: httpx.AsyncClient, stream: EventLog
) -> None:
    fake.script("second", [Text("second answer")])
    sid = await new_session(fake_http)
    hold = fake.hold_run_end(sid)
    await prompt(fake_http, sid, "go")
    await hold.wait_started()
    await prompt(fake_http, sid, "again [[script:second]]")
    assert (await fake_http.post(f"/session/{sid}/abort")).json() is True
    hold.release()
    await fake.wait_until(
        lambda: not fake.sessions[sid].busy and len(fake.sessions[sid].messages) == 4
    )
    stored = await messages(fake_http, sid)
    assert stored[3]["info"]["parentID"] == stored[2]["info"]["id"]
    assert [p["text"] for p in stored[3]["parts"] if p["type"] == "text"] == ["second answer"]


# ------------------------------------------------------------ automatic compaction


async def test_compaction_mid_run_inserts_a_summary_and_a_synthetic_continue(
    fake: FakeOpenCodeServer, fake_http: httpx.AsyncClient, stream: EventLog
) -> None:
    fake.script(
        "big",
        [
            Tool("bash", {"command": "echo hi"}, output="hi\n"),
            Compact(summary="the summary"),
            Text("after compaction"),
        ],
    )
    sid = await new_session(fake_http)
    await prompt(fake_http, sid, "go [[script:big]]")
    await stream.wait_count("session.idle", sid, 1)
    await fake.wait_until(lambda: not fake.sessions[sid].busy)

    stored = await messages(fake_http, sid)
    infos = [m["info"] for m in stored]
    assert [i["role"] for i in infos] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    prompt_msg, tool_step, compaction, summary, synthetic, continuation = stored
    assert tool_step["info"]["finish"] == "tool-calls"
    assert compaction["parts"][0] | {"id": "", "messageID": "", "sessionID": ""} == {
        "id": "",
        "messageID": "",
        "sessionID": "",
        "type": "compaction",
        "auto": True,
        "overflow": False,
    }
    assert summary["info"]["parentID"] == compaction["info"]["id"]
    assert summary["info"]["agent"] == summary["info"]["mode"] == "compaction"
    assert summary["info"]["summary"] is True
    assert summary["info"]["finish"] == "stop"
    assert [p["text"] for p in summary["parts"] if p["type"] == "text"] == ["the summary"]
    (continue_part,) = synthetic["parts"]
    assert continue_part["type"] == "text"
    assert continue_part["text"] == COMPACTION_CONTINUE
    assert continue_part["synthetic"] is True
    assert continue_part["metadata"] == {"compaction_continue": True}
    assert continuation["info"]["parentID"] == synthetic["info"]["id"]
    assert continuation["info"]["agent"] == "build"
    assert "summary" not in continuation["info"]
    assert [p["text"] for p in continuation["parts"] if p["type"] == "text"] == ["after compaction"]
    assert prompt_msg["info"]["id"] == tool_step["info"]["parentID"]

    sequence = briefs(stream, sid)
    start = sequence.index("compaction")
    # The measured order, from the compaction message to the continuation's first part.
    assert sequence[start - 1 : start + 22] == [
        "user",
        "compaction",
        "status busy",
        "assistant",
        "status busy",
        "session.updated",
        "session.diff",
        "step-start",
        "text",
        "message.part.delta",
        "text",
        "finish stop",
        "assistant+",
        "assistant+",
        "user",
        "text",
        "session.compacted",
        "status busy",
        "assistant",
        "session.updated",
        "session.diff",
        "status busy",
        "step-start",
    ]
    assert sequence[start - 4 : start - 1] == ["finish tool-calls", "assistant+", "assistant+"]
    assert sequence.count("session.idle") == 1


async def test_compaction_after_a_text_step_ends_that_step_stop(
    fake: FakeOpenCodeServer, fake_http: httpx.AsyncClient, stream: EventLog
) -> None:
    fake.summary_text = "default summary"
    fake.script("big", [Text("big answer"), Compact(), Text("done")])
    sid = await new_session(fake_http)
    await prompt(fake_http, sid, "go [[script:big]]")
    await stream.wait_count("session.idle", sid, 1)
    await fake.wait_until(lambda: not fake.sessions[sid].busy)
    stored = await messages(fake_http, sid)
    assert stored[1]["info"]["finish"] == "stop"
    assert [p["text"] for p in stored[3]["parts"] if p["type"] == "text"] == ["default summary"]
    assert stored[5]["info"]["parentID"] == stored[4]["info"]["id"]


async def test_a_task_child_compacted_mid_run_answers_with_its_continuation(
    fake: FakeOpenCodeServer, fake_http: httpx.AsyncClient, stream: EventLog
) -> None:
    fake.script("child", [Text("before"), Compact(summary="child summary"), Text("child result")])
    fake.script("parent", [Task("explore", "child"), Text("parent done")])
    sid = await new_session(fake_http)
    await prompt(fake_http, sid, "go [[script:parent]]")
    await stream.wait_count("session.idle", sid, 1)
    await fake.wait_until(lambda: not fake.sessions[sid].busy)
    stored = await messages(fake_http, sid)
    (task_part,) = [p for m in stored for p in m["parts"] if p["type"] == "tool"]
    assert "child result" in task_part["state"]["output"]
    assert "child summary" not in task_part["state"]["output"]


# ------------------------------------------------------------ retries


async def test_a_retried_model_call_announces_each_retry_then_fails(
    fake: FakeOpenCodeServer, fake_http: httpx.AsyncClient, stream: EventLog
) -> None:
    fake.script("flaky", [Fail(message="boom", retries=5, retry_delay=0.001)])
    sid = await new_session(fake_http)
    await prompt(fake_http, sid, "go [[script:flaky]]")
    await stream.wait_count("session.idle", sid, 2)
    await fake.wait_until(lambda: not fake.sessions[sid].busy)

    statuses = [e["properties"]["status"] for e in stream.of(sid) if e["type"] == "session.status"]
    retries = [s for s in statuses if s["type"] == "retry"]
    assert [s["attempt"] for s in retries] == [1, 2, 3, 4, 5]
    assert all(s["message"] == "boom" and isinstance(s["next"], int) for s in retries)
    sequence = briefs(stream, sid)
    first = sequence.index("status retry")
    assert sequence[first - 1 : first + 10] == ["status busy"] + ["status retry", "status busy"] * 5
    assert sequence[first + 10 :] == [
        "session.error",
        "status idle",
        "session.idle",
        "assistant+",
        "status idle",
        "session.idle",
    ]
    error = next(e for e in stream.of(sid) if e["type"] == "session.error")["properties"]["error"]
    assert error["name"] == "APIError"
    assert error["data"]["statusCode"] == 500
    assert error["data"]["isRetryable"] is True
    assert json.loads(error["data"]["responseBody"])["error"]["type"] == "server_error"
    stored = await messages(fake_http, sid)
    assert stored[1]["info"]["error"] == error


async def test_status_answers_retry_while_it_lasts_and_an_abort_ends_it_quietly(
    fake: FakeOpenCodeServer, fake_http: httpx.AsyncClient, stream: EventLog
) -> None:
    fake.script("flaky", [Fail(message="boom", retries=5, retry_delay=30.0)])
    sid = await new_session(fake_http)
    await prompt(fake_http, sid, "go [[script:flaky]]")
    await stream.wait_for(
        lambda e: e["type"] == "session.status" and e["properties"]["status"]["type"] == "retry"
    )
    status = (await fake_http.get("/session/status")).json()
    assert status[sid]["type"] == "retry"
    assert status[sid]["attempt"] == 1
    assert status[sid]["message"] == "boom"
    mark = len(stream.of(sid))
    assert (await fake_http.post(f"/session/{sid}/abort")).json() is True
    await stream.wait_count("session.idle", sid, 1)
    await stream.wait_for_latest(fake)
    # Measured: the message completes without an error, then one idle pair.
    assert briefs(stream, sid)[mark:] == ["assistant+", "status idle", "session.idle"]
    assert (await fake_http.get("/session/status")).json() == {}
    stored = await messages(fake_http, sid)
    assert "error" not in stored[1]["info"]
    assert "completed" in stored[1]["info"]["time"]


# ------------------------------------------------------------ a restarted server


async def test_a_restart_ends_runs_silently_and_leaves_them_incomplete(
    fake: FakeOpenCodeServer, fake_http: httpx.AsyncClient, stream: EventLog
) -> None:
    fake.script("long", [Tool("bash", {"command": "sleep 30"}, duration=float("inf"))])
    fake.script("ask", [Permission("bash", patterns=("rm -rf build",))])
    sid, asking = await new_session(fake_http), await new_session(fake_http)
    await prompt(fake_http, sid, "go [[script:long]]")
    await prompt(fake_http, asking, "go [[script:ask]]")
    await stream.wait_for(lambda e: e["type"] == "permission.asked")
    await fake.wait_until(
        lambda: any(
            p.get("state", {}).get("status") == "running"
            for m in fake.sessions[sid].messages
            for p in m.parts
        )
    )
    assert len((await fake_http.get("/permission")).json()) == 1
    mark = len(fake.events)

    await fake.restart()

    assert len(fake.events) == mark  # nothing said about the vanished runs
    async with asyncio.timeout(2.0):
        await stream.ended.wait()
    assert isinstance(stream.error, httpx.RemoteProtocolError)
    assert (await fake_http.get("/session/status")).json() == {}
    assert (await fake_http.get("/permission")).json() == []
    stored = await messages(fake_http, sid)
    assistant = stored[1]["info"]
    assert "completed" not in assistant["time"]
    assert "error" not in assistant and "finish" not in assistant
    (tool,) = [p for p in stored[1]["parts"] if p["type"] == "tool"]
    assert tool["state"]["status"] == "running"

    fresh = await EventLog(fake_http).start(fake)
    try:
        assert (await fake_http.post(f"/session/{sid}/abort")).json() is True
        await fresh.wait_for(lambda e: e["type"] == "session.idle")
        await fresh.wait_for_latest(fake)
        assert [brief(e) for e in fresh.events] == [
            "server.connected",
            "status idle",
            "session.idle",
        ]
    finally:
        await fresh.stop()


async def test_a_blocking_prompt_cut_by_a_restart_fails_like_a_dropped_connection(
    fake: FakeOpenCodeServer, fake_http: httpx.AsyncClient, stream: EventLog
) -> None:
    fake.script("long", [Tool("bash", {"command": "sleep 30"}, duration=float("inf"))])
    sid = await new_session(fake_http)
    body = {"parts": [{"type": "text", "text": "go [[script:long]]"}]}
    blocking = asyncio.create_task(fake_http.post(f"/session/{sid}/message", json=body))
    await fake.wait_until(lambda: len(fake.sessions[sid].messages) == 2)
    await fake.restart()
    with pytest.raises(httpx.RemoteProtocolError):
        await blocking
    # The server still works: a new prompt runs.
    await prompt(fake_http, sid, "again")
    await fake.wait_until(lambda: len(fake.sessions[sid].messages) == 4)
    await fake.wait_until(lambda: not fake.sessions[sid].busy)


# ------------------------------------------------------------ status failures


async def test_status_failures_for_a_period_then_the_truth(
    fake: FakeOpenCodeServer, fake_http: httpx.AsyncClient
) -> None:
    fake.script("long", [Tool("bash", {"command": "sleep 30"}, duration=float("inf"))])
    sid = await new_session(fake_http)
    await prompt(fake_http, sid, "go [[script:long]]")
    await fake.wait_until(lambda: fake.sessions[sid].busy)
    hook = fake.fail("GET", "/session/status", status=503, times=3)
    codes = [(await fake_http.get("/session/status")).status_code for _ in range(4)]
    assert codes == [503, 503, 503, 200]
    assert hook.call_count == 4
    assert (await fake_http.get("/session/status")).json() == {sid: {"type": "busy"}}
    hook.remove()
    always = fake.fail("GET", "/session/status", status=503, times=None)
    assert [(await fake_http.get("/session/status")).status_code for _ in range(3)] == [503] * 3
    always.remove()
    assert (await fake_http.get("/session/status")).status_code == 200
