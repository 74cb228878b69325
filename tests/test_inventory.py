"""``OpenCodeAdapter.inventory``: each part parsed from the measured shapes, a failing
part reported without losing the others, the whole read bounded by the request timeout,
and the fake serving the real server's defaults."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from adapter import (
    AgentInfo,
    CommandInfo,
    ModelCost,
    ModelInfo,
    OpenCodeAdapter,
    OpenCodeClient,
    RetryPolicy,
    ServerInventory,
    SkillInfo,
    Timeouts,
)
from adapter.testing import FakeOpenCodeServer

FIXTURE = Path(__file__).parent / "fixtures" / "inventory-1.18.34.json"
MEASURED: dict[str, Any] = json.loads(FIXTURE.read_text(encoding="utf-8"))
BASE = "http://opencode.test"


def serve_measured(router: respx.MockRouter, **override: httpx.Response) -> None:
    """Every inventory route answers what 1.18.34 answered (``override``: by route)."""
    for route in ("/config/providers", "/agent", "/command", "/skill", "/mcp", "/global/health"):
        answer = override.get(route) or httpx.Response(200, json=MEASURED[f"GET {route}"])
        router.get(f"{BASE}{route}").mock(return_value=answer)


async def read(**client_options: Any) -> ServerInventory:
    async with OpenCodeClient(BASE, **client_options) as client:
        return await client.inventory()


async def test_each_part_is_read_from_the_measured_shapes(router: respx.MockRouter) -> None:
    serve_measured(router)
    inventory = await read()
    assert inventory.models == (
        ModelInfo(
            id="fake/fake-model",
            name="Fake model",
            context_limit=128000,
            output_limit=4096,
            input_modalities=("text",),
            cost=ModelCost(input=0.0, output=0.0, cache_read=0.0, cache_write=0.0),
        ),
    )
    modes = {agent.name: agent.mode for agent in inventory.agents}
    assert modes == {
        "build": "primary",
        "compaction": "primary",
        "explore": "subagent",
        "general": "subagent",
        "plan": "primary",
        "summary": "primary",
        "title": "primary",
    }
    assert AgentInfo("plan", "primary", "Plan mode. Disallows all edit tools.") in inventory.agents
    assert CommandInfo("hello", "Greets") in inventory.commands
    assert [c.name for c in inventory.commands] == ["init", "review", "hello", "customize-opencode"]
    assert [s.name for s in inventory.skills] == ["customize-opencode"]
    assert isinstance(inventory.skills[0], SkillInfo)
    assert dict(inventory.mcp) == {"off": "disabled", "broken": "failed"}
    assert dict(inventory.mcp_errors) == {"broken": "MCP error -32000: Connection closed"}
    assert inventory.version == "1.18.34"
    assert dict(inventory.errors) == {}
    as_json = json.loads(json.dumps(inventory.to_dict()))
    assert list(as_json) == [
        "models",
        "agents",
        "commands",
        "skills",
        "mcp",
        "mcp_errors",
        "version",
        "errors",
    ]
    assert as_json["models"][0]["cost"]["cache_read"] == 0.0
    assert as_json["mcp_errors"] == {"broken": "MCP error -32000: Connection closed"}


async def test_one_failing_part_is_reported_and_the_others_kept(
    router: respx.MockRouter,
) -> None:
    serve_measured(router, **{"/skill": httpx.Response(500, json={"name": "UnknownError"})})
    inventory = await read(retry=RetryPolicy(attempts=1))
    assert inventory.skills == ()
    assert set(inventory.errors) == {"skills"}
    assert "500" in inventory.errors["skills"]
    assert inventory.models and inventory.agents and inventory.commands
    assert inventory.version == "1.18.34"


async def test_a_part_of_the_wrong_shape_is_an_error_of_that_part(
    router: respx.MockRouter,
) -> None:
    serve_measured(
        router,
        **{
            "/agent": httpx.Response(200, json={"not": "a list"}),
            "/config/providers": httpx.Response(200, text="{not json"),
        },
    )
    inventory = await read()
    assert set(inventory.errors) == {"agents", "models"}
    assert inventory.agents == () and inventory.models == ()
    assert inventory.commands[0].name == "init"


async def test_unknown_fields_and_malformed_entries_are_ignored(
    router: respx.MockRouter,
) -> None:
    providers = {
        "providers": [
            {
                "id": "p",
                "future": [1, 2],
                "models": {
                    "m": {
                        "name": "M",
                        "limit": {"context": 1000, "output": "lots"},
                        "cost": {"input": 3, "cache": None},
                        "capabilities": {"input": {"text": True, "image": True, "pdf": "yes"}},
                        "newField": {"x": 1},
                    },
                    "broken": "not an object",
                },
            },
            "not a provider",
            {"models": {}},
        ],
        "default": {},
    }
    serve_measured(
        router,
        **{
            "/config/providers": httpx.Response(200, json=providers),
            "/agent": httpx.Response(
                200,
                json=[
                    {"name": "a", "mode": "all", "extra": True},
                    {"name": "b", "mode": "sideways"},
                    {"mode": "primary"},
                    7,
                ],
            ),
            "/mcp": httpx.Response(
                200,
                json={"x": {"status": "connected", "error": 7}, "y": "bad", "z": {"error": "e"}},
            ),
        },
    )
    inventory = await read()
    assert inventory.models == (
        ModelInfo("p/m", "M", 1000, None, ("text", "image"), ModelCost(input=3.0)),
    )
    assert inventory.agents == (AgentInfo("a", "all", None),)
    assert dict(inventory.mcp) == {"x": "connected"}
    assert dict(inventory.mcp_errors) == {}
    assert dict(inventory.errors) == {}


async def test_directory_is_sent_as_the_header(fake: FakeOpenCodeServer) -> None:
    seen: list[tuple[str, str | None]] = []

    async def note(request: httpx.Request) -> None:
        seen.append((request.url.path, request.headers.get("x-opencode-directory")))

    for path in ("/config/providers", "/agent", "/command", "/skill", "/mcp", "/global/health"):
        fake.on("GET", path, note)
    async with OpenCodeAdapter(fake.base_url, transport=fake.transport) as oc:
        seen.clear()
        await oc.inventory(directory="/srv/other")
        assert len(seen) == 6 and {d for _, d in seen} == {"/srv/other"}
        seen.clear()
        await oc.inventory()
        assert len(seen) == 6 and {d for _, d in seen} == {None}


async def test_the_read_is_bounded_by_the_request_timeout(fake: FakeOpenCodeServer) -> None:
    hold = fake.hold("GET", "/skill")
    try:
        async with OpenCodeAdapter(
            fake.base_url, transport=fake.transport, timeouts=Timeouts(request=0.3)
        ) as oc:
            inventory = await oc.inventory()
    finally:
        hold.release()
    assert set(inventory.errors) == {"skills"}
    assert "timed out" in inventory.errors["skills"]
    assert inventory.models and inventory.agents


async def test_the_fake_serves_the_real_defaults(fake: FakeOpenCodeServer) -> None:
    async with OpenCodeAdapter(fake.base_url, transport=fake.transport) as oc:
        inventory = await oc.inventory()
    assert dict(inventory.errors) == {}
    assert inventory.models == (
        ModelInfo("fake/fake-model", "Fake model", 128000, 4096, ("text",), ModelCost(0, 0, 0, 0)),
    )
    real = [(a["name"], a["mode"]) for a in MEASURED["GET /agent"]]
    assert [(a.name, a.mode) for a in inventory.agents] == real
    assert [c.name for c in inventory.commands] == ["init", "review", "customize-opencode"]
    assert [s.name for s in inventory.skills] == ["customize-opencode"]
    assert dict(inventory.mcp) == {} and inventory.version == "1.18.34"


async def test_the_fake_inventory_is_configurable(fake: FakeOpenCodeServer) -> None:
    fake.model_cost = {"input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75}
    fake.model_modalities = frozenset({"text", "image"})
    fake.inventory.context_limit = 2000
    fake.inventory.commands.append({"name": "hello", "description": "Greets", "template": "Hi"})
    fake.inventory.mcp["docs"] = {"status": "connected"}
    async with OpenCodeAdapter(fake.base_url, transport=fake.transport) as oc:
        inventory = await oc.inventory()
    (model,) = inventory.models
    assert model.context_limit == 2000
    assert model.cost == ModelCost(3.0, 15.0, 0.3, 3.75)
    assert set(model.input_modalities) == {"text", "image"}
    assert CommandInfo("hello", "Greets") in inventory.commands
    assert dict(inventory.mcp) == {"docs": "connected"}


@pytest.mark.parametrize("directory", [None, "/srv/x"])
async def test_a_closed_adapter_refuses(fake: FakeOpenCodeServer, directory: str | None) -> None:
    oc = OpenCodeAdapter(fake.base_url, transport=fake.transport)
    with pytest.raises(Exception, match="async with"):
        await oc.inventory(directory=directory)
