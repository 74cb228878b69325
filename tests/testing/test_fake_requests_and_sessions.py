"""Behaviour of the fake OpenCode server: permission and question requests, revert, the
session lifecycle, auth, hooks, the event stream and closing.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time

import httpx
import pytest

from adapter.testing.fake import FakeOpenCodeServer, Hang, Permission, Question, Task, Text, Tool
from tests.testing import fake_support as support
from tests.testing.fake_support import BASE, EventLog

# --------------------------------------------------------------------- permission / question


async def test_permission_round_trip(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    fake.script(
        "perm",
        [
            Permission("bash", ["rm -rf build"], tool=Tool("bash", {"command": "rm -rf build"})),
            Text("ok"),
        ],
    )
    sid = (await support.new_session(fake_http))["id"]
    await support.prompt(fake_http, sid, "[[script:perm]]")
    asked = await log.wait_for(lambda e: e["type"] == "permission.asked")
    props = asked["properties"]
    assert props["id"].startswith("per_")
    assert props["sessionID"] == sid
    assert props["permission"] == "bash"
    assert props["patterns"] == ["rm -rf build"]
    assert props["metadata"] == {"command": "rm -rf build"}  # measured defaults for bash
    assert props["always"] == ["rm *"]
    assert [p["id"] for p in (await fake_http.get("/permission")).json()] == [props["id"]]
    assert fake.sessions[sid].busy

    reply = await fake_http.post(f"/permission/{props['id']}/reply", json={"reply": "once"})
    assert reply.status_code == 200
    assert reply.json() is True
    replied = await log.wait_for(lambda e: e["type"] == "permission.replied")
    assert replied["properties"] == {"sessionID": sid, "requestID": props["id"], "reply": "once"}
    await support.idle(fake, sid)
    assert support.tool_parts(fake, sid, "bash")[0]["state"]["status"] == "completed"
    again = await fake_http.post(f"/permission/{props['id']}/reply", json={"reply": "once"})
    assert again.status_code == 404


async def test_permission_reject_stops_run(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    fake.script("perm", [Permission("edit", ["src/*"]), Text("never")])
    sid = await support.rejecting_session(fake_http, log, "perm")
    await support.idle(fake, sid)
    state = support.tool_parts(fake, sid, "edit")[0]["state"]
    assert state["status"] == "error"
    assert "rejected" in state["error"]
    assert "never" not in "".join(m.text for m in fake.sessions[sid].messages)
    assert "session.error" not in log.types(sid)


async def test_abort_leaves_pending_requests_as_ghosts(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    """Measured on 1.18.34: an abort does not withdraw its session's open permission or
    question request. It stays listed, its tool part ends ``error`` (interrupted), the
    session goes idle; a later prompt runs normally; a reply answers ``true`` and emits
    ``replied`` but runs nothing; a second reply is a 404."""
    questions = [{"question": "Go?", "header": "Go", "options": [{"label": "yes"}]}]
    fake.script("perm", [Permission("bash", ["ls"]), Text("never")])
    fake.script("ask", [Question(questions), Text("never")])
    perm_sid = (await support.new_session(fake_http))["id"]
    ask_sid = (await support.new_session(fake_http))["id"]
    await support.prompt(fake_http, perm_sid, "[[script:perm]]")
    await support.prompt(fake_http, ask_sid, "[[script:ask]]")
    asked = await log.wait_for(lambda e: e["type"] == "permission.asked")
    question = await log.wait_for(lambda e: e["type"] == "question.asked")
    for sid in (perm_sid, ask_sid):
        await fake_http.post(f"/session/{sid}/abort")
    assert (await fake_http.get("/session/status")).json() == {}
    permission_id, question_id = asked["properties"]["id"], question["properties"]["id"]
    assert [p["id"] for p in (await fake_http.get("/permission")).json()] == [permission_id]
    assert [q["id"] for q in (await fake_http.get("/question")).json()] == [question_id]
    assert fake.sessions[perm_sid].pending_requests == [permission_id]
    for sid, tool in ((perm_sid, "bash"), (ask_sid, "question")):
        state = support.tool_parts(fake, sid, tool)[0]["state"]
        assert (state["status"], state["error"]) == ("error", "Tool execution aborted")
        assert state["metadata"] == {"interrupted": True}

    await support.prompt(fake_http, perm_sid, "next")  # a later turn neither answers nor needs it
    await support.idle(fake, perm_sid)
    assert fake.sessions[perm_sid].messages[-1].text == "ok"
    assert [p["id"] for p in (await fake_http.get("/permission")).json()] == [permission_id]

    events_before = len(log.events)
    reply = await fake_http.post(f"/permission/{permission_id}/reply", json={"reply": "once"})
    assert (reply.status_code, reply.json()) == (200, True)
    answer = await fake_http.post(f"/question/{question_id}/reply", json={"answers": [["yes"]]})
    assert (answer.status_code, answer.json()) == (200, True)
    await log.wait_for(lambda e: e["type"] == "question.replied")
    late = [e["type"] for e in log.events[events_before:]]
    assert late == ["permission.replied", "question.replied"]  # and nothing runs
    assert support.tool_parts(fake, perm_sid, "bash")[0]["state"]["status"] == "error"
    assert (await fake_http.get("/permission")).json() == []
    assert (await fake_http.get("/question")).json() == []
    assert fake.sessions[perm_sid].pending_requests == []
    again = await fake_http.post(f"/permission/{permission_id}/reply", json={"reply": "once"})
    assert again.status_code == 404
    assert not any(
        "never" in m.text for s in (perm_sid, ask_sid) for m in fake.sessions[s].messages
    )


async def test_question_reply_and_reject(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
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
    sid = (await support.new_session(fake_http))["id"]
    await support.prompt(fake_http, sid, "[[script:ask]]")
    asked = await log.wait_for(lambda e: e["type"] == "question.asked")
    qid = asked["properties"]["id"]
    assert qid.startswith("que_")
    assert asked["properties"]["questions"] == questions
    assert asked["properties"]["sessionID"] == sid
    response = await fake_http.post(f"/question/{qid}/reply", json={"answers": [["blue"]]})
    assert response.json() is True
    replied = await log.wait_for(lambda e: e["type"] == "question.replied")
    assert replied["properties"] == {"sessionID": sid, "requestID": qid, "answers": [["blue"]]}
    await support.idle(fake, sid)
    state = support.tool_parts(fake, sid, "question")[0]["state"]
    assert state["status"] == "completed"
    assert "blue" in state["output"]
    assert fake.sessions[sid].messages[-1].text == "thanks"

    await support.prompt(fake_http, sid, "[[script:ask]]")
    second = await log.wait_for(
        lambda e: e["type"] == "question.asked" and e["properties"]["id"] != qid
    )
    rejected = await fake_http.post(f"/question/{second['properties']['id']}/reject")
    assert rejected.json() is True
    await log.wait_for(lambda e: e["type"] == "question.rejected")
    await support.idle(fake, sid)
    assert support.tool_parts(fake, sid, "question")[-1]["state"]["status"] == "error"
    assert (await fake_http.post("/question/que_nope/reject")).status_code == 404


# --------------------------------------------------------------------- revert


async def test_revert_marks_and_the_next_prompt_removes(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    """Measured on 1.18.34: revert keeps the messages and sets ``session.revert``;
    unrevert clears it; the next prompt removes the reverted messages."""
    fake.script("hang", [Hang()])
    sid = (await support.new_session(fake_http))["id"]
    for text in ("one", "two", "three"):
        await support.prompt(fake_http, sid, text)
        await support.idle(fake, sid)
    messages = fake.sessions[sid].messages
    second_user, second_reply = messages[2].id, messages[3].id
    tokens_before = fake.sessions[sid].info["tokens"]
    assert tokens_before["input"] == 30  # three steps of 10 input tokens

    response = await fake_http.post(f"/session/{sid}/revert", json={"messageID": second_user})
    assert response.status_code == 200
    assert response.json()["revert"] == {"messageID": second_user}
    assert len((await fake_http.get(f"/session/{sid}/message")).json()) == 6  # nothing removed
    assert "message.removed" not in log.types(sid)
    # An assistant message reverts from the user message of its turn.
    at_reply = await fake_http.post(f"/session/{sid}/revert", json={"messageID": second_reply})
    assert at_reply.json()["revert"] == {"messageID": second_user}
    unknown = await fake_http.post(f"/session/{sid}/revert", json={"messageID": "msg_unknown"})
    assert unknown.json()["revert"] == {"messageID": second_user}

    undone = await fake_http.post(f"/session/{sid}/unrevert")
    assert undone.status_code == 200 and "revert" not in undone.json()
    assert "revert" not in (await fake_http.post(f"/session/{sid}/unrevert")).json()
    await fake_http.post(f"/session/{sid}/revert", json={"messageID": second_user})

    mark = len(log.events)
    await support.prompt(fake_http, sid, "four")
    await support.idle(fake, sid)
    later = log.events[mark:]
    removed = [i for i, e in enumerate(later) if e["type"] == "message.removed"]
    assert [later[i]["properties"]["messageID"] for i in removed] == [m.id for m in messages[2:]]
    cleared = later[removed[-1] + 1]
    assert cleared["type"] == "session.updated"
    assert "revert" not in cleared["properties"]["info"]
    assert cleared["properties"]["info"]["tokens"]["input"] == 10  # removed steps taken off
    texts = [m.text for m in fake.sessions[sid].messages]
    assert texts == ["one", "ok", "four", "ok"]

    await support.prompt(fake_http, sid, "[[script:hang]]")
    busy = await fake_http.post(f"/session/{sid}/revert", json={"messageID": second_user})
    assert busy.status_code == 409
    assert busy.json() == {
        "_tag": "SessionBusyError",
        "sessionID": sid,
        "message": f"Session is busy: {sid}",
    }
    assert (await fake_http.post(f"/session/{sid}/unrevert")).status_code == 409
    await fake_http.post(f"/session/{sid}/abort")


async def test_revert_at_a_part_removes_the_rest_of_its_message(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    fake.script("work", [Text("before"), Tool("bash", {"command": "ls"}, output="a\n")])
    sid = (await support.new_session(fake_http))["id"]
    await support.prompt(fake_http, sid, "[[script:work]]")
    await support.idle(fake, sid)
    first_reply = fake.sessions[sid].messages[1]
    parts = first_reply.parts
    tool = next(p for p in parts if p["type"] == "tool")
    text = next(p for p in parts if p["type"] == "text")
    # A part with no text or tool before it reverts the whole turn.
    whole = await fake_http.post(
        f"/session/{sid}/revert", json={"messageID": first_reply.id, "partID": text["id"]}
    )
    assert whole.json()["revert"] == {"messageID": fake.sessions[sid].messages[0].id}
    response = await fake_http.post(
        f"/session/{sid}/revert", json={"messageID": first_reply.id, "partID": tool["id"]}
    )
    assert response.json()["revert"] == {"messageID": first_reply.id, "partID": tool["id"]}
    later = fake.sessions[sid].messages[2].id
    mark = len(log.events)
    await support.prompt(fake_http, sid, "again")
    await support.idle(fake, sid)
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
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    """The Session object's fields as measured on 1.18.34: usage from the start,
    ``summary``/``agent``/``model`` from the first prompt, tokens summed per step."""
    fake.script("work", [Tool("bash", {"command": "ls"}, output="a\n"), Text("done")])
    fake.script("kid", [Text("kid")])
    fake.script("spawn", [Task("explore", "kid")])
    created = await support.new_session(fake_http, title="t")
    zero = {"input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}}
    assert list(created) == [
        "id", "slug", "projectID", "directory", "path",
        "cost", "tokens", "title", "version", "time",
    ]  # fmt: skip
    assert created["path"] == created["directory"].lstrip("/")
    assert (created["cost"], created["tokens"]) == (0, zero)
    sid = created["id"]
    await support.prompt(fake_http, sid, "[[script:work]]")
    await support.idle(fake, sid)
    info = (await fake_http.get(f"/session/{sid}")).json()
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

    await support.prompt(fake_http, sid, "[[script:spawn]]")
    await support.idle(fake, sid)
    child = (await fake_http.get(f"/session/{sid}/children")).json()[0]
    assert child["agent"] == "general" and child["permission"] == []
    assert child["tokens"]["input"] > 0  # the child's own step
    asked = await support.new_session(
        fake_http, permission=[{"permission": "bash", "pattern": "*", "action": "ask"}]
    )
    assert asked["permission"] == [{"permission": "bash", "pattern": "*", "action": "ask"}]


async def test_patch_session(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    """Measured: ``session.updated`` per PATCH, ``time.updated`` unchanged, unknown
    fields ignored, archived sessions still listed."""
    created = await support.new_session(fake_http, title="before")
    sid = created["id"]
    renamed = await fake_http.patch(f"/session/{sid}", json={"title": "after"})
    assert renamed.status_code == 200 and renamed.json()["title"] == "after"
    archived = (await fake_http.patch(f"/session/{sid}", json={"time": {"archived": 1234}})).json()
    assert archived["time"] == {**created["time"], "archived": 1234}
    ignored = await fake_http.patch(f"/session/{sid}", json={"bogus": 1})
    assert ignored.status_code == 200 and "bogus" not in ignored.json()
    updates = [
        e["properties"]["info"]
        for e in fake.events
        if e["type"] == "session.updated" and e["properties"]["sessionID"] == sid
    ]
    assert [u["title"] for u in updates[-3:]] == ["after"] * 3
    assert {u["time"]["updated"] for u in updates[-3:]} == {created["time"]["updated"]}
    assert sid in [s["id"] for s in (await fake_http.get("/session")).json()]
    missing = await fake_http.patch("/session/ses_0000000000000000000000000", json={"title": "x"})
    assert missing.status_code == 404 and missing.json()["name"] == "NotFoundError"


async def test_delete_cascades_children_first_and_leaves_runs_and_requests(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    """Measured: ``200 true``; ``session.deleted`` per session, depth first in creation
    order; a busy deleted session stays busy (until aborted) and its pending request
    stays listed; the ids are then unknown (404) except to abort."""
    fake.script("hang", [Hang()])
    fake.script("perm", [Permission("bash", ["ls"])])
    root = (await support.new_session(fake_http))["id"]
    kid = (await support.new_session(fake_http, parentID=root))["id"]
    grandkid = (await support.new_session(fake_http, parentID=kid))["id"]
    kid2 = (await support.new_session(fake_http, parentID=root))["id"]
    other = (await support.new_session(fake_http))["id"]
    await support.prompt(fake_http, kid2, "[[script:hang]]")
    await support.prompt(fake_http, grandkid, "[[script:perm]]")
    asked = await log.wait_for(lambda e: e["type"] == "permission.asked")
    response = await fake_http.delete(f"/session/{root}")
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
        assert (await fake_http.get(f"/session/{sid}")).status_code == 404
        assert sid not in fake.sessions
    assert (await fake_http.delete(f"/session/{root}")).status_code == 404
    assert set((await fake_http.get("/session/status")).json()) == {kid2, grandkid}
    assert [p["id"] for p in (await fake_http.get("/permission")).json()] == [
        asked["properties"]["id"]
    ]
    assert list(fake.sessions) == [other]
    assert (await fake_http.post(f"/session/{kid2}/abort")).json() is True
    assert set((await fake_http.get("/session/status")).json()) == {grandkid}


async def test_summarize_runs_a_compaction_turn(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    """Measured: a user message with a ``compaction`` part, a ``summary`` assistant message
    of agent ``compaction`` streaming the summary, ``session.compacted``, idle; ``true``."""
    fake.summary_text = "We fixed the build."
    sid = (await support.new_session(fake_http))["id"]
    await support.prompt(fake_http, sid, "hello")
    await support.idle(fake, sid)
    mark = len(log.events)
    body = {"providerID": "fake", "modelID": "fake-model"}
    response = await fake_http.post(f"/session/{sid}/summarize", json=body)
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
    bad = await fake_http.post(f"/session/{sid}/summarize", json={"auto": True})
    assert bad.status_code == 400


async def test_summarize_while_busy_waits_and_an_abort_drops_it(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    sid = await support.hanging_session(fake_http, fake)
    await fake.wait_until(lambda: len(fake.sessions[sid].messages) == 2)
    body = {"providerID": "fake", "modelID": "fake-model", "auto": True}
    pending = asyncio.create_task(fake_http.post(f"/session/{sid}/summarize", json=body))
    await fake.wait_until(lambda: len(fake.sessions[sid].messages) == 3)
    compaction = fake.sessions[sid].messages[2].parts[0]
    assert (compaction["type"], compaction["auto"]) == ("compaction", True)
    assert not pending.done()
    await fake_http.post(f"/session/{sid}/abort")
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


async def test_hold_and_release(fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer) -> None:
    sid = fake.add_session(busy=True)
    hold = fake.hold("POST", "/session/{id}/abort")
    pending = asyncio.create_task(fake_http.post(f"/session/{sid}/abort"))
    await hold.wait_started()
    assert fake.in_flight == 1
    assert fake.sessions[sid].busy  # not handled while held
    other = await fake_http.get(f"/session/{sid}")  # other routes are not held
    assert other.status_code == 200
    hold.release()
    response = await pending
    assert response.json() is True
    assert not fake.sessions[sid].busy
    assert len(hold.requests) == 1


async def test_fail_and_custom_hooks(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    sid = fake.add_session()
    fake.fail("GET", "/session/{id}/children", status=503, times=2)
    codes = [(await fake_http.get(f"/session/{sid}/children")).status_code for _ in range(3)]
    assert codes == [503, 503, 200]

    fake.fail("GET", "/session/status", status=200, times=1, body=b"{not json")
    with pytest.raises(json.JSONDecodeError):
        (await fake_http.get("/session/status")).json()

    async def refuse(request: httpx.Request) -> httpx.Response | None:
        raise httpx.ConnectError("refused", request=request)

    hook = fake.on("*", "/global/*", refuse)
    with pytest.raises(httpx.ConnectError):
        await fake_http.get("/global/health")
    assert fake.requests[-1].status is None
    assert hook.call_count == 1
    hook.remove()
    assert (await fake_http.get("/global/health")).status_code == 200

    async def timeout_once(request: httpx.Request) -> httpx.Response | None:
        if request.url.path.endswith("/abort"):
            raise httpx.ReadTimeout("slow", request=request)
        return None

    fake.on("POST", "/session/{id}/{action}", timeout_once)
    with pytest.raises(httpx.ReadTimeout):
        await fake_http.post(f"/session/{sid}/abort")
    assert fake.sessions[sid].abort_count == 0


# --------------------------------------------------------------------- event stream


async def test_event_stream_fan_out_no_replay_and_raw(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    first = await EventLog(fake_http).start(fake)
    fake.emit("custom.one", {"n": 1})
    second = await EventLog(fake_http).start(fake)
    fake.emit("custom.two", {"n": 2})
    for log in (first, second):
        await log.wait_for(lambda e: e["type"] == "custom.two")
    assert [e["type"] for e in first.events] == ["server.connected", "custom.one", "custom.two"]
    assert [e["type"] for e in second.events] == ["server.connected", "custom.two"]
    assert all(e["id"].startswith("evt_") for e in first.events)

    raw: list[str] = []
    async with fake_http.stream("GET", "/event") as response:
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
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    log = await EventLog(fake_http).start(fake)
    assert fake.drop_event_streams() == 1
    await asyncio.wait_for(log.ended.wait(), 1)
    assert isinstance(log.error, httpx.RemoteProtocolError)
    fake.emit("missed", {})
    again = await EventLog(fake_http).start(fake)
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


async def test_wait_helpers(fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer) -> None:
    mark = fake.event_count
    sid = (await support.new_session(fake_http))["id"]
    created = await fake.wait_for_event(
        "session.created", lambda e: e["properties"]["sessionID"] == sid, since=mark
    )
    assert created["properties"]["info"]["id"] == sid
    with pytest.raises(TimeoutError):
        await fake.wait_for_event("session.created", timeout=0.05)
    waiter = asyncio.create_task(fake.wait_for_event("session.idle"))
    await asyncio.sleep(0)
    await support.prompt(fake_http, sid, "hi")
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
    sid = (await support.new_session(client))["id"]
    await support.prompt(client, sid, "[[script:root]]")
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
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer, log: EventLog
) -> None:
    sid = await support.hanging_session(fake_http, fake)
    assert (await fake_http.post(f"/session/{sid}/abort")).json() is True
    assert not fake.sessions[sid].busy
    await log.wait_for(lambda e: e["type"] == "session.error")
    await support.prompt(fake_http, sid, "again")
    await support.idle(fake, sid)
    assert fake.sessions[sid].messages[-1].text == "ok"
    assert (await fake_http.get("/session/status")).json() == {}
