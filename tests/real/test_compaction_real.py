"""Compaction against a real ``opencode serve``: what the host is told.

A summarize sent while a tool runs (``summarize_thread``): OpenCode 1.18.34 ends the
run once that tool step finished, writes the summary, then goes idle. The host sees
``thread.compacted`` (manual, with the summary's text) and the turn ends
``turn.aborted`` with a ``summarized:`` reason; the agent's next step never runs.
"""

from __future__ import annotations

import asyncio

import pytest

from adapter import OpenCodeAdapter
from adapter.testing import RealOpenCodeServer, ScriptedModelServer
from adapter.testing.model import Text, ToolCall, ToolCalls, script_marker
from tests.adapter_support import Recorder

pytestmark = pytest.mark.real


async def test_a_summarize_during_a_tool_step_ends_the_turn_with_a_reason(
    real_server: RealOpenCodeServer, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    slow = ToolCall("bash", {"command": "sleep 1; echo built", "description": "build"})
    scripted_model.script(unique_name, [ToolCalls([slow], text="working. "), Text("never reached")])
    async with OpenCodeAdapter(real_server.base_url, directory=str(real_server.directory)) as oc:
        rec = Recorder(oc)
        await oc.start_session("t", title="summarize", model="fake/fake-model")
        turn = await oc.send_turn("t", "go " + script_marker(unique_name))
        async with asyncio.timeout(30):
            while not any(e.tool == "bash" for e in rec.of("item.started", "t")):
                await asyncio.sleep(0.02)
        summary = await oc.summarize_thread("t")
        aborted = await rec.wait_for("turn.aborted", timeout=30)
        await rec.wait_for("thread.compacted", timeout=30)
    await rec.close()

    # the summary request carries no tools: the scripted model answers it like a title
    assert summary == scripted_model.title_text
    [compacted] = rec.of("thread.compacted", "t")
    assert compacted.auto is False and compacted.summary == summary
    assert compacted.turn_id == turn.turn_id
    assert aborted.turn_id == turn.turn_id
    assert aborted.reason is not None and aborted.reason.startswith("summarized:")
    assert rec.events.index(compacted) < rec.events.index(aborted)
    assert rec.of("turn.completed", "t") == []
    text = "".join(e.delta for e in rec.of("content.delta", "t") if e.stream == "assistant_text")
    assert text == "working. "
    assert aborted.partial is not None and "never reached" not in aborted.partial.text
    assert [e.status for e in rec.of("item.completed", "t") if e.tool == "bash"] == ["completed"]
