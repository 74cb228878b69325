"""``opencode-tree web``'s thread store and workers: the options, what reaches a worker,
and N worker processes serving one port (no OpenCode needed: the page and
``GET /threads`` are answered from the store; ``tests/real/test_web_workers_real.py``
runs turns across a restart on a real server)."""

from __future__ import annotations

import argparse
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapter import InvalidInputError
from adapter.cli import _web, amain
from adapter.cli._web_worker import WorkerSettings
from adapter.testing import free_port
from adapter.testing.fake import FakeOpenCodeServer
from tests.test_cli_web import fake_options, private_state, serve_and_probe, web_args

__all__ = ["fake_options", "private_state"]  # fixtures, shared with tests/test_cli_web.py

DSN = "postgresql://agent:hunter2-secret@127.0.0.1:1/threads"


def test_the_store_is_the_flag_else_the_variable_else_the_sqlite_default(
    monkeypatch: pytest.MonkeyPatch, private_state: Path
) -> None:
    assert _web.store_target(web_args()) == str(private_state)
    monkeypatch.setenv("OPENCODE_TREE_STORE", DSN)
    assert _web.store_target(web_args()) == DSN
    assert _web.store_target(web_args(store="sqlite:////tmp/x.db")) == "sqlite:////tmp/x.db"
    assert _web.store_target(web_args(no_store=True)) is None
    # A try-out's threads name a throwaway server: never kept, whatever the variable says.
    assert _web.store_target(web_args(try_out=True)) is None


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"store": "a.db", "no_store": True}, "--store and --no-store contradict"),
        ({"store": "a.db", "try_out": True}, "--try keeps no threads"),
        ({"store": " "}, "--store is empty"),
        ({"store": DSN}, "--store must not hold a password"),
        ({"store": "postgresql://h/db?password=hunter2-secret"}, "must not hold a password"),
        ({"workers": 0}, "--workers must be 1..64"),
        ({"workers": 65}, "--workers must be 1..64"),
        ({"workers": 2, "try_out": True}, "--try serves from one process"),
        ({"workers": 2, "no_store": True}, "--workers needs the thread store"),
    ],
)
def test_contradictions_and_a_password_on_the_command_line_are_refused(
    overrides: dict[str, Any], message: str
) -> None:
    args = web_args(**overrides)
    with pytest.raises(InvalidInputError, match=message) as caught:
        _web.worker_count(args)
        _web.store_target(args)
    assert "hunter2" not in str(caught.value)


def test_where_the_store_is_is_shown_without_a_credential() -> None:
    assert _web.describe_store(DSN) == "PostgreSQL 127.0.0.1:1/threads"
    assert _web.describe_store("sqlite:////var/lib/t.db") == "SQLite /var/lib/t.db"
    assert _web.describe_store("/srv/threads.sqlite3") == "SQLite /srv/threads.sqlite3"


def test_a_workers_settings_travel_in_the_environment_and_never_show() -> None:
    settings = WorkerSettings(
        base_url="http://127.0.0.1:4096",
        store=DSN,
        token="tok-secret",
        password="pw-secret",
        directory="/srv/project",
        allowed_hosts=("mybox.lan", "proxy.example"),
        on_close="detach",
    )
    env = settings.to_env()
    assert WorkerSettings.from_env(env) == settings
    assert "secret" not in repr(settings)
    open_one = WorkerSettings(base_url="http://127.0.0.1:4096", store=None, token=None)
    assert WorkerSettings.from_env(open_one.to_env()) == open_one
    # A token lost on the way does not open the API: the worker refuses to start.
    del env["OPENCODE_TREE_WEB_TOKEN"]
    with pytest.raises(InvalidInputError, match="OPENCODE_TREE_WEB_TOKEN is not set"):
        WorkerSettings.from_env(env)


async def test_a_dsn_that_cannot_be_opened_fails_before_serving_without_showing_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENCODE_TREE_STORE", DSN)
    code = await amain(["web", "--url", "http://127.0.0.1:9", "--no-token"])
    captured = capsys.readouterr()
    assert code in (1, 2), captured
    assert "hunter2" not in captured.out + captured.err
    assert "serving" not in captured.out


def file_mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_one_process_keeps_its_threads_in_the_store_across_runs(
    fake: FakeOpenCodeServer, monkeypatch: pytest.MonkeyPatch, private_state: Path
) -> None:
    first = await serve_and_probe(fake, monkeypatch, ["--no-token"])
    assert first["created"] == 201
    assert file_mode(private_state) == 0o600
    # The next run (same server, same default store) lists it, and the id is taken.
    again = await serve_and_probe(fake, monkeypatch, ["--no-token"])
    assert again["created"] == 409
    assert [t["thread_id"] for t in again["threads"]] == ["t1"]
    # --no-store: this process's threads only, as before.
    alone = await serve_and_probe(fake, monkeypatch, ["--no-token", "--no-store"])
    assert (alone["created"], [t["thread_id"] for t in alone["threads"]]) == (201, ["t1"])


# -- N worker processes ------------------------------------------------------------------

TOKEN = "workers-token-0123456789"


def descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(parent)], capture_output=True)
        kids = [int(p) for p in out.stdout.split()]
        found += kids
        todo += kids
    return found


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], int, Path]]:
    """``opencode-tree web --workers 3`` over an OpenCode URL nobody answers (the page
    and the store's listing need none); its process, port and store."""
    port, store = free_port(), tmp_path / "threads.sqlite3"
    env = {**os.environ, "WEB_T": TOKEN, "PYTHONUNBUFFERED": "1"}
    env.pop("OPENCODE_TREE_STORE", None)
    argv = ["--url", "http://127.0.0.1:9", "--workers", "3", "--port", str(port)]
    process = subprocess.Popen(
        [sys.executable, "-m", "adapter", "web", *argv, "--token-env", "WEB_T"],
        env={**env, "OPENCODE_TREE_STORE": f"sqlite:///{store}"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        lines.append(line)
        if "Ctrl-C to quit" in line:
            break
    else:
        raise AssertionError(f"web ended ({process.wait()}): {''.join(lines)}")
    try:
        yield process, port, store
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)


def test_workers_serve_one_port_take_no_secret_on_the_command_line_and_stop_on_sigterm(
    workers: tuple[subprocess.Popen[str], int, Path],
) -> None:
    process, port, store = workers
    pids = descendants(process.pid)
    assert len(pids) == 3, pids
    for pid in [process.pid, *pids]:
        assert TOKEN.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
    assert TOKEN.encode() in Path(f"/proc/{pids[0]}/environ").read_bytes()
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", trust_env=False) as http:
        answers = [
            http.get("/threads", headers={"Authorization": f"Bearer {TOKEN}"}) for _ in range(30)
        ]
        anonymous = http.get("/threads").status_code
    assert {a.status_code for a in answers} == {200} and anonymous == 401
    assert all(a.json() == [] for a in answers)
    assert store.is_file()
    started = time.monotonic()
    process.send_signal(signal.SIGTERM)
    assert process.wait(30) == 0
    print(f"3 workers stopped in {time.monotonic() - started:.2f} s")
    assert not [p for p in pids if Path(f"/proc/{p}").exists() and _alive(p)]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return state != "Z"


def test_a_worker_that_dies_is_replaced(
    workers: tuple[subprocess.Popen[str], int, Path],
) -> None:
    process, port, _ = workers
    before = descendants(process.pid)
    os.kill(before[0], signal.SIGKILL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        now = [p for p in descendants(process.pid) if _alive(p)]
        if len(now) == 3 and before[0] not in now:
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"not replaced: {before} -> {descendants(process.pid)}")
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", trust_env=False) as http:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        assert {http.get("/threads", headers=headers).status_code for _ in range(10)} == {200}


def test_parse_the_new_options() -> None:
    parsed = _web_parser().parse_args(["web", "--workers", "4", "--store", "sqlite:///t.db"])
    assert (parsed.workers, parsed.store, parsed.no_store) == (4, "sqlite:///t.db", False)


def _web_parser() -> argparse.ArgumentParser:
    from adapter.cli import _parser

    return _parser()
