"""The bearer token, the page's public files, mounting under a prefix, and secrets.

The OpenCode password must never reach a client or a log line, whatever the route
and however it fails.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from adapter import OpenCodeAdapter, Timeouts
from adapter.testing.fake import FakeOpenCodeServer, Hang, Permission, Task
from adapter.web import create_app
from tests.adapter_support import Recorder
from tests.web.app_driver import API_ROUTES, SseClient

TOKEN = "tok-9f8e7d"
PASSWORD = "oc-pass-5ecret-42"


@pytest.fixture
def fake_options() -> dict[str, Any]:
    return {"seed": 7, "password": PASSWORD}


@pytest.fixture
def opencode_adapter_options() -> dict[str, Any]:
    return {"password": PASSWORD, "timeouts": Timeouts(abort=2.0, tree=2.0)}


@pytest.fixture
def app(oc: OpenCodeAdapter) -> Starlette:
    return create_app(oc, token=TOKEN, ping=0)


def bearer(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_every_api_route_needs_the_token(app_client: httpx.AsyncClient) -> None:
    routes = [*API_ROUTES, ("GET", "/no/such/route")]
    for method, path in routes:
        for headers in (
            {},
            bearer("wrong"),
            {"Authorization": TOKEN},
            {"Authorization": "Basic x"},
        ):
            response = await app_client.request(method, path, headers=headers)
            assert response.status_code == 401, (method, path, headers)
            assert response.json()["error"]["type"] == "unauthorized"
            assert response.headers["www-authenticate"] == "Bearer"
    ok = await app_client.get("/threads", headers=bearer())
    assert ok.status_code == 200 and ok.json() == []
    lower = await app_client.get("/threads", headers={"Authorization": f"bearer {TOKEN}"})
    assert lower.status_code == 200


async def test_the_page_and_its_files_are_public(app_client: httpx.AsyncClient) -> None:
    page = await app_client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "<html" in page.text.lower()
    missing = await app_client.get("/static/does-not-exist.css")
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "not_found"


async def test_only_the_event_stream_takes_the_token_in_the_query(
    app: Starlette, app_client: httpx.AsyncClient, oc: OpenCodeAdapter
) -> None:
    await app_client.post("/threads", json={"thread_id": "t"}, headers=bearer())
    assert (await app_client.get(f"/threads/t?token={TOKEN}")).status_code == 401
    refused = SseClient(app, "/threads/t/events?token=wrong")
    assert await refused.started() == 401
    await refused.aclose()
    sse = SseClient(app, f"/threads/t/events?token={TOKEN}")
    try:
        assert await sse.started() == 200
        assert sse.headers["content-type"].startswith("text/event-stream")
    finally:
        await sse.aclose()


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/threads/t/events"),  # the events path, but not a GET
        ("PUT", "/threads/t/events"),
        ("GET", "/threads/t/x/events"),  # any other path ending in /events
        ("GET", "/threads/events"),
        ("GET", "/events"),
        ("GET", "/threads/t/events/"),
        ("GET", "/threads/t/events/x"),
        ("GET", "/threads/t"),
        ("GET", "/threads"),
        ("POST", "/threads"),
        ("POST", "/threads/t/stop"),
        ("POST", "/threads/t/subagents/ses_child/stop"),
        ("POST", "/threads/t/fork"),
        ("POST", "/threads/t/commands"),
        ("GET", "/inventory"),
    ],
)
async def test_the_query_token_is_refused_everywhere_but_a_get_of_the_events(
    app_client: httpx.AsyncClient, method: str, path: str
) -> None:
    assert (
        await app_client.post("/threads", json={"thread_id": "t"}, headers=bearer())
    ).status_code == 201
    response = await app_client.request(method, f"{path}?token={TOKEN}")
    assert response.status_code == 401, response.text
    assert response.json()["error"]["type"] == "unauthorized"


async def test_a_head_of_the_events_takes_the_query_token(app_client: httpx.AsyncClient) -> None:
    await app_client.post("/threads", json={"thread_id": "t"}, headers=bearer())
    assert (await app_client.head(f"/threads/t/events?token={TOKEN}")).status_code == 200
    assert (await app_client.head("/threads/t/events?token=wrong")).status_code == 401


async def test_mounted_under_a_prefix_the_routes_and_the_token_work(oc: OpenCodeAdapter) -> None:
    host = Starlette(routes=[Mount("/agent", app=create_app(oc, token=TOKEN))])
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=host), base_url="http://host"
    ) as http:
        assert (await http.get("/agent/")).status_code == 200
        assert (await http.get("/agent/threads")).status_code == 401
        made = await http.post("/agent/threads", json={"thread_id": "m"}, headers=bearer())
        assert made.status_code == 201
        assert (await http.get("/agent/threads/m", headers=bearer())).json()["thread_id"] == "m"


def test_create_app_refuses_bad_options(oc: OpenCodeAdapter) -> None:
    from adapter import InvalidInputError

    for kwargs in ({"token": ""}, {"max_queue": 0}, {"max_queue": True}, {"ping": -1}):
        with pytest.raises(InvalidInputError):
            create_app(oc, **kwargs)
    with pytest.raises(InvalidInputError):
        create_app(object())  # type: ignore[arg-type]


async def test_the_password_appears_in_no_body_and_no_log(
    app_client: httpx.AsyncClient,
    fake: FakeOpenCodeServer,
    rec: Recorder,
    captured_logs: list[dict[str, Any]],
) -> None:
    bodies: list[str] = []

    async def call(method: str, path: str, body: Any = None) -> httpx.Response:
        response = await app_client.request(method, path, json=body, headers=bearer())
        bodies.append(response.text)
        return response

    fake.script("child", [Hang()])
    fake.script("root", [Permission("bash", ["ls"]), Task("explore", "child")])
    info = (await call("POST", "/threads", {"thread_id": "t", "title": "pw"})).json()
    assert info["resume"] and PASSWORD not in str(info)
    await call("GET", "/threads")
    await call("GET", "/threads/t")
    await call("GET", "/inventory")
    await call("POST", "/threads/t/turns", {"text": "[[script:root]]", "model": "fake/fake-model"})
    opened = await rec.wait_for("request.opened")
    await call("POST", f"/threads/t/requests/{opened.request_id}", {"decision": "nope"})
    await call("POST", f"/threads/t/requests/{opened.request_id}", {"decision": "accept"})
    await rec.wait_for("child.started")
    await call("GET", "/threads/t/tree")
    # failures of every kind: the server failing, a failed stop, bad input, unknown things
    failing = fake.fail("GET", "/session/status", status=500, times=None)
    assert (await call("GET", "/threads/t/tree")).status_code == 502
    failing.remove()
    fake.fail("POST", f"/session/{info['session_id']}/abort", status=401, times=None)
    assert (await call("POST", "/threads/t/stop")).status_code == 502
    await call("POST", "/threads/t/turns", {"text": ""})
    await call("POST", "/threads", {"resume": {"schema": 1, "session_id": ""}})
    await call("GET", "/threads/nope")
    await call("POST", "/threads/t/requests/per_x", {"decision": "accept"})
    wrong = await app_client.get("/threads", headers=bearer(PASSWORD))
    bodies.append(wrong.text)
    assert wrong.status_code == 401
    assert len(bodies) == 15 and all(PASSWORD not in b for b in bodies)
    assert any('"stop_failed"' in b for b in bodies) and any(
        '"opencode_error"' in b for b in bodies
    )
    assert captured_logs and all(PASSWORD not in repr(entry) for entry in captured_logs)
