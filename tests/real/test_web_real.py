"""The web backend through ``opencode-tree web`` (a subprocess) on a real ``opencode serve``.

``GET /inventory`` lists what the server offers, and
``POST /threads/{id}/subagents/{session_id}/stop`` stops one of two parallel subagents:
the sibling and the root go on and the turn completes with the
sibling's work; the root and an unknown session are refused with nothing stopped. The
scenario is ``test_subagent_tasks_real.py``'s (``alpha`` hangs, ``beta`` streams for
about 4 s), driven over HTTP and the event stream only, with the bearer token the
command requires.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from adapter.testing import RealOpenCodeServer, ScriptedModelServer, free_port
from adapter.testing.model import script_marker
from tests.real.scripts import script_two_subagents
from tests.real.test_subagent_tasks_real import _model_call_open
from tests.real.web_process import frames, read_to_url

pytestmark = pytest.mark.real

TOKEN = secrets.token_urlsafe(24)


@contextlib.contextmanager
def web_command(server: RealOpenCodeServer) -> Iterator[str]:
    """``opencode-tree web`` on a free loopback port over ``server``; its base URL."""
    port = free_port()
    argv = ["web", "--url", server.base_url, "--directory", str(server.directory)]
    process = subprocess.Popen(
        [sys.executable, "-m", "adapter", *argv, "--port", str(port), "--token-env", "WEB_T"],
        env={**os.environ, "WEB_T": TOKEN, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        # The command prints its URL once it listens.
        if not read_to_url(process.stdout, port):
            raise AssertionError(f"opencode-tree web ended: {process.wait()}")
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=15)


@contextlib.asynccontextmanager
async def web_client(server: RealOpenCodeServer) -> AsyncIterator[httpx.AsyncClient]:
    with web_command(server) as base:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as http:
            yield http


async def test_the_inventory_through_the_web_command(real_server: RealOpenCodeServer) -> None:
    async with web_client(real_server) as http:
        response = await http.get("/inventory")
        unauthorised = await http.get("/inventory", headers={"Authorization": "Bearer x"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["errors"] == {} and body["version"]
    [model] = body["models"]
    assert model["id"] == "fake/fake-model" and model["context_limit"] == 128000
    modes = {a["name"]: a["mode"] for a in body["agents"]}
    assert modes["build"] == modes["plan"] == "primary" and modes["explore"] == "subagent"
    assert "init" in {c["name"] for c in body["commands"]}
    assert unauthorised.status_code == 401


async def read_events(stream: httpx.Response, found: asyncio.Queue[dict[str, Any]]) -> None:
    """Every event of an open event stream, put on ``found`` as it comes."""
    async for frame in frames(stream):
        if frame.event != "stream.gap":
            await found.put(frame.json())


async def next_of(found: asyncio.Queue[dict[str, Any]], kind: str) -> dict[str, Any]:
    async with asyncio.timeout(60):
        while (event := await found.get())["type"] != kind:
            pass
    return event


async def test_one_subagent_stopped_through_the_web_command(
    real_server: RealOpenCodeServer, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    name = unique_name
    script_two_subagents(scripted_model, name, beta_words=40)  # beta streams for about 4 s
    found: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    async with web_client(real_server) as http:
        made = await http.post("/threads", json={"thread_id": "w", "title": name})
        root = made.json()["session_id"]
        # Subscribed once the stream's headers came: nothing of the turn is missed.
        async with http.stream("GET", "/threads/w/events") as stream:
            reader = asyncio.create_task(read_events(stream, found))
            try:
                text = "go " + script_marker(name)
                sent = await http.post("/threads/w/turns", json={"text": text})
                assert sent.status_code == 202, sent.text
                started = [await next_of(found, "task.started") for _ in range(2)]
                tasks = {e["description"]: e["session_id"] for e in started}
                await _model_call_open(scripted_model, name, 2)
                refused = [
                    await http.post(f"/threads/w/subagents/{sid}/stop")
                    for sid in (root, "ses_" + "z" * 26)
                ]
                response = await http.post(f"/threads/w/subagents/{tasks['alpha']}/stop")
                tree = (await http.get("/threads/w/tree")).json()
                ends = {}
                async with asyncio.timeout(60):
                    while (event := await found.get())["type"] != "turn.completed":
                        if event["type"] == "task.completed":
                            ends[event["session_id"]] = event
            finally:
                reader.cancel()
    assert [r.status_code for r in refused] == [422, 404], [r.text for r in refused]
    assert response.status_code == 200, response.text
    report = response.json()
    assert report["ok"] and report["root_id"] == tasks["alpha"]
    assert [s["outcome"] for s in report["sessions"]] == ["aborted"]
    status = {s["session_id"]: s["status"] for s in tree["sessions"]}
    assert status[tasks["alpha"]] == "idle"
    assert status[tasks["beta"]] == "busy" and status[root] == "busy"
    assert event["state"] == "completed", json.dumps(event)[:500]
    assert ends[tasks["alpha"]]["status"] == "stopped"
    assert ends[tasks["beta"]]["status"] == "completed"
