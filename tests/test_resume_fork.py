"""Resuming a cursor in another directory forks its session (``docs/adapter.md``, "Resume
cursors"): the thread goes on in a copy that keeps the history, in the new directory,
and the original is left alone. A directory that differs only in spelling (a trailing
``/``, ``.``, a symlink) is the same directory, and a cursor that names no directory
(written before cursors carried one) resumes in place.

On OpenCode 1.18.34 a fork stays in the original's directory (measured, see
``tests/real/test_fork_real.py``), so the adapter forks and then moves the fork.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from adapter import OpenCodeAdapter, RequestError
from adapter.testing.fake import FakeOpenCodeServer
from tests.adapter_support import Recorder

FORK = "/session/{id}/fork"
MOVE = "/experimental/control-plane/move-session"


async def finished_thread(oc: OpenCodeAdapter, rec: Recorder, directory: str) -> dict[str, object]:
    """A thread in ``directory`` with one finished turn, stopped; its resume cursor."""
    info = await oc.start_session("first", directory=directory)
    turn = await oc.send_turn("first", "remember this")
    await rec.wait_for("turn.completed", lambda e: e.turn_id == turn.turn_id)
    await oc.stop_session("first")
    return dict(info.resume)


def user_texts(fake: FakeOpenCodeServer, session_id: str) -> list[str]:
    return [m.text for m in fake.sessions[session_id].messages if m.role == "user"]


def forks(fake: FakeOpenCodeServer) -> int:
    return sum(1 for r in fake.requests if r.method == "POST" and r.path.endswith("/fork"))


async def test_a_new_cursor_names_the_session_and_its_directory(oc: OpenCodeAdapter) -> None:
    info = await oc.start_session("t", directory="/p/")
    assert info.resume == {"schema": 1, "session_id": info.session_id, "directory": "/p"}


async def test_resuming_in_another_directory_forks_the_session_with_its_history(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    cursor = await finished_thread(oc, rec, "/p")
    original = str(cursor["session_id"])

    info = await oc.start_session("second", directory="/q", resume=cursor)

    fork = info.session_id
    assert fork != original and fake.sessions[fork].directory == "/q"
    assert info.resume == {"schema": 1, "session_id": fork, "directory": "/q"}
    assert user_texts(fake, fork) == ["remember this"], "the history came along"
    warning = await rec.wait_for("runtime.warning", lambda e: e.thread_id == "second")
    assert warning.session_id == fork and original in warning.message
    turn = await oc.send_turn("second", "and go on")
    done = await rec.wait_for("turn.completed", lambda e: e.turn_id == turn.turn_id)
    assert done.thread_id == "second"  # its events reached the new directory's stream
    assert user_texts(fake, fork) == ["remember this", "and go on"]
    assert user_texts(fake, original) == ["remember this"], "the original is unchanged"
    assert fake.sessions[original].directory == "/p"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """``D/p`` and ``D/link -> D/p``."""
    base = tmp_path.resolve()
    (base / "p").mkdir()
    (base / "link").symlink_to(base / "p")
    return base


@pytest.mark.parametrize("spelling", ["p/", "p/./", "x/../p", "link"])
async def test_a_spelling_of_the_same_directory_resumes_without_forking(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder, tree: Path, spelling: str
) -> None:
    cursor = await finished_thread(oc, rec, f"{tree}/p")
    again = f"{tree}/{spelling}"

    info = await oc.start_session("second", directory=again, resume=cursor)

    assert info.session_id == cursor["session_id"]
    assert info.resume == cursor
    assert forks(fake) == 0


async def test_a_cursor_without_a_directory_resumes_in_place(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer
) -> None:
    existing = fake.add_session(title="old", directory="/p")
    old_cursor = {"schema": 1, "session_id": existing}
    info = await oc.start_session("t", directory="/q", resume=old_cursor)
    assert info.session_id == existing and forks(fake) == 0
    assert info.resume == {"schema": 1, "session_id": existing, "directory": "/q"}


async def test_a_start_in_the_servers_own_directory_never_forks(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer
) -> None:
    existing = fake.add_session(title="old", directory="/p")
    cursor = {"schema": 1, "session_id": existing, "directory": "/p"}
    info = await oc.start_session("t", resume=cursor)
    assert info.session_id == existing and forks(fake) == 0


@pytest.mark.parametrize("directory", ["", 7, "a\x00b"])
async def test_a_cursor_with_a_malformed_directory_is_ignored(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, directory: object
) -> None:
    existing = fake.add_session(title="old", directory="/p")
    cursor = {"schema": 1, "session_id": existing, "directory": directory}
    info = await oc.start_session("t", directory="/q", resume=cursor)
    assert info.session_id != existing and forks(fake) == 0


async def test_the_fork_keeps_the_originals_rules_and_takes_the_new_mode(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer
) -> None:
    rule = {"permission": "bash", "pattern": "*", "action": "ask"}
    async with fake.client(headers={"x-opencode-directory": "/p"}) as http:
        existing = (await http.post("/session", json={"permission": [rule]})).json()["id"]
    cursor = {"schema": 1, "session_id": existing, "directory": "/p"}
    info = await oc.start_session("t", directory="/q", resume=cursor, permissions="full-access")
    assert info.session_id != existing
    rules = fake.sessions[info.session_id].info["permission"]
    assert rules[0] == rule and rules[-1]["action"] == "allow" and len(rules) > 1
    assert info.permissions == "full-access"


async def test_a_failed_fork_raises_and_starts_nothing(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer
) -> None:
    existing = fake.add_session(title="old", directory="/p")
    fake.fail("POST", FORK, status=500)
    cursor = {"schema": 1, "session_id": existing, "directory": "/p"}
    with pytest.raises(RequestError) as raised:
        await oc.start_session("t", directory="/q", resume=cursor)
    assert raised.value.operation == "fork_session"
    assert not oc.has_session("t")
    assert list(fake.sessions) == [existing]


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (400, {"name": "MoveSessionError", "data": {"message": "belongs to another project"}}),
        (404, "404 Not Found"),  # a server without the route: not "the session is gone"
    ],
)
async def test_a_failed_move_deletes_the_fork_and_raises(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, status: int, body: object
) -> None:
    existing = fake.add_session(title="old", directory="/p")
    fake.fail("POST", MOVE, status=status, body=body)
    cursor = {"schema": 1, "session_id": existing, "directory": "/p"}
    with pytest.raises(RequestError) as raised:
        await oc.start_session("t", directory="/q", resume=cursor)
    assert raised.value.operation == "move_session" and raised.value.status == status
    assert not oc.has_session("t")
    assert list(fake.sessions) == [existing], "the fork was deleted"
    assert forks(fake) == 1


async def test_a_server_without_the_move_route_is_told_apart_and_the_fork_deleted(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer
) -> None:
    """Measured on OpenCode 1.15.13: an unknown route answers 200 with the web page."""
    existing = fake.add_session(title="old", directory="/p")
    fake.fail("POST", MOVE, status=200, body="<!doctype html><html></html>")
    cursor = {"schema": 1, "session_id": existing, "directory": "/p"}
    with pytest.raises(RequestError) as raised:
        await oc.start_session("t", directory="/q", resume=cursor)
    assert raised.value.operation == "move_session"
    assert "cannot move a session" in str(raised.value)
    assert not oc.has_session("t")
    assert list(fake.sessions) == [existing], "the fork was deleted"


async def test_a_move_that_is_accepted_but_leaves_the_fork_in_place_is_refused(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer
) -> None:
    existing = fake.add_session(title="old", directory="/p")
    fake.fail("POST", MOVE, status=204, body=b"")
    cursor = {"schema": 1, "session_id": existing, "directory": "/p"}
    with pytest.raises(RequestError) as raised:
        await oc.start_session("t", directory="/q", resume=cursor)
    assert raised.value.operation == "move_session"
    assert not oc.has_session("t")
    assert list(fake.sessions) == [existing], "the fork was deleted"


async def test_an_original_gone_before_the_fork_starts_a_fresh_session(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    existing = fake.add_session(title="old", directory="/p")
    fake.fail("POST", FORK, status=404, body={"name": "NotFoundError", "data": {"message": "x"}})
    cursor = {"schema": 1, "session_id": existing, "directory": "/p"}
    info = await oc.start_session("t", directory="/q", resume=cursor)
    assert info.session_id != existing and fake.sessions[info.session_id].directory == "/q"
    warning = await rec.wait_for("runtime.warning", lambda e: e.thread_id == "t")
    assert "no longer exists" in warning.message


async def test_a_fork_the_server_made_in_the_new_directory_is_not_moved(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer
) -> None:
    """Measured on OpenCode 1.14.48: the fork is made in the request's directory (later
    releases make it in the original's). Then it is already where the thread goes on."""
    existing = fake.add_session(title="old", directory="/p")

    async def fork_in_place(request: httpx.Request) -> httpx.Response:
        made = fake.add_session(title="old (fork #1)", directory="/q")
        return httpx.Response(200, json=fake.sessions[made].info)

    fake.on("POST", FORK, fork_in_place)
    cursor = {"schema": 1, "session_id": existing, "directory": "/p"}
    info = await oc.start_session("t", directory="/q", resume=cursor)
    assert info.session_id != existing
    assert not [r for r in fake.requests if r.path == MOVE], "no move needed"
    assert info.resume == {"schema": 1, "session_id": info.session_id, "directory": "/q"}
