"""What a Stop button's page relies on, against a real ``opencode serve``: the live tree
with each session's status, a subscriber that joins mid-turn and is replayed exactly what
it missed, and the Stop's progress on the stream."""

from __future__ import annotations

import asyncio
import json

import pytest

from adapter import OpenCodeAdapter, TurnStopped
from adapter.testing import RealOpenCodeServer, ScriptedModelServer
from adapter.testing.model import Hang, Text, ToolCall, ToolCalls, script_marker, task_call
from tests.adapter_support import drain

pytestmark = pytest.mark.real


async def test_a_late_subscriber_the_tree_and_the_stop_on_the_stream(
    real_server: RealOpenCodeServer, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    name = unique_name
    scripted_model.script(f"{name}-leaf", [Hang()])
    scripted_model.script(f"{name}-mid", [ToolCalls([task_call("mid", f"{name}-leaf")])])
    scripted_model.script(
        name,
        [
            ToolCalls(
                [ToolCall("bash", {"command": "echo finished-before-stop", "description": "echo"})]
            ),
            ToolCalls([task_call("top", f"{name}-mid")]),
            Text("never reached"),
        ],
    )
    async with OpenCodeAdapter(real_server.base_url, directory=str(real_server.directory)) as oc:
        info = await oc.start_session(name, title=name)
        everything = oc.events(name)
        turn = await oc.send_turn(name, "go " + script_marker(name))
        await scripted_model.wait_for_async(
            lambda reqs: any(r.script == f"{name}-leaf" and r.open for r in reqs), timeout=60
        )
        # The model saw the leaf's request; the adapter learns the children from the
        # event stream, later under load.
        async with asyncio.timeout(60):
            while len((tree := await oc.session_tree(name)).sessions) < 3:
                await asyncio.sleep(0.05)
        assert tree.root_id == info.session_id
        assert [n.depth for n in tree] == [0, 1, 2]
        assert set(tree.busy) == {n.session_id for n in tree}, tree

        seen = await drain(everything)
        started = next(e for e in seen if e.type == "turn.started")
        late = oc.events(name, after=started.event_id)
        result = await oc.interrupt_turn(name)
        assert result.stop is not None and result.stop.ok

        live = await drain(everything)
        resumed = await drain(late)
        whole = seen + live
        cut = whole.index(started)
        assert [e.event_id for e in resumed] == [e.event_id for e in whole[cut + 1 :]]
        types = [e.type for e in live]
        assert types.count("turn.stopping") == 1 and types.count("turn.aborted") == 1
        assert types.index("turn.stopping") < types.index("turn.aborted")
        stopping = next(e for e in live if e.type == "turn.stopping")
        assert stopping.turn_id == turn.turn_id
        assert types[-1] == "turn.stopped" and "turn.stop_failed" not in types
        assert isinstance(live[-1], TurnStopped) and live[-1].stop is result.stop
        for event in whole:
            assert json.loads(json.dumps(event.to_dict()))["event_id"] == event.event_id
        assert any(
            c.output and "finished-before-stop" in c.output for c in result.partial.tool_calls
        )
        assert (await oc.session_tree(name)).busy == ()
