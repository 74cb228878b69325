"""Rich prompt input against a real ``opencode serve``: what reaches the model.

Measured on 1.18.34 (``docs/adapter.md``, "Prompt input"): a ``text/plain`` file part
is stored as two synthetic text parts plus the file part, and its content reaches the
model; ``system`` is appended to the system prompt of that prompt's model calls;
a tool mapped to ``False`` is left out of the model's tool list.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from adapter import OpenCodeAdapter, file_part
from adapter.testing import RealOpenCodeServer, ScriptedModelServer
from adapter.testing.fake import FakeOpenCodeServer
from adapter.testing.model import ModelRequest, Text, script_marker
from tests.adapter_support import Recorder
from tests.real.conftest import directory_http

pytestmark = pytest.mark.real


def requests_of(model: ScriptedModelServer, name: str) -> list[ModelRequest]:
    return [r for r in model.requests if r.script == name and not r.is_title]


async def test_a_file_system_and_tools_reach_the_model(
    real_server: RealOpenCodeServer,
    scripted_model: ScriptedModelServer,
    unique_name: str,
    tmp_path: Path,
) -> None:
    scripted_model.script(unique_name, [Text("read it")])
    notes = tmp_path / "notes.txt"
    notes.write_text("the secret number is 4242\n")
    async with OpenCodeAdapter(real_server.base_url, directory=str(real_server.directory)) as oc:
        rec = Recorder(oc)
        info = await oc.start_session("t", title="input")
        await oc.send_turn(
            "t",
            ["summarise " + script_marker(unique_name)],
            files=[notes, file_part(b"inline bytes 77", mime="text/plain", filename="b.txt")],
            system="SYSTEM-MARKER-9731",
            tools={"bash": False},
        )
        ended = await rec.wait_for("turn.completed", timeout=30)
        assert ended.state == "completed"
        history = await oc.read_thread("t")
        await rec.close()
    [request] = requests_of(scripted_model, unique_name)
    user = [m for m in request.body["messages"] if m["role"] == "user"][-1]
    texts = [c["text"] for c in user["content"] if c["type"] == "text"]
    assert "the secret number is 4242\n" in texts and "inline bytes 77" in texts
    assert 'Called the Read tool with the following input: {"filePath":"notes.txt"}' in texts
    system = json.dumps([m for m in request.body["messages"] if m["role"] == "system"])
    assert "SYSTEM-MARKER-9731" in system
    tools = {t["function"]["name"] for t in request.body["tools"]}
    assert "bash" not in tools and "read" in tools
    [stored] = [m for m in history.messages if m.info.role == "user"]
    kinds = [(p.type, p.raw.get("synthetic", False)) for p in stored.parts]
    from_file = [("text", True), ("text", True), ("file", False)]
    assert kinds == [("text", False), *from_file, *from_file]
    assert info.session_id == history.session_id


async def test_system_applies_to_its_own_prompt_only(
    real_server: RealOpenCodeServer, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    scripted_model.script(unique_name, [Text("one"), Text("two")])
    async with OpenCodeAdapter(real_server.base_url, directory=str(real_server.directory)) as oc:
        rec = Recorder(oc)
        await oc.start_session("t", title="system")
        await oc.send_turn("t", "first " + script_marker(unique_name), system="ONLY-ONCE-5521")
        await rec.wait_for("turn.completed", timeout=30)
        await oc.send_turn("t", "second")
        await rec.wait_for(
            "turn.completed", lambda e: len(rec.of("turn.completed")) == 2, timeout=30
        )
        await rec.close()
    first, second = requests_of(scripted_model, unique_name)
    systems = [
        json.dumps([m for m in r.body["messages"] if m["role"] == "system"])
        for r in (first, second)
    ]
    assert "ONLY-ONCE-5521" in systems[0] and "ONLY-ONCE-5521" not in systems[1]


def _bodies(directory: Path, name: str) -> list[dict[str, Any]]:
    data = "data:text/plain;base64," + base64.b64encode(b"line1\nline2\n").decode()
    text = {"type": "text", "text": "look " + script_marker(name)}
    on_disk = directory / f"{name}.txt"
    on_disk.write_text("a\nb\n")
    files = [
        {"type": "file", "mime": "text/plain", "url": data, "filename": "dir/a b.txt"},
        {"type": "file", "mime": "text/plain", "url": data},
        {"type": "file", "mime": "text/markdown", "url": data, "filename": "a.md"},
        {"type": "file", "mime": "text/plain", "url": on_disk.as_uri()},
        {"type": "file", "mime": "text/plain", "url": (directory / "missing.txt").as_uri()},
    ]
    options = {"system": "S", "tools": {"bash": False}, "variant": "high"}
    return [{"parts": [text, f]} for f in files] + [{"parts": [text], **options}]


def _comparable(message: Mapping[str, Any]) -> dict[str, Any]:
    info = message["info"]
    return {
        "parts": [
            {k: v for k, v in p.items() if k not in ("id", "sessionID", "messageID")}
            for p in message["parts"]
        ],
        "info": {k: info.get(k) for k in ("system", "tools", "model", "agent")},
    }


async def test_the_fake_stores_prompt_parts_as_the_real_server(
    real_server: RealOpenCodeServer, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    scripted_model.script(unique_name, [Text("ok")])
    bodies = _bodies(Path(real_server.directory), unique_name)
    stored: dict[str, list[dict[str, Any]]] = {"real": [], "fake": []}
    async with (
        FakeOpenCodeServer(provider_id="fake", model_id="fake-model") as fake,
        fake.client() as fake_http,
        directory_http(real_server, timeout=30.0) as real_http,
    ):
        for target, http in (("real", real_http), ("fake", fake_http)):
            for body in bodies:
                session_id = (await http.post("/session", json={"title": "parts"})).json()["id"]
                answer = await http.post(f"/session/{session_id}/message", json=body)
                assert answer.status_code == 200, answer.text
                messages = (await http.get(f"/session/{session_id}/message")).json()
                stored[target].append(_comparable(messages[0]))
    synthetic = [p for m in stored["real"] for p in m["parts"] if p.get("synthetic")]
    assert len(synthetic) == 8  # two per text/plain file, the missing one included
    assert stored["real"][-1]["info"]["model"]["variant"] == "high"
    assert stored["fake"] == stored["real"]
