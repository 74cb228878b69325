"""Permission presets against a real ``opencode serve`` (``docs/adapter.md``,
"Permission modes").

The test server's config allows every tool; measured on 1.18.34, a session's rules
are checked after the config's and the last matching rule wins, so ``ask`` makes a
``bash`` call ask and ``full-access`` does not, and a live change (``PATCH``, which
appends) takes effect on the next call.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from adapter import OpenCodeAdapter, PermissionPreset
from adapter.testing import RealOpenCodeServer, ScriptedModelServer, fake
from adapter.testing.model import Step, Text, ToolCall, ToolCalls, script_marker
from tests.adapter_support import Recorder
from tests.real.conftest import directory_http

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
    preset: PermissionPreset,
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
    steps: list[Step] = [ToolCalls([calls[0]]), Text("ran"), ToolCalls([calls[1]]), Text("ran")]
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


def _rule(permission: str, pattern: str, action: str) -> dict[str, str]:
    return {"permission": permission, "pattern": pattern, "action": action}


RULE_SETS: list[list[dict[str, str]] | None] = [
    None,
    [_rule("bash", "*", "ask")],
    [_rule("*", "*", "ask")],
    [_rule("*", "*", "allow")],
    [_rule("bash", "*", "allow"), _rule("bash", "*", "ask")],
    [_rule("bash", "*", "ask"), _rule("bash", "*", "allow")],
    [_rule("bash", "*", "ask"), _rule("bash", "echo *", "allow")],
    [_rule("bash", "*", "ask"), _rule("bash", "rm *", "allow")],
    [_rule("bash", "echo *", "deny")],
    [_rule("edit", "*", "ask")],
]


async def _asks_and_outcome(
    http: httpx.AsyncClient, rules: list[dict[str, str]] | None, text: str
) -> tuple[list[tuple[str, list[str]]], list[tuple[str, str, bool]]]:
    """Run one bash call under ``rules``; the requests asked (each replied ``once``) and
    the tool parts' (tool, status, error names a rule)."""
    body = {"title": "rules"} if rules is None else {"title": "rules", "permission": rules}
    session_id = (await http.post("/session", json=body)).json()["id"]
    prompt = {"parts": [{"type": "text", "text": text}]}
    assert (await http.post(f"/session/{session_id}/prompt_async", json=prompt)).status_code == 204
    asked: list[tuple[str, list[str]]] = []
    async with asyncio.timeout(30):
        while True:
            await asyncio.sleep(0.1)
            pending = [
                r for r in (await http.get("/permission")).json() if r["sessionID"] == session_id
            ]
            for request in pending:
                asked.append((request["permission"], request["patterns"]))
                await http.post(f"/permission/{request['id']}/reply", json={"reply": "once"})
            if pending or session_id in (await http.get("/session/status")).json():
                continue
            messages = (await http.get(f"/session/{session_id}/message")).json()
            last = messages[-1]["info"] if messages else {}
            if last.get("role") == "assistant" and last.get("finish") == "stop":
                break
    tools = [
        (p["tool"], p["state"]["status"], "specified a rule" in str(p["state"].get("error")))
        for m in messages
        for p in m["parts"]
        if p["type"] == "tool"
    ]
    return asked, tools


async def test_the_fake_enforces_session_rules_as_the_real_server(
    real_server: RealOpenCodeServer, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    """The test server's config allows everything: a plain fake ``Tool`` step."""
    call = ToolCall("bash", {"command": "echo hi", "description": "say hi"})
    scripted_model.script(unique_name, [ToolCalls([call]), Text("ran")])
    fake_steps: list[fake.Step] = [fake.Tool("bash", {"command": "echo hi"}, output="hi\n")]
    text = "go " + script_marker(unique_name)
    results: dict[str, list[Any]] = {"real": [], "fake": []}
    async with fake.FakeOpenCodeServer() as fake_server, fake_server.client() as fake_http:
        fake_server.script(unique_name, [*fake_steps, fake.Text("ran")])
        async with directory_http(real_server, timeout=30.0) as real_http:
            for target, http in (("real", real_http), ("fake", fake_http)):
                for rules in RULE_SETS:
                    results[target].append(await _asks_and_outcome(http, rules, text))
    assert results["real"][1] == ([("bash", ["echo hi"])], [("bash", "completed", False)])
    assert results["real"][-2] == ([], [("bash", "error", True)])
    assert results["fake"] == results["real"]
