"""The ACP agent's host features: ``session/list`` (the server's sessions of a ``cwd``, with
titles and times, paged), ``session/close`` (the tree stopped) and ``session/fork``
(``fork_thread``), through the SDK's client on the fake OpenCode."""

from __future__ import annotations

import asyncio

import pytest
from acp import RequestError, text_block

import adapter.acp._sessions as sessions_module
from adapter import OpenCodeAdapter
from adapter.testing import FakeOpenCodeServer
from adapter.testing.fake import Hang, Task, Text
from tests.acp.client_side import Harness


async def test_list_names_the_root_sessions_of_a_cwd_newest_first_in_pages(
    acp_client: Harness, fake: FakeOpenCodeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sessions_module, "PAGE_SIZE", 2)
    fake.script("child", [Text("child")])
    fake.script("root", [Task("look", "child"), Text("done")])
    first = await acp_client.new_session("/tmp/project")
    await acp_client.conn.prompt(session_id=first, prompt=[text_block("[[script:root]]")])
    second = await acp_client.new_session("/tmp/project")
    third = await acp_client.new_session("/tmp/project")
    await acp_client.new_session("/tmp/other")
    page = await acp_client.conn.list_sessions(cwd="/tmp/project")
    assert [s.session_id for s in page.sessions] == [third, second]
    assert all(s.cwd == "/tmp/project" and s.title and s.updated_at for s in page.sessions)
    assert page.next_cursor is not None
    rest = await acp_client.conn.list_sessions(cwd="/tmp/project", cursor=page.next_cursor)
    assert [s.session_id for s in rest.sessions] == [first]  # its subagent is not listed
    assert rest.next_cursor is None
    updated_at = rest.sessions[0].updated_at
    assert updated_at is not None and updated_at.endswith("Z")


@pytest.mark.parametrize(
    ("cwd", "cursor"), [("relative/dir", None), ("/tmp/project", "nonsense"), (None, "-1")]
)
async def test_list_refuses_a_relative_cwd_and_a_cursor_it_did_not_give(
    acp_client: Harness, cwd: str | None, cursor: str | None
) -> None:
    await acp_client.new_session("/tmp/project")
    with pytest.raises(RequestError) as refused:
        await acp_client.conn.list_sessions(cwd=cwd, cursor=cursor)
    assert refused.value.code == -32602


async def test_close_stops_the_running_tree_the_prompt_answers_cancelled(
    acp_client: Harness, fake: FakeOpenCodeServer, oc: OpenCodeAdapter
) -> None:
    fake.script("hang", [Hang()])
    fake.script("root", [Task("deep", "hang")])
    sid = await acp_client.new_session()
    running = asyncio.create_task(
        acp_client.conn.prompt(session_id=sid, prompt=[text_block("[[script:root]]")])
    )
    await fake.wait_until(
        lambda: len(fake.sessions) == 2 and all(s.busy for s in fake.sessions.values())
    )
    await acp_client.conn.close_session(session_id=sid)
    assert (await asyncio.wait_for(running, 10)).stop_reason == "cancelled"
    assert not any(s.busy for s in fake.sessions.values())
    assert all(i.session_id != sid for i in oc.list_sessions())
    with pytest.raises(RequestError) as refused:
        await acp_client.conn.prompt(session_id=sid, prompt=[text_block("again")])
    assert refused.value.code == -32602
    with pytest.raises(RequestError):
        await acp_client.conn.close_session(session_id=sid)


async def test_fork_is_a_new_session_with_the_history_and_the_source_goes_on(
    acp_client: Harness, fake: FakeOpenCodeServer
) -> None:
    fake.script("one", [Text("first answer")])
    sid = await acp_client.new_session("/tmp/project")
    await acp_client.conn.prompt(session_id=sid, prompt=[text_block("[[script:one]]")])
    fork = await acp_client.conn.fork_session(session_id=sid, cwd="/tmp/project", mcp_servers=[])
    assert fork.session_id != sid and fork.session_id in fake.sessions
    assert fork.config_options and fork.modes is not None
    assert [m.text for m in fake.sessions[fork.session_id].messages if m.role == "assistant"] == [
        "first answer"
    ]
    fake.script("two", [Text("forked")])
    answer = await acp_client.conn.prompt(
        session_id=fork.session_id, prompt=[text_block("[[script:two]]")]
    )
    assert answer.stop_reason == "end_turn"
    with pytest.raises(RequestError) as refused:
        await acp_client.conn.fork_session(session_id="ses_nobody", cwd="/tmp/project")
    assert refused.value.code == -32602
