"""``turn.diff.updated`` on a real ``opencode serve`` with snapshots on in a git project:
a turn's changed files (its subagent's included) reach the host, each change once, and
the next turn's diff is its own.

The shared server runs with ``snapshot: false`` and no git (no diff at all), so this
module starts its own: ``snapshot: true`` and a project that is a git repository with a
commit, OpenCode's snapshots being git trees of the worktree.
"""

from __future__ import annotations

import itertools
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapter import OpenCodeAdapter
from adapter.testing import RealOpenCodeServer, ScriptedModelServer
from adapter.testing.model import Text, ToolCall, ToolCalls, script_marker, task_call
from tests.adapter_support import Recorder

pytestmark = pytest.mark.real

T = "thread"


def git(project: Path, *args: str) -> None:
    identity = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t.invalid"}
    identity |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t.invalid"}
    subprocess.run(
        ["git", "-C", str(project), *args],
        check=True,
        capture_output=True,
        env={**os.environ, **identity},
    )


@pytest.fixture(scope="module")
def snapshot_project(scripted_model: ScriptedModelServer) -> Iterator[tuple[str, Path]]:
    """A server with snapshots on, and a git project in its directory (made before any
    request names it): ``(base_url, project)``."""
    with RealOpenCodeServer(scripted_model.base_url, config_overrides={"snapshot": True}) as server:
        project = server.directory / "repo"
        project.mkdir()
        (project / "keep.txt").write_text("one\ntwo\nthree\n", encoding="utf-8")
        git(project, "init", "-q")
        git(project, "add", ".")
        git(project, "commit", "-qm", "start")
        yield server.base_url, project


async def test_a_turns_changed_files_with_a_subagents_arrive_and_the_next_turn_has_its_own(
    snapshot_project: tuple[str, Path], scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    base_url, project = snapshot_project
    name = unique_name
    write = ToolCall("write", {"filePath": str(project / "new.txt"), "content": "a\nb\n"})
    edit = ToolCall(
        "edit",
        {"filePath": str(project / "keep.txt"), "oldString": "two", "newString": "TWO\nmore"},
    )
    child_write = ToolCall("write", {"filePath": str(project / "child.txt"), "content": "c\n"})
    later = ToolCall("write", {"filePath": str(project / "later.txt"), "content": "l\n"})
    scripted_model.script(f"{name}-child", [ToolCalls([child_write]), Text("child done")])
    # Steps are chosen by the number of assistant messages: the turns follow on.
    scripted_model.script(
        name,
        [
            ToolCalls([write]),
            ToolCalls([edit]),
            ToolCalls([task_call("help", f"{name}-child")]),
            Text("first done"),
            Text("second: nothing changed"),
            ToolCalls([later]),
            Text("third done"),
        ],
    )
    async with OpenCodeAdapter(base_url, directory=str(project)) as oc:
        rec = Recorder(oc)
        await oc.start_session(T, title=name)
        first = await oc.send_turn(T, "go " + script_marker(name))
        await rec.wait_for("turn.completed", lambda e: e.turn_id == first.turn_id, timeout=60)
        # OpenCode's last diff of the turn may come just after the idle.
        whole = await rec.wait_for("turn.diff.updated", lambda e: len(e.files) == 3, timeout=20)
        second = await oc.send_turn(T, "again")
        await rec.wait_for("turn.completed", lambda e: e.turn_id == second.turn_id, timeout=60)
        third = await oc.send_turn(T, "once more")
        last = await rec.wait_for(
            "turn.diff.updated", lambda e: e.turn_id == third.turn_id, timeout=60
        )
        await rec.wait_for("turn.completed", lambda e: e.turn_id == third.turn_id, timeout=60)
        await rec.close()
    assert whole.turn_id == first.turn_id
    assert [(f.path, f.status, f.additions, f.deletions) for f in whole.files] == [
        ("child.txt", "added", 1, 0),
        ("keep.txt", "modified", 2, 1),
        ("new.txt", "added", 2, 0),
    ]
    assert all(f.patch and not f.patch_omitted for f in whole.files)
    assert whole.omitted_files == 0
    diffs = rec.of("turn.diff.updated", T)
    assert second.turn_id not in {d.turn_id for d in diffs}, "a turn that changed nothing"
    firsts = [d.files for d in diffs if d.turn_id == first.turn_id]
    assert all(a != b for a, b in itertools.pairwise(firsts)), "each change once"
    assert [f.path for f in last.files] == ["later.txt"], "the turn's own files only"
