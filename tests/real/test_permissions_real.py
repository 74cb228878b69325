"""Permission presets against a real ``opencode serve`` (``docs/adapter.md``,
"Permission modes").

The test server's config allows every tool; measured on 1.18.34, a session's rules
are checked after the config's and the last matching rule wins, so ``ask`` makes a
``bash`` call ask and ``full-access`` does not, and a live change (``PATCH``, which
appends) takes effect on the next call.
"""

from __future__ import annotations

import pytest

from adapter import OpenCodeAdapter
from adapter.testing import RealOpenCodeServer, ScriptedModelServer
from adapter.testing.model import Text, ToolCall, ToolCalls, script_marker
from tests.adapter_support import Recorder

pytestmark = pytest.mark.real


def bash_then_text(model: ScriptedModelServer, name: str, command: str) -> None:
    call = ToolCall("bash", {"command": command, "description": "run it"})
    model.script(name, [ToolCalls([call]), Text("ran")])


@pytest.mark.parametrize(
    ("preset", "asks"), [("ask", True), ("auto-edit", True), ("full-access", False)]
)
async def test_a_preset_decides_whether_bash_asks(
    real_server: RealOpenCodeServer,
    scripted_model: ScriptedModelServer,
    unique_name: str,
    preset: str,
    asks: bool,
) -> None:
    bash_then_text(scripted_model, unique_name, "echo preset")
    async with OpenCodeAdapter(real_server.base_url, directory=str(real_server.directory)) as oc:
        rec = Recorder(oc)
        info = await oc.start_session("t", title=preset, permissions=preset)
        assert info.permissions == preset
        await oc.send_turn("t", "go " + script_marker(unique_name))
        if asks:
            opened = await rec.wait_for("request.opened", timeout=30)
            assert (opened.permission, opened.patterns) == ("bash", ("echo preset",))
            await oc.respond_to_request("t", opened.request_id, "accept")
        ended = await rec.wait_for("turn.completed", timeout=30)
        assert ended.state == "completed"
        assert len(rec.of("request.opened")) == int(asks)
        await rec.close()


async def test_a_live_change_and_a_resume_re_apply_the_mode(
    real_server: RealOpenCodeServer, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    # The scripted model answers by the number of assistant messages so far: the second
    # turn's first request is step 2.
    calls = [ToolCall("bash", {"command": f"echo {n}", "description": "run"}) for n in (1, 2)]
    steps = [ToolCalls([calls[0]]), Text("ran"), ToolCalls([calls[1]]), Text("ran")]
    scripted_model.script(unique_name, steps)
    async with OpenCodeAdapter(real_server.base_url, directory=str(real_server.directory)) as oc:
        rec = Recorder(oc)
        info = await oc.start_session("t", title="live", permissions="ask")
        assert (await oc.set_permissions("t", "full-access")).permissions == "full-access"
        await oc.send_turn("t", "go " + script_marker(unique_name))
        await rec.wait_for("turn.completed", timeout=30)
        assert rec.of("request.opened") == []
        await oc.stop_session("t")
        resumed = await oc.start_session("t2", resume=info.resume, permissions="ask")
        assert resumed.session_id == info.session_id and resumed.permissions == "ask"
        await oc.send_turn("t2", "again")
        opened = await rec.wait_for("request.opened", timeout=30)
        assert (opened.thread_id, opened.patterns) == ("t2", ("echo 2",))
        await oc.respond_to_request("t2", opened.request_id, "accept")
        ended = await rec.wait_for("turn.completed", lambda e: e.thread_id == "t2", timeout=30)
        assert ended.state == "completed"
        await rec.close()
