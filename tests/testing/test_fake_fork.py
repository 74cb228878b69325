"""The fake forks and moves a session as OpenCode 1.18.34 does (measured 2026-12-01 with
the scripted model; the real side is ``tests/real/test_fork_real.py``):

- ``POST /session/{id}/fork {messageID?}`` answers 200 with a new root session (no
  ``parentID``) in the *original's* directory, whatever directory the request names,
  titled ``"<title> (fork #1)"`` (``#2`` for a fork of ``#1``), without the original's
  permission rules; it holds a copy of every message before ``messageID`` (all of them
  when ``messageID`` names none of the session's), with new, later ids. An id without
  ``msg`` is a bare 400 BadRequest, an unknown session a 404.
- ``POST /experimental/control-plane/move-session`` answers 204; the session's directory
  becomes the destination, and its later runs are there. An unknown session is a 400
  ``MoveSessionError``.
"""

from __future__ import annotations

from typing import Any

import httpx

from adapter.testing.fake import FakeOpenCodeServer, Text

MOVE = "/experimental/control-plane/move-session"


async def two_turns(fake: FakeOpenCodeServer, http: httpx.AsyncClient, **body: Any) -> str:
    """A session in the fake's own directory with two finished turns ("one", "two")."""
    fake.script("s", [Text("one"), Text("two")])
    session_id: str = (await http.post("/session", json={"title": "orig", **body})).json()["id"]
    for text in ("a", "b"):
        prompt = {"parts": [{"type": "text", "text": f"{text} [[script:s]]"}]}
        assert (await http.post(f"/session/{session_id}/message", json=prompt)).status_code == 200
    return session_id


def shape(messages: list[dict[str, Any]]) -> list[tuple[str, list[str], list[str]]]:
    return [
        (
            m["info"]["role"],
            [p["type"] for p in m["parts"]],
            [p["text"] for p in m["parts"] if p["type"] == "text"],
        )
        for m in messages
    ]


async def test_a_fork_copies_the_history_into_a_new_root_session_of_the_same_directory(
    fake: FakeOpenCodeServer,
) -> None:
    rule = {"permission": "bash", "pattern": "*", "action": "ask"}
    async with fake.client() as http:
        original = await two_turns(fake, http, permission=[rule])
        since = fake.event_count
        other = {"x-opencode-directory": "/elsewhere"}
        answer = await http.post(f"/session/{original}/fork", json={}, headers=other)
        assert answer.status_code == 200
        fork = answer.json()
        assert fork["directory"] == fake.directory  # not the request's
        assert "parentID" not in fork and "permission" not in fork
        assert fork["title"] == "orig (fork #1)"
        old = (await http.get(f"/session/{original}/message")).json()
        new = (await http.get(f"/session/{fork['id']}/message")).json()
    assert shape(new) == shape(old)
    assert min(m["info"]["id"] for m in new) > max(m["info"]["id"] for m in old)
    assert all(p["sessionID"] == fork["id"] for m in new for p in m["parts"])
    assert new[1]["info"]["parentID"] == new[0]["info"]["id"]
    types = [e["type"] for e in list(fake.events)[since - fake.event_count :]]
    assert types[0] == "session.created" and types[1] == "message.updated"


async def test_a_fork_stops_before_the_message_it_names(fake: FakeOpenCodeServer) -> None:
    async with fake.client() as http:
        original = await two_turns(fake, http)
        old = (await http.get(f"/session/{original}/message")).json()
        third = old[2]["info"]["id"]

        async def forked(body: Any) -> int:
            fork = (await http.post(f"/session/{original}/fork", json=body)).json()
            return len((await http.get(f"/session/{fork['id']}/message")).json())

        assert await forked({"messageID": third}) == 2
        assert await forked({"messageID": "msg_zzzzzzzzzzzzzzzzzzzzzzzzzz"}) == 4
        assert await forked({"unknown": 1}) == 4
        bad = await http.post(f"/session/{original}/fork", json={"messageID": "nope"})
        assert (bad.status_code, bad.json()) == (400, {"_tag": "BadRequest"})
        gone = await http.post("/session/ses_doesnotexist000000000000/fork", json={})
        assert gone.status_code == 404 and gone.json()["name"] == "NotFoundError"


async def test_a_fork_of_a_fork_counts_up(fake: FakeOpenCodeServer) -> None:
    async with fake.client() as http:
        original = await two_turns(fake, http)
        first = (await http.post(f"/session/{original}/fork", json={})).json()
        second = (await http.post(f"/session/{first['id']}/fork", json={})).json()
    assert second["title"] == "orig (fork #2)"


async def test_a_moved_session_lives_and_runs_in_its_new_directory(
    fake: FakeOpenCodeServer,
) -> None:
    async with fake.client() as http:
        original = await two_turns(fake, http)
        fork = (await http.post(f"/session/{original}/fork", json={})).json()["id"]
        since = fake.event_count
        body = {"sessionID": fork, "destination": {"directory": "/q"}, "moveChanges": False}
        moved = await http.post(MOVE, json=body)
        assert moved.status_code == 204
        assert fake.event_count == since, "a move emits nothing"
        assert (await http.get(f"/session/{fork}")).json()["directory"] == "/q"
        fake.script("t", [Text("three")])
        prompt = {"parts": [{"type": "text", "text": "c [[script:t]]"}]}
        answer = (await http.post(f"/session/{fork}/message", json=prompt)).json()
        assert answer["info"]["path"]["cwd"] == "/q"
        unknown = {"sessionID": "ses_doesnotexist000000000000", "destination": {"directory": "/q"}}
        refused = await http.post(MOVE, json=unknown)
    assert refused.status_code == 400 and refused.json()["name"] == "MoveSessionError"
    assert fake.sessions[original].directory == fake.directory
