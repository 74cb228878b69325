"""Contract tests of ``OpenCodeClient`` against a respx-mocked server."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import respx

from adapter import (
    AuthError,
    InvalidInputError,
    NotFoundError,
    OpenCodeClient,
    ProtocolError,
    RequestError,
    RetryPolicy,
    SessionStatus,
)
from tests.mocked_tree_api import BASE, error, not_found, session_calls, session_json

SECRET = "s3cret-pässword-for-tests"
FAST_RETRY = RetryPolicy(attempts=3, initial_wait=0.001, max_wait=0.002)


@pytest.fixture
async def opencode_client() -> AsyncIterator[OpenCodeClient]:
    async with OpenCodeClient(BASE, retry=FAST_RETRY, directory="/work/project") as c:
        yield c


def message_json(sid: str, mid: str, role: str = "assistant") -> dict[str, Any]:
    return {
        "info": {
            "id": mid,
            "sessionID": sid,
            "role": role,
            "time": {"created": 1, "completed": 2},
            "error": {"name": "MessageAbortedError", "data": {"message": "Aborted"}},
        },
        "parts": [
            {"id": "prt_1", "messageID": mid, "sessionID": sid, "type": "text", "text": "hello"},
            {
                "id": "prt_2",
                "messageID": mid,
                "sessionID": sid,
                "type": "tool",
                "tool": "bash",
                "callID": "call_1",
                "state": {"status": "completed", "input": {"command": "echo hi"}, "output": "hi\n"},
            },
        ],
    }


async def test_basic_auth_and_directory_header_are_sent(router: respx.MockRouter) -> None:
    route = router.get("/global/health").respond(json={"healthy": True, "version": "1.18.34"})
    async with OpenCodeClient(BASE, password=SECRET, directory="/work/project") as client:
        health = await client.health()
    assert health.healthy and health.version == "1.18.34"
    request = route.calls.last.request
    expected = base64.b64encode(f"opencode:{SECRET}".encode()).decode()
    assert request.headers["authorization"] == f"Basic {expected}"
    assert request.headers["x-opencode-directory"] == "/work/project"


async def test_no_auth_header_without_password(
    router: respx.MockRouter, opencode_client: OpenCodeClient
) -> None:
    route = router.get("/global/health").respond(json={"healthy": True})
    await opencode_client.health()
    assert "authorization" not in route.calls.last.request.headers


async def test_password_never_in_repr_logs_or_errors(
    router: respx.MockRouter, captured_logs: list[dict[str, Any]]
) -> None:
    router.get("/session/status").mock(side_effect=httpx.ConnectError("refused"))
    router.post("/session/ses_a/abort").respond(401)
    async with OpenCodeClient(BASE, password=SECRET, retry=FAST_RETRY) as client:
        assert SECRET not in repr(client)
        assert "auth=basic" in repr(client)
        with pytest.raises(RequestError) as e1:
            await client.status()
        with pytest.raises(AuthError) as e2:
            await client.abort("ses_a")
    for exc in (e1.value, e2.value):
        assert SECRET not in str(exc) and SECRET not in repr(exc)
    assert captured_logs, "requests and retries are logged"
    assert SECRET not in json.dumps(captured_logs, default=str)
    encoded = base64.b64encode(f"opencode:{SECRET}".encode()).decode()
    assert encoded not in json.dumps(captured_logs, default=str)


def test_credentials_in_the_url_are_refused() -> None:
    with pytest.raises(InvalidInputError):
        OpenCodeClient("http://opencode:pw@127.0.0.1:4096")
    with pytest.raises(InvalidInputError):
        OpenCodeClient("ftp://127.0.0.1")
    for url in ("http://127.0.0.1:4096/?auth_token=pw", "http://127.0.0.1:4096?", "http://h/#pw"):
        with pytest.raises(InvalidInputError) as caught:
            OpenCodeClient(url)
        assert "pw" not in str(caught.value) and "127.0.0.1" not in str(caught.value)


async def test_every_request_is_logged_with_operation_session_status_duration(
    router: respx.MockRouter, opencode_client: OpenCodeClient, captured_logs: list[dict[str, Any]]
) -> None:
    router.post("/session/ses_a/abort").respond(json=True)
    await opencode_client.abort("ses_a")
    entry = next(e for e in captured_logs if e["event"] == "opencode.request")
    assert entry["operation"] == "abort"
    assert entry["session_id"] == "ses_a"
    assert entry["status"] == 200
    assert entry["duration_ms"] >= 0


async def test_401_is_auth_error(router: respx.MockRouter, opencode_client: OpenCodeClient) -> None:
    router.get("/session/ses_a").respond(401)
    with pytest.raises(AuthError) as caught:
        await opencode_client.get_session("ses_a")
    assert caught.value.status == 401
    assert caught.value.operation == "get_session"


async def test_not_found_by_status_and_by_body(
    router: respx.MockRouter, opencode_client: OpenCodeClient
) -> None:
    router.get("/session/ses_a").mock(return_value=not_found("ses_a"))
    router.get("/session/ses_b/children").respond(
        400, json={"name": "NotFoundError", "data": {"message": "Session not found: ses_b"}}
    )
    with pytest.raises(NotFoundError) as caught:
        await opencode_client.get_session("ses_a")
    assert caught.value.server_message == "Session not found: ses_a"
    with pytest.raises(NotFoundError):
        await opencode_client.children("ses_b")


async def test_request_error_carries_operation_status_and_server_message(
    router: respx.MockRouter, opencode_client: OpenCodeClient
) -> None:
    router.post("/session/ses_a/revert").mock(return_value=error(409, "session is busy"))
    with pytest.raises(RequestError) as caught:
        await opencode_client.revert("ses_a", "msg_1")
    err = caught.value
    assert (err.operation, err.status, err.server_message) == ("revert", 409, "session is busy")
    assert str(err) == "revert failed for ses_a (HTTP 409): session is busy"


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"{not json", "application/json"),
        (b'{"id": 1}', "application/json"),
        (b'"a string"', "application/json"),
        (b'{"id": "../etc", "time": {"created": 1}}', "application/json"),
    ],
)
async def test_malformed_responses_are_protocol_errors(
    router: respx.MockRouter, opencode_client: OpenCodeClient, body: bytes, content_type: str
) -> None:
    router.get("/session/ses_a").respond(200, content=body, headers={"content-type": content_type})
    with pytest.raises(ProtocolError):
        await opencode_client.get_session("ses_a")


async def test_huge_bodies_are_refused_with_bounded_reads(router: respx.MockRouter) -> None:
    async def endless() -> AsyncIterator[bytes]:
        yield b"["
        for _ in range(10_000):
            yield b'{"id":"ses_x","time":{"created":1}},' * 100

    router.get("/session/ses_a/children").mock(
        return_value=httpx.Response(200, stream=_Stream(endless()))
    )
    async with OpenCodeClient(BASE, max_response_bytes=64 * 1024) as client:
        with pytest.raises(ProtocolError, match="exceeds the limit"):
            await client.children("ses_a")


class _Stream(httpx.AsyncByteStream):
    def __init__(self, source: AsyncIterator[bytes]) -> None:
        self.source = source
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.source:
            yield chunk

    async def aclose(self) -> None:
        self.closed = True


async def test_declared_oversize_is_refused_before_reading(router: respx.MockRouter) -> None:
    router.get("/session/status").respond(
        200, content=b"{}", headers={"content-length": str(10**9)}
    )
    async with OpenCodeClient(BASE) as client:
        with pytest.raises(ProtocolError, match="exceeds the limit"):
            await client.status()


@pytest.mark.parametrize("bad", ["../../global/dispose", "ses_a/b", "ses_%2F", "abc", "ses_é", ""])
async def test_invalid_caller_ids_are_refused_without_a_request(
    router: respx.MockRouter, opencode_client: OpenCodeClient, bad: str
) -> None:
    for call in (*session_calls(opencode_client, bad), opencode_client.prompt_async(bad, "hi")):
        with pytest.raises(InvalidInputError):
            await call
    assert router.calls.call_count == 0


@pytest.mark.parametrize(
    ("created", "listed"),
    [
        pytest.param(
            {"ses_c": 30, "ses_a": 10, "ses_b": 20},
            ["ses_a", "ses_b", "ses_c"],
            id="sorted_by_creation_time",
        ),
        # OpenCode lists children in creation order; ids do not sort that way (they are
        # descending-time ids), so equal timestamps must keep the server's order.
        pytest.param(
            {"ses_z": 10, "ses_a": 10, "ses_m": 5},
            ["ses_m", "ses_z", "ses_a"],
            id="created_in_one_millisecond_keep_the_servers_creation_order",
        ),
    ],
)
async def test_children(
    router: respx.MockRouter,
    opencode_client: OpenCodeClient,
    created: dict[str, int],
    listed: list[str],
) -> None:
    router.get("/session/ses_p/children").respond(
        json=[session_json(sid, "ses_p", time) for sid, time in created.items()]
    )
    kids = await opencode_client.children("ses_p")
    assert [k.id for k in kids] == listed
    assert kids[0].parent_id == "ses_p"
    assert kids[0].title == f"title of {listed[0]}"


async def test_status_map_and_messages_are_typed(
    router: respx.MockRouter, opencode_client: OpenCodeClient
) -> None:
    router.get("/session/status").respond(
        json={
            "ses_a": {"type": "busy"},
            "ses_b": {"type": "retry", "attempt": 2, "message": "rate", "next": 5},
        }
    )
    router.get("/session/ses_a/message").respond(json=[message_json("ses_a", "msg_1")])
    status = await opencode_client.status()
    assert status["ses_a"] == SessionStatus("busy")
    assert (
        status["ses_b"].type == "retry" and status["ses_b"].attempt == 2 and status["ses_b"].is_busy
    )
    [msg] = await opencode_client.messages("ses_a")
    assert msg.info.error is not None and msg.info.error.name == "MessageAbortedError"
    assert msg.parts[0].text == "hello"
    tool = msg.parts[1]
    assert tool.tool == "bash" and tool.state is not None and tool.state.output == "hi\n"


async def test_prompt_async_body_and_it_is_never_retried(
    router: respx.MockRouter, opencode_client: OpenCodeClient
) -> None:
    route = router.post("/session/ses_a/prompt_async").mock(return_value=error(503, "overloaded"))
    with pytest.raises(RequestError) as caught:
        await opencode_client.prompt_async(
            "ses_a",
            "do it",
            message_id="msg_00000000000aAbBcCdDeEfFgG",
            model=("fake", "m"),
            agent="build",
        )
    assert caught.value.status == 503
    assert route.call_count == 1
    body = json.loads(route.calls.last.request.content)
    assert body == {
        "parts": [{"type": "text", "text": "do it"}],
        "messageID": "msg_00000000000aAbBcCdDeEfFgG",
        "model": {"providerID": "fake", "modelID": "m"},
        "agent": "build",
    }
    route.mock(return_value=httpx.Response(204))
    await opencode_client.prompt_async("ses_a", "again")  # returns None (typed so)
    assert route.call_count == 2 and route.calls.last.response.status_code == 204


async def test_permission_and_question_replies(
    router: respx.MockRouter, opencode_client: OpenCodeClient
) -> None:
    perm = router.post("/permission/per_1/reply").respond(json=True)
    question = router.post("/question/que_1/reply").respond(json=True)
    reject = router.post("/question/que_2/reject").respond(json=True)
    assert await opencode_client.permission_reply("per_1", "always")
    assert await opencode_client.question_reply("que_1", [["Yes"], ["A", "B"]])
    assert await opencode_client.question_reject("que_2")
    assert json.loads(perm.calls.last.request.content) == {"reply": "always"}
    assert json.loads(question.calls.last.request.content) == {"answers": [["Yes"], ["A", "B"]]}
    assert reject.call_count == 1
    with pytest.raises(InvalidInputError):
        await opencode_client.permission_reply("per_1", "sometimes")  # type: ignore[arg-type]


async def test_create_session_with_parent(
    router: respx.MockRouter, opencode_client: OpenCodeClient
) -> None:
    route = router.post("/session").respond(json=session_json("ses_kid", "ses_p", 1))
    session = await opencode_client.create_session(title="t", parent_id="ses_p")
    assert session.parent_id == "ses_p"
    assert json.loads(route.calls.last.request.content) == {"title": "t", "parentID": "ses_p"}


@pytest.mark.parametrize(
    "fault",
    [httpx.ConnectError("refused"), httpx.ReadTimeout("slow"), httpx.RemoteProtocolError("reset")],
)
async def test_transient_transport_faults_are_retried(
    router: respx.MockRouter, opencode_client: OpenCodeClient, fault: Exception
) -> None:
    route = router.get("/session/ses_a/children").mock(
        side_effect=[fault, fault, httpx.Response(200, json=[])]
    )
    assert await opencode_client.children("ses_a") == []
    assert route.call_count == 3


async def test_429_then_exhausted_retries_raise_typed_error(
    router: respx.MockRouter, opencode_client: OpenCodeClient, captured_logs: list[dict[str, Any]]
) -> None:
    route = router.get("/session/status").mock(return_value=error(429, "slow down"))
    with pytest.raises(RequestError) as caught:
        await opencode_client.status()
    assert route.call_count == 3
    assert caught.value.status == 429
    assert "after 3 attempts" in str(caught.value)
    assert sum(1 for e in captured_logs if e["event"] == "opencode.retry") == 2


async def test_connection_refused_is_a_request_error(
    router: respx.MockRouter, opencode_client: OpenCodeClient
) -> None:
    router.post("/session").mock(side_effect=httpx.ConnectError("refused"))
    with pytest.raises(RequestError) as caught:
        await opencode_client.create_session()
    assert caught.value.status is None
    assert "connection failed" in str(caught.value)


async def test_closed_client_raises_request_error() -> None:
    client = OpenCodeClient(BASE)
    await client.aclose()
    with pytest.raises(RequestError, match="closed"):
        await client.status()


async def test_event_stream_decodes_and_skips_malformed_events(
    router: respx.MockRouter, opencode_client: OpenCodeClient, captured_logs: list[dict[str, Any]]
) -> None:
    body = (
        b'data: {"id":"evt_1","type":"server.connected","properties":{}}\n\n'
        b"data: {broken\n\n"
        b"data: [1,2]\n\n"
        b'data: {"id":"evt_2","type":"session.idle","properties":{"sessionID":"ses_a"}}\n\n'
    )
    router.get("/event").respond(200, content=body, headers={"content-type": "text/event-stream"})
    async with opencode_client.event_stream() as events:
        got = [e["type"] async for e in events]
    assert got == ["server.connected", "session.idle"]
    assert sum(1 for e in captured_logs if e["event"] == "opencode.event.malformed") == 2


async def test_event_stream_refuses_a_non_sse_answer(
    router: respx.MockRouter, opencode_client: OpenCodeClient
) -> None:
    router.get("/event").respond(200, json={})
    with pytest.raises(ProtocolError):
        async with opencode_client.event_stream():
            pass
    router.get("/event").respond(401)
    with pytest.raises(AuthError):
        async with opencode_client.event_stream():
            pass
