"""Behaviour of the in-process OpenCode emulation (``adapter.testing.fake``).

Every test talks to the fake the way a client would: a plain ``httpx.AsyncClient``
on ``fake.transport`` and ``httpx_sse.aconnect_sse`` for ``GET /event``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from httpx_sse import aconnect_sse

from adapter.testing.fake import (
    Fail,
    FakeOpenCodeServer,
    Hang,
    Permission,
    Question,
    Task,
    Text,
    Tool,
)

BASE = "http://fake-opencode"
ID_RE = re.compile(r"^ses_[0-9A-Za-z]{26}$")
JSON = dict[str, Any]


class EventLog:
    """Reads ``GET /event`` in a background task and keeps every event."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client
        self.events: list[JSON] = []
        self.error: BaseException | None = None
        self.ended = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self, fake: FakeOpenCodeServer) -> EventLog:
        before = fake.stream_count
        self._task = asyncio.create_task(self._read())
        await fake.wait_until(lambda: fake.stream_count > before or self.ended.is_set())
        await self.wait_for(lambda e: e["type"] == "server.connected")
        return self

    async def _read(self) -> None:
        try:
            async with aconnect_sse(self.client, "GET", "/event") as source:
                async for sse in source.aiter_sse():
                    self.events.append(json.loads(sse.data))
        except httpx.HTTPError as exc:
            self.error = exc
        finally:
            self.ended.set()

    async def wait_for(self, check: Any, timeout: float = 2.0) -> JSON:
        async with asyncio.timeout(timeout):
            while True:
                for event in self.events:
                    if check(event):
                        return event
                await asyncio.sleep(0.001)

    def of(self, session_id: str) -> list[JSON]:
        return [e for e in self.events if e["properties"].get("sessionID") == session_id]

    def types(self, session_id: str) -> list[str]:
        return [e["type"] for e in self.of(session_id)]

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenCodeServer]:
    server = FakeOpenCodeServer(seed=7)
    yield server
    await server.aclose()


@pytest.fixture
async def client(fake: FakeOpenCodeServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=fake.transport, base_url=BASE) as c:
        yield c


@pytest.fixture
async def log(fake: FakeOpenCodeServer, client: httpx.AsyncClient) -> AsyncIterator[EventLog]:
    events = await EventLog(client).start(fake)
    yield events
    await events.stop()


async def new_session(client: httpx.AsyncClient, **body: Any) -> JSON:
    response = await client.post("/session", json=body)
    assert response.status_code == 200
    data: JSON = response.json()
    return data


async def prompt(
    client: httpx.AsyncClient, session_id: str, text: str, **extra: Any
) -> httpx.Response:
    body = {"parts": [{"type": "text", "text": text}], **extra}
    return await client.post(f"/session/{session_id}/prompt_async", json=body)


async def idle(fake: FakeOpenCodeServer, session_id: str) -> None:
    await fake.wait_until(lambda: not fake.sessions[session_id].busy)


def tool_parts(fake: FakeOpenCodeServer, session_id: str, tool: str) -> list[JSON]:
    return [
        part
        for message in fake.sessions[session_id].messages
        for part in message.parts
        if part["type"] == "tool" and part["tool"] == tool
    ]


# --------------------------------------------------------------------- basics


async def test_health(client: httpx.AsyncClient) -> None:
    response = await client.get("/global/health")
    assert response.status_code == 200
    assert response.json() == {"healthy": True, "version": "1.18.34"}


async def test_create_get_session_shapes(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    root = await new_session(client)
    assert ID_RE.match(root["id"])
    assert root["title"].startswith("New session - ")
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$", root["title"].split(" - ")[1])
    assert root["version"] == "1.18.34"
    assert root["projectID"] and root["directory"] and root["slug"]
    assert root["time"]["created"] == root["time"]["updated"]
    assert "parentID" not in root

    child = await new_session(client, parentID=root["id"])
    assert child["parentID"] == root["id"]
    assert child["title"].startswith("Child session - ")
    titled = await new_session(client, title="hello")
    assert titled["title"] == "hello"

    got = await client.get(f"/session/{child['id']}")
    assert got.status_code == 200
    assert got.json() == child
    await log.wait_for(lambda e: e["properties"].get("sessionID") == titled["id"])
    assert log.types(root["id"]) == ["session.created"]  # measured: no session.updated
    created = log.of(child["id"])[0]
    assert created["id"].startswith("evt_")
    assert created["properties"]["info"]["parentID"] == root["id"]


async def test_not_found_and_bad_ids(client: httpx.AsyncClient) -> None:
    missing = "ses_0000000000000000000000000"
    response = await client.get(f"/session/{missing}")
    assert response.status_code == 404
    assert response.json() == {
        "name": "NotFoundError",
        "data": {"message": f"Session not found: {missing}"},
    }
    children = await client.get(f"/session/{missing}/children")
    assert children.status_code == 404
    assert children.json()["name"] == "NotFoundError"

    for path in ("/session/nope", "/session/nope/children", "/session/nope/abort"):
        method = "POST" if path.endswith("abort") else "GET"
        bad = await client.request(method, path)
        assert bad.status_code == 500, path
        assert bad.json()["name"] == "UnknownError"

    assert (await client.get("/no/such/route")).status_code == 404
    assert (await client.delete("/global/health")).status_code == 404


async def test_children_direct_only_in_creation_order(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    """Measured on 1.18.34: four API children come back oldest first, grandchildren not."""
    root = await new_session(client)
    kids = [(await new_session(client, parentID=root["id"]))["id"] for _ in range(4)]
    grandchild = await new_session(client, parentID=kids[0])
    await client.patch(f"/session/{kids[0]}", json={"title": "renamed"})
    response = await client.get(f"/session/{root['id']}/children")
    listed = [s["id"] for s in response.json()]
    assert listed == kids  # a rename does not move a child either
    assert grandchild["id"] not in listed
    assert fake.sessions[root["id"]].children == kids


async def test_add_session_builds_trees_cheaply(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    started = time.perf_counter()
    root = fake.add_session(title="root")
    level = [root]
    for _ in range(3):
        level = [fake.add_session(parent_id=p) for p in level for _ in range(12)]
    assert len(fake.sessions) == 1 + 12 + 144 + 1728
    assert time.perf_counter() - started < 2.0
    assert all(ID_RE.match(s) for s in level)
    assert len(set(fake.sessions)) == len(fake.sessions)
    children = (await client.get(f"/session/{root}/children")).json()
    assert len(children) == 12
    assert all(c["parentID"] == root for c in children)
    with pytest.raises(KeyError):
        fake.add_session(parent_id="ses_missing")


# --------------------------------------------------------------------- status


async def test_status_map_lists_only_non_idle(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    a = fake.add_session(busy=True)
    b = fake.add_session()
    c = fake.add_session()
    assert (await client.get("/session/status")).json() == {a: {"type": "busy"}}
    fake.set_busy(b, True)
    retry = {"type": "retry", "attempt": 1, "message": "rate limited", "next": 1000}
    fake.set_status(c, retry)
    assert (await client.get("/session/status")).json() == {
        a: {"type": "busy"},
        b: {"type": "busy"},
        c: retry,
    }
    fake.set_busy(a, False)
    assert set((await client.get("/session/status")).json()) == {b, c}
    await log.wait_for(lambda e: e["type"] == "session.idle")
    assert log.types(a) == ["session.status", "session.idle"]
    assert log.types(c) == ["session.status"]


# --------------------------------------------------------------------- runs


async def test_default_run_event_sequence_and_messages(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    sid = (await new_session(client))["id"]
    response = await prompt(client, sid, "hello", messageID="msg_mine0001")
    assert response.status_code == 204
    assert (await client.get("/session/status")).json() == {sid: {"type": "busy"}}
    await log.wait_for(lambda e: e["type"] == "session.idle")
    await log.wait_for(lambda _e: log.types(sid).count("session.diff") == 2)
    types = log.types(sid)
    # The order measured on a real 1.18.34 server for a one-step text turn.
    assert types == [
        "session.created",  # POST /session
        "session.updated",  # the prompt sets the session's agent and model
        "message.updated",  # user echo
        "message.part.updated",
        "session.updated",
        "session.status",  # busy
        "message.updated",  # assistant
        "session.updated",  # the session's diff summary appears with the first step
        "session.diff",
        "session.status",  # busy again as the step starts streaming
        "message.part.updated",  # step-start
        "message.part.updated",  # text ""
        "message.part.delta",
        "message.part.updated",  # text with time.end
        "message.part.updated",  # step-finish
        "message.updated",  # finish + completed
        "message.updated",  # ... announced twice
        "session.status",  # busy once more
        "session.status",  # idle
        "session.idle",
        "session.updated",  # the step's tokens and cost added to the session
        "session.diff",
    ]
    statuses = [e["properties"]["status"]["type"] for e in log.of(sid) if "status" in e["type"]]
    assert statuses == ["busy", "busy", "busy", "idle"]
    diff = [e["properties"] for e in log.of(sid) if e["type"] == "session.diff"]
    assert diff == [{"sessionID": sid, "diff": []}] * 2
    echo = log.of(sid)[types.index("message.updated")]["properties"]["info"]
    assert echo["id"] == "msg_mine0001"
    assert echo["role"] == "user"

    messages = (await client.get(f"/session/{sid}/message")).json()
    assert [m["info"]["role"] for m in messages] == ["user", "assistant"]
    user, assistant = messages
    assert user["parts"][0]["text"] == "hello"
    info = assistant["info"]
    assert info["parentID"] == "msg_mine0001"
    assert info["finish"] == "stop"
    assert "completed" in info["time"]
    assert [p["type"] for p in assistant["parts"]] == ["step-start", "text", "step-finish"]
    text = assistant["parts"][1]
    assert text["text"] == "ok"
    assert "end" in text["time"]
    one = await client.get(f"/session/{sid}/message/{info['id']}")
    assert one.json() == assistant
    assert (await client.get(f"/session/{sid}/message/msg_nope")).status_code == 404
    assert (await client.get("/session/status")).json() == {}


async def test_text_chunks_and_tool_steps(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    fake.script(
        "work",
        [
            Text("Hello from ", chunks=2),
            Text("fake LLM", chunks=2),
            Tool("bash", {"command": "echo hi", "description": "say hi"}, output="hi\n"),
            Tool("read", {"filePath": "/x"}, error="File not found: /x"),
            Text("all done"),
        ],
    )
    sid = (await new_session(client))["id"]
    await prompt(client, sid, "go [[script:work]]")
    await log.wait_for(lambda e: e["type"] == "session.idle")
    deltas = [e["properties"]["delta"] for e in log.of(sid) if e["type"] == "message.part.delta"]
    assert "".join(deltas) == "Hello from fake LLMall done"
    assert len(deltas) == 5

    assistants = [m for m in fake.sessions[sid].messages if m.role == "assistant"]
    assert [m.info["finish"] for m in assistants] == ["tool-calls", "stop"]
    first = assistants[0].parts
    assert [p["type"] for p in first] == ["step-start", "text", "tool", "tool", "step-finish"]
    assert first[1]["text"] == "Hello from fake LLM"  # one text part per step
    bash = first[2]["state"]
    assert bash["status"] == "completed"
    assert bash["output"] == "hi\n"
    assert bash["title"] == "echo hi"
    assert bash["metadata"] == {"output": "hi\n", "exit": 0, "truncated": False}
    read = first[3]["state"]
    assert read["status"] == "error"
    assert read["error"] == "File not found: /x"
    assert assistants[1].text == "all done"

    bash_states = [
        e["properties"]["part"]["state"]["status"]
        for e in log.of(sid)
        if e["type"] == "message.part.updated" and e["properties"]["part"].get("tool") == "bash"
    ]
    assert bash_states == ["pending", "running", "running", "running", "completed"]


async def test_queued_prompt_runs_after_current(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    fake.script("slow", [Text("one", chunks=3, delay=0.01)])
    fake.script("fast", [Text("two")])
    sid = (await new_session(client))["id"]
    await prompt(client, sid, "[[script:slow]]")
    await prompt(client, sid, "[[script:fast]]")
    assert fake.sessions[sid].queued_prompts == 1
    await log.wait_for(lambda e: e["type"] == "session.idle")
    texts = [m.text for m in fake.sessions[sid].messages if m.role == "assistant"]
    assert texts == ["one", "two"]
    assert log.types(sid).count("session.idle") == 1


async def test_blocking_message_endpoint(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    fake.script("answer", [Text("forty-two")])
    sid = (await new_session(client))["id"]
    body = {"parts": [{"type": "text", "text": "q [[script:answer]]"}]}
    response = await client.post(f"/session/{sid}/message", json=body)
    assert response.status_code == 200
    assert response.json()["info"]["role"] == "assistant"
    assert response.json()["parts"][1]["text"] == "forty-two"


async def test_fail_and_unknown_script(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    fake.script("boom", [Text("partial"), Fail("APIError", "upstream 500", {"statusCode": 500})])
    sid = (await new_session(client))["id"]
    await prompt(client, sid, "[[script:boom]]")
    error = await log.wait_for(lambda e: e["type"] == "session.error")
    data = error["properties"]["error"]["data"]
    assert error["properties"]["error"]["name"] == "APIError"
    assert (data["message"], data["statusCode"], data["isRetryable"]) == (
        "upstream 500",
        500,  # ``data`` overrides the default 400
        False,
    )
    assert set(data) == {
        "message",
        "statusCode",
        "isRetryable",
        "responseHeaders",
        "responseBody",
        "metadata",
    }
    await idle(fake, sid)
    assistant = fake.sessions[sid].messages[-1]
    assert assistant.info["error"]["name"] == "APIError"
    assert assistant.text == "partial"

    other = (await new_session(client))["id"]
    await prompt(client, other, "[[script:missing]]")
    unknown = await log.wait_for(
        lambda e: e["type"] == "session.error" and e["properties"]["sessionID"] == other
    )
    assert "missing" in unknown["properties"]["error"]["data"]["message"]


async def test_task_spawns_child_and_returns_its_text(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    fake.script("child", [Text("child result")])
    fake.script("root", [Task("child A", "child"), Text("root done")])
    sid = (await new_session(client))["id"]
    await prompt(client, sid, "[[script:root]]")
    await log.wait_for(
        lambda e: e["type"] == "session.idle" and e["properties"]["sessionID"] == sid
    )
    (child_id,) = fake.sessions[sid].children
    child = fake.sessions[child_id]
    assert child.title == "child A (@general subagent)"
    assert child.parent_id == sid
    (task,) = tool_parts(fake, sid, "task")
    assert task["state"]["status"] == "completed"
    assert task["state"]["metadata"]["sessionId"] == child_id
    # Measured on 1.18.34: the child's id and state wrap the result.
    assert task["state"]["output"] == (
        f'<task id="{child_id}" state="completed">\n'
        "<task_result>\nchild result\n</task_result>\n</task>"
    )
    assert task["state"]["metadata"] == {
        "parentSessionId": sid,
        "sessionId": child_id,
        "model": {"modelID": "fake-model", "providerID": "fake"},
        "truncated": False,
    }
    # the child's session.created arrives right before the part turns running
    types = [(e["type"], e["properties"].get("sessionID")) for e in log.events]
    created = types.index(("session.created", child_id))
    running = next(
        i
        for i, e in enumerate(log.events)
        if e["type"] == "message.part.updated"
        and e["properties"]["part"].get("state", {}).get("status") == "running"
    )
    assert created < running
    assert log.events[running]["properties"]["part"]["state"]["metadata"]["sessionId"] == child_id


# --------------------------------------------------------------------- abort


async def test_abort_unknown_and_idle(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    unknown = await client.post("/session/ses_unknown000000000000000000/abort")
    assert unknown.status_code == 200
    assert unknown.json() is True
    sid = fake.add_session()
    for _ in range(2):
        response = await client.post(f"/session/{sid}/abort")
        assert response.json() is True
    await log.wait_for(lambda e: len([x for x in log.of(sid) if x["type"] == "session.idle"]) == 2)
    assert log.types(sid) == ["session.status", "session.idle"] * 2
    assert fake.sessions[sid].abort_count == 2


async def test_abort_busy_run_keeps_partial_output(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    fake.script(
        "partial",
        [
            Tool("bash", {"command": "echo hi"}, output="hi\n"),
            Text("partial answer", chunks=2),
            Hang(),
        ],
    )
    sid = (await new_session(client))["id"]
    await prompt(client, sid, "go [[script:partial]]")
    await log.wait_for(
        lambda e: e["type"] == "message.part.delta" and e["properties"]["delta"] == " answer"
    )
    mark = len(log.events)
    assert (await client.post(f"/session/{sid}/abort")).json() is True
    # the abort answers after the cleanup: state is final already
    assert not fake.sessions[sid].busy
    await log.wait_for(
        lambda e: log.types(sid)[-1] == "session.idle" and len(log.events) > mark + 6
    )
    after = [e["type"] for e in log.events[mark:]]
    assert after == [
        "session.error",
        "session.status",
        "session.idle",
        "message.part.updated",
        "message.updated",
        "session.status",
        "session.idle",
    ]
    assert log.events[mark]["properties"]["error"] == {
        "name": "MessageAbortedError",
        "data": {"message": "Aborted"},
    }
    messages = (await client.get(f"/session/{sid}/message")).json()
    first, last = messages[1], messages[2]
    assert first["info"]["finish"] == "tool-calls"
    assert first["parts"][1]["state"]["output"] == "hi\n"
    assert last["info"]["error"]["name"] == "MessageAbortedError"
    assert "completed" in last["info"]["time"]
    assert "finish" not in last["info"]
    assert last["parts"][-1]["text"] == "partial answer"


async def test_abort_running_tools(client: httpx.AsyncClient, fake: FakeOpenCodeServer) -> None:
    fake.script("bash", [Tool("bash", {"command": "sleep 32"}, duration=float("inf"))])
    fake.script("edit", [Tool("edit", {"filePath": "/a"}, duration=float("inf"))])
    sh = (await new_session(client))["id"]
    ed = (await new_session(client))["id"]
    await prompt(client, sh, "[[script:bash]]")
    await prompt(client, ed, "[[script:edit]]")
    await fake.wait_until(
        lambda: all(
            tool_parts(fake, s, t) and tool_parts(fake, s, t)[0]["state"]["status"] == "running"
            for s, t in ((sh, "bash"), (ed, "edit"))
        )
    )
    await client.post(f"/session/{sh}/abort")
    await client.post(f"/session/{ed}/abort")
    bash = tool_parts(fake, sh, "bash")[0]["state"]
    assert bash["status"] == "completed"
    assert "User aborted the command" in bash["output"]
    assert bash["metadata"]["exit"] is None
    edit = tool_parts(fake, ed, "edit")[0]["state"]
    assert edit["status"] == "error"
    assert edit["error"] == "Tool execution aborted"
    assert edit["metadata"]["interrupted"] is True


async def test_abort_cascades_to_task_child_but_not_api_children(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    fake.script("hang", [Text("child thinking..."), Hang()])
    fake.script("root", [Task("child A", "hang")])
    root = (await new_session(client))["id"]
    api_child = (await new_session(client, parentID=root))["id"]
    await prompt(client, api_child, "[[script:hang]]")
    await prompt(client, root, "[[script:root]]")
    await fake.wait_until(lambda: len(fake.sessions[root].children) == 2)
    task_child = fake.sessions[root].children[1]
    await fake.wait_until(lambda: fake.sessions[task_child].messages[-1].role == "assistant")
    await asyncio.sleep(0.01)
    status = (await client.get("/session/status")).json()
    assert set(status) == {root, api_child, task_child}

    await client.post(f"/session/{root}/abort")
    assert (await client.get("/session/status")).json() == {api_child: {"type": "busy"}}
    (task,) = tool_parts(fake, root, "task")
    assert task["state"]["status"] == "error"
    assert task["state"]["error"] == "Tool execution aborted"
    assert task["state"]["metadata"]["interrupted"] is True
    assert task["state"]["metadata"]["sessionId"] == task_child
    child_msg = fake.sessions[task_child].messages[-1]
    assert child_msg.info["error"]["name"] == "MessageAbortedError"
    # the child is cancelled before the root
    errors = [e["properties"]["sessionID"] for e in log.events if e["type"] == "session.error"]
    assert errors == [task_child, root]
    await client.post(f"/session/{api_child}/abort")
    assert (await client.get("/session/status")).json() == {}


async def test_aborting_only_the_child_lets_parent_continue(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    fake.script("hang", [Hang()])
    fake.script("root", [Task("child", "hang"), Text("carried on")])
    root = (await new_session(client))["id"]
    await prompt(client, root, "[[script:root]]")
    await fake.wait_until(lambda: bool(fake.sessions[root].children))
    child = fake.sessions[root].children[0]
    await fake.wait_until(lambda: fake.sessions[child].busy)
    await client.post(f"/session/{child}/abort")
    await idle(fake, root)
    (task,) = tool_parts(fake, root, "task")
    assert task["state"]["error"] == "Task cancelled"
    assert fake.sessions[root].messages[-1].text == "carried on"


async def test_abort_drops_queued_prompts_and_busy_flag_sessions(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    fake.script("hang", [Hang()])
    sid = (await new_session(client))["id"]
    await prompt(client, sid, "[[script:hang]]")
    await prompt(client, sid, "queued")
    await client.post(f"/session/{sid}/abort")
    await asyncio.sleep(0.01)
    assert not fake.sessions[sid].busy
    roles = [m.role for m in fake.sessions[sid].messages]
    assert sorted(roles) == ["assistant", "user", "user"]  # the queued prompt never ran

    flagged = fake.add_session(busy=True)
    await client.post(f"/session/{flagged}/abort")
    await log.wait_for(
        lambda e: e["type"] == "session.idle" and e["properties"]["sessionID"] == flagged
    )
    assert log.types(flagged) == ["session.error", "session.status", "session.idle"]


# --------------------------------------------------------------------- permission / question


async def test_permission_round_trip(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    fake.script(
        "perm",
        [
            Permission("bash", ["rm -rf build"], tool=Tool("bash", {"command": "rm -rf build"})),
            Text("ok"),
        ],
    )
    sid = (await new_session(client))["id"]
    await prompt(client, sid, "[[script:perm]]")
    asked = await log.wait_for(lambda e: e["type"] == "permission.asked")
    props = asked["properties"]
    assert props["id"].startswith("per_")
    assert props["sessionID"] == sid
    assert props["permission"] == "bash"
    assert props["patterns"] == ["rm -rf build"]
    assert props["metadata"] == {"command": "rm -rf build"}  # measured defaults for bash
    assert props["always"] == ["rm *"]
    assert [p["id"] for p in (await client.get("/permission")).json()] == [props["id"]]
    assert fake.sessions[sid].busy

    reply = await client.post(f"/permission/{props['id']}/reply", json={"reply": "once"})
    assert reply.status_code == 200
    assert reply.json() is True
    replied = await log.wait_for(lambda e: e["type"] == "permission.replied")
    assert replied["properties"] == {"sessionID": sid, "requestID": props["id"], "reply": "once"}
    await idle(fake, sid)
    assert tool_parts(fake, sid, "bash")[0]["state"]["status"] == "completed"
    again = await client.post(f"/permission/{props['id']}/reply", json={"reply": "once"})
    assert again.status_code == 404


async def test_permission_reject_stops_run(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    fake.script("perm", [Permission("edit", ["src/*"]), Text("never")])
    sid = (await new_session(client))["id"]
    await prompt(client, sid, "[[script:perm]]")
    asked = await log.wait_for(lambda e: e["type"] == "permission.asked")
    await client.post(f"/permission/{asked['properties']['id']}/reply", json={"reply": "reject"})
    await idle(fake, sid)
    state = tool_parts(fake, sid, "edit")[0]["state"]
    assert state["status"] == "error"
    assert "rejected" in state["error"]
    assert "never" not in "".join(m.text for m in fake.sessions[sid].messages)
    assert "session.error" not in log.types(sid)


async def test_abort_leaves_pending_requests_as_ghosts(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    """Measured on 1.18.34: an abort does not withdraw its session's open permission or
    question request. It stays listed, its tool part ends ``error`` (interrupted), the
    session goes idle; a later prompt runs normally; a reply answers ``true`` and emits
    ``replied`` but runs nothing; a second reply is a 404."""
    questions = [{"question": "Go?", "header": "Go", "options": [{"label": "yes"}]}]
    fake.script("perm", [Permission("bash", ["ls"]), Text("never")])
    fake.script("ask", [Question(questions), Text("never")])
    perm_sid = (await new_session(client))["id"]
    ask_sid = (await new_session(client))["id"]
    await prompt(client, perm_sid, "[[script:perm]]")
    await prompt(client, ask_sid, "[[script:ask]]")
    asked = await log.wait_for(lambda e: e["type"] == "permission.asked")
    question = await log.wait_for(lambda e: e["type"] == "question.asked")
    for sid in (perm_sid, ask_sid):
        await client.post(f"/session/{sid}/abort")
    assert (await client.get("/session/status")).json() == {}
    permission_id, question_id = asked["properties"]["id"], question["properties"]["id"]
    assert [p["id"] for p in (await client.get("/permission")).json()] == [permission_id]
    assert [q["id"] for q in (await client.get("/question")).json()] == [question_id]
    assert fake.sessions[perm_sid].pending_requests == [permission_id]
    for sid, tool in ((perm_sid, "bash"), (ask_sid, "question")):
        state = tool_parts(fake, sid, tool)[0]["state"]
        assert (state["status"], state["error"]) == ("error", "Tool execution aborted")
        assert state["metadata"] == {"interrupted": True}

    await prompt(client, perm_sid, "next")  # a later turn neither answers nor needs it
    await idle(fake, perm_sid)
    assert fake.sessions[perm_sid].messages[-1].text == "ok"
    assert [p["id"] for p in (await client.get("/permission")).json()] == [permission_id]

    events_before = len(log.events)
    reply = await client.post(f"/permission/{permission_id}/reply", json={"reply": "once"})
    assert (reply.status_code, reply.json()) == (200, True)
    answer = await client.post(f"/question/{question_id}/reply", json={"answers": [["yes"]]})
    assert (answer.status_code, answer.json()) == (200, True)
    await log.wait_for(lambda e: e["type"] == "question.replied")
    late = [e["type"] for e in log.events[events_before:]]
    assert late == ["permission.replied", "question.replied"]  # and nothing runs
    assert tool_parts(fake, perm_sid, "bash")[0]["state"]["status"] == "error"
    assert (await client.get("/permission")).json() == []
    assert (await client.get("/question")).json() == []
    assert fake.sessions[perm_sid].pending_requests == []
    again = await client.post(f"/permission/{permission_id}/reply", json={"reply": "once"})
    assert again.status_code == 404
    assert not any(
        "never" in m.text for s in (perm_sid, ask_sid) for m in fake.sessions[s].messages
    )


async def test_question_reply_and_reject(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    questions = [
        {
            "question": "Which color?",
            "header": "Color",
            "options": [
                {"label": "red", "description": "warm"},
                {"label": "blue", "description": "cold"},
            ],
        }
    ]
    fake.script("ask", [Question(questions), Text("thanks")])
    sid = (await new_session(client))["id"]
    await prompt(client, sid, "[[script:ask]]")
    asked = await log.wait_for(lambda e: e["type"] == "question.asked")
    qid = asked["properties"]["id"]
    assert qid.startswith("que_")
    assert asked["properties"]["questions"] == questions
    assert asked["properties"]["sessionID"] == sid
    response = await client.post(f"/question/{qid}/reply", json={"answers": [["blue"]]})
    assert response.json() is True
    replied = await log.wait_for(lambda e: e["type"] == "question.replied")
    assert replied["properties"] == {"sessionID": sid, "requestID": qid, "answers": [["blue"]]}
    await idle(fake, sid)
    state = tool_parts(fake, sid, "question")[0]["state"]
    assert state["status"] == "completed"
    assert "blue" in state["output"]
    assert fake.sessions[sid].messages[-1].text == "thanks"

    await prompt(client, sid, "[[script:ask]]")
    second = await log.wait_for(
        lambda e: e["type"] == "question.asked" and e["properties"]["id"] != qid
    )
    rejected = await client.post(f"/question/{second['properties']['id']}/reject")
    assert rejected.json() is True
    await log.wait_for(lambda e: e["type"] == "question.rejected")
    await idle(fake, sid)
    assert tool_parts(fake, sid, "question")[-1]["state"]["status"] == "error"
    assert (await client.post("/question/que_nope/reject")).status_code == 404


# --------------------------------------------------------------------- revert


async def test_revert_marks_and_the_next_prompt_removes(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    """Measured on 1.18.34: revert keeps the messages and sets ``session.revert``;
    unrevert clears it; the next prompt removes the reverted messages."""
    fake.script("hang", [Hang()])
    sid = (await new_session(client))["id"]
    for text in ("one", "two", "three"):
        await prompt(client, sid, text)
        await idle(fake, sid)
    messages = fake.sessions[sid].messages
    second_user, second_reply = messages[2].id, messages[3].id
    tokens_before = fake.sessions[sid].info["tokens"]
    assert tokens_before["input"] == 30  # three steps of 10 input tokens

    response = await client.post(f"/session/{sid}/revert", json={"messageID": second_user})
    assert response.status_code == 200
    assert response.json()["revert"] == {"messageID": second_user}
    assert len((await client.get(f"/session/{sid}/message")).json()) == 6  # nothing removed
    assert "message.removed" not in log.types(sid)
    # An assistant message reverts from the user message of its turn.
    at_reply = await client.post(f"/session/{sid}/revert", json={"messageID": second_reply})
    assert at_reply.json()["revert"] == {"messageID": second_user}
    unknown = await client.post(f"/session/{sid}/revert", json={"messageID": "msg_unknown"})
    assert unknown.json()["revert"] == {"messageID": second_user}

    undone = await client.post(f"/session/{sid}/unrevert")
    assert undone.status_code == 200 and "revert" not in undone.json()
    assert "revert" not in (await client.post(f"/session/{sid}/unrevert")).json()
    await client.post(f"/session/{sid}/revert", json={"messageID": second_user})

    mark = len(log.events)
    await prompt(client, sid, "four")
    await idle(fake, sid)
    later = log.events[mark:]
    removed = [i for i, e in enumerate(later) if e["type"] == "message.removed"]
    assert [later[i]["properties"]["messageID"] for i in removed] == [m.id for m in messages[2:]]
    cleared = later[removed[-1] + 1]
    assert cleared["type"] == "session.updated"
    assert "revert" not in cleared["properties"]["info"]
    assert cleared["properties"]["info"]["tokens"]["input"] == 10  # removed steps taken off
    texts = [m.text for m in fake.sessions[sid].messages]
    assert texts == ["one", "ok", "four", "ok"]

    await prompt(client, sid, "[[script:hang]]")
    busy = await client.post(f"/session/{sid}/revert", json={"messageID": second_user})
    assert busy.status_code == 409
    assert busy.json() == {
        "_tag": "SessionBusyError",
        "sessionID": sid,
        "message": f"Session is busy: {sid}",
    }
    assert (await client.post(f"/session/{sid}/unrevert")).status_code == 409
    await client.post(f"/session/{sid}/abort")


async def test_revert_at_a_part_removes_the_rest_of_its_message(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    fake.script("work", [Text("before"), Tool("bash", {"command": "ls"}, output="a\n")])
    sid = (await new_session(client))["id"]
    await prompt(client, sid, "[[script:work]]")
    await idle(fake, sid)
    first_reply = fake.sessions[sid].messages[1]
    parts = first_reply.parts
    tool = next(p for p in parts if p["type"] == "tool")
    text = next(p for p in parts if p["type"] == "text")
    # A part with no text or tool before it reverts the whole turn.
    whole = await client.post(
        f"/session/{sid}/revert", json={"messageID": first_reply.id, "partID": text["id"]}
    )
    assert whole.json()["revert"] == {"messageID": fake.sessions[sid].messages[0].id}
    response = await client.post(
        f"/session/{sid}/revert", json={"messageID": first_reply.id, "partID": tool["id"]}
    )
    assert response.json()["revert"] == {"messageID": first_reply.id, "partID": tool["id"]}
    later = fake.sessions[sid].messages[2].id
    mark = len(log.events)
    await prompt(client, sid, "again")
    await idle(fake, sid)
    removals = [
        (e["type"], e["properties"]["messageID"], e["properties"].get("partID"))
        for e in log.events[mark:]
        if e["type"] in ("message.removed", "message.part.removed")
    ]
    assert removals == [
        ("message.removed", later, None),
        *[("message.part.removed", first_reply.id, p["id"]) for p in parts[2:]],
    ]
    assert [p["type"] for p in fake.sessions[sid].messages[1].parts] == ["step-start", "text"]


# --------------------------------------------------------------------- session lifecycle


async def test_session_fields_before_and_after_turns(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    """The Session object's fields as measured on 1.18.34: usage from the start,
    ``summary``/``agent``/``model`` from the first prompt, tokens summed per step."""
    fake.script("work", [Tool("bash", {"command": "ls"}, output="a\n"), Text("done")])
    fake.script("kid", [Text("kid")])
    fake.script("spawn", [Task("explore", "kid")])
    created = await new_session(client, title="t")
    zero = {"input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}}
    assert list(created) == [
        "id", "slug", "projectID", "directory", "path",
        "cost", "tokens", "title", "version", "time",
    ]  # fmt: skip
    assert created["path"] == created["directory"].lstrip("/")
    assert (created["cost"], created["tokens"]) == (0, zero)
    sid = created["id"]
    await prompt(client, sid, "[[script:work]]")
    await idle(fake, sid)
    info = (await client.get(f"/session/{sid}")).json()
    assert info["summary"] == {"additions": 0, "deletions": 0, "files": 0}
    assert info["agent"] == "build"
    assert info["model"] == {"id": "fake-model", "providerID": "fake", "variant": "default"}
    steps = [
        p["tokens"]
        for m in fake.sessions[sid].messages
        for p in m.parts
        if p["type"] == "step-finish"
    ]
    assert len(steps) == 2  # the tool step, then the answer
    assert info["tokens"] == {
        "input": sum(t["input"] for t in steps),
        "output": sum(t["output"] for t in steps),
        "reasoning": 0,
        "cache": {"read": 0, "write": 0},
    }
    assert info["time"]["updated"] >= created["time"]["updated"]

    await prompt(client, sid, "[[script:spawn]]")
    await idle(fake, sid)
    child = (await client.get(f"/session/{sid}/children")).json()[0]
    assert child["agent"] == "general" and child["permission"] == []
    assert child["tokens"]["input"] > 0  # the child's own step
    asked = await new_session(
        client, permission=[{"permission": "bash", "pattern": "*", "action": "ask"}]
    )
    assert asked["permission"] == [{"permission": "bash", "pattern": "*", "action": "ask"}]


async def test_patch_session(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    """Measured: ``session.updated`` per PATCH, ``time.updated`` unchanged, unknown
    fields ignored, archived sessions still listed."""
    created = await new_session(client, title="before")
    sid = created["id"]
    renamed = await client.patch(f"/session/{sid}", json={"title": "after"})
    assert renamed.status_code == 200 and renamed.json()["title"] == "after"
    archived = (await client.patch(f"/session/{sid}", json={"time": {"archived": 1234}})).json()
    assert archived["time"] == {**created["time"], "archived": 1234}
    ignored = await client.patch(f"/session/{sid}", json={"bogus": 1})
    assert ignored.status_code == 200 and "bogus" not in ignored.json()
    updates = [
        e["properties"]["info"]
        for e in fake.events
        if e["type"] == "session.updated" and e["properties"]["sessionID"] == sid
    ]
    assert [u["title"] for u in updates[-3:]] == ["after"] * 3
    assert {u["time"]["updated"] for u in updates[-3:]} == {created["time"]["updated"]}
    assert sid in [s["id"] for s in (await client.get("/session")).json()]
    missing = await client.patch("/session/ses_0000000000000000000000000", json={"title": "x"})
    assert missing.status_code == 404 and missing.json()["name"] == "NotFoundError"


async def test_delete_cascades_children_first_and_leaves_runs_and_requests(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    """Measured: ``200 true``; ``session.deleted`` per session, depth first in creation
    order; a busy deleted session stays busy (until aborted) and its pending request
    stays listed; the ids are then unknown (404) except to abort."""
    fake.script("hang", [Hang()])
    fake.script("perm", [Permission("bash", ["ls"])])
    root = (await new_session(client))["id"]
    kid = (await new_session(client, parentID=root))["id"]
    grandkid = (await new_session(client, parentID=kid))["id"]
    kid2 = (await new_session(client, parentID=root))["id"]
    other = (await new_session(client))["id"]
    await prompt(client, kid2, "[[script:hang]]")
    await prompt(client, grandkid, "[[script:perm]]")
    asked = await log.wait_for(lambda e: e["type"] == "permission.asked")
    response = await client.delete(f"/session/{root}")
    assert (response.status_code, response.json()) == (200, True)
    await log.wait_for(
        lambda e: e["type"] == "session.deleted" and e["properties"]["sessionID"] == root
    )
    deleted = [e["properties"]["sessionID"] for e in log.events if e["type"] == "session.deleted"]
    assert deleted == [grandkid, kid, kid2, root]
    assert all(
        e["properties"]["info"]["id"] == e["properties"]["sessionID"]
        for e in log.events
        if e["type"] == "session.deleted"
    )
    for sid in (root, kid, grandkid, kid2):
        assert (await client.get(f"/session/{sid}")).status_code == 404
        assert sid not in fake.sessions
    assert (await client.delete(f"/session/{root}")).status_code == 404
    assert set((await client.get("/session/status")).json()) == {kid2, grandkid}
    assert [p["id"] for p in (await client.get("/permission")).json()] == [
        asked["properties"]["id"]
    ]
    assert list(fake.sessions) == [other]
    assert (await client.post(f"/session/{kid2}/abort")).json() is True
    assert set((await client.get("/session/status")).json()) == {grandkid}


async def test_summarize_runs_a_compaction_turn(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    """Measured: a user message with a ``compaction`` part, a ``summary`` assistant message
    of agent ``compaction`` streaming the summary, ``session.compacted``, idle; ``true``."""
    fake.summary_text = "We fixed the build."
    sid = (await new_session(client))["id"]
    await prompt(client, sid, "hello")
    await idle(fake, sid)
    mark = len(log.events)
    body = {"providerID": "fake", "modelID": "fake-model"}
    response = await client.post(f"/session/{sid}/summarize", json=body)
    assert (response.status_code, response.json()) == (200, True)
    user, summary = [m.to_json() for m in fake.sessions[sid].messages[2:]]
    assert [p["type"] for p in user["parts"]] == ["compaction"]
    assert user["parts"][0]["auto"] is False
    info = summary["info"]
    assert (info["summary"], info["agent"], info["mode"]) == (True, "compaction", "compaction")
    assert info["parentID"] == user["info"]["id"] and info["finish"] == "stop"
    assert fake.sessions[sid].messages[3].text == "We fixed the build."
    await log.wait_for(lambda e: e["type"] == "session.idle" and log.events.index(e) > mark)
    types = [e["type"] for e in log.events[mark:] if e["properties"].get("sessionID") == sid]
    assert types.index("session.compacted") > types.index("message.part.delta")
    assert types[-2:] == ["session.status", "session.idle"] or "session.idle" in types
    bad = await client.post(f"/session/{sid}/summarize", json={"auto": True})
    assert bad.status_code == 400


async def test_summarize_while_busy_waits_and_an_abort_drops_it(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    fake.script("hang", [Hang()])
    sid = (await new_session(client))["id"]
    await prompt(client, sid, "[[script:hang]]")
    await fake.wait_until(lambda: len(fake.sessions[sid].messages) == 2)
    body = {"providerID": "fake", "modelID": "fake-model", "auto": True}
    pending = asyncio.create_task(client.post(f"/session/{sid}/summarize", json=body))
    await fake.wait_until(lambda: len(fake.sessions[sid].messages) == 3)
    compaction = fake.sessions[sid].messages[2].parts[0]
    assert (compaction["type"], compaction["auto"]) == ("compaction", True)
    assert not pending.done()
    await client.post(f"/session/{sid}/abort")
    response = await pending
    assert (response.status_code, response.json()) == (200, True)
    assert [m.role for m in fake.sessions[sid].messages] == ["user", "assistant", "user"]
    assert not fake.sessions[sid].busy


# --------------------------------------------------------------------- auth


async def test_basic_auth() -> None:
    async with FakeOpenCodeServer(password="s3cret") as fake:
        async with httpx.AsyncClient(transport=fake.transport, base_url=BASE) as anon:
            for path in ("/global/health", "/event", "/session/status"):
                assert (await anon.get(path)).status_code == 401, path
        wrong = httpx.BasicAuth("opencode", "nope")
        async with httpx.AsyncClient(transport=fake.transport, base_url=BASE, auth=wrong) as bad:
            assert (await bad.get("/global/health")).status_code == 401
        good = httpx.BasicAuth("opencode", "s3cret")
        async with httpx.AsyncClient(transport=fake.transport, base_url=BASE, auth=good) as ok:
            assert (await ok.get("/global/health")).status_code == 200
            assert (await ok.post("/session", json={})).status_code == 200
        token = base64.b64encode(b"opencode:s3cret").decode()
        async with httpx.AsyncClient(transport=fake.transport, base_url=BASE) as query:
            health = await query.get("/global/health", params={"auth_token": token})
            assert health.status_code == 200


# --------------------------------------------------------------------- stats & hooks


async def test_latency_and_in_flight_accounting() -> None:
    async with FakeOpenCodeServer(latency=0.05, jitter=0.01, seed=1) as fake:
        sid = fake.add_session()
        async with httpx.AsyncClient(transport=fake.transport, base_url=BASE) as client:
            started = time.perf_counter()
            responses = await asyncio.gather(
                *(client.get(f"/session/{sid}") for _ in range(6)),
                client.post(f"/session/{sid}/abort"),
            )
            elapsed = time.perf_counter() - started
        assert all(r.status_code == 200 for r in responses)
        assert 0.05 <= elapsed < 0.5  # concurrent, not serialised
        assert fake.max_in_flight == 7
        assert fake.in_flight == 0
        assert len(fake.requests) == 7
        for record in fake.requests:
            assert record.session_id == sid
            assert record.status == 200
            assert record.ended_at is not None
            assert 0.05 <= record.ended_at - record.started_at < 0.5
        assert [r.path for r in fake.requests].count(f"/session/{sid}/abort") == 1
        fake.reset_stats()
        assert fake.requests == []
        assert fake.max_in_flight == 0


async def test_hold_and_release(client: httpx.AsyncClient, fake: FakeOpenCodeServer) -> None:
    sid = fake.add_session(busy=True)
    hold = fake.hold("POST", "/session/{id}/abort")
    pending = asyncio.create_task(client.post(f"/session/{sid}/abort"))
    await hold.wait_started()
    assert fake.in_flight == 1
    assert fake.sessions[sid].busy  # not handled while held
    other = await client.get(f"/session/{sid}")  # other routes are not held
    assert other.status_code == 200
    hold.release()
    response = await pending
    assert response.json() is True
    assert not fake.sessions[sid].busy
    assert len(hold.requests) == 1


async def test_fail_and_custom_hooks(client: httpx.AsyncClient, fake: FakeOpenCodeServer) -> None:
    sid = fake.add_session()
    fake.fail("GET", "/session/{id}/children", status=503, times=2)
    codes = [(await client.get(f"/session/{sid}/children")).status_code for _ in range(3)]
    assert codes == [503, 503, 200]

    fake.fail("GET", "/session/status", status=200, times=1, body=b"{not json")
    with pytest.raises(json.JSONDecodeError):
        (await client.get("/session/status")).json()

    async def refuse(request: httpx.Request) -> httpx.Response | None:
        raise httpx.ConnectError("refused", request=request)

    hook = fake.on("*", "/global/*", refuse)
    with pytest.raises(httpx.ConnectError):
        await client.get("/global/health")
    assert fake.requests[-1].status is None
    assert hook.calls == 1
    hook.remove()
    assert (await client.get("/global/health")).status_code == 200

    async def timeout_once(request: httpx.Request) -> httpx.Response | None:
        if request.url.path.endswith("/abort"):
            raise httpx.ReadTimeout("slow", request=request)
        return None

    fake.on("POST", "/session/{id}/{action}", timeout_once)
    with pytest.raises(httpx.ReadTimeout):
        await client.post(f"/session/{sid}/abort")
    assert fake.sessions[sid].abort_count == 0


# --------------------------------------------------------------------- event stream


async def test_event_stream_fan_out_no_replay_and_raw(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    first = await EventLog(client).start(fake)
    fake.emit("custom.one", {"n": 1})
    second = await EventLog(client).start(fake)
    fake.emit("custom.two", {"n": 2})
    for log in (first, second):
        await log.wait_for(lambda e: e["type"] == "custom.two")
    assert [e["type"] for e in first.events] == ["server.connected", "custom.one", "custom.two"]
    assert [e["type"] for e in second.events] == ["server.connected", "custom.two"]
    assert all(e["id"].startswith("evt_") for e in first.events)

    raw: list[str] = []
    async with client.stream("GET", "/event") as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = response.aiter_lines()
        raw.append(await anext(lines))
        fake.emit_raw(b"data: {broken\n\n")
        raw.append(await anext(lines))
        raw.append(await anext(lines))
        raw.append(await anext(lines))
    assert json.loads(raw[0][len("data: ") :])["type"] == "server.connected"
    assert raw[1:] == ["", "data: {broken", ""]
    await fake.wait_until(lambda: fake.stream_count == 2)
    await first.stop()
    await second.stop()
    await fake.wait_until(lambda: fake.stream_count == 0)


async def test_drop_event_streams_and_reconnect(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    log = await EventLog(client).start(fake)
    assert fake.drop_event_streams() == 1
    await asyncio.wait_for(log.ended.wait(), 1)
    assert isinstance(log.error, httpx.RemoteProtocolError)
    fake.emit("missed", {})
    again = await EventLog(client).start(fake)
    fake.emit("seen", {})
    await again.wait_for(lambda e: e["type"] == "seen")
    assert [e["type"] for e in again.events] == ["server.connected", "seen"]
    assert fake.drop_event_streams(error=False) == 1
    await asyncio.wait_for(again.ended.wait(), 1)
    assert again.error is None


async def test_heartbeat() -> None:
    async with FakeOpenCodeServer(heartbeat=0.01) as fake, fake.client() as client:
        log = await EventLog(client).start(fake)
        await log.wait_for(lambda e: e["type"] == "server.heartbeat")
        await log.stop()


async def test_wait_helpers(client: httpx.AsyncClient, fake: FakeOpenCodeServer) -> None:
    mark = fake.event_count
    sid = (await new_session(client))["id"]
    created = await fake.wait_for_event(
        "session.created", lambda e: e["properties"]["sessionID"] == sid, since=mark
    )
    assert created["properties"]["info"]["id"] == sid
    with pytest.raises(TimeoutError):
        await fake.wait_for_event("session.created", timeout=0.05)
    waiter = asyncio.create_task(fake.wait_for_event("session.idle"))
    await asyncio.sleep(0)
    await prompt(client, sid, "hi")
    idle_event = await waiter
    assert idle_event["properties"] == {"sessionID": sid}
    with pytest.raises(TimeoutError):
        await fake.wait_until(lambda: False, timeout=0.05)


# --------------------------------------------------------------------- close


async def test_close_is_clean() -> None:
    before = asyncio.all_tasks()
    fake = FakeOpenCodeServer()
    fake.script("hang", [Text("..."), Hang()])
    fake.script("root", [Task("kid", "hang")])
    client = httpx.AsyncClient(transport=fake.transport, base_url=BASE)
    log = await EventLog(client).start(fake)
    sid = (await new_session(client))["id"]
    await prompt(client, sid, "[[script:root]]")
    await fake.wait_until(lambda: len(fake.sessions) == 2 and fake.stream_count == 1)
    held = fake.hold("GET", "/session/status")
    status = asyncio.create_task(client.get("/session/status"))
    await held.wait_started()

    await fake.aclose()
    await asyncio.wait_for(log.ended.wait(), 1)
    assert log.error is None  # the stream ended cleanly
    with pytest.raises(httpx.ConnectError):
        await status
    with pytest.raises(httpx.ConnectError):
        await client.get("/global/health")
    await fake.aclose()  # idempotent
    await log.stop()
    await client.aclose()
    await asyncio.sleep(0)
    assert asyncio.all_tasks() - before == set()


async def test_abort_right_after_prompt_then_prompt_again(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    fake.script("hang", [Hang()])
    sid = (await new_session(client))["id"]
    await prompt(client, sid, "[[script:hang]]")
    assert (await client.post(f"/session/{sid}/abort")).json() is True
    assert not fake.sessions[sid].busy
    await log.wait_for(lambda e: e["type"] == "session.error")
    await prompt(client, sid, "again")
    await idle(fake, sid)
    assert fake.sessions[sid].messages[-1].text == "ok"
    assert (await client.get("/session/status")).json() == {}


# ----------------------------------------------- event order and payloads (measured)
#
# Each expectation below was measured on a real ``opencode serve`` 1.18.34 driven by a
# scripted model (the same script as the fake's), with ids and timestamps stripped.


def label(event: JSON) -> str:
    """An event reduced to what a parser branches on."""
    kind, props = event["type"], event["properties"]
    if kind == "message.part.updated":
        part = props["part"]
        status = f":{part['state']['status']}" if part["type"] == "tool" else ""
        return f"part:{part['type']}{status}"
    if kind == "session.status":
        return f"status:{props['status']['type']}"
    if kind == "message.updated":
        return f"message:{props['info']['role']}"
    return str(kind)


def labels(log: EventLog, session_id: str) -> list[str]:
    return [label(e) for e in log.events if e["properties"].get("sessionID") == session_id]


RUN_ENDED = ["status:busy", "status:idle", "session.idle", "session.updated", "session.diff"]


async def run_to_end(log: EventLog, session_id: str, tail: list[str] = RUN_ENDED) -> list[str]:
    await log.wait_for(lambda _e: labels(log, session_id)[-len(tail) :] == tail)
    return labels(log, session_id)


PROMPTED = [
    "session.created",
    "session.updated",
    "message:user",
    "part:text",
    "session.updated",
    "status:busy",
]
STEP_STARTS = [
    "message:assistant",
    "session.updated",
    "session.diff",
    "status:busy",
    "part:step-start",
]
STEP_ENDS = ["part:step-finish", "message:assistant", "message:assistant"]


async def test_tool_turn_event_order(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    fake.script(
        "tool",
        [
            Tool("bash", {"command": "echo hi", "description": "say hi"}, output="hi\n"),
            Text("done"),
        ],
    )
    sid = (await new_session(client, title="tool"))["id"]
    await prompt(client, sid, "go [[script:tool]]")
    assert await run_to_end(log, sid) == [
        *PROMPTED,
        *STEP_STARTS,
        "part:tool:pending",
        "part:tool:running",  # input only
        "part:tool:running",  # metadata.output ""
        "part:tool:running",  # metadata.output "hi\n"
        "part:tool:completed",
        *STEP_ENDS,
        "status:busy",  # each later step is announced busy before its message
        *STEP_STARTS,
        "part:text",
        "message.part.delta",
        "part:text",
        *STEP_ENDS,
        *RUN_ENDED,
    ]


async def test_bash_streams_its_output_and_says_when_there_is_none(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    command = "for i in 1 2; do echo line$i; done"
    fake.script(
        "stream",
        [
            Tool("bash", {"command": command}, output="line1\nline2\n", duration=0.02),
            Tool("bash", {"command": "true"}),
        ],
    )
    sid = (await new_session(client))["id"]
    await prompt(client, sid, "[[script:stream]]")
    await run_to_end(log, sid)
    updates = [
        e["properties"]["part"]
        for e in log.of(sid)
        if e["type"] == "message.part.updated" and e["properties"]["part"]["type"] == "tool"
    ]
    by_call: dict[str, list[JSON]] = {}
    for part in updates:
        by_call.setdefault(part["callID"], []).append(part["state"])
    streamed, silent = by_call.values()
    assert [s.get("metadata") for s in streamed if s["status"] == "running"] == [
        None,
        {"output": ""},
        {"output": "line1\n"},
        {"output": "line1\nline2\n"},
    ]
    assert streamed[-1]["output"] == "line1\nline2\n"
    assert streamed[-1]["title"] == command
    assert streamed[-1]["metadata"] == {
        "output": "line1\nline2\n",
        "exit": 0,
        "truncated": False,
    }
    assert [s.get("metadata") for s in silent if s["status"] == "running"] == [
        None,
        {"output": ""},
    ]
    assert silent[-1]["output"] == "(no output)"
    assert silent[-1]["metadata"] == {"output": "(no output)", "exit": 0, "truncated": False}


async def test_permission_is_asked_before_the_part_runs(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    bash = Tool("bash", {"command": "pwd", "description": "where"}, output="/p\n")
    fake.script("once", [Permission("bash", ["pwd"], always=["pwd *"], tool=bash), Text("ok")])
    sid = (await new_session(client))["id"]
    await prompt(client, sid, "[[script:once]]")
    asked = await log.wait_for(lambda e: e["type"] == "permission.asked")
    assert labels(log, sid)[-3:] == ["part:tool:pending", "permission.asked", "part:tool:running"]
    running = log.of(sid)[-1]["properties"]["part"]["state"]
    assert set(running) == {"status", "input", "time"}  # no title, no metadata yet
    assert asked["properties"]["tool"]["callID"] == log.of(sid)[-1]["properties"]["part"]["callID"]
    await client.post(f"/permission/{asked['properties']['id']}/reply", json={"reply": "once"})
    events = await run_to_end(log, sid)
    replied = events.index("permission.replied")
    assert (
        events[replied : replied + 6]
        == [
            "permission.replied",
            "part:tool:running",  # metadata.output ""
            "part:tool:running",  # metadata.output "/p\n"
            "part:tool:completed",
            *STEP_ENDS[:2],
        ]
    )


async def test_permission_always_holds_for_the_whole_server(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    """Measured: after ``always``, a later matching request of *another* session runs
    without asking; one that does not match the ``always`` patterns still asks."""
    fake.script("first", [Permission("bash", ["echo a"], always=["echo *"]), Text("ok")])
    fake.script("same", [Permission("bash", ["echo b"], always=["echo *"]), Text("ok")])
    fake.script("other", [Permission("bash", ["ls"], always=["ls *"]), Text("ok")])
    first = (await new_session(client))["id"]
    await prompt(client, first, "[[script:first]]")
    asked = await log.wait_for(lambda e: e["type"] == "permission.asked")
    await client.post(f"/permission/{asked['properties']['id']}/reply", json={"reply": "always"})
    await run_to_end(log, first)
    same = (await new_session(client))["id"]
    await prompt(client, same, "[[script:same]]")
    await run_to_end(log, same)
    assert "permission.asked" not in labels(log, same)
    assert tool_parts(fake, same, "bash")[0]["state"]["status"] == "completed"
    other = (await new_session(client))["id"]
    await prompt(client, other, "[[script:other]]")
    await log.wait_for(
        lambda e: e["type"] == "permission.asked" and e["properties"]["sessionID"] == other
    )


async def test_permission_reject_ends_the_run_without_a_last_busy(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    fake.script("no", [Permission("bash", ["ls"]), Text("never")])
    sid = (await new_session(client))["id"]
    await prompt(client, sid, "[[script:no]]")
    asked = await log.wait_for(lambda e: e["type"] == "permission.asked")
    await client.post(f"/permission/{asked['properties']['id']}/reply", json={"reply": "reject"})
    tail = ["status:idle", "session.idle", "session.updated", "session.diff"]
    events = await run_to_end(log, sid, tail)
    assert events[-11:] == [
        "permission.asked",
        "part:tool:running",
        "permission.replied",
        "part:tool:error",
        *STEP_ENDS,
        *tail,
    ]
    state = tool_parts(fake, sid, "bash")[0]["state"]
    assert state["error"] == "The user rejected permission to use this specific tool call."
    assert "metadata" not in state


async def test_question_is_asked_before_the_part_runs(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    questions = [{"question": "Pick?", "header": "Pick", "options": [{"label": "red"}]}]
    fake.script("ask", [Question(questions), Text("ok")])
    fake.script("dismiss", [Question(questions), Text("never")])
    sid = (await new_session(client))["id"]
    await prompt(client, sid, "[[script:ask]]")
    asked = await log.wait_for(lambda e: e["type"] == "question.asked")
    assert labels(log, sid)[-3:] == ["part:tool:pending", "question.asked", "part:tool:running"]
    await client.post(f"/question/{asked['properties']['id']}/reply", json={"answers": [["red"]]})
    events = await run_to_end(log, sid)
    start = events.index("question.replied")
    assert events[start : start + 2] == ["question.replied", "part:tool:completed"]
    state = tool_parts(fake, sid, "question")[0]["state"]
    assert state["title"] == "Asked 1 question"
    assert state["metadata"] == {"answers": [["red"]], "truncated": False}

    other = (await new_session(client))["id"]
    await prompt(client, other, "[[script:dismiss]]")
    asked = await log.wait_for(
        lambda e: e["type"] == "question.asked" and e["properties"]["sessionID"] == other
    )
    await client.post(f"/question/{asked['properties']['id']}/reject")
    tail = ["status:idle", "session.idle", "session.updated", "session.diff"]
    events = await run_to_end(log, other, tail)
    assert events[-9:-4] == ["question.rejected", "part:tool:error", *STEP_ENDS]
    state = tool_parts(fake, other, "question")[0]["state"]
    assert (state["error"], "metadata" in state) == ("The user dismissed this question", False)


async def test_a_failed_model_call_reports_then_goes_idle_twice(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    fake.script("fail", [Fail(message="bad request here")])
    sid = (await new_session(client))["id"]
    await prompt(client, sid, "[[script:fail]]")
    tail = ["session.idle", "message:assistant", "status:idle", "session.idle"]
    assert await run_to_end(log, sid, tail) == [
        *PROMPTED,
        *STEP_STARTS[:-1],  # no step-start part: the model call never streamed
        "session.error",
        "status:idle",
        *tail,
    ]
    error = next(e for e in log.of(sid) if e["type"] == "session.error")["properties"]["error"]
    body = (
        '{"error": {"message": "bad request here", "type": "invalid_request_error", "code": null}}'
    )
    assert error == {
        "name": "APIError",
        "data": {
            "message": "bad request here",
            "statusCode": 400,
            "isRetryable": False,
            "responseHeaders": {
                "connection": "close",
                "content-length": str(len(body)),
                "content-type": "application/json",
            },
            "responseBody": body,
            "metadata": {"url": "http://fake-model/v1/chat/completions"},
        },
    }
    info = fake.sessions[sid].messages[-1].info
    assert info["error"] == error
    assert "completed" in info["time"] and "finish" not in info


async def test_task_child_events_and_failed_child(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    fake.script("child", [Fail(message="child bad")])
    fake.script("root", [Task("explore", "child"), Text("root done")])
    sid = (await new_session(client))["id"]
    await prompt(client, sid, "[[script:root]]")
    await run_to_end(log, sid)
    (child_id,) = fake.sessions[sid].children
    around = [
        ("child" if e["properties"].get("sessionID") == child_id else "root", label(e))
        for e in log.events
        if e["properties"].get("sessionID") in (sid, child_id)
    ]
    start = around.index(("root", "part:tool:pending"))
    assert around[start : start + 8] == [
        ("root", "part:tool:pending"),
        ("child", "session.created"),
        ("root", "part:tool:running"),
        ("child", "session.updated"),
        ("child", "message:user"),
        ("child", "part:text"),
        ("child", "session.updated"),
        ("root", "part:tool:running"),  # measured: announced again
    ]
    (task,) = tool_parts(fake, sid, "task")
    assert task["state"]["error"] == f"Subagent failed (task_id: {child_id}): child bad"
    assert task["state"]["metadata"]["sessionId"] == child_id


async def test_error_bodies_match_the_real_server(client: httpx.AsyncClient) -> None:
    sid = (await new_session(client))["id"]
    unknown = "ses_ffffffffffffZZZZZZZZZZZZZZ"

    async def call(method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
        response = await client.request(method, path, **kwargs)
        return response.status_code, response.json()

    def bad(message: str, kind: str = "Payload") -> tuple[int, JSON]:
        return 400, {"name": "BadRequest", "data": {"message": message, "kind": kind}}

    not_found = (
        404,
        {"name": "NotFoundError", "data": {"message": f"Session not found: {unknown}"}},
    )
    for method, path in [
        ("GET", ""),
        ("GET", "/children"),
        ("GET", "/message"),
        ("POST", "/message"),
        ("POST", "/prompt_async"),
    ]:
        body = {"parts": [{"type": "text", "text": "hi"}]} if method == "POST" else None
        assert await call(method, f"/session/{unknown}{path}", json=body) == not_found, path
    assert await call("POST", f"/session/{unknown}/abort") == (200, True)
    missing_message = "msg_ffffffffffffZZZZZZZZZZZZZZ"
    assert await call("GET", f"/session/{unknown}/message/{missing_message}") == (
        404,
        {"name": "NotFoundError", "data": {"message": f"Message not found: {missing_message}"}},
    )
    assert await call("GET", f"/session/{sid}/message/abc") == bad(
        'Expected a string starting with "msg", got "abc"\n  at ["messageID"]', "Params"
    )
    status, body = await call("GET", "/session/abc/children")
    assert status == 500 and body["name"] == "UnknownError"
    assert body["data"]["message"] == "Unexpected server error. Check server logs for details."
    assert re.fullmatch(r"err_[0-9a-f]{8}", body["data"]["ref"])

    prompt_path = f"/session/{sid}/prompt_async"
    text = [{"type": "text", "text": "hi"}]
    assert await call("POST", prompt_path, json={}) == bad('Missing key\n  at ["parts"]')
    assert await call("POST", prompt_path, json={"parts": "hi"}) == bad(
        'Expected array, got "hi"\n  at ["parts"]'
    )
    assert await call("POST", prompt_path, json={"parts": [{"type": "text"}]}) == bad(
        'Missing key\n  at ["parts"][0]["text"]'
    )
    assert await call("POST", prompt_path, json={"parts": [{"type": "text", "text": 5}]}) == bad(
        'Expected string, got 5\n  at ["parts"][0]["text"]'
    )
    status, body = await call("POST", prompt_path, json={"parts": [{"type": "bogus"}]})
    assert status == 400 and body["data"]["message"].endswith(
        ', got {"type":"bogus"}\n  at ["parts"][0]'
    )
    assert await call("POST", prompt_path, json={"parts": text, "messageID": "abc"}) == bad(
        'Expected a string starting with "msg", got "abc"\n  at ["messageID"]'
    )
    assert await call("POST", prompt_path, json={"parts": text, "model": "fake"}) == bad(
        'Expected object | null, got "fake"\n  at ["model"]'
    )
    assert await call("POST", prompt_path, json={"parts": text, "agent": 5}) == bad(
        'Expected string | null, got 5\n  at ["agent"]'
    )
    assert await call("POST", prompt_path, json=[1]) == bad("Expected object, got [1]")
    assert await call("POST", prompt_path) == bad("Expected object, got undefined")
    status, body = await call("POST", prompt_path, content=b"{bad")
    assert (status, body["name"]) == (500, "UnknownError")
    assert await call("GET", f"/session/{sid}/message?limit=abc") == bad(
        'Expected an integer, got NaN\n  at ["limit"]', "Query"
    )

    assert await call("POST", "/session", json={"title": 5}) == (400, {"_tag": "BadRequest"})
    assert await call("POST", "/session", content=b"{bad") == (400, {"_tag": "BadRequest"})
    assert await call("POST", "/session", json={"parentID": "abc"}) == (400, {"_tag": "BadRequest"})
    status, orphan = await call("POST", "/session", json={"parentID": unknown})
    assert (status, orphan["parentID"]) == (200, unknown)  # measured: not checked

    permission = "/permission/per_ffffffffffffZZZZZZZZZZZZZZ/reply"
    assert await call("POST", permission, json={"reply": "once"}) == (
        404,
        {
            "_tag": "PermissionNotFoundError",
            "requestID": "per_ffffffffffffZZZZZZZZZZZZZZ",
            "message": "Permission request not found: per_ffffffffffffZZZZZZZZZZZZZZ",
        },
    )
    assert await call("POST", permission, json={"reply": "maybe"}) == bad(
        'Expected "once" | "always" | "reject", got "maybe"\n  at ["reply"]'
    )
    assert await call("POST", permission, json={}) == bad('Missing key\n  at ["reply"]')
    assert await call("POST", "/permission/abc/reply", json={"reply": "once"}) == bad(
        'Expected a string starting with "per", got "abc"\n  at ["requestID"]', "Params"
    )
    question = "/question/que_ffffffffffffZZZZZZZZZZZZZZ"
    for action, body in (("reply", {"answers": [["a"]]}), ("reject", None)):
        assert await call("POST", f"{question}/{action}", json=body) == (
            404,
            {
                "_tag": "QuestionNotFoundError",
                "requestID": "que_ffffffffffffZZZZZZZZZZZZZZ",
                "message": "Question request not found: que_ffffffffffffZZZZZZZZZZZZZZ",
            },
        )
    assert await call("POST", f"{question}/reply", json={"answers": "a"}) == bad(
        'Expected array, got "a"\n  at ["answers"]'
    )
    assert await call("POST", f"{question}/reply", json={"answers": ["a"]}) == bad(
        'Expected QuestionAnswer, got "a"\n  at ["answers"][0]'
    )
    assert await call("POST", f"{question}/reply", json={}) == bad('Missing key\n  at ["answers"]')


async def test_session_list_is_most_recently_updated_first(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    """Measured on 1.18.34: ``GET /session`` sorts by ``time.updated``, newest first, and
    puts the newer of two sessions updated in the same millisecond first."""
    a = (await new_session(client, title="a"))["id"]
    b = (await new_session(client, title="b"))["id"]
    child = (await new_session(client, title="child", parentID=b))["id"]
    for sid in (a, b, child):  # force a tie
        fake.sessions[sid].info["time"] = {"created": 1, "updated": 5}
    listed = [s["id"] for s in (await client.get("/session")).json()]
    assert listed == [child, b, a]
    await prompt(client, a, "hi")
    await idle(fake, a)
    listed = [s["id"] for s in (await client.get("/session?roots=true")).json()]
    assert listed == [a, b]


async def test_a_prompt_sent_during_a_run_joins_its_next_step(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    """Measured: a prompt sent while a tool runs is taken in by the run's next model
    step (whose message answers it) and gets no run of its own."""
    fake.script("first", [Tool("bash", {"command": "sleep 1"}, duration=0.05), Text("done")])
    sid = (await new_session(client))["id"]
    await prompt(client, sid, "[[script:first]]")
    await fake.wait_until(lambda: bool(tool_parts(fake, sid, "bash")))
    await prompt(client, sid, "second [[script:never]]")
    await run_to_end(log, sid)
    messages = fake.sessions[sid].messages
    assert [m.role for m in messages] == ["user", "assistant", "user", "assistant"]
    assert messages[1].info["parentID"] == messages[0].id
    assert messages[3].info["parentID"] == messages[2].id
    assert messages[3].text == "done"
    assert log.types(sid).count("session.idle") == 1


async def test_a_hanging_model_call_has_started_its_step(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    fake.script("hang", [Hang()])
    sid = (await new_session(client))["id"]
    await prompt(client, sid, "[[script:hang]]")
    await log.wait_for(lambda _e: labels(log, sid)[-1:] == ["part:step-start"])
    await client.post(f"/session/{sid}/abort")
    assert [p["type"] for p in fake.sessions[sid].messages[-1].parts] == ["step-start"]


# --------------------------------------------------------------- directories (measured)

HOME = "/home/user/project"  # the fake's default directory
OTHER = "/srv/other"
DIR = "x-opencode-directory"


def in_directory(fake: FakeOpenCodeServer, directory: str, *, query: bool = False) -> Any:
    """A client whose requests are served in ``directory`` (header, or ``?directory=``)."""
    if query:
        return httpx.AsyncClient(
            transport=fake.transport, base_url=BASE, params={"directory": directory}
        )
    return httpx.AsyncClient(transport=fake.transport, base_url=BASE, headers={DIR: directory})


async def created_in(client: httpx.AsyncClient, **request: Any) -> str:
    response = await client.post("/session", json={"title": "t"}, **request)
    assert response.status_code == 200
    info: JSON = response.json()
    assert info["path"] == info["directory"].lstrip("/")
    assert info["projectID"] == "global"
    return str(info["directory"])


async def test_a_session_takes_the_directory_of_its_request_normalised(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    assert fake.directory == HOME
    assert await created_in(client) == HOME
    assert await created_in(client, headers={DIR: OTHER}) == OTHER
    assert await created_in(client, headers={DIR: OTHER + "/"}) == OTHER
    assert await created_in(client, headers={DIR: OTHER + "/./"}) == OTHER
    assert await created_in(client, headers={DIR: "/srv/x/../other"}) == OTHER
    assert await created_in(client, headers={DIR: "relative/dir"}) == HOME + "/relative/dir"
    assert await created_in(client, headers={DIR: "/does/not/exist"}) == "/does/not/exist"
    # The query parameter wins over the header.
    both = {"headers": {DIR: HOME}, "params": {"directory": OTHER}}
    assert await created_in(client, **both) == OTHER
    # Non-ASCII: percent-encoded in the header or in the query; raw UTF-8 header bytes are
    # read as Latin-1 (the adapter's client therefore uses the query for such paths).
    assert await created_in(client, headers={DIR: "%2Fsrv%2Fcaf%C3%A9"}) == "/srv/café"
    assert await created_in(client, headers={DIR: "/srv/caf%C3%A9"}) == "/srv/café"
    assert await created_in(client, params={"directory": "/srv/café"}) == "/srv/café"
    raw = {DIR: "/srv/café".encode()}
    assert await created_in(client, headers=raw) == "/srv/café".encode().decode("latin-1")
    # A child created through the API gets its request's directory, not its parent's.
    parent = await new_session(client)
    child = await client.post("/session", json={"parentID": parent["id"]}, headers={DIR: OTHER})
    assert child.json()["directory"] == OTHER
    assert fake.sessions[child.json()["id"]].directory == OTHER


async def test_a_task_child_runs_in_its_parents_directory(fake: FakeOpenCodeServer) -> None:
    fake.script("kid", [Text("kid done")])
    fake.script("root", [Task("explore", "kid"), Text("root done")])
    async with in_directory(fake, OTHER) as other:
        sid = await new_session(other)
    async with fake.client() as home:
        await prompt(home, sid["id"], "[[script:root]]")  # sent in another directory
        await fake.wait_for_event(
            "session.idle", lambda e: e["properties"]["sessionID"] == sid["id"]
        )
    (child_id,) = fake.sessions[sid["id"]].children
    assert fake.sessions[child_id].directory == OTHER
    (assistant,) = [m for m in fake.sessions[child_id].messages if m.role == "assistant"]
    assert assistant.info["path"] == {"cwd": OTHER, "root": "/"}


async def test_an_event_stream_gets_only_its_directorys_sessions(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    fake.script("kid", [Text("kid done")])
    fake.script("root", [Task("explore", "kid"), Text("root done")])
    async with (
        in_directory(fake, OTHER, query=True) as by_query,
        in_directory(fake, OTHER + "/") as by_header,
        in_directory(fake, HOME) as home_by_header,
    ):
        other_logs = [await EventLog(by_query).start(fake), await EventLog(by_header).start(fake)]
        home_log = await EventLog(home_by_header).start(fake)
        mine = (await new_session(client))["id"]
        theirs = (await new_session(by_header))["id"]
        # Events follow the session's directory, not the directory of the request.
        assert (await prompt(client, theirs, "[[script:root]]")).status_code == 204
        for other_log in other_logs:
            await run_to_end(other_log, theirs)
        (child,) = fake.sessions[theirs].children
        for events in (log, home_log):
            assert {e["properties"].get("sessionID") for e in events.events[1:]} == {mine}
            assert [e["type"] for e in events.events] == ["server.connected", "session.created"]
        for other_log in other_logs:
            about = {e["properties"].get("sessionID") for e in other_log.events[1:]}
            assert about == {theirs, child}
        # An event about no known session goes to every stream.
        fake.emit("custom.everyone", {"n": 1})
        fake.emit("custom.home", {"n": 2}, directory=HOME + "/")
        for events in (log, home_log, *other_logs):
            await events.wait_for(lambda e: e["type"] == "custom.everyone")
        await log.wait_for(lambda e: e["type"] == "custom.home")
        for other_log in other_logs:
            assert "custom.home" not in [e["type"] for e in other_log.events]
        for events in (home_log, *other_logs):
            await events.stop()


async def test_listing_spans_directories_unless_the_query_names_one(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    mine = (await new_session(client))["id"]
    theirs = (await new_session(client, parentID=mine))["id"]
    other = (await client.post("/session", json={}, headers={DIR: OTHER})).json()["id"]
    listed = (await client.get("/session", headers={DIR: OTHER})).json()
    assert {s["id"] for s in listed} == {mine, theirs, other}
    only = (await client.get("/session", params={"directory": OTHER + "/"})).json()
    assert [s["id"] for s in only] == [other]
    both = {"params": {"directory": OTHER}, "headers": {DIR: HOME}}
    assert [s["id"] for s in (await client.get("/session", **both)).json()] == [other]
    # Routes that name a session answer it in any directory.
    got = await client.get(f"/session/{other}", headers={DIR: HOME})
    assert got.status_code == 200
    assert got.json()["directory"] == OTHER


async def test_status_and_pending_requests_are_those_of_the_request_directory(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    bash = Tool("bash", {"command": "pwd", "description": "where"}, output="/p\n")
    fake.script("ask", [Permission("bash", ["pwd"], always=["pwd *"], tool=bash), Text("ok")])
    fake.script("question", [Question([{"question": "Which?", "options": []}]), Text("ok")])
    fake.script("hang", [Hang()])
    asker = (await client.post("/session", json={}, headers={DIR: OTHER})).json()["id"]
    questioner = (await client.post("/session", json={}, headers={DIR: OTHER})).json()["id"]
    hanging = (await new_session(client))["id"]
    other_hang = (await client.post("/session", json={}, headers={DIR: OTHER})).json()["id"]
    await prompt(client, asker, "[[script:ask]]")
    await prompt(client, questioner, "[[script:question]]")
    await prompt(client, hanging, "[[script:hang]]")
    await prompt(client, other_hang, "[[script:hang]]")  # busy in OTHER, prompted from HOME
    await fake.wait_until(lambda: len(fake.sessions[asker].pending_requests) == 1)
    await fake.wait_until(lambda: len(fake.sessions[questioner].pending_requests) == 1)

    home_status = (await client.get("/session/status")).json()
    other_status = (await client.get("/session/status", params={"directory": OTHER})).json()
    assert set(home_status) == {hanging}
    assert set(other_status) == {asker, questioner, other_hang}
    assert (await client.get("/permission")).json() == []
    assert (await client.get("/question")).json() == []
    (permission,) = (await client.get("/permission", headers={DIR: OTHER})).json()
    (question,) = (await client.get("/question", headers={DIR: OTHER})).json()
    assert (permission["sessionID"], question["sessionID"]) == (asker, questioner)

    # A reply sent in another directory does not find the request; it stays pending.
    wrong = await client.post(f"/permission/{permission['id']}/reply", json={"reply": "once"})
    assert wrong.status_code == 404
    assert wrong.json()["_tag"] == "PermissionNotFoundError"
    wrong = await client.post(f"/question/{question['id']}/reply", json={"answers": [["A"]]})
    assert wrong.status_code == 404
    assert wrong.json()["_tag"] == "QuestionNotFoundError"
    assert len(fake.sessions[asker].pending_requests) == 1
    right = {"headers": {DIR: OTHER}}
    ok = await client.post(f"/permission/{permission['id']}/reply", json={"reply": "once"}, **right)
    assert (ok.status_code, ok.json()) == (200, True)
    ok = await client.post(f"/question/{question['id']}/reply", json={"answers": [["A"]]}, **right)
    assert (ok.status_code, ok.json()) == (200, True)
    await idle(fake, asker)
    await idle(fake, questioner)
    for sid in (hanging, other_hang):
        await client.post(f"/session/{sid}/abort")


async def test_the_default_directory_is_normalised_and_add_session_follows_the_parent() -> None:
    async with FakeOpenCodeServer(directory="/srv/p/./") as fake:
        assert fake.directory == "/srv/p"
        root = fake.add_session()
        child = fake.add_session(root)
        elsewhere = fake.add_session(directory="sub/")
        nested = fake.add_session(elsewhere)
        assert fake.sessions[root].directory == fake.sessions[child].directory == "/srv/p"
        assert fake.sessions[elsewhere].directory == fake.sessions[nested].directory
        assert fake.sessions[nested].info["path"] == "srv/p/sub"
        async with fake.client() as client:
            assert (await client.post("/session", json={})).json()["directory"] == "/srv/p"
