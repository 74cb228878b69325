"""The context meter on a real ``opencode serve``: ``TurnUsage.context_tokens`` equals
what OpenCode's own UI shows for the root, computed here from the stored messages the
way its TUI does (the last assistant message with output: input + output + reasoning +
cache read + cache write), and ``context_limit`` is the configured ``limit.context``
(128000 in the test configuration).

The scripted model reports the prompt tokens it is told (``prompt_tokens``), so the root's
steps and its subagent's have contexts far apart: a meter that summed the steps, or
counted the subagent's, would show it.
"""

from __future__ import annotations

import pytest

from adapter import OpenCodeAdapter, OpenCodeClient
from adapter.testing import RealOpenCodeServer, ScriptedModelServer
from adapter.testing.model import Hang, Text, ToolCall, ToolCalls, script_marker, task_call
from tests.adapter_support import Recorder
from tests.real.waits import a_hang_open

pytestmark = pytest.mark.real

#: ``limit.context`` of the test configuration's model (``opencode_config``).
LIMIT = 128000


async def uis_meter(client: OpenCodeClient, session_id: str) -> int | None:
    """What OpenCode's TUI shows for a session: its last assistant message with output."""
    shown = None
    for message in await client.messages(session_id):
        info = message.info.raw
        tokens = info.get("tokens") or {}
        if info.get("role") == "assistant" and tokens.get("output", 0) > 0:
            cache = tokens.get("cache") or {}
            shown = (
                tokens["input"]
                + tokens["output"]
                + tokens.get("reasoning", 0)
                + cache.get("read", 0)
                + cache.get("write", 0)
            )
    return shown


async def test_a_turns_meter_is_the_roots_last_step_as_the_ui_counts_it(
    real_server: RealOpenCodeServer,
    scripted_model: ScriptedModelServer,
    opencode_client: OpenCodeClient,
    unique_name: str,
) -> None:
    child, root = f"{unique_name}-child", f"{unique_name}-root"
    scripted_model.script(child, [Text("child done", prompt_tokens=90000)])
    scripted_model.script(
        root,
        [
            ToolCalls([task_call("look", child)], prompt_tokens=5000),
            Text("root done", prompt_tokens=7000),
        ],
    )
    async with OpenCodeAdapter(real_server.base_url, directory=str(real_server.directory)) as oc:
        rec = Recorder(oc)
        session_id = (await oc.start_session("t", title="meter")).session_id
        await oc.send_turn("t", "go " + script_marker(root))
        done = await rec.wait_for("turn.completed", timeout=60)
        shown = await uis_meter(opencode_client, session_id)
        await rec.close()

    usage = done.usage
    assert done.state == "completed"
    assert usage.context_tokens == shown
    assert shown is not None and 7000 <= shown < 7100  # the last root step's, not the child's
    assert usage.context_limit == LIMIT
    assert rec.of("turn.usage", "t")[-1].usage == usage


async def test_a_stopped_turns_meter_is_its_last_finished_root_step(
    real_server: RealOpenCodeServer,
    scripted_model: ScriptedModelServer,
    opencode_client: OpenCodeClient,
    unique_name: str,
) -> None:
    bash = ToolCall("bash", {"command": "echo hi", "description": "echo"})
    scripted_model.script(unique_name, [ToolCalls([bash], prompt_tokens=3000), Hang("x")])
    async with OpenCodeAdapter(real_server.base_url, directory=str(real_server.directory)) as oc:
        rec = Recorder(oc)
        session_id = (await oc.start_session("t", title="meter stop")).session_id
        await oc.send_turn("t", "go " + script_marker(unique_name))
        await a_hang_open(scripted_model, unique_name)
        result = await oc.interrupt_turn("t")
        aborted = await rec.wait_for("turn.aborted", timeout=30)
        shown = await uis_meter(opencode_client, session_id)
        await rec.close()

    usage = result.usage
    assert aborted.usage == usage
    assert usage.context_tokens == shown
    assert shown is not None and 3000 <= shown < 3100
    assert usage.context_limit == LIMIT
    assert result.to_dict()["partial"]["usage"]["context_limit"] == LIMIT
