"""The fake seen in domain terms: waits for a tool's status or a hanging run, the tree of a
session, the open permission and question requests.

Each is what a host's contract test would otherwise write as a predicate over raw
events (``e["properties"]["part"]["state"]["status"]``) or over ``fake.sessions``.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest

from adapter import OpenCodeAdapter
from adapter.testing.fake import (
    FakeOpenCodeServer,
    Hang,
    Permission,
    Question,
    Step,
    Task,
    Tool,
)
from tests.testing.fake_support import hanging_session, idle, new_session, prompt

FOREVER = float("inf")
COLOR = {"question": "Which color?", "header": "Color", "options": [{"label": "red"}]}


async def run_script(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer, name: str, steps: list[Step]
) -> str:
    """A new session running the script ``name`` (``steps``); its id."""
    fake.script(name, steps)
    sid = str((await new_session(client))["id"])
    await prompt(client, sid, f"[[script:{name}]]")
    return sid


# ------------------------------------------------------------------ wait_for_tool


async def test_wait_for_tool_returns_the_part_once_it_runs(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    waiting = asyncio.create_task(fake.wait_for_tool("bash"))
    sid = await run_script(
        fake_http, fake, "ls", [Tool("bash", {"command": "ls"}, duration=FOREVER)]
    )
    part = await waiting
    assert part["type"] == "tool" and part["tool"] == "bash"
    assert part["sessionID"] == sid and part["state"]["status"] == "running"
    assert part["state"]["input"] == {"command": "ls"}


async def test_wait_for_tool_after_the_fact_finds_the_status_already_reached(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    sid = await run_script(fake_http, fake, "read", [Tool("read", {"filePath": "a"}, output="x")])
    await idle(fake, sid)
    pending = await fake.wait_for_tool("read", status="pending", timeout=0.5)
    assert pending["state"]["status"] == "pending"
    running = await fake.wait_for_tool("read", timeout=0.5)
    assert running["state"]["status"] == "running"
    completed = await fake.wait_for_tool("read", status="completed", timeout=0.5)
    assert completed["state"]["status"] == "completed" and completed["state"]["output"] == "x"
    assert completed["id"] == running["id"]
    with pytest.raises(TimeoutError):
        await fake.wait_for_tool("read", status="error", timeout=0.1)


async def test_wait_for_tool_finds_a_stored_part_whose_events_left_the_history() -> None:
    async with FakeOpenCodeServer(event_history=3) as fake, fake.client() as client:
        sid = await run_script(client, fake, "read", [Tool("read", {"filePath": "a"}, output="x")])
        await idle(fake, sid)
        assert not any(e["type"] == "message.part.updated" for e in fake.events)
        part = await fake.wait_for_tool("read", status="completed", timeout=0.5)
        assert part["sessionID"] == sid and part["state"]["output"] == "x"


async def test_wait_for_tool_since_counts_only_later_parts(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    first = await run_script(fake_http, fake, "read", [Tool("read", {"filePath": "a"}, output="1")])
    await idle(fake, first)
    mark = fake.event_count
    with pytest.raises(TimeoutError):
        await fake.wait_for_tool("read", status="completed", since=mark, timeout=0.1)
    second = await run_script(
        fake_http, fake, "read", [Tool("read", {"filePath": "b"}, output="2")]
    )
    part = await fake.wait_for_tool("read", status="completed", since=mark)
    assert part["sessionID"] == second and part["state"]["output"] == "2"


async def test_wait_for_tool_of_one_session_and_an_error_status(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    other = await run_script(fake_http, fake, "ok", [Tool("grep", {"pattern": "x"}, output="")])
    mine = await run_script(fake_http, fake, "bad", [Tool("grep", {"pattern": "y"}, error="boom")])
    failed = await fake.wait_for_tool("grep", status="error", session_id=mine)
    assert failed["sessionID"] == mine and failed["state"]["error"] == "boom"
    done = await fake.wait_for_tool("grep", status="completed", session_id=other)
    assert done["sessionID"] == other
    with pytest.raises(TimeoutError):
        await fake.wait_for_tool("grep", status="error", session_id=other, timeout=0.1)


async def test_wait_for_tool_refuses_a_status_the_wire_never_says(
    fake: FakeOpenCodeServer,
) -> None:
    with pytest.raises(ValueError, match="status"):
        await fake.wait_for_tool("bash", status="done")


async def test_the_part_returned_is_a_copy(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    sid = await run_script(
        fake_http, fake, "ls", [Tool("bash", {"command": "ls"}, duration=FOREVER)]
    )
    part = await fake.wait_for_tool("bash")
    part["state"]["status"] = "tampered"
    [stored] = [p for m in fake.sessions[sid].messages for p in m.parts if p["type"] == "tool"]
    assert stored["state"]["status"] == "running"


# ------------------------------------------------------------------ wait_hanging


async def test_wait_hanging_returns_once_the_run_is_parked_in_a_hang(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    sid = await run_script(fake_http, fake, "work", [Tool("read", {"filePath": "a"}), Hang()])
    await fake.wait_hanging(sid)
    assert fake.sessions[sid].busy
    [read] = [p for m in fake.sessions[sid].messages for p in m.parts if p["type"] == "tool"]
    assert read["state"]["status"] == "completed", "every step before the hang ran"
    assert (await fake_http.post(f"/session/{sid}/abort")).json() is True
    await idle(fake, sid)


async def test_an_endless_tool_is_hanging_too(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    grep = await run_script(fake_http, fake, "grep", [Tool("grep", {}, duration=FOREVER)])
    bash = await run_script(fake_http, fake, "bash", [Tool("bash", {}, duration=FOREVER)])
    await fake.wait_hanging(grep)
    await fake.wait_hanging(bash)


async def test_wait_hanging_times_out_on_a_run_that_is_not_parked(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    sid = await run_script(fake_http, fake, "ask", [Permission("bash", ["ls"])])
    await fake.wait_until(lambda: bool(fake.sessions[sid].pending_requests))
    with pytest.raises(TimeoutError):
        await fake.wait_hanging(sid, timeout=0.1)
    idle_one = fake.add_session()
    with pytest.raises(TimeoutError):
        await fake.wait_hanging(idle_one, timeout=0.1)
    with pytest.raises(KeyError):
        await fake.wait_hanging("ses_unknown", timeout=0.1)


async def test_a_hang_is_over_once_the_session_was_aborted(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    sid = await hanging_session(fake_http, fake)
    await fake.wait_hanging(sid)
    await fake_http.post(f"/session/{sid}/abort")
    with pytest.raises(TimeoutError):
        await fake.wait_hanging(sid, timeout=0.1)


# ------------------------------------------------------------------ tree


async def test_tree_is_breadth_first_root_first_children_in_creation_order(
    fake: FakeOpenCodeServer,
) -> None:
    root = fake.add_session()
    a = fake.add_session(parent_id=root)
    b = fake.add_session(parent_id=root)
    a1 = fake.add_session(parent_id=a)
    b1 = fake.add_session(parent_id=b)
    a2 = fake.add_session(parent_id=a)
    a1x = fake.add_session(parent_id=a1)
    unrelated = fake.add_session()
    assert fake.tree(root) == [root, a, b, a1, a2, b1, a1x]
    assert fake.tree(a) == [a, a1, a2, a1x]
    assert fake.tree(unrelated) == [unrelated]
    with pytest.raises(KeyError):
        fake.tree("ses_unknown")


async def test_tree_includes_task_children(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    fake.script("leaf", [Hang()])
    fake.script("mid", [Task("deeper", "leaf")])
    root = await run_script(fake_http, fake, "root", [Task("explore", "mid")])
    [_, mid, leaf] = await fake.wait_for_tree(root, sessions=3, hanging=True)
    assert fake.tree(root) == [root, mid, leaf]
    assert fake.sessions[mid].parent_id == root and fake.sessions[leaf].parent_id == mid


# ------------------------------------------------------------------ pending requests


async def test_pending_permissions_and_questions_as_the_api_lists_them(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    asks = await run_script(fake_http, fake, "perm", [Permission("bash", ["rm -rf build"])])
    quiz = await run_script(fake_http, fake, "quiz", [Question([COLOR])])
    await fake.wait_until(lambda: bool(fake.pending_permissions() and fake.pending_questions()))
    [permission] = fake.pending_permissions()
    assert permission["sessionID"] == asks and permission["permission"] == "bash"
    assert permission["patterns"] == ["rm -rf build"] and permission["id"].startswith("per_")
    [question] = fake.pending_questions()
    assert question["sessionID"] == quiz and question["questions"] == [COLOR]
    assert fake.pending_permissions() == (await fake_http.get("/permission")).json()
    assert fake.pending_questions() == (await fake_http.get("/question")).json()
    assert fake.pending_permissions(session_id=quiz) == []
    assert fake.pending_questions(session_id=quiz) == [question]
    await fake_http.post(f"/permission/{permission['id']}/reply", json={"reply": "once"})
    assert fake.pending_permissions() == []


async def test_pending_requests_of_every_directory_and_after_an_abort(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    fake.script("perm", [Permission("bash", ["ls"])])
    elsewhere = (await new_session(fake_http, title="x"))["id"]
    sid = (await fake_http.post("/session", json={}, params={"directory": "/tmp/other"})).json()[
        "id"
    ]
    for session_id in (elsewhere, sid):
        await prompt(fake_http, session_id, "[[script:perm]]")
    await fake.wait_until(lambda: len(fake.pending_permissions()) == 2)
    assert {p["sessionID"] for p in fake.pending_permissions()} == {elsewhere, sid}
    await fake_http.post(f"/session/{sid}/abort")
    # Measured: a request outlives the abort of its session (still listed).
    assert [p["sessionID"] for p in fake.pending_permissions(session_id=sid)] == [sid]


# ------------------------------------------------------------------ the docs' examples


async def test_the_introduction_example_of_the_fake() -> None:
    """``docs/testing.md``, "Testing your own code": a subagent stopped mid-run."""
    async with FakeOpenCodeServer() as fake:
        fake.script("child", [Hang()])
        ls = Tool("bash", {"command": "ls"}, output="a\n")
        fake.script("root", [ls, Task("explore", "child")])
        async with OpenCodeAdapter(fake.base_url, transport=fake.transport) as oc:
            root = (await oc.start_session("t")).session_id
            await oc.send_turn("t", "go [[script:root]]")
            await fake.wait_for_tree(root, sessions=2, hanging=True)  # the subagent is mid-run
            await oc.interrupt_turn("t")
            aborted = {r.session_id for r in fake.calls("POST", "/session/{id}/abort")}
            assert aborted == set(fake.tree(root))
    assert fake.closed


async def test_the_docs_example_of_waiting_in_domain_terms(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer
) -> None:
    """``docs/testing.md``, "Waiting in domain terms"."""
    root = (await oc.start_session("t")).session_id
    fake.script("work", [Tool("bash", {"command": "make"}, duration=float("inf"))])
    await oc.send_turn("t", "go [[script:work]]")
    part = await fake.wait_for_tool("bash")
    assert part["state"]["input"] == {"command": "make"}
    await oc.interrupt_turn("t")

    fake.script("ask", [Permission("bash", ["rm -rf build"])])
    mark = fake.event_count
    await oc.send_turn("t", "go [[script:ask]]")
    pending = await fake.wait_for_tool("bash", status="pending", since=mark)
    assert pending["id"] != part["id"]
    await fake.wait_until(lambda: bool(fake.pending_permissions()))
    [asked] = fake.pending_permissions(session_id=root)
    assert asked["patterns"] == ["rm -rf build"]
