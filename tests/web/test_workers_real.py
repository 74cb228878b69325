"""``uvicorn --workers 4`` over a real OpenCode server and one SQLite store: every
worker serves every thread, and a Stop sent to any worker stops the whole tree with
the partial of a turn another worker started.

The host module is ``tests/web/workers_host.py`` (each answer names its worker's pid
in ``x-worker-pid``); the OpenCode server (1.18.34) and its scripted model are
started by the module's fixtures.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from adapter import OpenCodeClient
from adapter.testing import RealOpenCodeServer, ScriptedModelServer, free_port
from adapter.testing.model import Hang, ModelRequest, ToolCall, ToolCalls, script_marker, task_call

pytestmark = pytest.mark.real

ROOT = Path(__file__).resolve().parents[2]
WORKERS = 4
SLOW = 60.0


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server


@pytest.fixture
async def backend(opencode: RealOpenCodeServer, tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    """uvicorn with 4 worker processes serving ``workers_host``; a client that opens a
    new connection per request, so the kernel spreads them over the workers."""
    port = free_port()
    env = {
        **os.environ,
        "WORKERS_BASE_URL": opencode.base_url,
        "WORKERS_DIRECTORY": str(opencode.directory),
        "WORKERS_STORE": str(tmp_path / "threads.sqlite3"),
    }
    command = [sys.executable, "-m", "uvicorn", "tests.web.workers_host:app", "--port", str(port)]
    command += ["--workers", str(WORKERS), "--log-level", "warning"]
    log_path = tmp_path / "uvicorn.log"
    with log_path.open("wb") as log:
        process = await asyncio.create_subprocess_exec(
            *command, cwd=ROOT, env=env, stdout=log, stderr=log
        )
    limits = httpx.Limits(max_keepalive_connections=0)
    try:
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}", timeout=SLOW, limits=limits
        ) as http:
            async with asyncio.timeout(SLOW):
                while True:
                    assert process.returncode is None, log_path.read_text()
                    try:
                        if (await http.get("/threads")).status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    await asyncio.sleep(0.2)
            yield http
    finally:
        process.terminate()
        try:
            async with asyncio.timeout(20):
                await process.wait()
        except TimeoutError:
            process.kill()
            await process.wait()


def pid(response: httpx.Response) -> str:
    return response.headers["x-worker-pid"]


async def busy(server: RealOpenCodeServer) -> set[str]:
    async with OpenCodeClient(server.base_url, directory=str(server.directory)) as client:
        return {sid for sid, status in (await client.status()).items() if status.is_busy}


async def opened(model: ScriptedModelServer, script: str) -> ModelRequest:
    def found(requests: list[ModelRequest]) -> list[ModelRequest]:
        return [r for r in requests if r.script == script]

    return (await model.wait_for_async(found, timeout=SLOW))[0]


async def test_four_workers_serve_every_thread_and_any_stops_another_ones_turn(
    backend: httpx.AsyncClient, opencode: RealOpenCodeServer, model: ScriptedModelServer
) -> None:
    threads = [f"w{i}" for i in range(5)]
    for thread_id in threads:
        created = await backend.post("/threads", json={"thread_id": thread_id})
        assert created.status_code == 201, created.text

    answers = await asyncio.gather(*(backend.get(f"/threads/{threads[i % 5]}") for i in range(200)))
    statuses = [a.status_code for a in answers]
    assert statuses.count(404) == 0 and set(statuses) == {200}, statuses
    assert len({pid(a) for a in answers}) >= 2  # the requests were spread over the workers

    # A turn started on one worker, stopped through another (the kernel picks the
    # worker: a Stop that landed on the starting one is retried on a new thread).
    for attempt in range(6):
        name = f"tree{attempt}"
        model.script(f"{name}-c", [Hang()])
        bash = ToolCall("bash", {"command": "echo built", "description": "echo built"})
        model.script(name, [ToolCalls([bash]), ToolCalls([task_call("dig", f"{name}-c")])])
        thread_id = threads[attempt % 5]
        sent = await backend.post(
            f"/threads/{thread_id}/turns", json={"text": "go " + script_marker(name)}
        )
        assert sent.status_code == 202, sent.text
        await opened(model, f"{name}-c")
        assert await busy(opencode)
        stopped = await backend.post(f"/threads/{thread_id}/stop")
        assert stopped.status_code == 200, stopped.text
        body = stopped.json()
        assert body["turn_id"] == sent.json()["turn_id"]
        assert body["stop"]["ok"] and len(body["stop"]["sessions"]) >= 2
        outputs = [t["output"] for t in body["partial"]["tool_calls"]]
        assert any("built" in (o or "") for o in outputs), body["partial"]
        async with asyncio.timeout(10):
            while await busy(opencode):
                await asyncio.sleep(0.1)
        if pid(stopped) != pid(sent):
            break
    else:
        pytest.fail("every Stop landed on the worker that started its turn")
