"""The ACP host features through ``opencode-tree acp`` (a subprocess, as an editor runs
it) in front of a real ``opencode serve`` with the scripted model and configured slash
commands (``hello``, ``sub``: ``tests.differential.language.COMMANDS``)."""

from __future__ import annotations

import asyncio

import pytest
from acp import text_block

from adapter import OpenCodeClient
from adapter.testing import RealOpenCodeServer, ScriptedModelServer
from adapter.testing.model import Hang, ModelRequest, Text, ToolCalls, script_marker, task_call
from tests.acp.test_acp_real import agent
from tests.real.scripts import script_two_subagents

pytestmark = pytest.mark.real


def opencode(server: RealOpenCodeServer) -> OpenCodeClient:
    return OpenCodeClient(server.base_url, directory=str(server.directory))


async def test_modes_commands_and_usage_and_set_mode_plan_reaches_opencode(
    command_server: RealOpenCodeServer, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    cwd = str(command_server.directory)
    scripted_model.script(unique_name, [Text("a plan")])
    async with agent(command_server) as (conn, client, _wire), opencode(command_server) as oc:
        new = await conn.new_session(cwd=cwd, mcp_servers=[])
        sid = new.session_id
        assert new.modes is not None
        assert {"build", "plan"} <= {m.id for m in new.modes.available_modes}
        assert new.modes.current_mode_id == "build"
        options = {getattr(o, "root", o).id for o in new.config_options or []}
        assert options == {"model", "agent", "permission_mode"}
        async with asyncio.timeout(30):
            commands = await client.wait_for_update(sid, "available_commands_update")
        assert {"hello", "sub"} <= {c.name for c in commands.available_commands}
        await conn.set_session_mode(session_id=sid, mode_id="plan")
        response = await conn.prompt(
            session_id=sid, prompt=[text_block("think " + script_marker(unique_name))]
        )
        assert response.stop_reason == "end_turn"
        users = [m for m in await oc.messages(sid) if m.info.role == "user"]
        assert users[-1].info.raw.get("agent") == "plan"
        usages = [u for s, u in client.updates if s == sid and u.session_update == "usage_update"]
        assert usages, "no usage_update"
        assert usages[-1].size == 128000 and usages[-1].used > 0
        assert usages[-1].cost is not None and usages[-1].cost.currency == "USD"


async def _children_streaming(model: ScriptedModelServer, name: str) -> None:
    def open_ones(requests: list[ModelRequest]) -> bool:
        mine = [r for r in requests if r.script and r.script.startswith(f"{name}-")]
        return sum(1 for r in mine if r.ended_at is None and not r.is_title) >= 2

    await model.wait_for_async(open_ones, timeout=60)


async def test_stop_subagent_stops_one_of_two_parallel_subagents_and_the_prompt_ends_end_turn(
    command_server: RealOpenCodeServer, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    name = unique_name
    # The sibling streams its answer for about 8 s: still busy when alpha is stopped.
    script_two_subagents(scripted_model, name, beta_words=80)
    cwd = str(command_server.directory)
    async with agent(command_server) as (conn, client, _wire), opencode(command_server) as oc:
        sid = (await conn.new_session(cwd=cwd, mcp_servers=[])).session_id
        running = asyncio.create_task(
            conn.prompt(session_id=sid, prompt=[text_block("go " + script_marker(name))])
        )
        await _children_streaming(scripted_model, name)
        async with asyncio.timeout(60):
            alpha_call = await client.wait_for_call("task alpha")
        answer = await conn.ext_method(
            "opencode/stop_subagent", {"sessionId": sid, "toolCallId": alpha_call}
        )
        [alpha] = answer["stopped"]
        busy = set(await oc.status())
        assert alpha not in busy and sid in busy and len(busy) == 2, busy
        response = await asyncio.wait_for(running, 60)
        assert response.stop_reason == "end_turn"
        assert "the root's answer" in client.text()
        final = client.calls()
        assert final[alpha_call]["status"] == "failed"
        beta_call = next(c for c, v in final.items() if v.get("title") == "task beta")
        assert final[beta_call]["status"] == "completed"


async def test_session_list_names_the_new_session_and_close_stops_its_tree(
    command_server: RealOpenCodeServer, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    name = unique_name
    scripted_model.script(f"{name}-a", [Hang()])
    scripted_model.script(name, [ToolCalls([task_call("alpha", f"{name}-a")]), Text("never")])
    cwd = str(command_server.directory)
    async with agent(command_server) as (conn, _client, _wire), opencode(command_server) as oc:
        sid = (await conn.new_session(cwd=cwd, mcp_servers=[])).session_id
        listed = await conn.list_sessions(cwd=cwd)
        assert sid in [s.session_id for s in listed.sessions]
        [mine] = [s for s in listed.sessions if s.session_id == sid]
        assert mine.cwd == cwd and mine.title and mine.updated_at
        running = asyncio.create_task(
            conn.prompt(session_id=sid, prompt=[text_block("go " + script_marker(name))])
        )
        await scripted_model.wait_for_async(
            lambda reqs: any(r.script == f"{name}-a" and r.ended_at is None for r in reqs),
            timeout=60,
        )
        await conn.close_session(session_id=sid)
        assert (await asyncio.wait_for(running, 60)).stop_reason == "cancelled"
        children = [c.id for c in await oc.children(sid)]
        busy = set(await oc.status())
        assert not busy & {sid, *children}, busy
