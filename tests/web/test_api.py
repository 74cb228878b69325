"""The JSON routes of ``adapter.web``: threads, turns, the tree, request replies, errors."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest

from adapter import OpenCodeAdapter
from adapter.testing.fake import (
    Fail,
    FakeOpenCodeServer,
    Hang,
    Permission,
    Task,
    Text,
    Tool,
)
from tests.adapter_support import Recorder, refuse
from tests.web.app_driver import THREAD_ROUTES
from tests.web.conftest import AskColor


def error_of(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert set(body) >= {"error"}, body
    assert isinstance(body["error"]["type"], str) and isinstance(body["error"]["message"], str)
    return dict(body["error"])


async def expect_invalid(response: httpx.Response, field: str) -> str:
    assert response.status_code == 422, response.text
    error = error_of(response)
    assert error["type"] == "invalid_input" and error["field"] == field, error
    return str(error["message"])


# --------------------------------------------------------------------------- threads


async def test_a_thread_is_created_listed_and_read(
    app_client: httpx.AsyncClient, oc: OpenCodeAdapter, fake: FakeOpenCodeServer
) -> None:
    made = await app_client.post("/threads", json={"thread_id": "t1", "title": "My thread"})
    assert made.status_code == 201
    info = made.json()
    assert info["thread_id"] == "t1" and info["status"] == "ready"
    assert info["session_id"] in fake.sessions and fake.sessions[info["session_id"]].title == (
        "My thread"
    )
    assert info["resume"] and info["active_turn_id"] is None and info["last_error"] is None

    generated = await app_client.post("/threads")
    assert generated.status_code == 201
    assert re.fullmatch(r"t_[0-9a-f]{12}", generated.json()["thread_id"])

    listed = await app_client.get("/threads")
    assert listed.status_code == 200
    assert {t["thread_id"] for t in listed.json()} == {"t1", generated.json()["thread_id"]}
    one = await app_client.get("/threads/t1")
    assert one.status_code == 200 and one.json() == info


async def test_a_thread_resumes_from_its_cursor(
    app_client: httpx.AsyncClient, oc: OpenCodeAdapter
) -> None:
    first = (await app_client.post("/threads", json={"thread_id": "a"})).json()
    again = await app_client.post("/threads", json={"thread_id": "b", "resume": first["resume"]})
    assert again.status_code == 201 and again.json()["session_id"] == first["session_id"]


async def test_an_existing_thread_id_is_a_conflict(app_client: httpx.AsyncClient) -> None:
    assert (await app_client.post("/threads", json={"thread_id": "t1"})).status_code == 201
    again = await app_client.post("/threads", json={"thread_id": "t1"})
    assert again.status_code == 409 and error_of(again)["type"] == "conflict"


async def test_an_unknown_thread_is_404_on_every_thread_route(
    app_client: httpx.AsyncClient,
) -> None:
    for method, suffix, body in THREAD_ROUTES:
        path = f"/threads/nope{suffix}"
        response = await app_client.request(method, path, json=body)
        assert response.status_code == 404, (method, path)
        error = error_of(response)
        assert error["type"] == "unknown_thread" and "nope" in error["message"]


@pytest.mark.parametrize(
    ("content", "field"),
    [
        (b"{not json", "body"),
        (b"[1, 2]", "body"),
        (b'"text"', "body"),
        (b'{"thread_id": 7}', "thread_id"),
        (b'{"thread_id": ""}', "thread_id"),
        (b'{"thread_id": "a/b"}', "thread_id"),
        (b'{"title": ["x"]}', "title"),
        (b'{"title": "  "}', "title"),
        (b'{"resume": "ses_1"}', "resume"),
        (b'{"resume": {"session_id": 3}}', "resume"),
        (b'{"colour": "red"}', "colour"),
    ],
)
async def test_a_bad_thread_body_is_422_naming_the_field(
    app_client: httpx.AsyncClient, oc: OpenCodeAdapter, content: bytes, field: str
) -> None:
    response = await app_client.post(
        "/threads", content=content, headers={"content-type": "application/json"}
    )
    await expect_invalid(response, field)
    assert oc.list_sessions() == []


# --------------------------------------------------------------------------- turns


async def test_a_turn_is_accepted_and_runs(
    app_client: httpx.AsyncClient, oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("hello", [Text("hello there")])
    root = (await app_client.post("/threads", json={"thread_id": "t"})).json()["session_id"]
    sent = await app_client.post(
        "/threads/t/turns", json={"text": "hi [[script:hello]]", "model": "fake/fake-model"}
    )
    assert sent.status_code == 202
    turn_id = sent.json()["turn_id"]
    assert sent.json() == {"turn_id": turn_id}
    done = await rec.wait_for("turn.completed")
    assert done.turn_id == turn_id and done.state == "completed"
    [user] = [m for m in fake.sessions[root].messages if m.role == "user"]
    assert user.to_json()["info"]["model"] == {"providerID": "fake", "modelID": "fake-model"}


async def test_a_running_thread_shows_its_active_turn(
    app_client: httpx.AsyncClient, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("hang", [Hang()])
    await app_client.post("/threads", json={"thread_id": "t"})
    turn_id = (await app_client.post("/threads/t/turns", json={"text": "[[script:hang]]"})).json()[
        "turn_id"
    ]
    await rec.wait_for("turn.started")
    info = (await app_client.get("/threads/t")).json()
    assert info["status"] == "running" and info["active_turn_id"] == turn_id


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "text"),
        ({"text": ""}, "text"),
        ({"text": 3}, "text"),
        ({"text": "hi", "model": "gpt"}, "model"),
        ({"text": "hi", "model": "a/ b"}, "model"),
        ({"text": "hi", "model": 1}, "model"),
        ({"text": "hi", "agent": ""}, "agent"),
        ({"text": "hi", "agent": {}}, "agent"),
        ({"text": "hi", "files": []}, "files"),
    ],
)
async def test_a_bad_turn_body_is_422_naming_the_field(
    app_client: httpx.AsyncClient, fake: FakeOpenCodeServer, body: dict[str, Any], field: str
) -> None:
    await app_client.post("/threads", json={"thread_id": "t"})
    await expect_invalid(await app_client.post("/threads/t/turns", json=body), field)
    assert [r for r in fake.requests if r.path.endswith("/prompt_async")] == []


async def test_invalid_json_is_422(app_client: httpx.AsyncClient) -> None:
    await app_client.post("/threads", json={"thread_id": "t"})
    response = await app_client.post(
        "/threads/t/turns", content=b'{"text": ', headers={"content-type": "application/json"}
    )
    assert "not valid JSON" in await expect_invalid(response, "body")


# --------------------------------------------------------------------------- the tree


async def test_the_tree_lists_the_root_first_then_its_subagents_with_statuses(
    app_client: httpx.AsyncClient, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("child", [Hang()])
    fake.script("root", [Task("explore", "child")])
    root = (await app_client.post("/threads", json={"thread_id": "t"})).json()["session_id"]
    await app_client.post("/threads/t/turns", json={"text": "[[script:root]]"})
    child = await rec.wait_for("child.started")
    response = await app_client.get("/threads/t/tree")
    assert response.status_code == 200
    tree = response.json()
    assert tree["thread_id"] == "t" and tree["root_id"] == root
    sessions = tree["sessions"]
    assert [s["session_id"] for s in sessions] == [root, child.session_id]
    assert sessions[0]["parent_id"] is None and sessions[0]["depth"] == 0
    assert sessions[1]["parent_id"] == root and sessions[1]["depth"] == 1
    assert {s["status"] for s in sessions} == {"busy"}


async def test_a_server_failure_is_502_opencode_error(
    app_client: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    await app_client.post("/threads", json={"thread_id": "t"})
    fake.fail("GET", "/session/status", status=500, times=None)
    response = await app_client.get("/threads/t/tree")
    assert response.status_code == 502
    error = error_of(response)
    assert error["type"] == "opencode_error" and "HTTP 500" in error["message"]


# --------------------------------------------------------------------------- requests


async def test_a_permission_request_is_answered(
    app_client: httpx.AsyncClient, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("ask", [Permission("bash", ["ls"]), Text("done")])
    await app_client.post("/threads", json={"thread_id": "t"})
    await app_client.post("/threads/t/turns", json={"text": "[[script:ask]]"})
    opened = await rec.wait_for("request.opened")
    path = f"/threads/t/requests/{opened.request_id}"
    await expect_invalid(await app_client.post(path, json={"decision": "maybe"}), "decision")
    await expect_invalid(await app_client.post(path, json={}), "decision")
    await expect_invalid(
        await app_client.post(path, json={"decision": "accept", "reject": True}), "reject"
    )
    answered = await app_client.post(path, json={"decision": "accept"})
    assert answered.status_code == 200 and answered.json() == {"ok": True}
    resolved = await rec.wait_for("request.resolved")
    assert resolved.decision == "accept"
    await rec.wait_for("turn.completed")
    gone = await app_client.post(path, json={"decision": "accept"})
    assert gone.status_code == 404 and error_of(gone)["type"] == "not_found"


async def test_a_question_is_answered_and_bad_answers_name_the_field(
    app_client: httpx.AsyncClient, rec: Recorder, ask_color: AskColor
) -> None:
    path = await ask_color("thanks")
    message = await expect_invalid(
        await app_client.post(path, json={"answers": {"Colr": "red"}}), "answers"
    )
    assert "'Colr'" in message
    await expect_invalid(await app_client.post(path, json={"answers": "red"}), "answers")
    ok = await app_client.post(path, json={"answers": {"Color": "blue"}})
    assert ok.status_code == 200 and ok.json() == {"ok": True}
    resolved = await rec.wait_for("user-input.resolved")
    assert resolved.answers == (("blue",),)


async def test_a_question_is_rejected(
    app_client: httpx.AsyncClient, rec: Recorder, ask_color: AskColor
) -> None:
    path = await ask_color("never said")
    await expect_invalid(await app_client.post(path, json={"reject": False}), "reject")
    ok = await app_client.post(path, json={"reject": True})
    assert ok.status_code == 200
    assert (await rec.wait_for("user-input.resolved")).decision == "rejected"


async def test_an_unknown_request_is_404_not_found(app_client: httpx.AsyncClient) -> None:
    await app_client.post("/threads", json={"thread_id": "t"})
    for body in ({"decision": "accept"}, {"answers": ["red"]}, {"reject": True}):
        response = await app_client.post("/threads/t/requests/per_unknown", json=body)
        assert response.status_code == 404 and error_of(response)["type"] == "not_found"


# --------------------------------------------------------------------------- everything else


async def test_unknown_routes_and_methods_answer_the_error_shape(
    app_client: httpx.AsyncClient,
) -> None:
    missing = await app_client.get("/nothing/here")
    assert missing.status_code == 404 and error_of(missing)["type"] == "not_found"
    wrong = await app_client.delete("/threads")
    assert wrong.status_code == 405 and error_of(wrong)["type"] == "not_found"
    no_file = await app_client.get("/static/no-such-file.js")
    assert no_file.status_code == 404 and error_of(no_file)["type"] == "not_found"


async def test_an_unexpected_failure_is_500_without_a_traceback(
    app_client: httpx.AsyncClient,
    oc: OpenCodeAdapter,
    monkeypatch: pytest.MonkeyPatch,
    captured_logs: list[dict[str, Any]],
) -> None:
    def broken() -> list[Any]:
        raise RuntimeError("secret detail in a bug")

    monkeypatch.setattr(oc, "list_sessions", broken)
    response = await app_client.get("/threads")
    assert response.status_code == 500
    assert response.json() == {
        "error": {"type": "internal", "message": "internal error (see the server log)"}
    }
    [logged] = [e for e in captured_logs if e["event"] == "web.internal_error"]
    assert logged["error_type"] == "RuntimeError" and "secret detail" in logged["traceback"]


# --------------------------------------------------------------------------- lone surrogates out

LONE = "cut \ud800 here"  # OpenCode cuts by UTF-16 units; JSON.stringify writes "\ud800"
SHOWN = "cut \ufffd here"  # what leaves the app: the adapter's one rule (adapter._base._unicode)


def well_formed_json(response: httpx.Response) -> Any:
    """The body as strict UTF-8 JSON, with no surrogate escape left in it."""
    text = response.content.decode("utf-8")  # strict: raises on an encoded surrogate
    assert "\\ud8" not in text.lower() and "\\udc" not in text.lower(), text
    return json.loads(text)


async def test_a_stop_with_lone_surrogates_in_its_partial_and_report_is_well_formed(
    app_client: httpx.AsyncClient, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    """A tool input with a lone half (the partial result) and a refusal whose message
    has one (the report of a failed stop): 502 and then 200, both well formed."""
    fake.script("child", [Hang()])
    fake.script(
        "cut",
        [Tool("bash", {"command": f"echo {LONE}"}, output="x\n"), Task("explore", "child")],
    )
    root = (await app_client.post("/threads", json={"thread_id": "t"})).json()["session_id"]
    first = (await app_client.post("/threads/t/turns", json={"text": "[[script:cut]]"})).json()
    await rec.wait_for("child.started", lambda e: e.turn_id == first["turn_id"])
    response = await app_client.post("/threads/t/stop")
    assert response.status_code == 200, response.text
    body = well_formed_json(response)
    assert body["stop"]["ok"] is True
    bash = next(c for c in body["partial"]["tool_calls"] if c["tool"] == "bash")
    assert bash["input"] == {"command": f"echo {SHOWN}"}

    second = (await app_client.post("/threads/t/turns", json={"text": "[[script:cut]]"})).json()
    await rec.wait_for("child.started", lambda e: e.turn_id == second["turn_id"])
    refuse(fake, "POST", f"/session/{root}/abort", f"refused {LONE}", times=None)
    failed = await app_client.post("/threads/t/stop")
    assert failed.status_code == 502, failed.text
    refused = well_formed_json(failed)
    assert SHOWN in refused["error"]["message"]
    assert any(SHOWN in (s["error"] or "") for s in refused["stop"]["sessions"])


async def test_lone_surrogates_in_server_data_leave_every_json_answer_well_formed(
    app_client: httpx.AsyncClient, oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    """An error message, a subagent's title and a host-made thread id, each with a lone
    half: the listing, the thread and the tree stay 200 JSON, well formed."""
    fake.script("fails", [Fail(message=f"provider said {LONE}")])
    fake.script("child", [Hang()])
    fake.script("spawns", [Task(f"explore {LONE}", "child")])
    await app_client.post("/threads", json={"thread_id": "f"})
    await app_client.post("/threads/f/turns", json={"text": "[[script:fails]]"})
    await rec.wait_for("turn.completed")
    await app_client.post("/threads", json={"thread_id": "t"})
    await app_client.post("/threads/t/turns", json={"text": "[[script:spawns]]"})
    await rec.wait_for("child.started")
    await oc.start_session(f"host {LONE}")  # the host may use any id through the adapter

    listed = await app_client.get("/threads")
    assert listed.status_code == 200, listed.text
    assert {t["thread_id"] for t in well_formed_json(listed)} == {"f", "t", f"host {SHOWN}"}
    one = await app_client.get("/threads/f")
    assert one.status_code == 200 and SHOWN in well_formed_json(one)["last_error"]
    tree = await app_client.get("/threads/t/tree")
    assert tree.status_code == 200, tree.text
    assert well_formed_json(tree)["sessions"][1]["title"].startswith(f"explore {SHOWN}")
