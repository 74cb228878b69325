"""The real-OpenCode test infrastructure works against the pinned binary.

Covers the scripted model server on its own (plain httpx), and a real
``opencode serve`` driven through its HTTP API: text turns, nested ``task``
subagents, abort of a hanging model call, and basic auth.
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapter.testing import (
    PINNED_VERSION,
    RealOpenCodeServer,
    find_opencode_binary,
    free_port,
)
from adapter.testing.model import (
    Hang,
    HttpError,
    ModelRequest,
    ScriptedModelServer,
    Text,
    ToolCall,
    ToolCalls,
    script_marker,
    task_call,
)

pytestmark = pytest.mark.real

TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]


# ------------------------------------------------------------------ helpers


def chat_body(
    first_user_text: str, assistant_turns: int = 0, *, tools: bool = True
) -> dict[str, Any]:
    """An OpenAI chat request whose history holds ``assistant_turns`` assistant messages."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "system prompt"},
        {"role": "user", "content": [{"type": "text", "text": first_user_text}]},
    ]
    for i in range(assistant_turns):
        messages.append({"role": "assistant", "content": f"answer {i}"})
        messages.append({"role": "user", "content": f"follow-up {i} [[script:ignored]]"})
    body: dict[str, Any] = {"model": "fake-model", "messages": messages, "stream": True}
    if tools:
        body["tools"] = TOOLS
    return body


def stream_chat(
    model: ScriptedModelServer, body: dict[str, Any], session_id: str
) -> AbstractContextManager[httpx.Response]:
    """``body`` posted to ``model`` the way OpenCode sends a session's request, streamed."""
    return httpx.stream(
        "POST",
        f"{model.base_url}/chat/completions",
        json=body,
        headers={"x-opencode-session-id": session_id},
        trust_env=False,
    )


def read_sse(response: httpx.Response) -> list[Any]:
    """All ``data:`` payloads of an SSE response (``[DONE]`` kept as a string)."""
    events: list[Any] = []
    for line in response.iter_lines():
        if line.startswith("data: "):
            data = line[len("data: ") :]
            events.append(data if data == "[DONE]" else json.loads(data))
    return events


def deltas(events: list[Any]) -> list[dict[str, Any]]:
    return [e["choices"][0]["delta"] for e in events if isinstance(e, dict)]


def create_session(client: httpx.Client, title: str | None = "test") -> str:
    response = client.post("/session", json={} if title is None else {"title": title})
    assert response.status_code == 200, response.text
    session_id = response.json()["id"]
    assert isinstance(session_id, str)
    assert session_id.startswith("ses")
    return session_id


def prompt_async(client: httpx.Client, session_id: str, text: str) -> None:
    response = client.post(
        f"/session/{session_id}/prompt_async", json={"parts": [{"type": "text", "text": text}]}
    )
    assert response.status_code == 204, response.text


def messages(client: httpx.Client, session_id: str) -> list[dict[str, Any]]:
    response = client.get(f"/session/{session_id}/message")
    assert response.status_code == 200, response.text
    result = response.json()
    assert isinstance(result, list)
    return result


def turn_finished(client: httpx.Client, session_id: str) -> list[dict[str, Any]] | None:
    """The session's messages once its last assistant message is final and it is idle."""
    history = messages(client, session_id)
    if not history:
        return None
    info = history[-1]["info"]
    final = info["role"] == "assistant" and "completed" in info.get("time", {})
    final = final and (bool(info.get("error")) or info.get("finish") not in (None, "tool-calls"))
    if not final:
        return None
    if session_id in client.get("/session/status").json():
        return None
    return history


def wait_until(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def text_of(message: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in message["parts"] if p["type"] == "text")


def of_session(session_id: str) -> Callable[[list[ModelRequest]], list[ModelRequest]]:
    return lambda requests: [r for r in requests if r.session_id == session_id]


# -------------------------------------------------- model server, plain HTTP


def test_model_server_streams_text_slowly(
    scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    scripted_model.script(unique_name, [Text("The quick brown fox", chunk_size=4, delay=0.03)])
    fake_session = f"ses_{unique_name}"
    body = chat_body(f"hello {script_marker(unique_name)}")
    started = time.monotonic()
    with stream_chat(scripted_model, body, fake_session) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = read_sse(response)
    elapsed = time.monotonic() - started

    assert events[-1] == "[DONE]"
    chunks = [e for e in events if isinstance(e, dict)]
    assert all(e["object"] == "chat.completion.chunk" for e in chunks)
    pieces = [d["content"] for d in deltas(events) if d.get("content")]
    assert pieces == ["The ", "quic", "k br", "own ", "fox"]
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["usage"]["total_tokens"] > 0
    assert elapsed >= 4 * 0.03  # four pauses between five chunks

    # the server records the end just after its last bytes went out: wait for it
    (record,) = scripted_model.wait_for(
        lambda rs: [r for r in of_session(fake_session)(rs) if not r.open], timeout=2
    )
    assert (record.script, record.step, record.kind) == (unique_name, 0, "text")
    assert not record.is_title
    assert not record.open
    assert not record.disconnected
    assert record.ended_at is not None
    assert record.ended_at >= record.started_at


def test_model_server_streams_a_tool_calls_text_slowly_then_the_calls(
    scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    call = ToolCall("bash", {"command": "true"})
    scripted_model.script(
        unique_name, [ToolCalls([call], text="Let me see", chunk_size=4, delay=0.03)]
    )
    body = chat_body(f"hello {script_marker(unique_name)}")
    started = time.monotonic()
    with stream_chat(scripted_model, body, f"ses_{unique_name}") as response:
        events = read_sse(response)
    elapsed = time.monotonic() - started
    pieces = [d["content"] for d in deltas(events) if d.get("content")]
    assert pieces == ["Let ", "me s", "ee"]
    assert [
        d["tool_calls"][0]["function"]["name"] for d in deltas(events) if "tool_calls" in d
    ] == ["bash"]
    assert elapsed >= 2 * 0.03  # two pauses between three chunks
    with pytest.raises(ValueError, match="chunk_size"):
        ToolCalls([call], chunk_size=0)
    with pytest.raises(ValueError, match="delay"):
        ToolCalls([call], delay=-1)


def test_model_server_tool_calls_titles_defaults_and_errors(
    scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    scripted_model.script(
        unique_name,
        [
            Text("step zero"),
            ToolCalls(
                [
                    ToolCall("bash", {"command": "ls", "description": "list"}),
                    task_call("sub", "kid"),
                ],
                text="calling tools",
            ),
            HttpError(400, {"error": {"message": "nope"}}),
        ],
    )
    marker = script_marker(unique_name)
    url = f"{scripted_model.base_url}/chat/completions"
    with httpx.Client(trust_env=False, timeout=5) as client:
        # step 1: one assistant message in the history
        with client.stream("POST", url, json=chat_body(marker, 1)) as response:
            events = read_sse(response)
        calls = [c for d in deltas(events) for c in d.get("tool_calls", [])]
        assert [c["function"]["name"] for c in calls] == ["bash", "task"]
        assert [c["index"] for c in calls] == [0, 1]
        assert len({c["id"] for c in calls}) == 2
        assert json.loads(calls[0]["function"]["arguments"]) == {
            "command": "ls",
            "description": "list",
        }
        task_args = json.loads(calls[1]["function"]["arguments"])
        assert task_args["description"] == "sub"
        assert task_args["subagent_type"] == "general"
        assert "[[script:kid]]" in task_args["prompt"]
        assert "".join(d.get("content") or "" for d in deltas(events)) == "calling tools"
        assert events[-2]["choices"][0]["finish_reason"] == "tool_calls"

        # step 2: scripted HTTP error
        response = client.post(url, json=chat_body(marker, 2))
        assert response.status_code == 400
        assert response.json() == {"error": {"message": "nope"}}

        # past the end of the script, and without any marker: default text
        for body in (chat_body(marker, 3), chat_body("no marker here")):
            with client.stream("POST", url, json=body) as response:
                text = "".join(d.get("content") or "" for d in deltas(read_sse(response)))
            assert text == "done"

        # no tools: a title request, which does not consume a step
        with client.stream("POST", url, json=chat_body(marker, 0, tools=False)) as response:
            title = "".join(d.get("content") or "" for d in deltas(read_sse(response)))
        assert title == scripted_model.title_text

    mine = [r for r in scripted_model.requests if r.script == unique_name]
    assert [(r.step, r.kind, r.is_title) for r in mine] == [
        (1, "tool_calls", False),
        (2, "http_error", False),
        (3, "default", False),
        (None, "title", True),
    ]
    assert mine[0].tool_names == ("bash", "task")


async def test_model_server_records_disconnect_of_hanging_response(
    scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    scripted_model.script(unique_name, [Hang("partial answer")])
    fake_session = f"ses_{unique_name}"
    async with (
        httpx.AsyncClient(trust_env=False, timeout=5) as client,
        client.stream(
            "POST",
            f"{scripted_model.base_url}/chat/completions",
            json=chat_body(script_marker(unique_name)),
            headers={"x-opencode-session-id": fake_session},
        ) as response,
    ):
        received = ""
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                received += json.loads(line[6:])["choices"][0]["delta"].get("content", "")
            if received == "partial answer":
                break
        (hanging,) = await scripted_model.wait_for_async(
            lambda rs: [r for r in rs if r.session_id == fake_session and r.open],
            timeout=2,
        )
        assert hanging.kind == "hang"
        assert scripted_model.open_requests([fake_session]) == [hanging]
        # leaving the block closes the connection mid-response

    (dropped,) = await scripted_model.wait_for_async(
        lambda rs: [r for r in rs if r.session_id == fake_session and r.disconnected],
        timeout=2,
    )
    assert not dropped.open
    assert scripted_model.open_requests([fake_session]) == []
    with pytest.raises(TimeoutError, match="did not match"):
        scripted_model.wait_for(lambda rs: [r for r in rs if r.script == "never"], timeout=0.05)


# ------------------------------------------------------------ real server


def test_real_server_starts_isolated_and_healthy(
    real_server: RealOpenCodeServer, opencode_http: httpx.Client
) -> None:
    response = opencode_http.get("/global/health")
    assert response.status_code == 200
    # The release matrix (scripts/test-matrix.py) runs this suite on other releases too.
    expected = os.environ.get("OPENCODE_VERSION_UNDER_TEST", PINNED_VERSION)
    assert response.json() == {"healthy": True, "version": expected}

    assert real_server.port != 4096
    assert real_server.base_url == f"http://127.0.0.1:{real_server.port}"
    assert os.getpgid(real_server.pid) == real_server.pid  # its own process group
    assert Path(f"/proc/{real_server.pid}/cwd").resolve() == real_server.directory
    assert real_server.directory.is_dir()
    assert real_server.startup_seconds is not None
    assert real_server.startup_seconds < 30
    assert "opencode server listening on" in real_server.log_text()

    session = opencode_http.post("/session", json={"title": "where"}).json()
    assert Path(session["directory"]) == real_server.directory


async def test_prompt_streams_scripted_text(
    scripted_model: ScriptedModelServer,
    real_server: RealOpenCodeServer,
    opencode_http: httpx.Client,
    unique_name: str,
) -> None:
    text = "Hello from the scripted model, streamed slowly."
    scripted_model.script(unique_name, [Text(text, chunk_size=6, delay=0.04)])
    session_id = create_session(opencode_http, title="titled, so no title request")

    sent = time.monotonic()
    prompt_async(opencode_http, session_id, f"say hello {script_marker(unique_name)}")
    (request,) = await scripted_model.wait_for_async(of_session(session_id), timeout=15)
    latency = request.started_at - sent
    history = wait_until(lambda: turn_finished(opencode_http, session_id), 15, "the turn")

    assert [m["info"]["role"] for m in history] == ["user", "assistant"]
    assistant = history[-1]
    assert assistant["info"]["finish"] == "stop"
    assert text_of(assistant) == text
    # The model side took >= 7 pauses of 40 ms. (OpenCode's own part timestamps are
    # not a reliable measure: a busy server may process queued chunks in one go.)
    (done,) = scripted_model.wait_for(
        lambda rs: [r for r in rs if r.index == request.index and not r.open], timeout=5
    )
    assert done.ended_at is not None
    assert done.ended_at - done.started_at >= 7 * 0.04
    assert (request.script, request.step, request.kind) == (unique_name, 0, "text")
    assert not request.is_title
    assert [r.session_id for r in scripted_model.requests].count(session_id) == 1
    print(f"\nprompt_async -> model request: {latency:.3f} s")


def test_untitled_session_gets_title_request_and_default_text(
    scripted_model: ScriptedModelServer, opencode_http: httpx.Client
) -> None:
    session_id = create_session(opencode_http, title=None)
    prompt_async(opencode_http, session_id, "a prompt without any script marker")
    history = wait_until(lambda: turn_finished(opencode_http, session_id), 15, "the turn")

    assert text_of(history[-1]) == scripted_model.default_text

    def all_done(rs: list[ModelRequest]) -> list[ModelRequest]:
        # the title request runs concurrently with the turn and may finish after it
        mine = of_session(session_id)(rs)
        finished = len(mine) >= 2 and all(not r.open for r in mine)
        return mine if finished else []

    requests = scripted_model.wait_for(all_done, timeout=5)
    assert sorted(r.kind for r in requests) == ["default", "title"]
    (title_request,) = [r for r in requests if r.is_title]
    assert "tools" not in title_request.body or not title_request.body["tools"]


def test_task_tool_creates_child_and_nested_grandchild(
    scripted_model: ScriptedModelServer, opencode_http: httpx.Client, unique_name: str
) -> None:
    root_s, child_s, grand_s = (f"{unique_name}-{n}" for n in ("root", "child", "grand"))
    scripted_model.script(root_s, [ToolCalls([task_call("child job", child_s)]), Text("root ok")])
    scripted_model.script(child_s, [ToolCalls([task_call("grand job", grand_s)]), Text("child ok")])
    scripted_model.script(grand_s, [Text("grandchild ok")])

    root = create_session(opencode_http, title="tree root")
    prompt_async(opencode_http, root, f"start {script_marker(root_s)}")
    history = wait_until(lambda: turn_finished(opencode_http, root), 20, "the root turn")
    assert text_of(history[-1]) == "root ok"

    (child,) = opencode_http.get(f"/session/{root}/children").json()
    assert child["parentID"] == root
    assert child["title"] == "child job (@general subagent)"
    (grand,) = opencode_http.get(f"/session/{child['id']}/children").json()
    assert grand["parentID"] == child["id"]
    assert grand["title"] == "grand job (@general subagent)"
    assert opencode_http.get(f"/session/{grand['id']}/children").json() == []

    assert text_of(messages(opencode_http, grand["id"])[-1]) == "grandchild ok"
    assert text_of(messages(opencode_http, child["id"])[-1]) == "child ok"
    task_parts = [p for m in history for p in m["parts"] if p.get("tool") == "task"]
    assert [p["state"]["status"] for p in task_parts] == ["completed"]
    assert task_parts[0]["state"]["metadata"]["sessionId"] == child["id"]

    by_session = {
        sid: [(r.script, r.step) for r in scripted_model.requests if r.session_id == sid]
        for sid in (root, child["id"], grand["id"])
    }
    assert by_session == {
        root: [(root_s, 0), (root_s, 1)],
        child["id"]: [(child_s, 0), (child_s, 1)],
        grand["id"]: [(grand_s, 0)],
    }


def test_abort_drops_hanging_model_request(
    scripted_model: ScriptedModelServer, opencode_http: httpx.Client, unique_name: str
) -> None:
    scripted_model.script(unique_name, [Hang("thinking about it")])
    session_id = create_session(opencode_http, title="hang")
    prompt_async(opencode_http, session_id, f"hang please {script_marker(unique_name)}")

    (hanging,) = scripted_model.wait_for(
        lambda rs: [r for r in rs if r.session_id == session_id and r.open], timeout=15
    )
    assert hanging.kind == "hang"
    # Wait until OpenCode opened the text part. While a part streams, the stored copy
    # holds no text yet (deltas only go out as events); it is filled in when it ends.
    last = wait_until(
        lambda: [
            p for p in messages(opencode_http, session_id)[-1]["parts"] if p["type"] == "text"
        ],
        5,
        "the streaming text part",
    )
    assert last[0]["text"] == ""
    assert "end" not in last[0]["time"]
    assert opencode_http.get("/session/status").json()[session_id]["type"] == "busy"
    held_until = time.monotonic() + 0.2
    while time.monotonic() < held_until:  # still holding, checked every 50 ms
        assert scripted_model.open_requests([session_id]) == [hanging]
        time.sleep(0.05)
    assert scripted_model.open_requests([session_id]) == [hanging]

    aborted_at = time.monotonic()
    response = opencode_http.post(f"/session/{session_id}/abort")
    assert response.status_code == 200
    assert response.json() is True
    (dropped,) = scripted_model.wait_for(
        lambda rs: [r for r in rs if r.index == hanging.index and r.disconnected], timeout=5
    )
    assert dropped.ended_at is not None
    assert dropped.ended_at - aborted_at < 2.0
    print(f"\nabort -> model disconnect seen: {dropped.ended_at - aborted_at:.3f} s")

    history = wait_until(lambda: turn_finished(opencode_http, session_id), 10, "aborted turn")
    info = history[-1]["info"]
    assert info["error"]["name"] == "MessageAbortedError"
    assert "finish" not in info
    assert text_of(history[-1]) == "thinking about it"
    assert scripted_model.requests_after(aborted_at, [session_id]) == []


def test_password_protected_server(scripted_model: ScriptedModelServer) -> None:
    password = "correct horse"
    with RealOpenCodeServer(scripted_model.base_url, password=password) as server:
        assert server.password == password
        with httpx.Client(base_url=server.base_url, trust_env=False, timeout=5) as client:
            assert client.get("/global/health").status_code == 401
            assert client.get("/session").status_code == 401
            assert client.get("/global/health", auth=("opencode", "wrong")).status_code == 401
            ok = client.get("/global/health", auth=("opencode", password))
            assert ok.status_code == 200
            assert ok.json()["healthy"] is True
            assert client.get("/global/health", headers=server.auth_headers()).status_code == 200
            token = server.auth_headers()["Authorization"].removeprefix("Basic ")
            assert client.get("/global/health", params={"auth_token": token}).status_code == 200
        pid, directory = server.pid, server.directory
    # after exit: the process (group) is gone and the temp tree removed
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)
    assert not directory.exists()
    assert "opencode server listening on" in server.log_text()


# ------------------------------------------------------- helper functions


def test_binary_resolution_and_ports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENCODE_BIN", raising=False)
    found = find_opencode_binary()
    assert found.is_file()
    assert os.access(found, os.X_OK)

    with pytest.raises(FileNotFoundError, match="make opencode"):
        find_opencode_binary(tmp_path / "missing")
    monkeypatch.setenv("OPENCODE_BIN", str(tmp_path / "also-missing"))
    with pytest.raises(FileNotFoundError, match="OPENCODE_BIN"):
        find_opencode_binary()
    monkeypatch.setenv("OPENCODE_BIN", str(found))
    assert find_opencode_binary() == found.resolve()

    ports = {free_port() for _ in range(20)}
    assert 4096 not in ports
    assert all(1024 < p < 65536 for p in ports)
    with pytest.raises(ValueError, match="4096"):
        RealOpenCodeServer("http://127.0.0.1:9/v1", port=4096)


def test_startup_failure_reports_log_tail(tmp_path: Path) -> None:
    fake = tmp_path / "fake-opencode"
    fake.write_text("#!/bin/sh\necho 'fake server: cannot start' >&2\nexit 3\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    server = RealOpenCodeServer("http://127.0.0.1:9/v1", binary=fake, startup_timeout=5)
    with pytest.raises(RuntimeError, match="exited with code 3") as info:
        server.start()
    assert "fake server: cannot start" in str(info.value)
    assert not server.directory.exists()


def test_scripted_model_errors_end_or_retry_a_turn_as_documented(
    opencode_http: httpx.Client, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    """``HttpError.invalid_request`` fails the turn at once; ``server_error`` is retried."""
    fatal, retried = f"{unique_name}-fatal", f"{unique_name}-retried"
    scripted_model.script(fatal, [HttpError.invalid_request("bad request body")])
    scripted_model.script(retried, [HttpError.server_error("provider down")] * 3)

    session = create_session(opencode_http)
    prompt_async(opencode_http, session, "go " + script_marker(fatal))
    history = wait_until(lambda: turn_finished(opencode_http, session), 30, "the failed turn")
    error = history[-1]["info"]["error"]
    assert error["name"] == "APIError"
    assert error["data"]["message"] == "bad request body"
    assert error["data"]["isRetryable"] is False
    assert len(of_session(session)(scripted_model.requests)) == 1

    session = create_session(opencode_http)
    prompt_async(opencode_http, session, "go " + script_marker(retried))

    def retry_status() -> dict[str, Any] | None:
        status: dict[str, Any] | None = opencode_http.get("/session/status").json().get(session)
        return status if status is not None and status.get("type") == "retry" else None

    status = wait_until(retry_status, 30, "a retry status")
    assert status["attempt"] == 1
    assert status["message"] == "provider down"
    assert opencode_http.post(f"/session/{session}/abort").json() is True
    wait_until(lambda: session not in opencode_http.get("/session/status").json(), 10, "idle")


def test_http_error_constructors_validate_their_status() -> None:
    assert HttpError.invalid_request("x").status == 400
    assert HttpError.server_error("x", status=429).status == 429
    with pytest.raises(ValueError):
        HttpError.invalid_request("x", status=500)
    with pytest.raises(ValueError):
        HttpError.invalid_request("x", status=429)
    with pytest.raises(ValueError):
        HttpError.server_error("x", status=404)
