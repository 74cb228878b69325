"""The fake's records: what a test reads of the requests it received and of its sessions.

``fake.requests`` / ``fake.calls(method, pattern)`` are asserted on the way respx's
``route.calls`` are: each :class:`RecordedRequest` carries the parsed body, the query
and the headers, the password never among them.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator

import httpx
import pytest

from adapter import OpenCodeAdapter
from adapter.testing import RecordedRequest
from adapter.testing.fake import FakeOpenCodeServer, FakeSession, Hang, Permission
from tests.adapter_support import Recorder
from tests.testing.fake_support import new_session, prompt

PASSWORD = "s3cret-pass-word"


async def test_a_json_body_is_recorded_parsed(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    sid = (await new_session(fake_http, title="hello"))["id"]
    await prompt(fake_http, sid, "hi", agent="build")
    created, prompted = fake.requests[-2:]
    assert created.body == {"title": "hello"}
    assert prompted.body == {"parts": [{"type": "text", "text": "hi"}], "agent": "build"}


async def test_an_empty_body_is_none_and_other_bytes_stay_raw(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    sid = fake.add_session()
    await fake_http.post(f"/session/{sid}/abort")
    await fake_http.post(f"/session/{sid}/prompt_async", content=b"{not json")
    await fake_http.post("/session", content=b"\xff\xfe")
    empty, malformed, binary = fake.requests[-3:]
    assert empty.body is None
    assert malformed.body == b"{not json" and malformed.status == 500
    assert binary.body == b"\xff\xfe"


async def test_a_streamed_body_is_read_once_and_still_reaches_the_route(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"title": '
        yield b'"streamed"}'

    response = await fake_http.post(
        "/session", content=chunks(), headers={"content-type": "application/json"}
    )
    assert response.status_code == 200 and response.json()["title"] == "streamed"
    assert fake.requests[-1].body == {"title": "streamed"}


async def test_query_is_a_read_only_multi_mapping_first_value_by_key(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    await fake_http.get("/session", params=[("roots", "true"), ("tag", "a"), ("tag", "b")])
    query = fake.requests[-1].query
    assert query["roots"] == "true"
    assert query["tag"] == "a" and query.get_list("tag") == ["a", "b"]
    assert query == httpx.QueryParams([("roots", "true"), ("tag", "a"), ("tag", "b")])
    assert dict(query) == {"roots": "true", "tag": "a"}
    assert "directory" not in query
    with pytest.raises(RuntimeError, match="immutable"):
        query["roots"] = "false"


async def test_headers_are_case_insensitive(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    await fake_http.get("/session", headers={"X-OpenCode-Directory": "/tmp/elsewhere"})
    headers = fake.requests[-1].headers
    assert headers["x-opencode-directory"] == "/tmp/elsewhere"
    assert headers["X-OPENCODE-DIRECTORY"] == "/tmp/elsewhere"
    latin1 = {b"x-opencode-directory": "/tmp/caf\xe9".encode("latin-1")}
    await fake_http.get("/session", headers=latin1)
    assert fake.requests[-1].headers["x-opencode-directory"] == "/tmp/caf\xe9", "sent raw"


async def test_the_password_appears_nowhere_in_a_recorded_request() -> None:
    token = base64.b64encode(f"opencode:{PASSWORD}".encode()).decode()  # ?auth_token=
    async with FakeOpenCodeServer(password=PASSWORD) as fake:
        oc = OpenCodeAdapter(fake.base_url, transport=fake.transport, password=PASSWORD)
        async with oc:
            await oc.start_session("t")
            await oc.send_turn("t", "hi")
        async with fake.client() as client:
            await client.get("/session/status", params={"auth_token": token, "a": "b"})
            await client.get("/session/status", auth=("opencode", "wrong-" + PASSWORD))
        authorized = [r for r in fake.requests if "authorization" in r.headers]
        assert authorized, "the adapter authenticates with a header"
        assert {r.headers["authorization"] for r in authorized} == {"[redacted]"}
        by_query = fake.requests[-2]
        assert dict(by_query.query) == {"auth_token": "[redacted]", "a": "b"}
        assert by_query.status == 200
        for record in fake.requests:
            for secret in (PASSWORD, token):
                assert secret not in repr(record)
                assert secret not in str(record.headers.raw)


async def test_calls_filter_by_method_and_pattern_in_order(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    a, b = fake.add_session(), fake.add_session()
    await fake_http.post(f"/session/{a}/abort")
    await fake_http.get(f"/session/{a}")
    await fake_http.post(f"/session/{b}/abort")
    await fake_http.post(f"/session/{a}/abort")
    aborts = fake.calls("POST", "/session/{id}/abort")
    assert [r.session_id for r in aborts] == [a, b, a]
    assert all(isinstance(r, RecordedRequest) for r in aborts)
    assert [r.path for r in fake.calls("post", f"/session/{a}/*")] == [f"/session/{a}/abort"] * 2
    assert len(fake.calls("*", f"/session/{a}*")) == 3
    assert fake.calls("GET", "/session/{id}/abort") == []


def test_a_fake_session_is_built_and_shown_with_the_name_of_its_attribute() -> None:
    session = FakeSession(id="ses_1", parent_id="ses_0", info={"id": "ses_1"})
    assert session.id == "ses_1" and session.parent_id == "ses_0"
    assert repr(session) == "FakeSession(id='ses_1', parent_id='ses_0', status='idle')"


async def test_a_fake_session_from_the_fake_shows_its_ids(fake: FakeOpenCodeServer) -> None:
    root = fake.add_session()
    child = fake.add_session(parent_id=root, busy=True)
    assert repr(fake.sessions[root]) == f"FakeSession(id={root!r}, parent_id=None, status='idle')"
    assert (
        repr(fake.sessions[child])
        == f"FakeSession(id={child!r}, parent_id={root!r}, status='busy')"
    )


async def test_the_fake_is_an_async_context_manager_that_closes() -> None:
    async with FakeOpenCodeServer() as fake:
        assert not fake.closed
    assert fake.closed


async def test_the_docs_example_of_assertions_on_what_was_sent(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    """``docs/testing.md``, "Asserting on what was sent"."""
    fake.script("ask", [Permission("bash", ["ls"]), Hang()])
    root = (await oc.start_session("t")).session_id
    await oc.send_turn("t", "go [[script:ask]]")
    opened = await rec.wait_for("request.opened")
    await oc.respond_to_request("t", opened.request_id, "accept")
    reply = fake.assert_called_once("POST", "/permission/{id}/reply")
    assert reply.body == {"reply": "once"}
    child = fake.add_session(parent_id=root, busy=True)
    await oc.interrupt_turn("t")
    aborted = {r.session_id for r in fake.calls("POST", "/session/{id}/abort")}
    assert aborted == set(fake.tree(root)) == {root, child}
