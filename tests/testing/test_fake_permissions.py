"""The fake enforces a session's ``permission`` rules as OpenCode 1.18.34 does (measured
with a config that allows everything, and with one where ``bash`` and ``edit`` ask):
the session's rules are checked after the config's and the last matching rule wins;
``PATCH`` appends rules; ``task`` children do not inherit their parent's rules.

A plain :class:`Tool` step stands for a tool the config allows; a :class:`Permission`
step for one the config asks about.
"""

from __future__ import annotations

from typing import Any

import pytest

from adapter.testing.fake import FakeOpenCodeServer, Permission, Step, Task, Text, Tool


def rule(permission: str, pattern: str, action: str) -> dict[str, str]:
    return {"permission": permission, "pattern": pattern, "action": action}


BASH = Tool("bash", {"command": "echo hi"}, output="hi\n")
DENIED = "The user has specified a rule which prevents you from using this specific tool call."


async def run(
    fake: FakeOpenCodeServer,
    steps: list[Step],
    permission: list[dict[str, str]] | None,
    *,
    patch: list[dict[str, str]] | None = None,
    reply: str = "once",
) -> tuple[str, list[Any]]:
    """Run ``steps`` in a new session with ``permission`` (then ``patch``), replying
    ``reply`` to every request; return the session id and the requests asked."""
    fake.script("s", steps)
    since = fake.event_count
    async with fake.client() as http:
        body = {} if permission is None else {"permission": permission}
        session_id = (await http.post("/session", json=body)).json()["id"]
        if patch is not None:
            await http.patch(f"/session/{session_id}", json={"permission": patch})
        prompt = {"parts": [{"type": "text", "text": "go [[script:s]]"}]}
        await http.post(f"/session/{session_id}/prompt_async", json=prompt)
        while True:
            await fake.wait_until(
                lambda: (
                    not fake.sessions[session_id].busy
                    or any(s.pending_requests for s in fake.sessions.values())
                )
            )
            pending = (await http.get("/permission")).json()
            if not pending:
                break
            for request in pending:
                await http.post(f"/permission/{request['id']}/reply", json={"reply": reply})
    events = list(fake.events)[since - fake.event_count :] if fake.event_count > since else []
    asked = [e["properties"] for e in events if e["type"] == "permission.asked"]
    return session_id, asked


def tool_states(fake: FakeOpenCodeServer, session_id: str) -> list[tuple[str, str, str]]:
    return [
        (p["tool"], p["state"]["status"], str(p["state"].get("error") or p["state"].get("output")))
        for m in fake.sessions[session_id].messages
        for p in m.parts
        if p["type"] == "tool"
    ]


@pytest.mark.parametrize(
    ("rules", "asks"),
    [
        (None, False),  # the config allows
        ([rule("bash", "*", "ask")], True),  # the session's rule beats the config's
        ([rule("*", "*", "ask")], True),
        ([rule("*", "*", "allow")], False),
        ([rule("bash", "*", "allow"), rule("bash", "*", "ask")], True),  # last match wins
        ([rule("bash", "*", "ask"), rule("bash", "*", "allow")], False),
        ([rule("bash", "*", "ask"), rule("bash", "echo *", "allow")], False),
        ([rule("bash", "*", "ask"), rule("bash", "rm *", "allow")], True),
        ([rule("edit", "*", "ask")], False),  # another permission
    ],
)
async def test_session_rules_decide_whether_an_allowed_tool_asks(
    fake: FakeOpenCodeServer, rules: list[dict[str, str]] | None, asks: bool
) -> None:
    session_id, asked = await run(fake, [BASH, Text("ok")], rules)
    assert [(a["permission"], a["patterns"]) for a in asked] == (
        [("bash", ["echo hi"])] if asks else []
    )
    assert tool_states(fake, session_id) == [("bash", "completed", "hi\n")]


@pytest.mark.parametrize(
    ("rules", "asks"),
    [
        (None, True),  # the config asks
        ([rule("*", "*", "allow")], False),  # the session's rule beats the config's
        ([rule("bash", "*", "allow")], False),
        ([rule("bash", "*", "allow"), rule("bash", "*", "ask")], True),
    ],
)
async def test_session_rules_decide_whether_a_config_ask_asks(
    fake: FakeOpenCodeServer, rules: list[dict[str, str]] | None, asks: bool
) -> None:
    step = Permission("bash", ["echo hi"], tool=BASH)
    session_id, asked = await run(fake, [step, Text("ok")], rules)
    assert len(asked) == int(asks)
    assert tool_states(fake, session_id) == [("bash", "completed", "hi\n")]


async def test_a_denied_call_fails_and_the_run_goes_on(fake: FakeOpenCodeServer) -> None:
    session_id, asked = await run(fake, [BASH, Text("after")], [rule("bash", "echo *", "deny")])
    assert asked == []
    [(tool, status, error)] = tool_states(fake, session_id)
    assert (tool, status) == ("bash", "error") and error.startswith(DENIED)
    assert fake.sessions[session_id].messages[-1].text == "after"


async def test_edit_tools_ask_for_edit_with_the_path(fake: FakeOpenCodeServer) -> None:
    write = Tool("write", {"filePath": "/p/new.txt", "content": "x"}, output="Wrote file")
    _, asked = await run(fake, [write, Text("ok")], [rule("edit", "*", "ask")])
    assert [(a["permission"], a["patterns"]) for a in asked] == [("edit", ["p/new.txt"])]


async def test_a_rejected_ask_stops_the_run(fake: FakeOpenCodeServer) -> None:
    session_id, asked = await run(
        fake, [BASH, Text("never")], [rule("bash", "*", "ask")], reply="reject"
    )
    assert len(asked) == 1
    assert tool_states(fake, session_id) == [
        ("bash", "error", "The user rejected permission to use this specific tool call.")
    ]


async def test_patch_appends_rules(fake: FakeOpenCodeServer) -> None:
    session_id, asked = await run(
        fake, [BASH, Text("ok")], [rule("*", "*", "allow")], patch=[rule("bash", "*", "ask")]
    )
    assert len(asked) == 1
    assert fake.sessions[session_id].info["permission"] == [
        rule("*", "*", "allow"),
        rule("bash", "*", "ask"),
    ]
    async with fake.client() as http:
        same = await http.patch(f"/session/{session_id}", json={"permission": []})
    assert same.json()["permission"] == [rule("*", "*", "allow"), rule("bash", "*", "ask")]


async def test_task_children_do_not_inherit_the_parents_rules(fake: FakeOpenCodeServer) -> None:
    fake.script("child", [BASH, Text("child ok")])
    _, asked = await run(fake, [Task("sub", "child"), Text("ok")], [rule("bash", "*", "ask")])
    assert asked == []
