"""The ACP agent's host features: what a session offers and how a client changes it, through
the SDK's client on the fake OpenCode.

``session/new`` answers with ``configOptions`` (a model select from ``inventory()``, an
agent select of the primary agents, the permission mode) and ``modes`` (the agents
again, for clients that only know modes); ``available_commands_update`` follows with the
server's slash commands, and a prompt ``/name args`` of a known command runs it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from acp import RequestError, text_block
from acp.schema import (
    AcpMcpServer,
    EnvVariable,
    HttpHeader,
    HttpMcpServer,
    McpServerStdio,
    SseMcpServer,
)

from adapter import OpenCodeAdapter
from adapter.testing import FakeOpenCodeServer
from adapter.testing.fake import Text
from tests.acp.client_side import Harness
from tests.adapter_support import SentBodies

PROMPT = "/session/{id}/prompt_async"
COMMAND = "/session/{id}/command"


def options_of(config_options: Any) -> dict[str, Any]:
    unwrapped = [getattr(o, "root", o) for o in config_options]
    return {o.id: o for o in unwrapped}


async def new(h: Harness) -> tuple[str, Any]:
    await h.conn.initialize(protocol_version=1)
    response = await h.conn.new_session(cwd="/tmp/project", mcp_servers=[])
    return response.session_id, response


async def test_new_session_offers_models_primary_agents_permission_modes_and_modes(
    acp_client: Harness,
) -> None:
    _sid, response = await new(acp_client)
    options = options_of(response.config_options)
    assert list(options) == ["model", "agent", "permission_mode"]
    model, agent, permission = options["model"], options["agent"], options["permission_mode"]
    assert [o.value for o in model.options] == ["default", "fake/fake-model"]
    assert model.current_value == "default" and model.category == "model"
    assert [o.value for o in agent.options] == ["build", "plan"]  # no hidden, no subagent
    assert agent.current_value == "build" and agent.category == "mode"
    values = [o.value for o in permission.options]
    assert values == ["default", "ask", "auto-edit", "full-access"]
    assert permission.current_value == "default"
    modes = response.modes
    assert [m.id for m in modes.available_modes] == ["build", "plan"]
    assert modes.current_mode_id == "build"


async def test_set_mode_plan_makes_the_next_prompt_carry_agent_plan(
    acp_client: Harness, fake: FakeOpenCodeServer
) -> None:
    fake.script("ok", [Text("fine")])
    sid, _ = await new(acp_client)
    sent = SentBodies(fake, PROMPT)
    await acp_client.conn.set_session_mode(session_id=sid, mode_id="plan")
    await acp_client.conn.prompt(session_id=sid, prompt=[text_block("[[script:ok]]")])
    assert sent[-1]["agent"] == "plan"
    updates = [
        u for _, u in acp_client.client.updates if u.session_update == "config_option_update"
    ]
    assert options_of(updates[-1].config_options)["agent"].current_value == "plan"


async def test_set_config_option_changes_agent_model_and_permission_mode(
    acp_client: Harness, fake: FakeOpenCodeServer, oc: OpenCodeAdapter
) -> None:
    fake.script("ok", [Text("fine")])
    sid, _ = await new(acp_client)
    sent = SentBodies(fake, PROMPT)
    answer = await acp_client.conn.set_config_option(
        session_id=sid, config_id="agent", value="plan"
    )
    assert options_of(answer.config_options)["agent"].current_value == "plan"
    modes = [u for _, u in acp_client.client.updates if u.session_update == "current_mode_update"]
    assert modes[-1].current_mode_id == "plan"
    await acp_client.conn.set_config_option(
        session_id=sid, config_id="model", value="fake/fake-model"
    )
    answer = await acp_client.conn.set_config_option(
        session_id=sid, config_id="permission_mode", value="full-access"
    )
    permission = options_of(answer.config_options)["permission_mode"]
    assert permission.current_value == "full-access"
    # The server's configuration cannot be restored on a live session: no longer offered.
    assert [o.value for o in permission.options] == ["ask", "auto-edit", "full-access"]
    with pytest.raises(RequestError):
        await acp_client.conn.set_config_option(
            session_id=sid, config_id="permission_mode", value="default"
        )
    [info] = [i for i in oc.list_sessions() if i.session_id == sid]
    assert info.permissions == "full-access"
    await acp_client.conn.prompt(session_id=sid, prompt=[text_block("[[script:ok]]")])
    assert sent[-1]["agent"] == "plan"
    assert sent[-1]["model"] == {"providerID": "fake", "modelID": "fake-model"}


@pytest.mark.parametrize(
    ("config_id", "value"),
    [
        ("agent", "explore"),  # a subagent is no mode of the root
        ("agent", "title"),  # hidden
        ("model", "nobody/none"),
        ("permission_mode", "yolo"),
        ("nothing", "plan"),
        ("agent", "x" * 10_000),
    ],
)
async def test_set_config_option_refuses_what_was_not_offered(
    acp_client: Harness, fake: FakeOpenCodeServer, config_id: str, value: str
) -> None:
    sid, _ = await new(acp_client)
    before = len(fake.requests)
    with pytest.raises(RequestError) as refused:
        await acp_client.conn.set_config_option(session_id=sid, config_id=config_id, value=value)
    assert refused.value.code == -32602
    assert len(fake.requests) == before, "nothing reached OpenCode"


async def test_set_mode_and_config_refuse_unknown_sessions_and_modes(acp_client: Harness) -> None:
    sid, _ = await new(acp_client)
    for call in (
        acp_client.conn.set_session_mode(session_id=sid, mode_id="explore"),
        acp_client.conn.set_session_mode(session_id="ses_nobody", mode_id="plan"),
        acp_client.conn.set_config_option(session_id="ses_nobody", config_id="agent", value="plan"),
    ):
        with pytest.raises(RequestError) as refused:
            await call
        assert refused.value.code == -32602


async def test_available_commands_follow_session_new_and_a_slash_prompt_runs_the_command(
    acp_client: Harness, fake: FakeOpenCodeServer
) -> None:
    fake.inventory.commands.append(
        {"name": "hello", "description": "Greets", "template": "Say hello to $ARGUMENTS"}
    )
    sid, _ = await new(acp_client)
    await acp_client.conn.set_session_mode(session_id=sid, mode_id="plan")

    async with asyncio.timeout(5):
        update = await acp_client.client.wait_for_update(sid, "available_commands_update")
    listed = {c.name: c for c in update.available_commands}
    assert {"init", "review", "hello"} <= set(listed)
    assert listed["hello"].description == "Greets"
    assert listed["hello"].input is not None
    sent = SentBodies(fake, COMMAND)
    fake.script("cmd", [Text("hello world")])
    response = await acp_client.conn.prompt(
        session_id=sid, prompt=[text_block("/hello the world [[script:cmd]]")]
    )
    assert response.stop_reason == "end_turn"
    assert (sent[0]["command"], sent[0]["arguments"]) == ("hello", "the world [[script:cmd]]")
    assert sent[0]["agent"] == "plan"
    assert acp_client.client.text() == "hello world"


async def test_a_slash_prompt_of_no_known_command_is_an_ordinary_prompt(
    acp_client: Harness, fake: FakeOpenCodeServer
) -> None:
    fake.script("ok", [Text("fine")])
    sid, _ = await new(acp_client)
    sent = SentBodies(fake, PROMPT)
    commands = SentBodies(fake, COMMAND)
    await acp_client.conn.prompt(
        session_id=sid, prompt=[text_block("/tmp/x is a path [[script:ok]]")]
    )
    assert commands == [] and sent[0]["parts"][0]["text"].startswith("/tmp/x")
    # No agent chosen: none named, so the server's default_agent runs (as before).
    assert "agent" not in sent[0] and "model" not in sent[0]


async def test_mcp_servers_of_session_new_are_added_to_opencode_in_the_cwd(
    acp_client: Harness, fake: FakeOpenCodeServer
) -> None:
    await acp_client.conn.initialize(protocol_version=1)
    init = await acp_client.conn.initialize(protocol_version=1)
    assert init.agent_capabilities is not None
    mcp = init.agent_capabilities.mcp_capabilities
    assert mcp is not None and (mcp.http, mcp.sse) == (True, True)
    servers: list[HttpMcpServer | SseMcpServer | AcpMcpServer | McpServerStdio] = [
        McpServerStdio(
            name="files",
            command="/usr/bin/mcp-files",
            args=["--root", "/tmp"],
            env=[EnvVariable(name="TOKEN", value="t")],
        ),
        HttpMcpServer(
            type="http",
            name="web",
            url="https://mcp.example/api",
            headers=[HttpHeader(name="Authorization", value="Bearer x")],
        ),
        SseMcpServer(type="sse", name="events", url="https://mcp.example/sse", headers=[]),
        AcpMcpServer(type="acp", name="inproc", server_id="s1"),
    ]
    await acp_client.conn.new_session(cwd="/tmp/project", mcp_servers=servers)
    added = fake.inventory.added["/tmp/project"]
    assert added["files"] == {
        "type": "local",
        "command": ["/usr/bin/mcp-files", "--root", "/tmp"],
        "environment": {"TOKEN": "t"},
    }
    assert added["web"] == {
        "type": "remote",
        "url": "https://mcp.example/api",
        "headers": {"Authorization": "Bearer x"},
    }
    assert added["events"] == {"type": "remote", "url": "https://mcp.example/sse"}
    assert "inproc" not in added  # OpenCode has no ACP transport: logged, skipped


async def test_an_mcp_server_opencode_refuses_does_not_fail_the_session(
    acp_client: Harness, fake: FakeOpenCodeServer
) -> None:
    await acp_client.conn.initialize(protocol_version=1)
    bad = McpServerStdio(name="x" * 300, command="", args=[], env=[])
    response = await acp_client.conn.new_session(cwd="/tmp/project", mcp_servers=[bad])
    assert response.session_id in fake.sessions
