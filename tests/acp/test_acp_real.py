"""``opencode-tree acp`` over stdio, driven by the SDK's client, against a real OpenCode.

The agent runs as an editor runs it: a subprocess (``python -m adapter acp --url``)
speaking ACP on stdin/stdout, here in front of a real ``opencode serve`` whose model is
the scripted one. These are the behaviours ``opencode acp`` itself gets wrong:
a Cancel of a nested ``task`` tree must answer ``cancelled`` with the whole tree idle and
no model request after the answer, and a grandchild's permission request must reach the
client.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager
from typing import cast

import acp
import pytest
from acp import text_block
from acp.connection import StreamEvent
from acp.core import ClientSideConnection
from acp.schema import PromptResponse

from adapter import OpenCodeClient
from adapter.testing import RealOpenCodeServer, ScriptedModelServer
from adapter.testing.model import Hang, Text, ToolCall, ToolCalls, script_marker, task_call
from tests.acp.client_side import RecordingClient
from tests.real.waits import tree_of

pytestmark = pytest.mark.real

# Subagents ask before bash (a session's own "ask" rule is not passed on to the
# subagents its task tool creates; the agent's is).
ASK_BASH = {"agent": {"general": {"permission": {"bash": "ask"}}}}
RUNS = 5
AFTER = 0.5  # seconds after a cancelled prompt's answer in which no model request starts


async def no_model_request_after(
    model: ScriptedModelServer, answered: float, session_ids: Iterable[str], what: str = ""
) -> None:
    """For ``AFTER`` seconds, checked as they pass: no model request of ``session_ids``
    started after ``answered`` (a real server: nothing to wait on but the clock)."""
    sessions = list(session_ids)
    quiet_until = time.monotonic() + AFTER
    while True:
        late = model.requests_after(answered, session_ids=sessions)
        assert late == [], f"{what}model requests after the answer: {late}"
        if time.monotonic() >= quiet_until:
            return
        await asyncio.sleep(0.05)


def script_asking_leaf(model: ScriptedModelServer, name: str, command: str, answer: str) -> None:
    """Scripts ``<name>-leaf``, a subagent's: a bash call of ``command`` (which asks, as
    ``ASK_BASH`` sets for subagents), then ``answer``."""
    bash = ToolCalls([ToolCall("bash", {"command": command, "description": "echo"})])
    model.script(f"{name}-leaf", [bash, Text(answer)])


async def prompt_started(
    conn: ClientSideConnection, server: RealOpenCodeServer, script: str
) -> tuple[str, asyncio.Task[PromptResponse]]:
    """A new session of ``conn`` in ``server``'s directory and its prompt running the
    model's script ``script``, as a task (its answer when awaited)."""
    sid = (await conn.new_session(cwd=str(server.directory), mcp_servers=[])).session_id
    running = conn.prompt(session_id=sid, prompt=[text_block("go " + script_marker(script))])
    return sid, asyncio.create_task(running)


@pytest.fixture(scope="module")
def asking_server(scripted_model: ScriptedModelServer) -> Iterator[RealOpenCodeServer]:
    with RealOpenCodeServer(scripted_model.base_url, config_overrides=ASK_BASH) as server:
        yield server


@asynccontextmanager
async def agent(
    server: RealOpenCodeServer,
) -> AsyncIterator[tuple[ClientSideConnection, RecordingClient, list[StreamEvent]]]:
    client = RecordingClient()
    wire: list[StreamEvent] = []
    command = [
        "-m", "adapter", "acp", "--url", server.base_url, "--directory", str(server.directory)
    ]  # fmt: skip
    async with acp.spawn_agent_process(
        cast(acp.Client, client), sys.executable, *command, observers=[wire.append]
    ) as (conn, _process):
        await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        yield conn, client, wire


async def test_cancel_of_a_nested_task_tree_answers_cancelled_with_the_tree_idle(
    asking_server: RealOpenCodeServer, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    model = scripted_model
    async with (
        agent(asking_server) as (conn, client, wire),
        OpenCodeClient(asking_server.base_url, directory=str(asking_server.directory)) as oc,
    ):
        for run in range(RUNS):
            name = f"{unique_name}-{run}"
            extra = Text(f"EXTRA {name}")
            model.script(f"{name}-leaf", [Hang()])
            model.script(f"{name}-mid", [ToolCalls([task_call("mid", f"{name}-leaf")]), extra])
            model.script(name, [ToolCalls([task_call("top", f"{name}-mid")]), extra])
            sid, running = await prompt_started(conn, asking_server, name)
            leaf = f"{name}-leaf"
            await model.wait_for_async(
                lambda reqs: any(r.script == leaf and r.open for r in reqs),  # noqa: B023
                timeout=60,
            )
            tree = await tree_of(oc, sid)
            assert len(tree) == 3
            await conn.cancel(session_id=sid)
            response = await asyncio.wait_for(running, 60)
            answered = time.monotonic()
            assert response.stop_reason == "cancelled"
            busy = set(await oc.status())  # the non-idle sessions
            assert not busy & set(tree), f"run {run}: still busy after the answer: {busy}"
            await no_model_request_after(model, answered, tree, f"run {run}: ")
            last_answer = max(
                i for i, e in enumerate(wire) if "stopReason" in str(e.message.get("result"))
            )
            after = [
                e.message
                for e in wire[last_answer + 1 :]
                if e.message.get("method") == "session/update"
                and e.message["params"]["sessionId"] == sid
            ]
            assert after == [], f"run {run}: updates after the answer"
            assert f"EXTRA {name}" not in client.text()


async def test_a_grandchilds_bash_permission_reaches_the_client_and_allowing_it_finishes(
    asking_server: RealOpenCodeServer, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    model = scripted_model
    name = unique_name
    script_asking_leaf(model, name, "echo deep", "leaf done")
    model.script(f"{name}-mid", [ToolCalls([task_call("mid", f"{name}-leaf")]), Text("mid done")])
    model.script(name, [ToolCalls([task_call("top", f"{name}-mid")]), Text("root done")])
    async with agent(asking_server) as (conn, client, _wire):
        sid, running = await prompt_started(conn, asking_server, name)
        ask = await asyncio.wait_for(client.asks.get(), 60)
        assert ask.session_id == sid
        assert ask.tool_call.title is not None and ask.tool_call.title.startswith("top > mid > ")
        assert "echo deep" in ask.tool_call.title
        ask.choose("accept")
        response = await asyncio.wait_for(running, 60)
        assert response.stop_reason == "end_turn"
        calls = client.calls()
        bash_call = calls[ask.tool_call.tool_call_id]
        assert bash_call["status"] == "completed" and "deep" in str(bash_call.get("raw_output"))
        assert client.text().endswith("root done")


async def test_cancel_while_a_childs_permission_is_pending_resolves_it_and_stops_the_tree(
    asking_server: RealOpenCodeServer, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    model = scripted_model
    name = unique_name
    script_asking_leaf(model, name, "echo never", "ran")
    model.script(name, [ToolCalls([task_call("asks", f"{name}-leaf")]), Text(f"EXTRA {name}")])
    async with (
        agent(asking_server) as (conn, client, _wire),
        OpenCodeClient(asking_server.base_url, directory=str(asking_server.directory)) as oc,
    ):
        sid, running = await prompt_started(conn, asking_server, name)
        ask = await asyncio.wait_for(client.asks.get(), 60)
        tree = await tree_of(oc, sid)
        await conn.cancel(session_id=sid)
        response = await asyncio.wait_for(running, 60)
        answered = time.monotonic()
        assert response.stop_reason == "cancelled"
        assert not set(await oc.status()) & set(tree)
        pending = {r.id for r in await oc.pending_requests() if r.session_id in tree}
        assert pending == set()  # the stop withdrew it on the server
        ask.cancelled()  # what a client does for its open requests when it cancels
        await no_model_request_after(model, answered, tree)
        asked_call = client.calls().get(ask.tool_call.tool_call_id, {})
        assert asked_call.get("status") != "completed"  # the bash never ran


async def test_cancel_stops_children_created_through_the_api(
    asking_server: RealOpenCodeServer, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    model = scripted_model
    name = unique_name
    model.script(name, [Hang()])
    async with (
        agent(asking_server) as (conn, _client, _wire),
        OpenCodeClient(asking_server.base_url, directory=str(asking_server.directory)) as oc,
    ):
        sid, running = await prompt_started(conn, asking_server, name)
        kids = []
        for i in range(2):
            kid = await oc.create_session(title=f"kid {i}", parent_id=sid)
            await oc.prompt_async(kid.id, "work " + script_marker(name))
            kids.append(kid.id)
        await model.wait_for_async(
            lambda reqs: len({r.session_id for r in reqs if r.script == name and r.open}) >= 3,
            timeout=60,
        )
        await conn.cancel(session_id=sid)
        response = await asyncio.wait_for(running, 60)
        answered = time.monotonic()
        assert response.stop_reason == "cancelled"
        assert not set(await oc.status()) & {sid, *kids}
        await no_model_request_after(model, answered, [sid, *kids])


async def test_load_replays_a_session_in_a_new_agent_process(
    asking_server: RealOpenCodeServer, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    name = unique_name
    echo = ToolCalls([ToolCall("read", {"filePath": str(asking_server.directory / "x.txt")})])
    (asking_server.directory / "x.txt").write_text("hello\n")
    scripted_model.script(name, [echo, Text("read it")])
    async with agent(asking_server) as (conn, _client, _wire):
        sid, running = await prompt_started(conn, asking_server, name)
        done = await running
        assert done.stop_reason == "end_turn"
    async with agent(asking_server) as (conn, client, _wire):
        await conn.load_session(cwd=str(asking_server.directory), session_id=sid, mcp_servers=[])
        kinds = client.kinds()
        assert kinds[0] == "user_message_chunk" and "tool_call" in kinds
        assert client.text().endswith("read it")
        [read] = [c for c in client.calls().values() if c["kind"] == "read"]
        assert read["status"] == "completed"


async def test_a_server_that_dies_mid_prompt_ends_the_prompt_with_an_error(
    scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    # Its own server: this one is killed. The agent is told --url, so it cannot see the
    # process die; it learns it from the lost stream and the status requests that fail,
    # bounded by Timeouts.idle_confirm (60 s; measured: the prompt failed 88 s after the
    # kill, and later calls failed at once).
    with RealOpenCodeServer(scripted_model.base_url) as server:
        scripted_model.script(unique_name, [Hang()])
        async with agent(server) as (conn, _client, _wire):
            sid, running = await prompt_started(conn, server, unique_name)
            await scripted_model.wait_for_async(
                lambda reqs: any(r.script == unique_name and r.open for r in reqs), timeout=60
            )
            os.killpg(server.pid, signal.SIGKILL)
            with pytest.raises(acp.RequestError, match="the turn failed"):
                await asyncio.wait_for(running, 150)
            for call in (
                conn.prompt(session_id=sid, prompt=[text_block("again")]),
                conn.new_session(cwd=str(server.directory), mcp_servers=[]),
            ):
                with pytest.raises(acp.RequestError, match="connection failed"):
                    await asyncio.wait_for(call, 30)
