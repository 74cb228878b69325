"""Recording a real server's native stream (B93), and replaying the recording into the fake:
what a bug report's recording is for. Checked on a real ``opencode serve``: the recording
holds the whole tree's events, the types the adapter does not map included, and the fake,
fed the recording, makes the adapter emit the same canonical events."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapter import (
    NativeFileRecorder,
    NativeRecord,
    OpenCodeAdapter,
    Timeouts,
    read_native_recording,
)
from adapter.testing import RealOpenCodeServer, ScriptedModelServer
from adapter.testing.fake import FakeOpenCodeServer
from adapter.testing.model import Text, ToolCall, ToolCalls, script_marker, task_call
from tests.adapter_support import Recorder

pytestmark = pytest.mark.real

T = "thread"


def comparable(events: list[Any], root: str) -> list[dict[str, Any]]:
    """What a host sees of the thread, without event ids, times, turn ids and the root's id."""
    varying = {"event_id", "created_at", "turn_id"}
    # turn.usage is throttled in time: where it falls depends on the pace of the events,
    # so only the last one (the totals) is compared.
    usage = [e for e in events if e.type == "turn.usage"][-1:]
    shown = [
        {k: v for k, v in e.to_dict().items() if k not in varying}
        for e in [*(e for e in events if e.type != "turn.usage"), *usage]
    ]
    result: list[dict[str, Any]] = json.loads(json.dumps(shown).replace(root, "ROOT"))
    return result


async def test_a_real_turn_is_recorded_whole_and_its_replay_gives_the_same_events(
    real_server: RealOpenCodeServer,
    scripted_model: ScriptedModelServer,
    unique_name: str,
    tmp_path: Path,
) -> None:
    name = unique_name
    todos = [{"content": "look around", "status": "in_progress", "priority": "high"}]
    scripted_model.script(f"{name}-child", [Text("child done")])
    scripted_model.script(
        name,
        [
            ToolCalls([ToolCall("todowrite", {"todos": todos})]),
            ToolCalls([ToolCall("bash", {"command": "echo recorded", "description": "echo"})]),
            ToolCalls([task_call("look", f"{name}-child")]),
            Text("root done"),
        ],
    )
    path = tmp_path / "real.jsonl"
    with NativeFileRecorder(path) as recorder:
        async with OpenCodeAdapter(
            real_server.base_url, directory=str(real_server.directory), native_recorder=recorder
        ) as oc:
            rec = Recorder(oc)
            recorded_root = (await oc.start_session(T, title=name)).session_id
            turn = await oc.send_turn(T, "go " + script_marker(name))
            await rec.wait_for("turn.completed", lambda e: e.turn_id == turn.turn_id, timeout=60)
            child = (await rec.wait_for("child.started")).session_id
            await rec.close()
    original = comparable([e for e in rec.events if e.thread_id == T], recorded_root)

    records = [r for r in read_native_recording(path) if isinstance(r, NativeRecord)]
    assert {r.thread_id for r in records} == {T}
    assert {r.session_id for r in records} == {recorded_root, child}
    types = {r.event["type"] for r in records}
    # Types the adapter maps to no canonical event are recorded too.
    assert {"todo.updated", "session.diff", "message.updated"} <= types, types
    recorded_user = next(
        r.event["properties"]["info"]["id"]
        for r in records
        if r.event["type"] == "message.updated" and r.event["properties"]["info"]["role"] == "user"
    )

    async with FakeOpenCodeServer() as fake:
        prompts: list[str] = []

        async def accept_only(request: httpx.Request) -> httpx.Response:
            prompts.append(json.loads(request.content)["messageID"])
            return httpx.Response(204)

        fake.on("POST", "/session/{id}/prompt_async", accept_only)
        async with OpenCodeAdapter(
            fake.base_url, transport=fake.transport, timeouts=Timeouts(connect=5.0)
        ) as oc:
            rec = Recorder(oc)
            root = (await oc.start_session(T, title=name)).session_id
            await oc.send_turn(T, "go " + script_marker(name))
            fake.replay_native(records, ids={recorded_root: root, recorded_user: prompts[0]})
            await rec.wait_for("turn.completed", timeout=10)
            await rec.close()
    assert comparable([e for e in rec.events if e.thread_id == T], root) == original
