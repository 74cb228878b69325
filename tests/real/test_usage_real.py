"""Usage and cost across the tree on a real ``opencode serve`` 1.18.34.

The server's model has prices (``cost`` per million tokens in ``opencode.json``), so
every finished step has a nonzero cost that OpenCode computed itself. A turn's usage
must equal what the server stores: every assistant message of every session of the
tree, summed per session, read back here the way a host would have to without the
adapter.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import pytest

from adapter import OpenCodeAdapter, OpenCodeClient, SessionUsage, TurnUsage
from adapter.testing import RealOpenCodeServer, ScriptedModelServer
from adapter.testing.model import Hang, Step, Text, ToolCall, ToolCalls, script_marker, task_call
from tests.adapter_support import Recorder
from tests.real.waits import a_hang_open

pytestmark = pytest.mark.real

#: Per million tokens, as in ``opencode.json``.
PRICE = {"input": 1000.0, "output": 2000.0, "cache_read": 100.0, "cache_write": 1250.0}


@pytest.fixture(scope="module")
def priced_server(scripted_model: ScriptedModelServer) -> Iterator[RealOpenCodeServer]:
    """A server whose scripted model has prices (only this module uses it)."""
    with RealOpenCodeServer(
        scripted_model.base_url,
        config_overrides={"provider": {"fake": {"models": {"fake-model": {"cost": PRICE}}}}},
    ) as server:
        yield server


def bash(command: str) -> ToolCalls:
    return ToolCalls([ToolCall("bash", {"command": command, "description": command})])


def message_usage(info: Mapping[str, Any]) -> SessionUsage:
    """A stored assistant message's tokens and cost, read from its ``info`` as the server
    stores it (``tokens.input``, ``tokens.cache.read``, ``cost``, ...), independently of the
    adapter's own reading."""
    tokens = info.get("tokens") or {}
    cache = tokens.get("cache") or {}
    return SessionUsage(
        input_tokens=int(tokens.get("input", 0)),
        output_tokens=int(tokens.get("output", 0)),
        reasoning_tokens=int(tokens.get("reasoning", 0)),
        cache_read_tokens=int(cache.get("read", 0)),
        cache_write_tokens=int(cache.get("write", 0)),
        cost=float(info.get("cost", 0)),
    )


async def stored_usage(client: OpenCodeClient, root: str) -> dict[str, SessionUsage]:
    """Each session of the tree -> the sum of its stored assistant messages."""
    found: dict[str, SessionUsage] = {}
    todo = [root]
    while todo:
        sid = todo.pop()
        total = SessionUsage()
        for message in await client.messages(sid):
            if message.info.role == "assistant":
                total += message_usage(message.info.raw)
        found[sid] = total
        todo += [child.id for child in await client.children(sid)]
    return found


def matching(usage: TurnUsage, stored: dict[str, SessionUsage]) -> bool:
    try:
        assert_matches(usage, stored)
    except AssertionError:
        return False
    return True


def assert_matches(usage: TurnUsage, stored: dict[str, SessionUsage]) -> None:
    assert set(usage.by_session) == set(stored)
    for sid, expected in stored.items():
        got = usage.by_session[sid]
        assert got.cost == pytest.approx(expected.cost)
        assert got == SessionUsage(
            expected.input_tokens,
            expected.output_tokens,
            expected.reasoning_tokens,
            expected.cache_read_tokens,
            expected.cache_write_tokens,
            got.cost,
        )
    assert usage.input_tokens == sum(s.input_tokens for s in stored.values())
    assert usage.output_tokens == sum(s.output_tokens for s in stored.values())
    assert usage.cost == pytest.approx(sum(s.cost for s in stored.values()))
    # OpenCode's own arithmetic, from the configured prices (no cache tokens here).
    assert usage.cost == pytest.approx(
        (usage.input_tokens * PRICE["input"] + usage.output_tokens * PRICE["output"]) / 1e6
    )


def script_tree(model: ScriptedModelServer, name: str, grandchild: list[Step]) -> tuple[str, str]:
    """Root -> child -> grandchild by ``task`` calls, the grandchild scripted as given.

    Returns the grandchild's and the root's script names."""
    gc, child, root = (f"{name}-{n}" for n in ("gc", "child", "root"))
    model.script(gc, grandchild)
    model.script(child, [ToolCalls([task_call("level2", gc)]), Text("child done")])
    model.script(root, [ToolCalls([task_call("level1", child)]), Text("root done")])
    return gc, root


@asynccontextmanager
async def turn_on_a_tree(
    server: RealOpenCodeServer, root: str, title: str
) -> AsyncIterator[tuple[OpenCodeAdapter, OpenCodeClient, Recorder, str]]:
    """Thread ``t`` sent ``root``'s script on ``server``: the adapter, a plain client on the
    same directory, the adapter's recorder and the root session's id."""
    directory = str(server.directory)
    async with (
        OpenCodeAdapter(server.base_url, directory=directory) as oc,
        OpenCodeClient(server.base_url, directory=directory) as client,
    ):
        rec = Recorder(oc)
        session_id = (await oc.start_session("t", title=title)).session_id
        await oc.send_turn("t", "go " + script_marker(root))
        yield oc, client, rec, session_id


async def test_a_nested_trees_usage_is_what_the_server_stores(
    priced_server: RealOpenCodeServer, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    _, root = script_tree(scripted_model, unique_name, [bash("echo gc"), Text("grandchild done")])
    async with turn_on_a_tree(priced_server, root, "usage") as (_oc, client, rec, session_id):
        done = await rec.wait_for("turn.completed", timeout=60)
        stored = await stored_usage(client, session_id)
        await rec.close()

    assert done.state == "completed"
    usage = done.usage
    assert len(stored) == 3 and all(s.cost > 0 for s in stored.values())
    assert_matches(usage, stored)
    assert usage.subagents == 2
    assert usage.complete is True
    assert rec.of("turn.usage", "t")[-1].usage == usage


async def test_a_stopped_trees_usage_counts_the_subagents_spend(
    priced_server: RealOpenCodeServer, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    # The grandchild finishes one step and hangs in its second when the stop comes.
    gc, root = script_tree(scripted_model, unique_name, [bash("echo gc"), Hang("x")])
    async with turn_on_a_tree(priced_server, root, "usage stop") as (oc, client, rec, session_id):
        await a_hang_open(scripted_model, gc)
        result = await oc.interrupt_turn("t")
        aborted = await rec.wait_for("turn.aborted", timeout=30)
        # What the server records late is stored soon after: wait until the stored sums
        # match the turn's usage, then check every 50 ms for 1 s that nothing changes them.
        stored = await stored_usage(client, session_id)
        async with asyncio.timeout(30):
            while not matching(result.usage, stored):
                await asyncio.sleep(0.05)
                stored = await stored_usage(client, session_id)
        quiet_until = time.monotonic() + 1.0
        while time.monotonic() < quiet_until:
            await asyncio.sleep(0.05)
            stored = await stored_usage(client, session_id)
            assert_matches(result.usage, stored)
        await rec.close()

    usage = result.usage
    assert aborted.usage == usage == result.partial.usage
    assert_matches(usage, stored)
    assert usage.complete is False  # the hanging step (and the task steps) never finished
    assert usage.subagents == 2
    grandchild = [sid for sid, s in stored.items() if sid != session_id and s.cost > 0]
    assert grandchild, stored  # a subagent's finished step is counted, with its cost
