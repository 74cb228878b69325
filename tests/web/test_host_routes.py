"""``GET /inventory``, the model and agent of threads and turns checked against it,
``POST /threads/{id}/fork`` and ``POST /threads/{id}/commands``, on the fake.

A model or agent the server does not offer, a subagent-only agent, an unknown command,
a field of the wrong type: each is a typed 422 naming the field, with nothing sent to
OpenCode.
"""

from __future__ import annotations

import json

import httpx

from adapter import OpenCodeAdapter
from adapter.testing.fake import FakeOpenCodeServer, Hang, Text
from tests.adapter_support import Recorder, SentBodies
from tests.web.conftest import RunTurn
from tests.web.test_api import error_of, expect_invalid

MODEL = "fake/fake-model"


def sent(fake: FakeOpenCodeServer, suffix: str) -> list[str]:
    """The paths of every ``POST /session/{id}{suffix}`` so far."""
    return [r.path for r in fake.requests if r.method == "POST" and r.path.endswith(suffix)]


async def test_the_inventory_is_the_adapters(
    app_client: httpx.AsyncClient, oc: OpenCodeAdapter
) -> None:
    response = await app_client.get("/inventory")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body == json.loads(json.dumps((await oc.inventory()).to_dict()))
    assert [m["id"] for m in body["models"]] == [MODEL]
    assert body["models"][0]["context_limit"] == 128000
    assert {"build", "plan"} <= {a["name"] for a in body["agents"]}
    assert {"init", "review"} <= {c["name"] for c in body["commands"]}
    assert (await app_client.post("/inventory", json={})).status_code == 405


async def test_a_thread_made_with_a_model_and_an_agent_sends_them_with_its_turns(
    app_client: httpx.AsyncClient, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    prompts = SentBodies(fake, "/session/{id}/prompt_async")
    made = await app_client.post(
        "/threads", json={"thread_id": "t", "model": MODEL, "agent": "plan"}
    )
    assert made.status_code == 201, made.text
    fake.script("hi", [Text("hi")])
    turn = await app_client.post("/threads/t/turns", json={"text": "[[script:hi]]"})
    assert turn.status_code == 202
    await rec.wait_for("turn.completed")
    [prompt] = prompts
    assert prompt["agent"] == "plan"
    assert prompt["model"] == {"providerID": "fake", "modelID": "fake-model"}
    fake.script("hi", [Text("hi")])
    other = await app_client.post(
        "/threads/t/turns", json={"text": "[[script:hi]]", "agent": "build"}
    )
    assert other.status_code == 202
    await rec.wait_for("turn.completed", lambda e: e.turn_id == other.json()["turn_id"])
    assert prompts[-1]["agent"] == "build"


async def test_a_model_or_agent_the_server_does_not_offer_is_refused(
    app_client: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    for body, field in [
        ({"model": "fake/other-model"}, "model"),
        ({"model": "nope"}, "model"),
        ({"agent": "nobody"}, "agent"),
        ({"agent": "explore"}, "agent"),  # a subagent: it runs as a task, not as a thread's
        ({"agent": 7}, "agent"),
        ({"agent": ""}, "agent"),
    ]:
        message = await expect_invalid(await app_client.post("/threads", json=body), field)
        assert message, body
    assert (await app_client.get("/threads")).json() == []
    await app_client.post("/threads", json={"thread_id": "t"})
    for body, field in [
        ({"text": "hi", "model": "fake/other-model"}, "model"),
        ({"text": "hi", "agent": "nobody"}, "agent"),
    ]:
        await expect_invalid(await app_client.post("/threads/t/turns", json=body), field)
    assert sent(fake, "/prompt_async") == []


async def test_an_unreadable_inventory_refuses_a_choice_it_cannot_check(
    app_client: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    fake.fail("GET", "/agent", status=500, times=None)
    refused = await app_client.post("/threads", json={"agent": "plan"})
    assert refused.status_code == 502 and error_of(refused)["type"] == "opencode_error"
    assert "agent" in error_of(refused)["message"]
    inventory = await app_client.get("/inventory")
    assert inventory.status_code == 200 and "agents" in inventory.json()["errors"]
    assert (await app_client.post("/threads", json={"model": MODEL})).status_code == 201


async def test_a_fork_is_a_new_thread_and_the_source_is_untouched(
    app_client: httpx.AsyncClient, fake: FakeOpenCodeServer, thread: str, run_turn: RunTurn
) -> None:
    await run_turn("one", [Text("first answer")])
    source = (await app_client.get(f"/threads/{thread}")).json()
    forked = await app_client.post(f"/threads/{thread}/fork", json={"thread_id": "f"})
    assert forked.status_code == 201, forked.text
    info = forked.json()
    assert info["thread_id"] == "f" and info["session_id"] != source["session_id"]
    assert (await app_client.get("/threads/f")).json()["session_id"] == info["session_id"]
    assert (await app_client.get(f"/threads/{thread}")).json() == source
    again = await app_client.post(f"/threads/{thread}/fork", json={"thread_id": "f"})
    assert again.status_code == 409 and error_of(again)["type"] == "conflict"
    named = await app_client.post(f"/threads/{thread}/fork", json={})
    assert named.status_code == 201 and named.json()["thread_id"].startswith("t_")
    forks = len(sent(fake, "/fork"))
    for body, field in [
        ({"thread_id": "a/b"}, "thread_id"),
        ({"thread_id": 3}, "thread_id"),
        ({"thread_id": "g", "at": 1}, "at"),
    ]:
        await expect_invalid(await app_client.post(f"/threads/{thread}/fork", json=body), field)
    assert len(sent(fake, "/fork")) == forks
    unknown = await app_client.post("/threads/nope/fork", json={"thread_id": "g"})
    assert unknown.status_code == 404


async def test_a_command_runs_as_a_turn(
    app_client: httpx.AsyncClient, fake: FakeOpenCodeServer, rec: Recorder, thread: str
) -> None:
    fake.script("cmd", [Text("initialised")])
    commands = SentBodies(fake, "/session/{id}/command")
    response = await app_client.post(
        f"/threads/{thread}/commands", json={"name": "init", "arguments": "[[script:cmd]]"}
    )
    assert response.status_code == 202, response.text
    turn_id = response.json()["turn_id"]
    assert set(response.json()) == {"turn_id"}
    done = await rec.wait_for("turn.completed", lambda e: e.turn_id == turn_id)
    assert done.state == "completed"
    [body] = commands
    assert (body["command"], body["arguments"]) == ("init", "[[script:cmd]]")


async def test_a_bad_command_is_refused_and_nothing_runs(
    app_client: httpx.AsyncClient, fake: FakeOpenCodeServer, rec: Recorder, thread: str
) -> None:
    for body, field in [
        ({"name": "nope"}, "name"),
        ({"name": ""}, "name"),
        ({}, "name"),
        ({"name": "init", "arguments": 5}, "arguments"),
        ({"name": "init", "agent": "nobody"}, "agent"),
        ({"name": "init", "text": "x"}, "text"),
    ]:
        await expect_invalid(await app_client.post(f"/threads/{thread}/commands", json=body), field)
    assert sent(fake, "/command") == []
    fake.script("long", [Hang()])
    await app_client.post(f"/threads/{thread}/turns", json={"text": "[[script:long]]"})
    await rec.wait_for("turn.started")
    busy = await app_client.post(f"/threads/{thread}/commands", json={"name": "init"})
    assert busy.status_code == 409 and error_of(busy)["type"] == "conflict"
    assert sent(fake, "/command") == []
