"""The stop's promises, checked against a real ``opencode serve`` and a scripted model.

Every assertion reads the server's own state (``/session/status``,
``/children``, ``/message``) or the model server's request log, never only the
adapter's bookkeeping.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from adapter import AuthError, OpenCodeAdapter, OpenCodeClient, stop_tree
from adapter.testing import RealOpenCodeServer, ScriptedModelServer
from adapter.testing.model import Hang, Text, ToolCall, ToolCalls, script_marker, task_call
from tests.adapter_support import Recorder
from tests.real.waits import bash_printed, model_calls_closed, tree_of

pytestmark = pytest.mark.real

QUIET = 2.0  # seconds during which no model request of a stopped tree may start


@pytest.fixture
async def oc(real_server: RealOpenCodeServer) -> AsyncIterator[OpenCodeAdapter]:
    async with OpenCodeAdapter(
        real_server.base_url, directory=str(real_server.directory)
    ) as adapter:
        yield adapter


@pytest.fixture
async def rec(oc: OpenCodeAdapter) -> AsyncIterator[Recorder]:
    recorder = Recorder(oc)
    yield recorder
    await recorder.close()


def bash(command: str) -> ToolCall:
    return ToolCall("bash", {"command": command, "description": command[:20]})


async def busy(client: OpenCodeClient) -> set[str]:
    return {sid for sid, status in (await client.status()).items() if status.is_busy}


async def start_nested_turn(
    oc: OpenCodeAdapter, model: ScriptedModelServer, name: str, thread: str
) -> tuple[str, str]:
    """root (bash, then task) -> child (task) -> grandchild whose model call hangs."""
    model.script(f"{name}-gc", [Hang()])
    model.script(f"{name}-child", [ToolCalls([task_call("deeper", f"{name}-gc")])])
    model.script(
        f"{name}-root",
        [ToolCalls([bash("echo ready")]), ToolCalls([task_call("explore", f"{name}-child")])],
    )
    info = await oc.start_session(thread, title=f"{name} {thread}")
    turn = await oc.send_turn(thread, "go " + script_marker(f"{name}-root"))
    await model.wait_for_async(
        lambda reqs: [r for r in reqs if r.script == f"{name}-gc" and r.open], timeout=30
    )
    return info.session_id, turn.turn_id


async def test_nested_task_tree_stops_completely(
    oc: OpenCodeAdapter,
    rec: Recorder,
    opencode_client: OpenCodeClient,
    scripted_model: ScriptedModelServer,
    unique_name: str,
) -> None:
    root, turn_id = await start_nested_turn(oc, scripted_model, unique_name, "nested")
    tree = await tree_of(opencode_client, root)
    assert len(tree) == 3
    result = await oc.interrupt_turn("nested", turn_id)
    assert set(result.stop.session_ids if result.stop else ()) == set(tree)
    assert not (await busy(opencode_client)) & set(tree), "every tree session is idle"
    await model_calls_closed(scripted_model, tree)
    aborted = await rec.wait_for("turn.aborted")
    assert aborted.turn_id == turn_id and aborted.reason == "Interrupted by user."


async def test_api_children_stop_and_unrelated_sessions_are_untouched(
    oc: OpenCodeAdapter,
    rec: Recorder,
    opencode_client: OpenCodeClient,
    scripted_model: ScriptedModelServer,
    unique_name: str,
    captured_logs: list[dict[str, Any]],
) -> None:
    hang = f"{unique_name}-hang"
    scripted_model.script(hang, [Hang()])
    info = await oc.start_session("api", title="api children")
    root = info.session_id
    await oc.send_turn("api", "go " + script_marker(hang))
    # Children created through the API, each busy with a hanging model call:
    # a root abort alone does not stop them.
    kids = [
        await opencode_client.create_session(title=f"kid {i}", parent_id=root) for i in range(3)
    ]
    grandkid = await opencode_client.create_session(title="grandkid", parent_id=kids[0].id)
    unrelated = await opencode_client.create_session(title="unrelated")
    unrelated_kid = await opencode_client.create_session(
        title="unrelated kid", parent_id=unrelated.id
    )
    working = [k.id for k in kids] + [grandkid.id, unrelated.id, unrelated_kid.id]
    for sid in working:
        await opencode_client.prompt_async(sid, "work " + script_marker(hang))
    everyone = [root, *working]
    await scripted_model.wait_for_async(
        lambda reqs: {r.session_id for r in reqs if r.open and not r.is_title} >= set(everyone),
        timeout=30,
    )
    captured_logs.clear()
    result = await oc.interrupt_turn("api")
    tree = {root, grandkid.id, *(k.id for k in kids)}
    assert result.stop is not None and set(result.stop.session_ids) == tree
    still_busy = await busy(opencode_client)
    assert not still_busy & tree
    assert {unrelated.id, unrelated_kid.id} <= still_busy
    assert {r.session_id for r in scripted_model.open_requests()} >= {
        unrelated.id,
        unrelated_kid.id,
    }
    await model_calls_closed(scripted_model, tree)
    requested = {e.get("session_id") for e in captured_logs if e["event"] == "opencode.request"}
    assert unrelated.id not in requested and unrelated_kid.id not in requested
    await opencode_client.abort(unrelated_kid.id)
    await opencode_client.abort(unrelated.id)


async def test_no_model_request_after_stop(
    oc: OpenCodeAdapter,
    opencode_client: OpenCodeClient,
    scripted_model: ScriptedModelServer,
    unique_name: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    runs = 4
    figures = {"ours": [0, 0, 0], "root-only": [0, 0, 0]}  # during stop, after return, still busy
    for i in range(runs):
        for strategy in ("ours", "root-only"):
            thread = f"{strategy}-{i}"
            root, _ = await start_nested_turn(oc, scripted_model, f"{unique_name}-{thread}", thread)
            tree = await tree_of(opencode_client, root)
            pressed = time.monotonic()
            if strategy == "ours":
                await oc.interrupt_turn(thread)
            else:
                await opencode_client.abort(root)
            returned = time.monotonic()
            await asyncio.sleep(QUIET)
            during = scripted_model.requests_after(pressed, session_ids=tree)
            after = scripted_model.requests_after(returned, session_ids=tree)
            figures[strategy][0] += len([r for r in during if r.started_at < returned])
            figures[strategy][1] += len(after)
            figures[strategy][2] += len((await busy(opencode_client)) & set(tree))
            if strategy == "root-only":
                await oc.interrupt_turn(thread)  # clean up what the root abort left
    with capsys.disabled():
        for strategy, (during_n, after_n, busy_n) in figures.items():
            print(
                f"\n[no work after stop] {strategy}: {runs} nested runs, model requests "
                f"started while stopping: {during_n}, after return: {after_n}, "
                f"tree sessions busy {QUIET:.0f} s later: {busy_n}"
            )
    assert figures["ours"][1] == 0
    assert figures["ours"][2] == 0


async def test_partial_results_survive_the_interrupt(
    oc: OpenCodeAdapter,
    rec: Recorder,
    opencode_client: OpenCodeClient,
    scripted_model: ScriptedModelServer,
    unique_name: str,
) -> None:
    name = f"{unique_name}-p"
    scripted_model.script(
        name, [ToolCalls([bash("echo finished-output")]), Hang(text_before="partial answer so far")]
    )
    await oc.start_session("partial", title="partial")
    await oc.send_turn("partial", "go " + script_marker(name))
    await rec.wait_for("content.delta", timeout=30)
    await scripted_model.wait_for_async(
        lambda reqs: [r for r in reqs if r.script == name and r.open]
    )
    result = await oc.interrupt_turn("partial")
    [echo] = [c for c in result.partial.tool_calls if c.tool == "bash"]
    assert (
        echo.status == "completed" and echo.output is not None and "finished-output" in echo.output
    )
    assert "partial answer so far" in result.partial.text
    # A bash killed by the abort is interrupted, its output kept.
    sleepy = f"{unique_name}-s"
    scripted_model.script(sleepy, [ToolCalls([bash("echo started; sleep 30")])])
    # (The scripted model picks its script from a conversation's first message: new session.)
    partial_2 = await oc.start_session("partial-2", title="partial 2")
    await oc.send_turn("partial-2", "again " + script_marker(sleepy))
    await rec.wait_for(
        "item.updated", lambda e: "sleep 30" in str(e.input.get("command")), timeout=30
    )
    await bash_printed(opencode_client, partial_2.session_id, "started")  # the process runs
    second = await oc.interrupt_turn("partial-2")
    [killed] = [c for c in second.partial.tool_calls if c.tool == "bash"]
    assert killed.status == "interrupted"
    assert killed.output is not None and "User aborted the command" in killed.output
    stored = await opencode_client.messages(second.partial.root_session_id)
    assert any(
        p.state and "User aborted" in (p.state.output or "") for m in stored for p in m.parts
    )


async def test_password_is_required_and_never_logged(
    scripted_model: ScriptedModelServer, captured_logs: list[dict[str, Any]]
) -> None:
    password = "real-secret-Zq9"
    server = RealOpenCodeServer(scripted_model.base_url, password=password)
    await asyncio.to_thread(server.start)
    try:
        async with OpenCodeAdapter(server.base_url, directory=str(server.directory)) as anonymous:
            with pytest.raises(AuthError):
                await anonymous.start_session("t")
        scripted_model.script("pw-turn", [Text("authenticated answer")])
        async with OpenCodeAdapter(
            server.base_url, password=password, directory=str(server.directory)
        ) as oc:
            rec = Recorder(oc)
            await oc.start_session("t", title="pw")
            await oc.send_turn("t", "hi " + script_marker("pw-turn"))
            done = await rec.wait_for("turn.completed", timeout=30)
            assert done.state == "completed"
            await rec.close()
    finally:
        await asyncio.to_thread(server.close)
    dump = json.dumps(captured_logs, default=str)
    assert captured_logs and password not in dump


async def test_a_normal_turn_completes_with_text_and_tool_items(
    oc: OpenCodeAdapter, rec: Recorder, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    text = "The quick brown fox jumps over the lazy dog. " * 4
    scripted_model.script(
        unique_name, [ToolCalls([bash("echo tool-ran")]), Text(text, chunk_size=7, delay=0.01)]
    )
    await oc.start_session("normal", title="normal")
    turn = await oc.send_turn("normal", "go " + script_marker(unique_name))
    done = await rec.wait_for("turn.completed", timeout=30)
    assert done.turn_id == turn.turn_id and done.state == "completed"
    deltas = "".join(e.delta for e in rec.of("content.delta", "normal"))
    assert deltas == text
    [started] = rec.of("item.started", "normal")
    [completed] = rec.of("item.completed", "normal")
    assert started.item_id == completed.item_id and completed.item_type == "command"
    assert completed.detail is not None and "tool-ran" in completed.detail


def test_real_server_http_is_plain_loopback(real_server: RealOpenCodeServer) -> None:
    assert httpx.URL(real_server.base_url).host == "127.0.0.1"


async def test_children_come_back_in_creation_order(opencode_client: OpenCodeClient) -> None:
    """Measured on 1.18.34: ``/children`` lists in creation order, and several children
    share a millisecond when created back to back; the client keeps that order."""
    root = await opencode_client.create_session(title="children order")
    created = [
        (await opencode_client.create_session(title=f"kid {i}", parent_id=root.id)).id
        for i in range(6)
    ]
    kids = await opencode_client.children(root.id)
    assert [k.id for k in kids] == created
    report = await stop_tree(opencode_client, root.id)
    assert [s.session_id for s in report.sessions] == [root.id, *created]
