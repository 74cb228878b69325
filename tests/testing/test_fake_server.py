"""Behaviour of the fake OpenCode server (``adapter.testing.fake``): sessions, runs, abort.

See :mod:`tests.testing.fake_support` for how the tests talk to it.
"""

from __future__ import annotations

import re
import time

import httpx
import pytest

from adapter.testing.fake import Fail, FakeOpenCodeServer, Hang, Task, Text, Tool
from tests.testing import fake_support as support
from tests.testing.fake_support import ID_RE, EventLog

# --------------------------------------------------------------------- basics


async def test_health(fake_http: httpx.AsyncClient) -> None:
    response = await fake_http.get("/global/health")
    assert response.status_code == 200
    assert response.json() == {"healthy": True, "version": "1.18.34"}


async def test_create_get_session_shapes(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    root = await support.new_session(fake_http)
    assert ID_RE.match(root["id"])
    assert root["title"].startswith("New session - ")
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$", root["title"].split(" - ")[1])
    assert root["version"] == "1.18.34"
    assert root["projectID"] and root["directory"] and root["slug"]
    assert root["time"]["created"] == root["time"]["updated"]
    assert "parentID" not in root

    child = await support.new_session(fake_http, parentID=root["id"])
    assert child["parentID"] == root["id"]
    assert child["title"].startswith("Child session - ")
    titled = await support.new_session(fake_http, title="hello")
    assert titled["title"] == "hello"

    got = await fake_http.get(f"/session/{child['id']}")
    assert got.status_code == 200
    assert got.json() == child
    await log.wait_for(lambda e: e["properties"].get("sessionID") == titled["id"])
    assert log.types(root["id"]) == ["session.created"]  # measured: no session.updated
    created = log.of(child["id"])[0]
    assert created["id"].startswith("evt_")
    assert created["properties"]["info"]["parentID"] == root["id"]


async def test_not_found_and_bad_ids(fake_http: httpx.AsyncClient) -> None:
    missing = "ses_0000000000000000000000000"
    response = await fake_http.get(f"/session/{missing}")
    assert response.status_code == 404
    assert response.json() == {
        "name": "NotFoundError",
        "data": {"message": f"Session not found: {missing}"},
    }
    children = await fake_http.get(f"/session/{missing}/children")
    assert children.status_code == 404
    assert children.json()["name"] == "NotFoundError"

    for path in ("/session/nope", "/session/nope/children", "/session/nope/abort"):
        method = "POST" if path.endswith("abort") else "GET"
        bad = await fake_http.request(method, path)
        assert bad.status_code == 500, path
        assert bad.json()["name"] == "UnknownError"

    assert (await fake_http.get("/no/such/route")).status_code == 404
    assert (await fake_http.delete("/global/health")).status_code == 404


async def test_children_direct_only_in_creation_order(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    """Measured on 1.18.34: four API children come back oldest first, grandchildren not."""
    root = await support.new_session(fake_http)
    kids = [(await support.new_session(fake_http, parentID=root["id"]))["id"] for _ in range(4)]
    grandchild = await support.new_session(fake_http, parentID=kids[0])
    await fake_http.patch(f"/session/{kids[0]}", json={"title": "renamed"})
    response = await fake_http.get(f"/session/{root['id']}/children")
    listed = [s["id"] for s in response.json()]
    assert listed == kids  # a rename does not move a child either
    assert grandchild["id"] not in listed
    assert fake.sessions[root["id"]].children == kids


async def test_add_session_builds_trees_cheaply(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
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
    children = (await fake_http.get(f"/session/{root}/children")).json()
    assert len(children) == 12
    assert all(c["parentID"] == root for c in children)
    with pytest.raises(KeyError):
        fake.add_session(parent_id="ses_missing")


# --------------------------------------------------------------------- status


async def test_status_map_lists_only_non_idle(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    a = fake.add_session(busy=True)
    b = fake.add_session()
    c = fake.add_session()
    assert (await fake_http.get("/session/status")).json() == {a: {"type": "busy"}}
    fake.set_busy(b, True)
    retry = {"type": "retry", "attempt": 1, "message": "rate limited", "next": 1000}
    fake.set_status(c, retry)
    assert (await fake_http.get("/session/status")).json() == {
        a: {"type": "busy"},
        b: {"type": "busy"},
        c: retry,
    }
    fake.set_busy(a, False)
    assert set((await fake_http.get("/session/status")).json()) == {b, c}
    await log.wait_for(lambda e: e["type"] == "session.idle")
    assert log.types(a) == ["session.status", "session.idle"]
    assert log.types(c) == ["session.status"]


# --------------------------------------------------------------------- runs


async def test_default_run_event_sequence_and_messages(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    sid = (await support.new_session(fake_http))["id"]
    response = await support.prompt(fake_http, sid, "hello", messageID="msg_mine0001")
    assert response.status_code == 204
    assert (await fake_http.get("/session/status")).json() == {sid: {"type": "busy"}}
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

    messages = (await fake_http.get(f"/session/{sid}/message")).json()
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
    one = await fake_http.get(f"/session/{sid}/message/{info['id']}")
    assert one.json() == assistant
    assert (await fake_http.get(f"/session/{sid}/message/msg_nope")).status_code == 404
    assert (await fake_http.get("/session/status")).json() == {}


async def test_text_chunks_and_tool_steps(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
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
    sid = (await support.new_session(fake_http))["id"]
    await support.prompt(fake_http, sid, "go [[script:work]]")
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
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    fake.script("slow", [Text("one", chunks=3, delay=0.01)])
    fake.script("fast", [Text("two")])
    sid = (await support.new_session(fake_http))["id"]
    await support.prompt(fake_http, sid, "[[script:slow]]")
    await support.prompt(fake_http, sid, "[[script:fast]]")
    assert fake.sessions[sid].queued_prompts == 1
    await log.wait_for(lambda e: e["type"] == "session.idle")
    texts = [m.text for m in fake.sessions[sid].messages if m.role == "assistant"]
    assert texts == ["one", "two"]
    assert log.types(sid).count("session.idle") == 1


async def test_blocking_message_endpoint(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    fake.script("answer", [Text("forty-two")])
    sid = (await support.new_session(fake_http))["id"]
    body = {"parts": [{"type": "text", "text": "q [[script:answer]]"}]}
    response = await fake_http.post(f"/session/{sid}/message", json=body)
    assert response.status_code == 200
    assert response.json()["info"]["role"] == "assistant"
    assert response.json()["parts"][1]["text"] == "forty-two"


async def test_fail_and_unknown_script(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    fake.script("boom", [Text("partial"), Fail("APIError", "upstream 500", {"statusCode": 500})])
    sid = (await support.new_session(fake_http))["id"]
    await support.prompt(fake_http, sid, "[[script:boom]]")
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
    await support.idle(fake, sid)
    assistant = fake.sessions[sid].messages[-1]
    assert assistant.info["error"]["name"] == "APIError"
    assert assistant.text == "partial"

    other = (await support.new_session(fake_http))["id"]
    await support.prompt(fake_http, other, "[[script:missing]]")
    unknown = await log.wait_for(
        lambda e: e["type"] == "session.error" and e["properties"]["sessionID"] == other
    )
    assert "missing" in unknown["properties"]["error"]["data"]["message"]


async def test_task_spawns_child_and_returns_its_text(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    fake.script("child", [Text("child result")])
    fake.script("root", [Task("child A", "child"), Text("root done")])
    sid = (await support.new_session(fake_http))["id"]
    await support.prompt(fake_http, sid, "[[script:root]]")
    await log.wait_for(
        lambda e: e["type"] == "session.idle" and e["properties"]["sessionID"] == sid
    )
    (child_id,) = fake.sessions[sid].children
    child = fake.sessions[child_id]
    assert child.title == "child A (@general subagent)"
    assert child.parent_id == sid
    (task,) = support.tool_parts(fake, sid, "task")
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
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    unknown = await fake_http.post("/session/ses_unknown000000000000000000/abort")
    assert unknown.status_code == 200
    assert unknown.json() is True
    sid = fake.add_session()
    for _ in range(2):
        response = await fake_http.post(f"/session/{sid}/abort")
        assert response.json() is True
    await log.wait_for(lambda e: len([x for x in log.of(sid) if x["type"] == "session.idle"]) == 2)
    assert log.types(sid) == ["session.status", "session.idle"] * 2
    assert fake.sessions[sid].abort_count == 2


async def test_abort_busy_run_keeps_partial_output(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    fake.script(
        "partial",
        [
            Tool("bash", {"command": "echo hi"}, output="hi\n"),
            Text("partial answer", chunks=2),
            Hang(),
        ],
    )
    sid = (await support.new_session(fake_http))["id"]
    await support.prompt(fake_http, sid, "go [[script:partial]]")
    await log.wait_for(
        lambda e: e["type"] == "message.part.delta" and e["properties"]["delta"] == " answer"
    )
    mark = len(log.events)
    assert (await fake_http.post(f"/session/{sid}/abort")).json() is True
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
    messages = (await fake_http.get(f"/session/{sid}/message")).json()
    first, last = messages[1], messages[2]
    assert first["info"]["finish"] == "tool-calls"
    assert first["parts"][1]["state"]["output"] == "hi\n"
    assert last["info"]["error"]["name"] == "MessageAbortedError"
    assert "completed" in last["info"]["time"]
    assert "finish" not in last["info"]
    assert last["parts"][-1]["text"] == "partial answer"


async def test_abort_running_tools(fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer) -> None:
    fake.script("bash", [Tool("bash", {"command": "sleep 32"}, duration=float("inf"))])
    fake.script("edit", [Tool("edit", {"filePath": "/a"}, duration=float("inf"))])
    sh = (await support.new_session(fake_http))["id"]
    ed = (await support.new_session(fake_http))["id"]
    await support.prompt(fake_http, sh, "[[script:bash]]")
    await support.prompt(fake_http, ed, "[[script:edit]]")
    await fake.wait_until(
        lambda: all(
            support.tool_parts(fake, s, t)
            and support.tool_parts(fake, s, t)[0]["state"]["status"] == "running"
            for s, t in ((sh, "bash"), (ed, "edit"))
        )
    )
    await fake_http.post(f"/session/{sh}/abort")
    await fake_http.post(f"/session/{ed}/abort")
    bash = support.tool_parts(fake, sh, "bash")[0]["state"]
    assert bash["status"] == "completed"
    assert "User aborted the command" in bash["output"]
    assert bash["metadata"]["exit"] is None
    edit = support.tool_parts(fake, ed, "edit")[0]["state"]
    assert edit["status"] == "error"
    assert edit["error"] == "Tool execution aborted"
    assert edit["metadata"]["interrupted"] is True


async def test_abort_cascades_to_task_child_but_not_api_children(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    fake.script("hang", [Text("child thinking..."), Hang()])
    fake.script("root", [Task("child A", "hang")])
    root = (await support.new_session(fake_http))["id"]
    api_child = (await support.new_session(fake_http, parentID=root))["id"]
    await support.prompt(fake_http, api_child, "[[script:hang]]")
    await support.prompt(fake_http, root, "[[script:root]]")
    # The task child (the newest, after the API child) hangs: the abort finds it mid-run.
    _, _, task_child = await fake.wait_for_tree(root, sessions=3, hanging=True)
    status = (await fake_http.get("/session/status")).json()
    assert set(status) == {root, api_child, task_child}

    await fake_http.post(f"/session/{root}/abort")
    assert (await fake_http.get("/session/status")).json() == {api_child: {"type": "busy"}}
    (task,) = support.tool_parts(fake, root, "task")
    assert task["state"]["status"] == "error"
    assert task["state"]["error"] == "Tool execution aborted"
    assert task["state"]["metadata"]["interrupted"] is True
    assert task["state"]["metadata"]["sessionId"] == task_child
    child_msg = fake.sessions[task_child].messages[-1]
    assert child_msg.info["error"]["name"] == "MessageAbortedError"
    # the child is cancelled before the root
    errors = [e["properties"]["sessionID"] for e in log.events if e["type"] == "session.error"]
    assert errors == [task_child, root]
    await fake_http.post(f"/session/{api_child}/abort")
    assert (await fake_http.get("/session/status")).json() == {}


async def test_aborting_only_the_child_lets_parent_continue(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    fake.script("hang", [Hang()])
    fake.script("root", [Task("child", "hang"), Text("carried on")])
    root = (await support.new_session(fake_http))["id"]
    await support.prompt(fake_http, root, "[[script:root]]")
    await fake.wait_until(lambda: bool(fake.sessions[root].children))
    child = fake.sessions[root].children[0]
    await fake.wait_until(lambda: fake.sessions[child].busy)
    await fake_http.post(f"/session/{child}/abort")
    await support.idle(fake, root)
    (task,) = support.tool_parts(fake, root, "task")
    assert task["state"]["error"] == "Task cancelled"
    assert fake.sessions[root].messages[-1].text == "carried on"


async def test_abort_drops_queued_prompts_and_busy_flag_sessions(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    sid = await support.hanging_session(fake_http, fake)
    await support.prompt(fake_http, sid, "queued")
    await fake_http.post(f"/session/{sid}/abort")
    await log.wait_for_latest(fake)  # the abort's events, read back over the stream
    assert not fake.sessions[sid].busy
    roles = [m.role for m in fake.sessions[sid].messages]
    assert sorted(roles) == ["assistant", "user", "user"]  # the queued prompt never ran

    flagged = fake.add_session(busy=True)
    await fake_http.post(f"/session/{flagged}/abort")
    await log.wait_for(
        lambda e: e["type"] == "session.idle" and e["properties"]["sessionID"] == flagged
    )
    assert log.types(flagged) == ["session.error", "session.status", "session.idle"]
