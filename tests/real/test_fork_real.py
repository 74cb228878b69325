"""Forking and moving a session on a real ``opencode serve`` (what ``docs/adapter.md``,
"Resume cursors", and the fake's fork and move routes rely on).

Measured on 1.18.34 (2026-12-01, scripted model, no git in the project directory):

- ``POST /session/{id}/fork {}`` answers 200 with a new *root* session (no
  ``parentID``) titled ``"<title> (fork #1)"``, holding a copy of every message (new,
  later ids). It lives in the **original's** directory whatever ``?directory=`` or
  ``x-opencode-directory`` the request names: its runs use the old directory and its
  events reach the old directory's stream only. It carries none of the original's
  permission rules. ``messageID`` forks the messages before it.
- ``POST /experimental/control-plane/move-session {sessionID, destination: {directory},
  moveChanges: false}`` answers 204; the session's directory becomes the destination and
  its later runs are there. A directory of another project (a git repository, while the
  session is in the global project) is refused: 400 ``MoveSessionError``.

So resuming into another directory is a fork and then a move; the adapter does both.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapter import OpenCodeAdapter, RequestError
from adapter.testing import RealOpenCodeServer, ScriptedModelServer
from adapter.testing.model import Text, ToolCall, ToolCalls, script_marker
from tests.adapter_support import Recorder

pytestmark = pytest.mark.real

MOVE = "/experimental/control-plane/move-session"


def pwd() -> ToolCalls:
    return ToolCalls([ToolCall("bash", {"command": "pwd", "description": "where"})])


@pytest.fixture
def other(real_server: RealOpenCodeServer) -> Iterator[Path]:
    """A directory beside the server's project (the same, global, project: no git)."""
    path = real_server.directory.parent / f"other-{uuid.uuid4().hex[:8]}"
    path.mkdir()
    yield path


def bash_outputs(messages: list[dict[str, Any]]) -> list[str]:
    return [
        str(part["state"].get("output", ""))
        for message in messages
        for part in message["parts"]
        if part["type"] == "tool" and part["tool"] == "bash"
    ]


def test_a_fork_copies_the_history_and_stays_in_the_originals_directory(
    opencode_http: httpx.Client,
    real_server: RealOpenCodeServer,
    scripted_model: ScriptedModelServer,
    unique_name: str,
    other: Path,
) -> None:
    here = {"x-opencode-directory": str(real_server.directory)}
    scripted_model.script(unique_name, [Text("one"), Text("two")])
    rule = {"permission": "bash", "pattern": "*", "action": "ask"}
    body: dict[str, Any] = {"title": "orig", "permission": [rule]}
    original = opencode_http.post("/session", json=body, headers=here).json()
    for text in ("a", "b"):
        prompt = {"parts": [{"type": "text", "text": f"{text} {script_marker(unique_name)}"}]}
        sent = opencode_http.post(f"/session/{original['id']}/message", json=prompt, headers=here)
        assert sent.status_code == 200
    old = opencode_http.get(f"/session/{original['id']}/message", headers=here).json()

    there = {"x-opencode-directory": str(other)}
    forked = opencode_http.post(f"/session/{original['id']}/fork", json={}, headers=there)
    by_query = opencode_http.post(
        f"/session/{original['id']}/fork", params={"directory": str(other)}, json={}
    )

    assert forked.status_code == by_query.status_code == 200
    fork = forked.json()
    assert fork["directory"] == by_query.json()["directory"] == str(real_server.directory)
    assert "parentID" not in fork and "permission" not in fork
    assert fork["title"] == "orig (fork #1)"
    new = opencode_http.get(f"/session/{fork['id']}/message", headers=there).json()
    assert [m["info"]["role"] for m in new] == [m["info"]["role"] for m in old]
    texts = [[p.get("text") for p in m["parts"] if p["type"] == "text"] for m in new]
    assert texts == [[p.get("text") for p in m["parts"] if p["type"] == "text"] for m in old]
    assert min(m["info"]["id"] for m in new) > max(m["info"]["id"] for m in old)
    until = {"messageID": old[2]["info"]["id"]}
    cut = opencode_http.post(f"/session/{original['id']}/fork", json=until).json()
    assert len(opencode_http.get(f"/session/{cut['id']}/message").json()) == 2
    gone = opencode_http.post("/session/ses_doesnotexist000000000000/fork", json={})
    assert gone.status_code == 404


def test_a_moved_session_runs_in_its_new_directory_within_its_project_only(
    opencode_http: httpx.Client,
    real_server: RealOpenCodeServer,
    scripted_model: ScriptedModelServer,
    unique_name: str,
    other: Path,
) -> None:
    scripted_model.script(unique_name, [pwd(), Text("done")])
    session = opencode_http.post("/session", json={"title": "to move"}).json()
    body = {"sessionID": session["id"], "destination": {"directory": str(other)}}
    moved = opencode_http.post(MOVE, json={**body, "moveChanges": False})
    assert moved.status_code == 204
    assert opencode_http.get(f"/session/{session['id']}").json()["directory"] == str(other)
    prompt = {"parts": [{"type": "text", "text": f"where {script_marker(unique_name)}"}]}
    there = {"x-opencode-directory": str(other)}
    assert opencode_http.post(
        f"/session/{session['id']}/message", json=prompt, headers=there
    ).is_success
    messages = opencode_http.get(f"/session/{session['id']}/message").json()
    assert bash_outputs(messages) == [f"{other}\n"]

    repository = other / "repository"
    repository.mkdir()
    git_commit_root(repository)
    into_git = {"sessionID": session["id"], "destination": {"directory": str(repository)}}
    refused = opencode_http.post(MOVE, json=into_git)
    assert refused.status_code == 400
    assert refused.json()["name"] == "MoveSessionError"


def git_commit_root(path: Path) -> None:
    """A git repository with one commit: OpenCode makes it a project of its own."""
    who = ["-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    subprocess.run(["git", *who, "-C", str(path), "commit", "-q", "--allow-empty", "-m", "r"])


async def test_resuming_in_another_directory_goes_on_in_a_fork_there(
    real_server: RealOpenCodeServer,
    scripted_model: ScriptedModelServer,
    unique_name: str,
    other: Path,
) -> None:
    # The scripted model answers by the number of assistant messages so far: the fork's
    # first request is step 1 (the pwd call) only if the history came along.
    scripted_model.script(unique_name, [Text("first"), pwd(), Text("done")])
    async with OpenCodeAdapter(real_server.base_url, directory=str(real_server.directory)) as oc:
        rec = Recorder(oc)
        info = await oc.start_session("a", title="fork me")
        turn = await oc.send_turn("a", "go " + script_marker(unique_name))
        await rec.wait_for("turn.completed", lambda e: e.turn_id == turn.turn_id, timeout=30)
        await oc.stop_session("a")

        resumed = await oc.start_session("b", directory=str(other) + "/", resume=info.resume)

        assert resumed.session_id != info.session_id
        assert resumed.resume["directory"] == str(other)
        warning = await rec.wait_for("runtime.warning", lambda e: e.thread_id == "b")
        assert warning.session_id == resumed.session_id
        turn = await oc.send_turn("b", "where are you")
        done = await rec.wait_for("turn.completed", lambda e: e.turn_id == turn.turn_id, timeout=30)
        assert done.state == "completed"
        await rec.close()
    async with httpx.AsyncClient(base_url=real_server.base_url, trust_env=False) as http:
        fork = (await http.get(f"/session/{resumed.session_id}/message")).json()
        original = (await http.get(f"/session/{info.session_id}/message")).json()
    assert bash_outputs(fork) == [f"{other}\n"]
    assert bash_outputs(original) == [], "the original is unchanged"


@pytest.fixture
def other_project(other: Path) -> Path:
    """``other``, made a git repository: a project of its own, where a move is refused."""
    git_commit_root(other)
    return other


async def test_a_fork_the_server_cannot_move_is_deleted_and_raised(
    real_server: RealOpenCodeServer, other_project: Path
) -> None:
    async with OpenCodeAdapter(real_server.base_url, directory=str(real_server.directory)) as oc:
        info = await oc.start_session("a", title="stay here")
        await oc.stop_session("a")
        with pytest.raises(RequestError) as raised:
            await oc.start_session("b", directory=str(other_project), resume=info.resume)
        assert (raised.value.operation, raised.value.status) == ("move_session", 400)
        assert not oc.has_session("b")
    async with httpx.AsyncClient(base_url=real_server.base_url, trust_env=False) as http:
        titles = [s["title"] for s in (await http.get("/session")).json()]
    assert "stay here" in titles and "stay here (fork #1)" not in titles
