"""Two backends, as on two hosts, sharing one PostgreSQL thread store over a real OpenCode.

Two ``opencode-tree web --url <opencode serve> --port P`` processes (one each on its own
port, the DSN in ``$OPENCODE_TREE_STORE`` as ``docs/cli.md`` says to pass one) over one
real OpenCode with the scripted model and one throwaway PostgreSQL server
(``tests/web/store/postgres_server.py``, as ``nobody`` when run as root). A thread
created and prompted on A is shown and stopped on B, with A's turn output in the
partial and every session of the tree idle; concurrent creates of one id on A and B
give one 201 and one 409, and both then serve the winner's session.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from adapter.testing import RealOpenCodeServer, ScriptedModelServer, free_port
from adapter.testing.model import script_marker
from tests.real.test_web_workers_real import (
    BEFORE,
    ECHOED,
    TOKEN,
    busy,
    grandchild_open,
    script_tree,
    web_http,
)
from tests.web.store.postgres_server import throwaway_postgres

pytestmark = pytest.mark.real


@pytest.fixture(scope="module")
def pg_dsn() -> Iterator[str]:
    with throwaway_postgres() as server:
        with psycopg.connect(server.dsn(), autocommit=True) as admin:
            admin.execute("CREATE DATABASE hosts")
        yield server.dsn("hosts")


@contextlib.contextmanager
def backends(
    server: RealOpenCodeServer, dsn: str, log: Path, count: int = 2
) -> Iterator[list[int]]:
    """``count`` ``opencode-tree web`` processes on ports of their own over ``server``
    and the store ``dsn`` (through the environment); their ports once each serves."""
    ports = [free_port() for _ in range(count)]
    env = {**os.environ, "WEB_T": TOKEN, "PYTHONUNBUFFERED": "1", "OPENCODE_TREE_STORE": dsn}
    processes: list[subprocess.Popen[str]] = []
    try:
        with log.open("a") as sink:
            for port in ports:
                argv = ["web", "--url", server.base_url, "--directory", str(server.directory)]
                argv += ["--port", str(port), "--token-env", "WEB_T"]
                processes.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "adapter", *argv],
                        env=env,
                        stdout=subprocess.PIPE,
                        stderr=sink,
                        text=True,
                        start_new_session=True,
                    )
                )
        for process, port in zip(processes, ports, strict=True):
            assert process.stdout is not None
            for line in process.stdout:  # the URL is printed once it serves
                if f"127.0.0.1:{port}/" in line:
                    break
            else:
                raise AssertionError(f"web ended ({process.wait()}): {log.read_text()[-2000:]}")
        yield ports
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            assert process.wait(timeout=30) == 0, log.read_text()[-2000:]
    finally:
        for process in processes:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=15)


async def test_two_backends_on_one_postgresql_serve_and_stop_each_others_threads(
    real_server: RealOpenCodeServer,
    scripted_model: ScriptedModelServer,
    unique_name: str,
    pg_dsn: str,
    tmp_path: Path,
) -> None:
    name = unique_name
    script_tree(scripted_model, name)
    log = tmp_path / "web.log"
    with backends(real_server, pg_dsn, log) as (port_a, port_b):
        async with web_http(port_a) as a, web_http(port_b) as b:
            made = await a.post("/threads", json={"thread_id": "hosts", "title": name})
            assert made.status_code == 201, made.text
            root = made.json()["session_id"]
            sent = await a.post("/threads/hosts/turns", json={"text": "go " + script_marker(name)})
            assert sent.status_code == 202, sent.text
            turn_id = sent.json()["turn_id"]
            grand = (await grandchild_open(scripted_model, name)).session_id

            shown = await b.get("/threads/hosts")
            assert shown.status_code == 200, shown.text
            info = shown.json()
            assert (info["session_id"], info["status"]) == (root, "running"), info
            assert info["active_turn_id"] == turn_id
            listed = {t["thread_id"]: t for t in (await b.get("/threads")).json()}
            assert listed["hosts"]["status"] == "running"

            stop = await b.post("/threads/hosts/stop")
            assert stop.status_code == 200, stop.text
            result = stop.json()
            assert result["turn_id"] == turn_id and result["stop"]["ok"], result
            assert {root, grand} <= {s["session_id"] for s in result["stop"]["sessions"]}
            partial = result["partial"]
            assert BEFORE.strip() in partial["text"], partial["text"]
            bash = [c for c in partial["tool_calls"] if c["tool"] == "bash"]
            assert [(c["status"], c["output"]) for c in bash] == [("completed", f"{ECHOED}\n")]
            assert not await busy(real_server) & {root, grand}

            # A, which started the turn, sees B's stop end it (the adapter follows the
            # session whoever stops it).
            async with asyncio.timeout(15):
                while (await a.get("/threads/hosts")).json()["status"] != "ready":
                    await asyncio.sleep(0.05)

            race = await asyncio.gather(
                a.post("/threads", json={"thread_id": "race"}),
                b.post("/threads", json={"thread_id": "race"}),
            )
            assert sorted(r.status_code for r in race) == [201, 409], [r.text for r in race]
            [won] = [r.json() for r in race if r.status_code == 201]
            [lost] = [r.json() for r in race if r.status_code == 409]
            assert lost["error"]["type"] == "conflict"
            served = [(await h.get("/threads/race")).json()["session_id"] for h in (a, b)]
            assert served == [won["session_id"]] * 2
            assert not await busy(real_server)
    assert "Traceback" not in log.read_text(), log.read_text()[-3000:]
