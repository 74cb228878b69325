"""Permission modes on the fake: presets become OpenCode rules on create, on resume and
on a live change, and a session's rules decide whether a tool call asks
(``docs/adapter.md``, "Permission modes")."""

from __future__ import annotations

from typing import Any

import pytest

from adapter import (
    PERMISSION_PRESETS,
    InvalidInputError,
    OpenCodeAdapter,
    PermissionPreset,
    PermissionRule,
)
from adapter.testing.fake import FakeOpenCodeServer, Text, Tool
from tests.adapter_support import Recorder

T = "thread-1"
ALLOW_ALL = {"permission": "*", "pattern": "*", "action": "allow"}


def rules(name: str) -> list[dict[str, str]]:
    return [rule.to_native() for rule in PERMISSION_PRESETS[name]]


def stored(fake: FakeOpenCodeServer, session_id: str) -> Any:
    return fake.sessions[session_id].info.get("permission")


def test_the_presets_are_exactly_as_documented() -> None:
    risky = ["bash", "webfetch", "websearch", "codesearch", "external_directory", "doom_loop"]
    asks = [{"permission": name, "pattern": "*", "action": "ask"} for name in risky]
    assert rules("full-access") == [ALLOW_ALL]
    assert rules("auto-edit") == [ALLOW_ALL, *asks]
    assert rules("ask") == [
        ALLOW_ALL,
        {"permission": "edit", "pattern": "*", "action": "ask"},
        *asks,
    ]


async def test_a_preset_is_set_on_create_and_kept_in_the_session_info(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer
) -> None:
    info = await oc.start_session(T, permissions="ask")
    assert stored(fake, info.session_id) == rules("ask")
    assert info.permissions == "ask"
    assert oc.list_sessions()[0].permissions == "ask"
    plain = await oc.start_session("plain")
    assert plain.permissions is None
    assert stored(fake, plain.session_id) is None  # nothing sent: the server config decides


async def test_a_preset_is_re_applied_on_resume(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer
) -> None:
    existing = fake.add_session(title="old")
    async with fake.client() as http:
        await http.patch(f"/session/{existing}", json={"permission": rules("ask")})
    info = await oc.start_session(
        T, resume={"schema": 1, "session_id": existing}, permissions="full-access"
    )
    assert info.session_id == existing and info.permissions == "full-access"
    # OpenCode appends; the preset's catch-all comes last, so it decides alone.
    assert stored(fake, existing) == rules("ask") + rules("full-access")
    patches = [r for r in fake.requests if r.method == "PATCH"]
    assert len(patches) == 2  # ours and the setup's


async def test_a_live_thread_changes_its_mode(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("bash", [Tool("bash", {"command": "ls"}, output="a\n"), Text("done")])
    info = await oc.start_session(T, permissions="full-access")
    await oc.send_turn(T, "go [[script:bash]]")
    await rec.wait_for("turn.completed")
    assert rec.of("request.opened") == []
    changed = await oc.set_permissions(T, "ask")
    assert changed.permissions == "ask" and oc.list_sessions()[0].permissions == "ask"
    assert stored(fake, info.session_id) == rules("full-access") + rules("ask")
    await oc.send_turn(T, "again [[script:bash]]")
    opened = await rec.wait_for("request.opened")
    assert (opened.permission, opened.patterns) == ("bash", ("ls",))
    await oc.respond_to_request(T, opened.request_id, "accept")
    await rec.wait_for("turn.completed", lambda e: len(rec.of("turn.completed")) == 2)
    custom = [PermissionRule("bash", "ls*", "allow")]
    assert (await oc.set_permissions(T, custom)).permissions == tuple(custom)


BASH = Tool("bash", {"command": "echo hi"}, output="hi\n")
EDIT = Tool("write", {"filePath": "/work/a.txt", "content": "x"}, output="Wrote file")


@pytest.mark.parametrize(
    ("tool", "preset", "asks"),
    [
        pytest.param(BASH, "ask", ("bash", ("echo hi",)), id="bash-ask"),
        pytest.param(BASH, "auto-edit", ("bash", ("echo hi",)), id="bash-auto-edit"),
        pytest.param(BASH, "full-access", None, id="bash-full-access"),
        pytest.param(EDIT, "ask", ("edit", ("work/a.txt",)), id="edit-ask"),
        pytest.param(EDIT, "auto-edit", None, id="edit-auto-edit"),
    ],
)
async def test_a_tool_asks_or_not_by_preset(
    oc: OpenCodeAdapter,
    fake: FakeOpenCodeServer,
    rec: Recorder,
    tool: Tool,
    preset: PermissionPreset,
    asks: tuple[str, tuple[str, ...]] | None,
) -> None:
    """Bash asks in both asking modes, an edit in ``ask`` only; ``full-access`` asks for
    nothing. What asks is accepted and the turn completes."""
    fake.script("tool", [tool, Text("done")])
    await oc.start_session(T, permissions=preset)
    await oc.send_turn(T, "go [[script:tool]]")
    if asks is not None:
        opened = await rec.wait_for("request.opened")
        assert (opened.permission, opened.patterns) == asks
        await oc.respond_to_request(T, opened.request_id, "accept")
    ended = await rec.wait_for("turn.completed")
    assert ended.state == "completed"
    assert len(rec.of("request.opened")) == int(asks is not None)


async def test_raw_rules_are_sent_as_given(oc: OpenCodeAdapter, fake: FakeOpenCodeServer) -> None:
    raw: list[PermissionRule | dict[str, str]] = [
        {"permission": "bash", "pattern": "*", "action": "ask"},
        PermissionRule("bash", "git *", "allow"),
    ]
    info = await oc.start_session(T, permissions=raw)
    assert stored(fake, info.session_id) == [
        {"permission": "bash", "pattern": "*", "action": "ask"},
        {"permission": "bash", "pattern": "git *", "action": "allow"},
    ]
    assert info.permissions == (
        PermissionRule("bash", "*", "ask"),
        PermissionRule("bash", "git *", "allow"),
    )


@pytest.mark.parametrize(
    ("permissions", "message"),
    [
        ("yolo", "permissions must be one of 'full-access', 'auto-edit', 'ask'"),
        (5, "permissions must be a preset name or a list of rules"),
        ([], "permissions is an empty list"),
        ([{"permission": "bash", "pattern": "*"}], r"permissions\[0\]\.action must be one of"),
        ([{"permission": "", "pattern": "*", "action": "ask"}], r"permissions\[0\]\.permission"),
        ([{"permission": "bash", "action": "ask"}], r"permissions\[0\]\.pattern"),
        ([ALLOW_ALL, {**ALLOW_ALL, "extra": 1}], r"permissions\[1\] has unknown keys"),
        ([ALLOW_ALL, "bash"], r"permissions\[1\] must be a rule mapping"),
    ],
)
async def test_bad_permissions_are_refused_before_anything_is_sent(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, permissions: Any, message: str
) -> None:
    with pytest.raises(InvalidInputError, match=message):
        await oc.start_session(T, permissions=permissions)
    assert not oc.has_session(T) and fake.sessions == {}
    await oc.start_session("live")
    with pytest.raises(InvalidInputError, match=message):
        await oc.set_permissions("live", permissions)
    assert [r for r in fake.requests if r.method == "PATCH"] == []
