"""The fake's event order and payloads, and its directory scoping (both measured on the
real server).
"""

from __future__ import annotations

import re
from typing import Any

import httpx

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
from tests.testing import fake_support as support
from tests.testing.fake_support import BASE, JSON, EventLog

# ----------------------------------------------- event order and payloads (measured)
#
# Each expectation below was measured on a real ``opencode serve`` 1.18.34 driven by a
# scripted model (the same script as the fake's), with ids and timestamps stripped.


def labels(log: EventLog, session_id: str) -> list[str]:
    return [support.label(e) for e in log.events if e["properties"].get("sessionID") == session_id]


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
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    fake.script(
        "tool",
        [
            Tool("bash", {"command": "echo hi", "description": "say hi"}, output="hi\n"),
            Text("done"),
        ],
    )
    sid = (await support.new_session(fake_http, title="tool"))["id"]
    await support.prompt(fake_http, sid, "go [[script:tool]]")
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
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    command = "for i in 1 2; do echo line$i; done"
    fake.script(
        "stream",
        [
            Tool("bash", {"command": command}, output="line1\nline2\n", duration=0.02),
            Tool("bash", {"command": "true"}),
        ],
    )
    sid = (await support.new_session(fake_http))["id"]
    await support.prompt(fake_http, sid, "[[script:stream]]")
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
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    bash = Tool("bash", {"command": "pwd", "description": "where"}, output="/p\n")
    fake.script("once", [Permission("bash", ["pwd"], always=["pwd *"], tool=bash), Text("ok")])
    sid = (await support.new_session(fake_http))["id"]
    await support.prompt(fake_http, sid, "[[script:once]]")
    asked = await log.wait_for(lambda e: e["type"] == "permission.asked")
    assert labels(log, sid)[-3:] == ["part:tool:pending", "permission.asked", "part:tool:running"]
    running = log.of(sid)[-1]["properties"]["part"]["state"]
    assert set(running) == {"status", "input", "time"}  # no title, no metadata yet
    assert asked["properties"]["tool"]["callID"] == log.of(sid)[-1]["properties"]["part"]["callID"]
    await fake_http.post(f"/permission/{asked['properties']['id']}/reply", json={"reply": "once"})
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
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    """Measured: after ``always``, a later matching request of *another* session runs
    without asking; one that does not match the ``always`` patterns still asks."""
    fake.script("first", [Permission("bash", ["echo a"], always=["echo *"]), Text("ok")])
    fake.script("same", [Permission("bash", ["echo b"], always=["echo *"]), Text("ok")])
    fake.script("other", [Permission("bash", ["ls"], always=["ls *"]), Text("ok")])
    first = (await support.new_session(fake_http))["id"]
    await support.prompt(fake_http, first, "[[script:first]]")
    asked = await log.wait_for(lambda e: e["type"] == "permission.asked")
    await fake_http.post(f"/permission/{asked['properties']['id']}/reply", json={"reply": "always"})
    await run_to_end(log, first)
    same = (await support.new_session(fake_http))["id"]
    await support.prompt(fake_http, same, "[[script:same]]")
    await run_to_end(log, same)
    assert "permission.asked" not in labels(log, same)
    assert support.tool_parts(fake, same, "bash")[0]["state"]["status"] == "completed"
    other = (await support.new_session(fake_http))["id"]
    await support.prompt(fake_http, other, "[[script:other]]")
    await log.wait_for(
        lambda e: e["type"] == "permission.asked" and e["properties"]["sessionID"] == other
    )


async def test_permission_reject_ends_the_run_without_a_last_busy(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    fake.script("no", [Permission("bash", ["ls"]), Text("never")])
    sid = await support.rejecting_session(fake_http, log, "no")
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
    state = support.tool_parts(fake, sid, "bash")[0]["state"]
    assert state["error"] == "The user rejected permission to use this specific tool call."
    assert "metadata" not in state


async def test_question_is_asked_before_the_part_runs(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    questions = [{"question": "Pick?", "header": "Pick", "options": [{"label": "red"}]}]
    fake.script("ask", [Question(questions), Text("ok")])
    fake.script("dismiss", [Question(questions), Text("never")])
    sid = (await support.new_session(fake_http))["id"]
    await support.prompt(fake_http, sid, "[[script:ask]]")
    asked = await log.wait_for(lambda e: e["type"] == "question.asked")
    assert labels(log, sid)[-3:] == ["part:tool:pending", "question.asked", "part:tool:running"]
    await fake_http.post(
        f"/question/{asked['properties']['id']}/reply", json={"answers": [["red"]]}
    )
    events = await run_to_end(log, sid)
    start = events.index("question.replied")
    assert events[start : start + 2] == ["question.replied", "part:tool:completed"]
    state = support.tool_parts(fake, sid, "question")[0]["state"]
    assert state["title"] == "Asked 1 question"
    assert state["metadata"] == {"answers": [["red"]], "truncated": False}

    other = (await support.new_session(fake_http))["id"]
    await support.prompt(fake_http, other, "[[script:dismiss]]")
    asked = await log.wait_for(
        lambda e: e["type"] == "question.asked" and e["properties"]["sessionID"] == other
    )
    await fake_http.post(f"/question/{asked['properties']['id']}/reject")
    tail = ["status:idle", "session.idle", "session.updated", "session.diff"]
    events = await run_to_end(log, other, tail)
    assert events[-9:-4] == ["question.rejected", "part:tool:error", *STEP_ENDS]
    state = support.tool_parts(fake, other, "question")[0]["state"]
    assert (state["error"], "metadata" in state) == ("The user dismissed this question", False)


async def test_a_failed_model_call_reports_then_goes_idle_twice(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    fake.script("fail", [Fail(message="bad request here")])
    sid = (await support.new_session(fake_http))["id"]
    await support.prompt(fake_http, sid, "[[script:fail]]")
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
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    fake.script("child", [Fail(message="child bad")])
    fake.script("root", [Task("explore", "child"), Text("root done")])
    sid = (await support.new_session(fake_http))["id"]
    await support.prompt(fake_http, sid, "[[script:root]]")
    await run_to_end(log, sid)
    (child_id,) = fake.sessions[sid].children
    around = [
        ("child" if e["properties"].get("sessionID") == child_id else "root", support.label(e))
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
    (task,) = support.tool_parts(fake, sid, "task")
    assert task["state"]["error"] == f"Subagent failed (task_id: {child_id}): child bad"
    assert task["state"]["metadata"]["sessionId"] == child_id


async def test_error_bodies_match_the_real_server(fake_http: httpx.AsyncClient) -> None:
    sid = (await support.new_session(fake_http))["id"]
    unknown = "ses_ffffffffffffZZZZZZZZZZZZZZ"

    async def call(method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
        response = await fake_http.request(method, path, **kwargs)
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
    for action, answer in (("reply", {"answers": [["a"]]}), ("reject", None)):
        assert await call("POST", f"{question}/{action}", json=answer) == (
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
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    """Measured on 1.18.34: ``GET /session`` sorts by ``time.updated``, newest first, and
    puts the newer of two sessions updated in the same millisecond first."""
    a = (await support.new_session(fake_http, title="a"))["id"]
    b = (await support.new_session(fake_http, title="b"))["id"]
    child = (await support.new_session(fake_http, title="child", parentID=b))["id"]
    for sid in (a, b, child):  # force a tie
        fake.sessions[sid].info["time"] = {"created": 1, "updated": 5}
    listed = [s["id"] for s in (await fake_http.get("/session")).json()]
    assert listed == [child, b, a]
    await support.prompt(fake_http, a, "hi")
    await support.idle(fake, a)
    listed = [s["id"] for s in (await fake_http.get("/session?roots=true")).json()]
    assert listed == [a, b]


async def test_a_prompt_sent_during_a_run_joins_its_next_step(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    """Measured: a prompt sent while a tool runs is taken in by the run's next model
    step (whose message answers it) and gets no run of its own."""
    fake.script("first", [Tool("bash", {"command": "sleep 1"}, duration=0.05), Text("done")])
    sid = (await support.new_session(fake_http))["id"]
    await support.prompt(fake_http, sid, "[[script:first]]")
    await fake.wait_until(lambda: bool(support.tool_parts(fake, sid, "bash")))
    await support.prompt(fake_http, sid, "second [[script:never]]")
    await run_to_end(log, sid)
    messages = fake.sessions[sid].messages
    assert [m.role for m in messages] == ["user", "assistant", "user", "assistant"]
    assert messages[1].info["parentID"] == messages[0].id
    assert messages[3].info["parentID"] == messages[2].id
    assert messages[3].text == "done"
    assert log.types(sid).count("session.idle") == 1


async def test_a_hanging_model_call_has_started_its_step(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    sid = await support.hanging_session(fake_http, fake)
    await log.wait_for(lambda _e: labels(log, sid)[-1:] == ["part:step-start"])
    await fake_http.post(f"/session/{sid}/abort")
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
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    assert fake.directory == HOME
    assert await created_in(fake_http) == HOME
    assert await created_in(fake_http, headers={DIR: OTHER}) == OTHER
    assert await created_in(fake_http, headers={DIR: OTHER + "/"}) == OTHER
    assert await created_in(fake_http, headers={DIR: OTHER + "/./"}) == OTHER
    assert await created_in(fake_http, headers={DIR: "/srv/x/../other"}) == OTHER
    assert await created_in(fake_http, headers={DIR: "relative/dir"}) == HOME + "/relative/dir"
    assert await created_in(fake_http, headers={DIR: "/does/not/exist"}) == "/does/not/exist"
    # The query parameter wins over the header.
    both = {"headers": {DIR: HOME}, "params": {"directory": OTHER}}
    assert await created_in(fake_http, **both) == OTHER
    # Non-ASCII: percent-encoded in the header or in the query; raw UTF-8 header bytes are
    # read as Latin-1 (the adapter's client therefore uses the query for such paths).
    assert await created_in(fake_http, headers={DIR: "%2Fsrv%2Fcaf%C3%A9"}) == "/srv/café"
    assert await created_in(fake_http, headers={DIR: "/srv/caf%C3%A9"}) == "/srv/café"
    assert await created_in(fake_http, params={"directory": "/srv/café"}) == "/srv/café"
    raw = {DIR: "/srv/café".encode()}
    assert await created_in(fake_http, headers=raw) == "/srv/café".encode().decode("latin-1")
    # A child created through the API gets its request's directory, not its parent's.
    parent = await support.new_session(fake_http)
    child = await fake_http.post("/session", json={"parentID": parent["id"]}, headers={DIR: OTHER})
    assert child.json()["directory"] == OTHER
    assert fake.sessions[child.json()["id"]].directory == OTHER


async def test_a_task_child_runs_in_its_parents_directory(fake: FakeOpenCodeServer) -> None:
    fake.script("kid", [Text("kid done")])
    fake.script("root", [Task("explore", "kid"), Text("root done")])
    async with in_directory(fake, OTHER) as other:
        sid = await support.new_session(other)
    async with fake.client() as home:
        await support.prompt(home, sid["id"], "[[script:root]]")  # sent in another directory
        await fake.wait_for_event(
            "session.idle", lambda e: e["properties"]["sessionID"] == sid["id"]
        )
    (child_id,) = fake.sessions[sid["id"]].children
    assert fake.sessions[child_id].directory == OTHER
    (assistant,) = [m for m in fake.sessions[child_id].messages if m.role == "assistant"]
    assert assistant.info["path"] == {"cwd": OTHER, "root": "/"}


async def test_an_event_stream_gets_only_its_directorys_sessions(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
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
        mine = (await support.new_session(fake_http))["id"]
        theirs = (await support.new_session(by_header))["id"]
        # Events follow the session's directory, not the directory of the request.
        assert (await support.prompt(fake_http, theirs, "[[script:root]]")).status_code == 204
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
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    mine = (await support.new_session(fake_http))["id"]
    theirs = (await support.new_session(fake_http, parentID=mine))["id"]
    other = (await fake_http.post("/session", json={}, headers={DIR: OTHER})).json()["id"]
    listed = (await fake_http.get("/session", headers={DIR: OTHER})).json()
    assert {s["id"] for s in listed} == {mine, theirs, other}
    only = (await fake_http.get("/session", params={"directory": OTHER + "/"})).json()
    assert [s["id"] for s in only] == [other]
    both = await fake_http.get("/session", params={"directory": OTHER}, headers={DIR: HOME})
    assert [s["id"] for s in both.json()] == [other]
    # Routes that name a session answer it in any directory.
    got = await fake_http.get(f"/session/{other}", headers={DIR: HOME})
    assert got.status_code == 200
    assert got.json()["directory"] == OTHER


async def test_status_and_pending_requests_are_those_of_the_request_directory(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    bash = Tool("bash", {"command": "pwd", "description": "where"}, output="/p\n")
    fake.script("ask", [Permission("bash", ["pwd"], always=["pwd *"], tool=bash), Text("ok")])
    fake.script("question", [Question([{"question": "Which?", "options": []}]), Text("ok")])
    fake.script("hang", [Hang()])
    asker = (await fake_http.post("/session", json={}, headers={DIR: OTHER})).json()["id"]
    questioner = (await fake_http.post("/session", json={}, headers={DIR: OTHER})).json()["id"]
    hanging = (await support.new_session(fake_http))["id"]
    other_hang = (await fake_http.post("/session", json={}, headers={DIR: OTHER})).json()["id"]
    await support.prompt(fake_http, asker, "[[script:ask]]")
    await support.prompt(fake_http, questioner, "[[script:question]]")
    await support.prompt(fake_http, hanging, "[[script:hang]]")
    # Busy in OTHER, prompted from HOME.
    await support.prompt(fake_http, other_hang, "[[script:hang]]")
    await fake.wait_until(lambda: len(fake.sessions[asker].pending_requests) == 1)
    await fake.wait_until(lambda: len(fake.sessions[questioner].pending_requests) == 1)

    home_status = (await fake_http.get("/session/status")).json()
    other_status = (await fake_http.get("/session/status", params={"directory": OTHER})).json()
    assert set(home_status) == {hanging}
    assert set(other_status) == {asker, questioner, other_hang}
    assert (await fake_http.get("/permission")).json() == []
    assert (await fake_http.get("/question")).json() == []
    (permission,) = (await fake_http.get("/permission", headers={DIR: OTHER})).json()
    (question,) = (await fake_http.get("/question", headers={DIR: OTHER})).json()
    assert (permission["sessionID"], question["sessionID"]) == (asker, questioner)

    # A reply sent in another directory does not find the request; it stays pending.
    wrong = await fake_http.post(f"/permission/{permission['id']}/reply", json={"reply": "once"})
    assert wrong.status_code == 404
    assert wrong.json()["_tag"] == "PermissionNotFoundError"
    wrong = await fake_http.post(f"/question/{question['id']}/reply", json={"answers": [["A"]]})
    assert wrong.status_code == 404
    assert wrong.json()["_tag"] == "QuestionNotFoundError"
    assert len(fake.sessions[asker].pending_requests) == 1
    right = {DIR: OTHER}
    ok = await fake_http.post(
        f"/permission/{permission['id']}/reply", json={"reply": "once"}, headers=right
    )
    assert (ok.status_code, ok.json()) == (200, True)
    ok = await fake_http.post(
        f"/question/{question['id']}/reply", json={"answers": [["A"]]}, headers=right
    )
    assert (ok.status_code, ok.json()) == (200, True)
    await support.idle(fake, asker)
    await support.idle(fake, questioner)
    for sid in (hanging, other_hang):
        await fake_http.post(f"/session/{sid}/abort")


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
