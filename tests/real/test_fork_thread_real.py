"""``fork_thread`` on a real ``opencode serve``, and the fork route facts it rests on
(``docs/adapter.md``, "Forking a thread"; the fake's fork route copies them).

Measured on 1.18.34 (2026-12-01, scripted model):

- ``POST /session/{id}/fork {messageID}`` copies the messages stored *before*
  ``messageID`` (a user or an assistant message alike); a ``messageID`` the session
  does not hold forks every message; one without the ``msg`` prefix is a bare
  ``400 {"_tag": "BadRequest"}`` (1.14.48: the schema's ``400 {name: "BadRequest",
  data}``).
- The fork is a root session (no ``parentID``, not among the source's children) titled
  ``"<title> (fork #1)"``; a fork of that fork is ``"<title> (fork #2)"``.
- A fork while the source runs answers at once (about 50 ms) and copies what is stored
  then, the running step's unfinished assistant message included (no ``completed``,
  no ``finish``, and it stays so after the source is aborted); the source goes on
  running, and the fork takes prompts.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from adapter import InvalidInputError, OpenCodeAdapter, SessionInfo
from adapter.testing import RealOpenCodeServer, ScriptedModelServer
from adapter.testing.model import Hang, Step, Text, script_marker
from tests.adapter_support import Recorder
from tests.real.conftest import adapter_on

pytestmark = pytest.mark.real


def prompt(text: str, name: str) -> dict[str, Any]:
    return {"parts": [{"type": "text", "text": f"{text} {script_marker(name)}"}]}


def roles_and_texts(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [
        (m["info"]["role"], "".join(p.get("text", "") for p in m["parts"] if p["type"] == "text"))
        for m in messages
    ]


@asynccontextmanager
async def source_thread(
    server: RealOpenCodeServer,
    model: ScriptedModelServer,
    name: str,
    steps: list[Step],
    **options: Any,
) -> AsyncIterator[tuple[OpenCodeAdapter, Recorder, SessionInfo]]:
    """An adapter with thread ``source`` started, the model scripted with ``steps``."""
    model.script(name, steps)
    async with adapter_on(server) as oc:
        rec = Recorder(oc)
        try:
            yield oc, rec, await oc.start_session("source", **options)
        finally:
            await rec.close()


def of_turn(turn_id: str) -> Callable[[Any], bool]:
    """A ``wait_for`` predicate: an event of turn ``turn_id``."""
    return lambda event: bool(event.turn_id == turn_id)


async def completed_turns(oc: OpenCodeAdapter, rec: Recorder, *texts: str) -> None:
    """Each of ``texts`` sent to thread ``source`` as a turn, and completed."""
    for text in texts:
        turn = await oc.send_turn("source", text)
        await rec.wait_for("turn.completed", of_turn(turn.turn_id), 30)


def test_a_fork_at_a_message_copies_the_messages_before_it(
    opencode_http: httpx.Client, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    scripted_model.script(unique_name, [Text("one"), Text("two"), Text("three")])
    source = opencode_http.post("/session", json={"title": "orig"}).json()
    for text in ("a", "b", "c"):
        sent = opencode_http.post(
            f"/session/{source['id']}/message", json=prompt(text, unique_name)
        )
        assert sent.status_code == 200
    stored = opencode_http.get(f"/session/{source['id']}/message").json()

    def fork(session_id: str, body: dict[str, Any]) -> dict[str, Any]:
        answer = opencode_http.post(f"/session/{session_id}/fork", json=body)
        assert answer.status_code == 200, answer.text
        made: dict[str, Any] = answer.json()
        made["messages"] = opencode_http.get(f"/session/{made['id']}/message").json()
        return made

    at_user = fork(source["id"], {"messageID": stored[2]["info"]["id"]})
    at_assistant = fork(source["id"], {"messageID": stored[3]["info"]["id"]})
    unknown = fork(source["id"], {"messageID": "msg_doesnotexist0000000000"})
    of_fork = fork(at_user["id"], {})

    marker = script_marker(unique_name)
    assert roles_and_texts(at_user["messages"]) == [("user", f"a {marker}"), ("assistant", "one")]
    assert [m["info"]["role"] for m in at_assistant["messages"]] == ["user", "assistant", "user"]
    assert len(unknown["messages"]) == len(stored) == 6
    assert at_user["title"] == at_assistant["title"] == "orig (fork #1)"
    assert of_fork["title"] == "orig (fork #2)"
    assert all("parentID" not in made for made in (at_user, at_assistant, unknown, of_fork))
    assert opencode_http.get(f"/session/{source['id']}/children").json() == []
    assert len(opencode_http.get(f"/session/{source['id']}/message").json()) == 6
    bad = opencode_http.post(f"/session/{source['id']}/fork", json={"messageID": "bad"})
    assert bad.status_code == 400  # the body differs by release; the fake's is 1.18.34's


def test_a_fork_while_the_source_runs_copies_the_unfinished_step_and_the_run_goes_on(
    opencode_http: httpx.Client, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    scripted_model.script(unique_name, [Text("first"), Hang("partial")])
    source = opencode_http.post("/session", json={"title": "busy"}).json()["id"]
    opencode_http.post(f"/session/{source}/message", json=prompt("a", unique_name))
    opencode_http.post(f"/session/{source}/prompt_async", json=prompt("b", unique_name))
    scripted_model.wait_for(lambda requests: scripted_model.open_requests([source]), timeout=30)

    fork = opencode_http.post(f"/session/{source}/fork", json={})

    assert fork.status_code == 200
    assert opencode_http.get("/session/status").json().get(source) == {"type": "busy"}
    copied = opencode_http.get(f"/session/{fork.json()['id']}/message").json()
    assert [m["info"]["role"] for m in copied] == ["user", "assistant", "user", "assistant"]
    running = copied[-1]["info"]
    assert "completed" not in running["time"] and "finish" not in running
    assert opencode_http.post(f"/session/{source}/abort").json() is True


async def test_fork_thread_branches_before_a_turn_and_leaves_the_source_alone(
    real_server: RealOpenCodeServer, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    # The scripted model answers by the number of assistant messages so far: the fork's
    # turn is answered "branch" only if exactly the first turn came along.
    marker = script_marker(unique_name)
    steps: list[Step] = [Text("one"), Text("branch"), Text("three")]
    async with source_thread(
        real_server, scripted_model, unique_name, steps, permissions="ask"
    ) as (oc, rec, source):
        await completed_turns(oc, rec, f"first {marker}", f"second {marker}")
        before = (await oc.read_thread("source")).messages
        with pytest.raises(InvalidInputError, match="2 turns"):
            await oc.fork_thread("source", "fork", at_turn=2)

        info = await oc.fork_thread("source", "fork", at_turn=1)
        turn = await oc.send_turn("fork", "again")
        done = await rec.wait_for("turn.completed", lambda e: e.turn_id == turn.turn_id, 30)

        assert done.thread_id == "fork" and info.permissions == "ask"
        assert info.directory == source.directory
        history = (await oc.read_thread("fork")).messages
        texts = ["".join(p.text or "" for p in m.parts if p.type == "text") for m in history]
        assert texts == [f"first {marker}", "one", "again", "branch"]
        assert (await oc.read_thread("source")).messages == before
        assert oc.session_info("source").status == "ready"
    async with httpx.AsyncClient(base_url=real_server.base_url, trust_env=False) as http:
        fork = (await http.get(f"/session/{info.session_id}")).json()
        rules = (await http.get(f"/session/{source.session_id}")).json()["permission"]
    assert fork["permission"] == rules and "parentID" not in fork


async def test_a_stop_of_the_source_leaves_the_running_fork_alone(
    real_server: RealOpenCodeServer, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    steps: list[Step] = [Text("one"), Hang("working")]
    async with source_thread(real_server, scripted_model, unique_name, steps) as (oc, rec, _):
        await completed_turns(oc, rec, "first " + script_marker(unique_name))
        info = await oc.fork_thread("source", "fork")
        running = await oc.send_turn("fork", "go on")
        await scripted_model.wait_for_async(
            lambda requests: scripted_model.open_requests([info.session_id]), timeout=30
        )

        await oc.stop_session("source")

        assert oc.session_info("fork").active_turn_id == running.turn_id
        assert [node.status for node in (await oc.session_tree("fork")).sessions] == ["busy"]
        assert scripted_model.open_requests([info.session_id])
        await oc.interrupt_turn("fork")


async def test_a_fork_after_a_rollback_leaves_the_reverted_turns_out(
    real_server: RealOpenCodeServer, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    steps: list[Step] = [Text("one"), Text("two")]
    async with source_thread(real_server, scripted_model, unique_name, steps) as (oc, rec, _):
        marker = script_marker(unique_name)
        await completed_turns(oc, rec, f"first {marker}", f"second {marker}")
        kept = await oc.rollback_thread("source", 1)

        info = await oc.fork_thread("source", "fork")

        forked = (await oc.read_thread("fork")).messages
        assert [m.info.role for m in forked] == [m.info.role for m in kept.messages]
        assert len(forked) == 2 and info.session_id != kept.session_id
