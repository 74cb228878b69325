"""The ``opencode-tree`` command line, against the in-process fake server."""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import signal
import subprocess
import sys
from typing import Any

import pytest

from adapter.cli import amain
from adapter.testing import free_port
from adapter.testing.fake import FakeOpenCodeServer, Hang, Text, Tool


@pytest.fixture
def fake_options() -> dict[str, Any]:
    return {"seed": 3}


def url(fake: FakeOpenCodeServer) -> list[str]:
    return ["--url", fake.base_url]


class StrictTerminal:
    """stdout and stderr as strict UTF-8 streams (a lone surrogate written raises), read back
    as text. ``rich`` makes the CLI render as on a terminal (trees, styles)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, rich: bool = False) -> None:
        self._out, self._err = io.BytesIO(), io.BytesIO()
        for name, raw in (("stdout", self._out), ("stderr", self._err)):
            stream = io.TextIOWrapper(raw, encoding="utf-8", errors="strict", write_through=True)
            monkeypatch.setattr(sys, name, stream)
        if rich:
            monkeypatch.setenv("TTY_COMPATIBLE", "1")
            monkeypatch.setenv("NO_COLOR", "1")
            monkeypatch.setenv("COLUMNS", "400")  # a tree line is cropped to the width

    @property
    def out(self) -> str:
        return _plain(self._out.getvalue().decode("utf-8"))

    @property
    def err(self) -> str:
        return _plain(self._err.getvalue().decode("utf-8"))


def _plain(text: str) -> str:
    """``text`` without the terminal's style codes (bold, dim...)."""
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


async def test_tree_shows_titles_and_status(
    fake: FakeOpenCodeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    root = fake.add_session(title="root title")
    kid = fake.add_session(parent_id=root, title="kid title", busy=True)
    code = await amain(["tree", root, *url(fake)], transport=fake.transport)
    out = capsys.readouterr().out
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("idle") and "root title" in lines[0] and root in lines[0]
    assert lines[1].startswith("└── busy") and "kid title" in lines[1] and kid in lines[1]


async def test_tree_json(fake: FakeOpenCodeServer, capsys: pytest.CaptureFixture[str]) -> None:
    root = fake.add_session(title="r")
    fake.add_session(parent_id=root, title="k", busy=True)
    assert await amain(["tree", root, "--json", *url(fake)], transport=fake.transport) == 0
    data = json.loads(capsys.readouterr().out)
    assert [s["status"] for s in data["sessions"]] == ["idle", "busy"]


async def test_stop_prints_the_report_and_stops_the_tree(
    fake: FakeOpenCodeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    root = fake.add_session(busy=True)
    kids = [fake.add_session(parent_id=root, busy=True) for _ in range(3)]
    unrelated = fake.add_session(busy=True)
    code = await amain(["stop", root, "--concurrency", "2", *url(fake)], transport=fake.transport)
    out = capsys.readouterr().out
    assert code == 0
    assert "4 sessions: 4 aborted, 0 already gone, 0 failed; max 2 of 2 requests in flight" in out
    assert all(k in out for k in kids)
    assert not any(fake.sessions[s].busy for s in [root, *kids])
    assert fake.sessions[unrelated].busy
    # the root's abort goes out three times (docs/interrupt.md: no extra model step)
    root_aborts = [r for r in fake.requests if r.path == f"/session/{root}/abort"]
    assert len(root_aborts) == 3


async def test_stop_failure_exits_non_zero_with_the_first_failure(
    fake: FakeOpenCodeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    root = fake.add_session(busy=True)
    bad = fake.add_session(parent_id=root, busy=True)
    ok = fake.add_session(parent_id=root, busy=True)
    fake.fail("POST", f"/session/{bad}/abort", status=400, times=None)
    code = await amain(["stop", root, "--json", *url(fake)], transport=fake.transport)
    captured = capsys.readouterr()
    assert code == 1
    [report] = json.loads(captured.out)["reports"]
    assert report["ok"] is False and report["first_failure"] == bad
    assert f"could not stop {bad}" in captured.err
    assert not fake.sessions[ok].busy


async def test_run_streams_text_and_tool_calls(
    fake: FakeOpenCodeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.script(
        "cli",
        [
            Tool("bash", {"command": "ls"}, output="a.txt\n", title="ls"),
            Text("All good.", chunks=3),
        ],
    )
    code = await amain(["run", "check [[script:cli]]", *url(fake)], transport=fake.transport)
    out = capsys.readouterr().out
    assert code == 0
    assert "▶ bash" in out and "✔ bash a.txt" in out
    assert "All good." in out


async def test_run_ctrl_c_interrupts_and_prints_the_partial_result(
    fake: FakeOpenCodeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.script(
        "cli", [Tool("bash", {"command": "echo first"}, output="first\n"), Text("halfway"), Hang()]
    )
    task = asyncio.create_task(
        amain(["run", "work [[script:cli]]", *url(fake)], transport=fake.transport)
    )
    await fake.wait_for_event("message.part.delta", timeout=5)
    os.kill(os.getpid(), signal.SIGINT)
    code = await asyncio.wait_for(task, 10)
    out = capsys.readouterr().out
    assert code == 130
    assert "interrupting the turn" in out
    assert "1 sessions: 1 aborted" in out
    assert "completed   bash echo first" in out and "halfway" in out


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["run", "hi", "--model", "not-a-model"], "model must look like 'provider/model'"),
        (["tree", "ses_doesnotexist"], "not found: Session not found"),
        (["stop", "../../etc"], "not a valid session id"),
    ],
)
async def test_errors_are_one_line_and_non_zero(
    fake: FakeOpenCodeServer, capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    code = await amain([*argv, *url(fake)], transport=fake.transport)
    err = capsys.readouterr().err
    assert code != 0
    assert expected in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


async def test_unreachable_server_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()
    code = await amain(["tree", "ses_x", "--url", f"http://127.0.0.1:{port}", "--timeout", "2"])
    err = capsys.readouterr().err
    assert code == 1
    assert f"cannot reach http://127.0.0.1:{port}" in err and "Traceback" not in err


async def test_401_names_the_password_variable(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeOpenCodeServer(password="pw-123")
    root = fake.add_session()
    try:
        assert await amain(["tree", root, "--url", fake.base_url], transport=fake.transport) == 1
        assert "--password-env" in capsys.readouterr().err
        monkeypatch.setenv("MY_OC_PW", "pw-123")
        code = await amain(
            ["tree", root, "--url", fake.base_url, "--password-env", "MY_OC_PW"],
            transport=fake.transport,
        )
        captured = capsys.readouterr()
        assert code == 0 and root in captured.out
        assert "pw-123" not in captured.out + captured.err
    finally:
        await fake.aclose()


async def test_missing_password_variable_is_a_clear_error(
    fake: FakeOpenCodeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code = await amain(
        ["tree", "ses_x", "--password-env", "NOPE_NOT_SET", *url(fake)], transport=fake.transport
    )
    assert code == 2
    assert "NOPE_NOT_SET" in capsys.readouterr().err


async def test_demo_with_the_fake_server_proves_everything(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = await amain(["demo", "--fake", "--json"])
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert code == 0
    assert "FAKE SERVER" in captured.err
    assert data["backend"] == "fake"
    proof = data["proof"]
    assert proof["ok"] and proof["all_tree_idle"] and proof["unrelated_never_requested"]
    assert proof["tree_sessions"] == 6 and proof["model_requests_after_stop"] == 0


async def test_demo_without_node_says_how_to_install_and_falls_back(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENCODE_BIN", "/nonexistent/opencode")
    monkeypatch.setenv("PATH", "/nonexistent")
    code = await amain(["demo", "--json"])
    captured = capsys.readouterr()
    assert code == 0
    assert "Node.js and npm were not found" in captured.err
    assert "apt-get install nodejs npm" in captured.err and "make opencode" in captured.err
    assert "FAKE SERVER" in captured.err
    assert json.loads(captured.out)["backend"] == "fake"


# -- server text with lone UTF-16 surrogates (OpenCode cuts strings by UTF-16 units) ----------


@pytest.mark.parametrize("mode", ["plain", "rich", "json"])
async def test_tree_prints_a_title_with_a_lone_surrogate_as_the_replacement_character(
    fake: FakeOpenCodeServer, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    term = StrictTerminal(monkeypatch, rich=mode == "rich")
    root = fake.add_session(title="a\ud800b")
    fake.add_session(parent_id=root, title="kid \udfff", busy=True)
    argv = ["tree", root, *url(fake), *(["--json"] if mode == "json" else [])]
    code = await amain(argv, transport=fake.transport)
    assert (code, term.err) == (0, "")
    if mode == "json":
        titles = [s["title"] for s in json.loads(term.out)["sessions"]]
        assert titles == ["a\ufffdb", "kid \ufffd"]
        assert "\\ud" not in term.out, "no lone surrogate escape in the JSON either"
    else:
        assert "a\ufffdb" in term.out and "kid \ufffd" in term.out and root in term.out


@pytest.mark.parametrize("mode", ["plain", "rich", "json"])
async def test_a_stop_report_with_a_lone_surrogate_in_a_server_error_is_printed(
    fake: FakeOpenCodeServer, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    term = StrictTerminal(monkeypatch, rich=mode == "rich")
    root = fake.add_session(busy=True)
    bad = fake.add_session(parent_id=root, busy=True)
    body = {"name": "UnknownError", "data": {"message": "refused \ud83d here"}}
    fake.fail("POST", f"/session/{bad}/abort", status=400, times=None, body=body)
    argv = ["stop", root, *url(fake), *(["--json"] if mode == "json" else [])]
    code = await amain(argv, transport=fake.transport)
    assert code == 1
    assert f"could not stop {bad}" in term.err and "refused \ufffd here" in term.err
    if mode == "json":
        [report] = json.loads(term.out)["reports"]
        assert "refused \ufffd here" in report["error"]
    else:
        assert "refused \ufffd here" in term.out and bad in term.out


async def test_run_streams_text_with_lone_surrogates_and_joins_a_pair_split_across_deltas(
    fake: FakeOpenCodeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    term = StrictTerminal(monkeypatch)
    fake.script(
        "cli",
        [
            Tool("bash", {"command": "ls \ud800"}, output="x\udc00\n", title="ls \ud800"),
            Text("lone \ud800 half. "),
            Text("split x\ud83d"),  # a pair cut between two deltas, as OpenCode cuts it
            Text("\ude00y done."),
        ],
    )
    code = await amain(["run", "go [[script:cli]]", *url(fake)], transport=fake.transport)
    assert (code, term.err) == (0, "")
    assert "✔ bash x\ufffd" in term.out
    assert "lone \ufffd half. split x\U0001f600y done." in term.out


async def test_an_error_message_with_a_lone_surrogate_is_printed(
    fake: FakeOpenCodeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    term = StrictTerminal(monkeypatch)
    body = {"name": "NotFoundError", "data": {"message": "no session \udc80 here"}}
    fake.fail("GET", "/session/ses_gone", status=404, times=None, body=body)
    code = await amain(["tree", "ses_gone", *url(fake)], transport=fake.transport)
    assert code == 1
    assert term.err == "error: not found: no session \ufffd here\n"


async def test_the_interrupted_partial_result_with_lone_surrogates_is_printed(
    fake: FakeOpenCodeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    term = StrictTerminal(monkeypatch)
    fake.script(
        "cli",
        [
            Tool("bash", {"command": "echo \udfff"}, output="out \ud800\n"),
            Text("half\ud800"),
            Hang(),
        ],
    )
    task = asyncio.create_task(
        amain(["run", "work [[script:cli]]", *url(fake)], transport=fake.transport)
    )
    await fake.wait_for_event("message.part.delta", timeout=5)
    os.kill(os.getpid(), signal.SIGINT)
    assert await asyncio.wait_for(task, 10) == 130
    # What the partial result keeps of the text is the adapter's rule; the CLI prints it.
    assert "completed   bash echo \ufffd" in term.out and "→ out " in term.out
    assert "text so far: half" in term.out


WATCH_SCRIPT = """
import asyncio
from adapter.cli import amain
from adapter.testing.fake import FakeOpenCodeServer

async def main() -> None:
    fake = FakeOpenCodeServer(seed=3)
    root = fake.add_session(title="a\\ud800b")
    argv = ["tree", root, "--watch", "0.01", "--url", fake.base_url]
    task = asyncio.create_task(amain(argv, transport=fake.transport))
    while sum(r.path == "/session/status" for r in fake.requests) < 3:
        await asyncio.sleep(0.01)
    print("printed elsewhere \\udc00 while the tree is live")
    while sum(r.path == "/session/status" for r in fake.requests) < 5:
        await asyncio.sleep(0.01)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)

asyncio.run(main())
"""


def test_tree_watch_on_a_terminal_renders_lone_surrogates_and_other_prints() -> None:
    """rich's Live points sys.stdout at its console while it runs; the CLI's output
    stream must not follow it there (it would feed the console its own output)."""
    env = {
        **os.environ,
        "TTY_COMPATIBLE": "1",
        "NO_COLOR": "1",
        "PYTHONIOENCODING": "utf-8:strict",
    }
    done = subprocess.run(
        [sys.executable, "-c", WATCH_SCRIPT],
        env=env,
        capture_output=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    out = _plain(done.stdout.decode("utf-8"))
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")[-2000:]
    assert "a\ufffdb" in out and "printed elsewhere \ufffd while the tree is live" in out
