"""``opencode-tree web --workers 2 --store FILE`` (subprocesses) over a real ``opencode serve``.

A rolling restart, with two workers and with one process: a thread's
turn whose tree works (root -> task -> task -> a model call that never ends) is
running when the web command is stopped,
by SIGTERM (its workers detach) or by SIGKILL of its whole process group (a crash:
nothing is sent to OpenCode). The tree goes on working on OpenCode. A new web
command on the same store and port lists the thread, serves it as ``running`` (the
turn adopted), and a Stop through it stops the whole tree, with the pre-restart
output (the root's text and its bash call's output) in the partial.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapter import OpenCodeClient
from adapter.testing import RealOpenCodeServer, ScriptedModelServer, free_port
from adapter.testing.model import Hang, ModelRequest, ToolCall, ToolCalls, script_marker, task_call
from tests.real.web_process import read_to_url

pytestmark = pytest.mark.real

TOKEN = secrets.token_urlsafe(24)
BEFORE = "Working on it before the restart. "
ECHOED = "built before the restart"


@contextlib.contextmanager
def web_command(
    server: RealOpenCodeServer, store: Path, port: int, log: Path, workers: int = 2
) -> Iterator[subprocess.Popen[str]]:
    """``opencode-tree web --workers N`` on ``port`` over ``server``, once it serves;
    in a process group of its own (so a SIGKILL of the group is a crash of it all)."""
    argv = [
        *("web", "--url", server.base_url, "--directory", str(server.directory)),
        *(
            "--workers",
            str(workers),
            "--store",
            str(store),
            "--port",
            str(port),
            "--token-env",
            "WEB_T",
        ),
    ]
    with log.open("a") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "adapter", *argv],
            env={**os.environ, "WEB_T": TOKEN, "PYTHONUNBUFFERED": "1"},
            stdout=subprocess.PIPE,
            stderr=sink,
            text=True,
            start_new_session=True,
        )
    try:
        assert process.stdout is not None
        for line in process.stdout:  # the URL is printed once every worker serves
            if f"127.0.0.1:{port}/" in line:
                break
        else:
            raise AssertionError(f"web ended ({process.wait()}): {log.read_text()[-2000:]}")
        yield process
    finally:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=15)


def script_tree(model: ScriptedModelServer, name: str) -> None:
    """The root says something and runs bash, then a task whose child's task hangs."""
    model.script(f"{name}-g", [Hang(text_before="grandchild working")])
    model.script(f"{name}-c", [ToolCalls([task_call("deeper", f"{name}-g")])])
    bash = ToolCall("bash", {"command": f"echo {ECHOED}", "description": "build"})
    model.script(
        name, [ToolCalls([bash], text=BEFORE), ToolCalls([task_call("research", f"{name}-c")])]
    )


async def grandchild_open(model: ScriptedModelServer, name: str) -> ModelRequest:
    def found(requests: list[ModelRequest]) -> list[ModelRequest]:
        return [r for r in requests if r.script == f"{name}-g" and r.ended_at is None]

    return (await model.wait_for_async(found, timeout=60))[0]


async def busy(server: RealOpenCodeServer) -> set[str]:
    async with OpenCodeClient(server.base_url, directory=str(server.directory)) as client:
        return {sid for sid, status in (await client.status()).items() if status.is_busy}


def web_http(port: int) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{port}",
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=60,
        trust_env=False,
    )


@pytest.mark.parametrize(
    ("how", "workers"), [("SIGTERM", 2), ("SIGKILL", 2), ("SIGTERM", 1)], ids=str
)
async def test_a_turn_survives_a_restart_of_the_web_command_and_is_stopped_after_it(
    real_server: RealOpenCodeServer,
    scripted_model: ScriptedModelServer,
    unique_name: str,
    tmp_path: Path,
    how: str,
    workers: int,
) -> None:
    name = unique_name
    script_tree(scripted_model, name)
    store, log, port = tmp_path / "threads.sqlite3", tmp_path / "web.log", free_port()
    thread = f"roll-{how.lower()}-{workers}"
    with web_command(real_server, store, port, log, workers) as first:
        async with web_http(port) as http:
            made = await http.post("/threads", json={"thread_id": thread, "title": name})
            assert made.status_code == 201, made.text
            root = made.json()["session_id"]
            sent = await http.post(
                f"/threads/{thread}/turns", json={"text": "go " + script_marker(name)}
            )
            assert sent.status_code == 202, sent.text
            turn_id = sent.json()["turn_id"]
            grand = (await grandchild_open(scripted_model, name)).session_id
        stopped_at = time.monotonic()
        if how == "SIGTERM":
            first.send_signal(signal.SIGTERM)
            assert first.wait(timeout=30) == 0, log.read_text()[-2000:]
        else:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(timeout=10)
        print(f"{how}: the web command was gone in {time.monotonic() - stopped_at:.2f} s")
    # Nothing stopped the tree: it works on OpenCode with no web command at all.
    working = await busy(real_server)
    assert {root, grand} <= working, (root, grand, working)
    with web_command(real_server, store, port, log, workers) as second:
        async with web_http(port) as http:
            listed = (await http.get("/threads")).json()
            shown = await http.get(f"/threads/{thread}")
            stop = await http.post(f"/threads/{thread}/stop")
        second.send_signal(signal.SIGTERM)
        assert second.wait(timeout=30) == 0, log.read_text()[-2000:]
    assert thread in [t["thread_id"] for t in listed], listed
    assert shown.status_code == 200, shown.text
    info = shown.json()
    assert (info["status"], info["active_turn_id"]) == ("running", turn_id), info
    assert stop.status_code == 200, stop.text
    result: dict[str, Any] = stop.json()
    assert result["turn_id"] == turn_id and result["stop"]["ok"], result
    stopped = {s["session_id"] for s in result["stop"]["sessions"]}
    assert {root, grand} <= stopped, result["stop"]
    partial = result["partial"]
    assert BEFORE.strip() in partial["text"], partial["text"]
    bash = [c for c in partial["tool_calls"] if c["tool"] == "bash"]
    assert [(c["status"], c["output"]) for c in bash] == [("completed", f"{ECHOED}\n")], bash
    assert not await busy(real_server) & {root, grand}
    assert "Traceback" not in log.read_text(), log.read_text()[-3000:]


def test_make_web_serves_and_sigterm_stops_its_opencode_server(tmp_path: Path) -> None:
    """``make web`` (``opencode-tree web --try``): it serves, keeps no thread store
    (whatever ``$OPENCODE_TREE_STORE`` says), and SIGTERM ends it with exit code 0
    and its OpenCode server stopped (it was left running before: uvicorn raised the
    signal again after its shutdown and the process died before the server's stop)."""
    port = free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "XDG_STATE_HOME": str(tmp_path / "state")}
    env["OPENCODE_TREE_STORE"] = str(tmp_path / "never.sqlite3")
    process = subprocess.Popen(
        [sys.executable, "-m", "adapter", "web", "--try", "--no-token", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        assert process.stdout is not None
        if not read_to_url(process.stdout, port):
            raise AssertionError(f"web --try ended: {process.wait()}")
        [server] = [int(p) for p in _children(process.pid)]
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", trust_env=False) as http:
            made = http.post("/threads", json={"thread_id": "try"})
            assert made.status_code == 201, made.text
            assert [t["thread_id"] for t in http.get("/threads").json()] == ["try"]
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
    assert not (tmp_path / "never.sqlite3").exists()
    assert not (tmp_path / "state").exists()
    deadline = time.monotonic() + 10
    while _running(server) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(server), f"the OpenCode server {server} outlived the web command"


def _children(pid: int) -> list[str]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True)
    return out.stdout.split()


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False
