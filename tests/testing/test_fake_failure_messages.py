"""The fake explains its failures: a wait that times out and a request assertion that fails
say what they wanted and show what the fake saw (its sessions with their statuses, the open
requests, the last requests received), within a bounded number of lines.

Also :meth:`FakeOpenCodeServer.wait_for_tree`, the one wait for "a tree of N sessions
whose deepest one hangs".
"""

from __future__ import annotations

import asyncio

import httpx
import pytest

from adapter.testing.fake import FakeOpenCodeServer, Hang, Permission, Task, Text
from tests.testing.fake_support import new_session, prompt

SHORT = 0.05


async def _subagent_tree(client: httpx.AsyncClient, fake: FakeOpenCodeServer) -> str:
    """A root whose ``task`` child hangs; the root's id."""
    fake.script("child", [Text("working"), Hang()])
    fake.script("root", [Task("explore", "child")])
    root = str((await new_session(client))["id"])
    await prompt(client, root, "go [[script:root]]")
    return root


# ------------------------------------------------------------------ waits that time out


async def test_wait_until_names_the_lambda_and_shows_the_tree_pending_and_requests(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    root = await _subagent_tree(fake_http, fake)
    root_id, child = await fake.wait_for_tree(root, sessions=2, hanging=True)
    fake.script("ask", [Permission("bash", ["rm -rf build"])])
    asking = str((await new_session(fake_http))["id"])
    await prompt(fake_http, asking, "[[script:ask]]")
    await fake.wait_until(lambda: bool(fake.pending_permissions()))
    with pytest.raises(TimeoutError) as raised:
        await fake.wait_until(lambda: len(fake.tree(root)) == 3, timeout=SHORT)
    message = str(raised.value)
    assert message.startswith(
        f"condition lambda: len(fake.tree(root)) == 3 not met within {SHORT}s\n"
    )
    assert "sessions (3):" in message
    # The tree, indented by depth, each session with its status.
    assert f"\n    {root_id} busy\n      {child} busy, hanging\n" in message
    [permission] = fake.pending_permissions()
    assert f"    {asking} busy, asking {permission['id']}\n" in message
    assert "pending requests (1):" in message
    assert f"permission {permission['id']} of {asking}: bash ['rm -rf build']" in message
    assert f"last requests ({len(fake.requests)}, oldest first):" in message
    assert f"POST /session/{asking}/prompt_async -> 204" in message


async def test_wait_until_says_the_description_given(fake: FakeOpenCodeServer) -> None:
    with pytest.raises(TimeoutError) as raised:
        await fake.wait_until(lambda: False, timeout=SHORT, description="the host gave up")
    message = str(raised.value)
    assert message.startswith(f"condition the host gave up not met within {SHORT}s\n")
    assert "sessions: none" in message and "pending requests: none" in message
    assert "last requests: none" in message


async def test_wait_until_names_a_function_predicate(fake: FakeOpenCodeServer) -> None:
    def everything_idle() -> bool:
        return False

    with pytest.raises(TimeoutError, match="condition everything_idle not met"):
        await fake.wait_until(everything_idle, timeout=SHORT)


async def test_a_lambda_over_several_lines_is_named_whole(fake: FakeOpenCodeServer) -> None:
    root = fake.add_session()
    with pytest.raises(TimeoutError) as raised:
        await fake.wait_until(
            lambda: (
                len(fake.tree(root)) == 2 and not fake.sessions[root].busy
            ),  # a comma after it, and more arguments
            timeout=SHORT,
        )
    assert str(raised.value).startswith(
        "condition lambda: (len(fake.tree(root)) == 2 and not fake.sessions[root].busy) not met"
    )


async def test_wait_for_event_names_the_type_and_predicate_and_shows_the_state(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    session = str((await new_session(fake_http))["id"])
    with pytest.raises(TimeoutError) as raised:
        await fake.wait_for_event(
            "session.idle", lambda e: e["properties"]["sessionID"] == session, timeout=SHORT
        )
    message = str(raised.value)
    assert message.startswith(
        "no 'session.idle' event matching "
        'lambda e: e["properties"]["sessionID"] == session within'
    )
    assert f"    {session} idle\n" in message and "POST /session -> 200" in message
    with pytest.raises(TimeoutError, match=r"no 'session\.idle' event matching its end within"):
        await fake.wait_for_event("session.idle", timeout=SHORT, description="its end")


async def test_the_domain_waits_show_the_state_too(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    root = await _subagent_tree(fake_http, fake)
    [_, child] = await fake.wait_for_tree(root, sessions=2, hanging=True)
    with pytest.raises(TimeoutError) as raised:
        await fake.wait_for_tool("bash", session_id=child, timeout=SHORT)
    assert str(raised.value).startswith(f"no 'bash' tool part in {child} reached 'running'")
    assert f"{child} busy, hanging" in str(raised.value)
    with pytest.raises(TimeoutError) as raised:
        await fake.wait_hanging(root, timeout=SHORT)
    assert str(raised.value).startswith(f"session {root} did not hang within {SHORT}s\n")
    assert f"{child} busy, hanging" in str(raised.value)


async def test_a_hold_that_held_nothing_says_which_and_shows_the_state(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    session = str((await new_session(fake_http))["id"])
    hold = fake.hold("POST", "/session/{id}/abort")
    with pytest.raises(TimeoutError) as raised:
        await hold.wait_started(timeout=SHORT)
    message = str(raised.value)
    assert message.startswith(
        f"fake.hold('POST', '/session/{{id}}/abort') held nothing within {SHORT}s\n"
    )
    assert f"    {session} idle" in message
    run_end = fake.hold_run_end(session)
    with pytest.raises(TimeoutError) as raised:
        await run_end.wait_started(timeout=SHORT)
    assert str(raised.value).startswith(f"fake.hold_run_end({session!r}) held nothing within")


async def test_the_state_shown_is_bounded(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    root = fake.add_session()
    for _ in range(99):
        fake.add_session(parent_id=root)
    for _ in range(30):
        await fake_http.get(f"/session/{root}")
    state = fake.describe_state()
    assert "sessions (100):" in state and "    … 80 more" in state
    assert "last requests (10 of 30, oldest first):" in state
    assert len(state.splitlines()) < 40
    assert state == fake.describe_state(), "reading the state changes nothing"


# ------------------------------------------------------------------ request assertions


async def test_assert_called_once_returns_the_request(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    session = str((await new_session(fake_http, title="x"))["id"])
    created = fake.assert_called_once("POST", "/session")
    assert created.body == {"title": "x"} and created.status == 200
    await fake_http.post(f"/session/{session}/abort")
    assert fake.assert_called_once("post", "/session/{id}/abort").session_id == session
    fake.assert_not_called("DELETE", "/session/{id}")
    assert fake.assert_called("*", "/session*", times=2) == fake.calls("*", "/session*")
    assert fake.assert_called("POST", "/session/*") == fake.calls("POST", "/session/*")


async def test_assert_called_once_lists_what_was_sent_when_nothing_matched(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    session = str((await new_session(fake_http))["id"])
    await prompt(fake_http, session, "hi")
    with pytest.raises(AssertionError) as raised:
        fake.assert_called_once("POST", "/permission/{id}/reply")
    message = str(raised.value)
    assert message.startswith("expected 1 request POST /permission/{id}/reply, got 0\n")
    assert "the fake received (2, oldest first):" in message
    assert f"  POST /session/{session}/prompt_async -> 204" in message


async def test_the_assertions_list_the_matching_requests_with_their_bodies(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    await new_session(fake_http, title="one")
    await new_session(fake_http, title="two")
    with pytest.raises(AssertionError) as raised:
        fake.assert_called_once("POST", "/session")
    message = str(raised.value)
    assert message.startswith("expected 1 request POST /session, got 2\n")
    assert "  POST /session -> 200 body={'title': 'one'}\n" in message
    assert "  POST /session -> 200 body={'title': 'two'}\n" in message
    with pytest.raises(AssertionError, match=r"^expected no request POST /session, got 2\n"):
        fake.assert_not_called("POST", "/session")
    with pytest.raises(AssertionError, match=r"^expected 3 requests POST /session, got 2\n"):
        fake.assert_called("POST", "/session", times=3)
    with pytest.raises(AssertionError, match=r"^expected at least 1 request GET /question, got 0"):
        fake.assert_called("GET", "/question")


# ------------------------------------------------------------------ wait_for_tree


async def test_wait_for_tree_returns_the_tree_once_its_deepest_session_hangs(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    fake.script("leaf", [Text("reading"), Hang()])
    fake.script("mid", [Task("deeper", "leaf")])
    fake.script("root", [Task("explore", "mid")])
    root = str((await new_session(fake_http))["id"])
    waiting = asyncio.create_task(fake.wait_for_tree(root, sessions=3, hanging=True))
    anywhere = asyncio.create_task(fake.wait_for_tree(sessions=3, hanging=True))
    await prompt(fake_http, root, "go [[script:root]]")
    tree = await waiting
    [_, mid, leaf] = tree
    assert tree == fake.tree(root) and fake.sessions[leaf].parent_id == mid
    await fake.wait_hanging(leaf, timeout=SHORT)  # already hanging: returns at once
    assert await anywhere == tree
    assert await fake.wait_for_tree(root, sessions=3) == tree


async def test_wait_for_tree_waits_for_the_hang_not_only_the_count(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    fake.script("child", [Permission("bash", ["ls"])])
    fake.script("root", [Task("explore", "child")])
    root = str((await new_session(fake_http))["id"])
    await prompt(fake_http, root, "go [[script:root]]")
    [_, child] = await fake.wait_for_tree(root, sessions=2)
    await fake.wait_until(lambda: bool(fake.pending_permissions()))
    with pytest.raises(TimeoutError) as raised:
        await fake.wait_for_tree(root, sessions=2, hanging=True, timeout=SHORT)
    message = str(raised.value)
    assert message.startswith(
        f"no tree of 2 sessions under {root} whose deepest session hangs within {SHORT}s\n"
    )
    assert f"{child} busy, asking per_" in message
    with pytest.raises(TimeoutError, match=r"^no tree of 3 sessions within"):
        await fake.wait_for_tree(sessions=3, timeout=SHORT)
    with pytest.raises(KeyError):
        await fake.wait_for_tree("ses_unknown", sessions=1)
    with pytest.raises(ValueError):
        await fake.wait_for_tree(root, sessions=0)
