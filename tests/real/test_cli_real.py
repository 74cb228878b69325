"""The command line against a real OpenCode server: ``demo``, ``stop`` and ``inventory``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import httpx
import pytest

from adapter.testing import RealOpenCodeServer, ScriptedModelServer
from adapter.testing.model import Hang, script_marker

pytestmark = pytest.mark.real


def run_cli(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run(
        [sys.executable, "-m", "adapter", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


def test_demo_json_proves_every_promise() -> None:
    started = time.monotonic()
    done = run_cli("demo", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads(done.stdout)
    assert data["backend"] == "real"
    proof = data["proof"]
    assert proof == {
        "tree_sessions": 6,
        "server_tree_matches": True,
        "all_tree_idle": True,
        "unrelated_still_working": True,
        "unrelated_never_requested": True,
        "model_requests_after_stop": 0,
        "finished_tool_output_kept": True,
        "interrupted_calls": proof["interrupted_calls"],
        "stop_ok": True,
        "ok": True,
    }
    assert proof["interrupted_calls"] >= 3
    kinds = sorted(row["kind"] for row in data["tree"])
    assert kinds == ["api-child", "api-child", "root", "subagent", "subagent", "subagent"]
    assert all(row["outcome"] == "aborted" for row in data["tree"])
    assert data["stop"]["max_in_flight"] <= 8
    assert time.monotonic() - started < 60


def test_stop_command_against_a_real_server(
    real_server: RealOpenCodeServer, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    scripted_model.script(unique_name, [Hang()])
    with httpx.Client(base_url=real_server.base_url, timeout=10) as http:
        root = http.post("/session", json={"title": "cli root"}).json()["id"]
        kid = http.post("/session", json={"title": "cli kid", "parentID": root}).json()["id"]
        for sid in (root, kid):
            body = {"parts": [{"type": "text", "text": "go " + script_marker(unique_name)}]}
            assert http.post(f"/session/{sid}/prompt_async", json=body).status_code == 204
        scripted_model.wait_for(
            lambda reqs: {r.session_id for r in reqs if r.open and not r.is_title} >= {root, kid}
        )
        done = run_cli(
            "stop", root, "--url", real_server.base_url, "--directory", str(real_server.directory)
        )
        assert done.returncode == 0, done.stderr
        assert "2 sessions: 2 aborted" in done.stdout
        assert root in done.stdout and kid in done.stdout
        assert http.get("/session/status").json() == {}


def test_inventory_command_shows_the_configured_models_limits(
    real_server: RealOpenCodeServer,
) -> None:
    """The harness configures fake/fake-model with limit {context: 128000, output: 4096}."""
    where = ("--url", real_server.base_url, "--directory", str(real_server.directory))
    done = run_cli("inventory", "--json", *where)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["errors"] == {} and data["version"] == real_server.version
    [model] = data["models"]
    assert (model["id"], model["context_limit"], model["output_limit"]) == (
        "fake/fake-model",
        128000,
        4096,
    )
    assert {"build", "plan"} <= {a["name"] for a in data["agents"] if a["mode"] == "primary"}
    assert {"init", "review"} <= {c["name"] for c in data["commands"]}
    tables = run_cli("inventory", *where)
    assert tables.returncode == 0, tables.stderr
    assert "fake/fake-model" in tables.stdout
    assert "128,000" in tables.stdout and "4,096" in tables.stdout
