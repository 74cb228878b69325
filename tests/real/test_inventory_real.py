"""``OpenCodeAdapter.inventory`` on a real ``opencode serve``: what it reads is what the
server's configuration says, and the fake configured alike reads the same.

Measured on 1.18.34 (2026-12-01, scripted model; sample in
``tests/fixtures/inventory-1.18.34.json``): a model's ``modalities.input`` in
``opencode.json`` is served as ``capabilities.input`` (``{text: true, image: true,
audio: false, ...}``), its ``cost`` with ``cache: {read, write}``; ``GET /mcp`` answers
``{name: {status, error?}}`` (``disabled`` for ``enabled: false``); a ``command`` of the
configuration is listed by ``GET /command`` after the built-ins ``init`` and ``review``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from adapter import CommandInfo, ModelCost, ModelInfo, OpenCodeAdapter, ServerInventory
from adapter.testing import FakeOpenCodeServer, RealOpenCodeServer, ScriptedModelServer

pytestmark = pytest.mark.real

PRICE = {"input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75}
CONFIG: dict[str, Any] = {
    "provider": {
        "fake": {
            "models": {
                "fake-model": {
                    "limit": {"context": 64000, "output": 2048},
                    "cost": PRICE,
                    "modalities": {"input": ["text", "image"], "output": ["text"]},
                }
            }
        }
    },
    "command": {"hello": {"template": "Say hello to $ARGUMENTS", "description": "Greets"}},
    "mcp": {"off": {"type": "local", "command": ["true"], "enabled": False}},
}


@pytest.fixture(scope="module")
def configured_server(scripted_model: ScriptedModelServer) -> Iterator[RealOpenCodeServer]:
    with RealOpenCodeServer(scripted_model.base_url, config_overrides=CONFIG) as server:
        yield server


async def real_inventory(server: RealOpenCodeServer) -> ServerInventory:
    async with OpenCodeAdapter(server.base_url, directory=str(server.directory)) as oc:
        return await oc.inventory()


async def test_inventory_is_what_the_servers_config_says(
    configured_server: RealOpenCodeServer,
) -> None:
    inventory = await real_inventory(configured_server)
    assert dict(inventory.errors) == {}
    assert inventory.models == (
        ModelInfo(
            id="fake/fake-model",
            name="Fake model",
            context_limit=64000,
            output_limit=2048,
            input_modalities=("text", "image"),
            cost=ModelCost(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75),
        ),
    )
    modes = {agent.name: agent.mode for agent in inventory.agents}
    assert modes["build"] == modes["plan"] == "primary"
    assert modes["general"] == modes["explore"] == "subagent"
    assert CommandInfo("hello", "Greets") in inventory.commands
    assert dict(inventory.mcp) == {"off": "disabled"}
    assert inventory.version == configured_server.version


async def test_the_fake_configured_alike_reads_the_same(
    configured_server: RealOpenCodeServer,
) -> None:
    real = await real_inventory(configured_server)
    async with FakeOpenCodeServer() as fake:
        fake.model_cost = PRICE
        fake.model_modalities = frozenset({"text", "image"})
        fake.inventory.context_limit, fake.inventory.output_limit = 64000, 2048
        fake.inventory.commands.insert(2, {"name": "hello", "description": "Greets"})
        fake.inventory.mcp["off"] = {"status": "disabled"}
        async with OpenCodeAdapter(fake.base_url, transport=fake.transport) as oc:
            faked = await oc.inventory()
    assert faked.models == real.models
    assert [(a.name, a.mode) for a in faked.agents] == [(a.name, a.mode) for a in real.agents]
    assert [c.name for c in faked.commands] == [c.name for c in real.commands]
    assert [s.name for s in faked.skills] == [s.name for s in real.skills]
    assert faked.mcp == real.mcp
    assert faked.errors == real.errors
