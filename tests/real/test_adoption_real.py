"""Adoption on a real ``opencode serve``: a run this adapter did not start is a turn.

* A host process killed (``SIGKILL``) mid-turn, and a new adapter resumed from the cursor:
  the thread is ``running`` with the dead process's turn id, ``turn.started`` says
  ``origin="adopted"``, the turn's text is what the scripted model streamed before and
  after the restart (nothing missing, nothing twice), every subagent of the tree is a
  ``child.started`` and in ``session_tree``, and Stop's partial holds the bash output
  finished before the restart. And a host killed while the root streams its answer: the
  adopted turn completes with the whole text, once (the part began before the new adapter
  saw it).
* The same after a graceful ``aclose(detach=True)``, which sends no abort: the tree is
  still busy on the server after it.
* A run another client prompts on a watched thread (a plain ``POST prompt_async``): a
  turn with its text, ending ``completed``.
* Two adapters on one thread: B resumes A's running turn with the same
  id, B's Stop stops the whole tree with A's output in its partial, A's turn ends
  ``turn.aborted`` ("Aborted outside this adapter.") promptly, and a follow-up runs and
  both see it; measured on 1.18.34: A's turn ended 0.02-0.07 s after B's Stop returned,
whether the root's step after its cancelled ``task`` hangs or answers (the two shapes an
abort by another client was measured to take).

The restart scenarios script a root that writes text and runs ``bash``, then a ``task``
subagent whose own subagent streams its answer slowly (``GRAND_TEXT``, about 4 s, so the
tree is still working when the new adapter resumes: asserted), then writes more text and
hangs until the Stop. The server stays up throughout (``test_server_death_real.py`` kills it).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from adapter import ContentDelta, InterruptResult, OpenCodeClient, TurnStarted
from adapter.testing import RealOpenCodeServer, ScriptedModelServer
from adapter.testing import model as scripted
from tests.adapter_support import Recorder
from tests.faults.harness import check_event_invariants
from tests.real.conftest import adapter_on, directory_http
from tests.real.waits import text_part_stored

pytestmark = pytest.mark.real

T = "t"
ROOT = Path(__file__).resolve().parents[2]

BEFORE = ("Building first. ", "Now a subagent. ")
AFTER = "After the restart. "
#: The grandchild's answer: 40 characters, one per 0.1 s chunk, so it works about 4 s
#: after its request opens (the host is killed, or detaches, at that moment).
GRAND_TEXT = "g" * 40
#: Bounds that hold on a loaded 2-core machine (measured times are printed).
SLOW = 60.0


def bash(command: str, text: str = "") -> scripted.ToolCalls:
    return scripted.ToolCalls(
        [scripted.ToolCall("bash", {"command": command, "description": command})], text=text
    )


def script_tree(model: ScriptedModelServer, name: str) -> None:
    """Root: text and ``bash echo built``; text and a ``task`` (its child's own ``task``
    streams slowly); then ``AFTER`` and a hang until the Stop."""
    model.script(f"{name}-g", [scripted.Text(GRAND_TEXT, chunk_size=1, delay=0.1)])
    model.script(
        f"{name}-c",
        [scripted.ToolCalls([scripted.task_call("dig", f"{name}-g")]), scripted.Text("child done")],
    )
    model.script(
        name,
        [
            bash("echo built", BEFORE[0]),
            scripted.ToolCalls([scripted.task_call("look around", f"{name}-c")], text=BEFORE[1]),
            scripted.Hang(AFTER),
        ],
    )


async def opened(model: ScriptedModelServer, script: str, step: int = 0) -> scripted.ModelRequest:
    """The first model request of ``script``'s ``step``, once it is open or done."""

    def found(requests: list[scripted.ModelRequest]) -> list[scripted.ModelRequest]:
        return [r for r in requests if r.script == script and r.step == step]

    return (await model.wait_for_async(found, timeout=SLOW))[0]


def request_of(model: ScriptedModelServer, index: int) -> scripted.ModelRequest:
    return next(r for r in model.requests if r.index == index)


def text_of(rec: Recorder, turn_id: str) -> str:
    return "".join(
        e.delta
        for e in rec.of(ContentDelta, T)
        if e.turn_id == turn_id and e.stream == "assistant_text"
    )


async def wait_text(rec: Recorder, turn_id: str, text: str, timeout: float = SLOW) -> None:
    async with asyncio.timeout(timeout):
        while text not in text_of(rec, turn_id):
            await asyncio.sleep(0.02)


async def busy(server: RealOpenCodeServer) -> set[str]:
    async with OpenCodeClient(server.base_url, directory=str(server.directory)) as client:
        return {sid for sid, status in (await client.status()).items() if status.is_busy}


async def adopt_and_stop(
    server: RealOpenCodeServer,
    model: ScriptedModelServer,
    name: str,
    cursor: Mapping[str, Any],
    turn_id: str,
) -> tuple[Recorder, InterruptResult, dict[str, str]]:
    """A new adapter resumes ``cursor`` while the tree of ``script_tree(name)`` works:
    the adopted turn, checked; then its Stop. The recorder, the Stop's result and the
    tree's sessions by role (read from the model's requests, not from the adapter)."""
    grand_request = await opened(model, f"{name}-g")
    async with adapter_on(server) as oc:
        rec = Recorder(oc)
        resumed_at = time.monotonic()
        info = await oc.start_session(T, resume=cursor)
        print(f"start_session(resume=) returned in {time.monotonic() - resumed_at:.2f} s")
        grand = request_of(model, grand_request.index)
        assert grand.ended_at is None or grand.ended_at > resumed_at, (
            f"the tree stopped working {resumed_at - grand.ended_at:.2f} s before the resume: "
            "the machine is too slow for GRAND_TEXT"
        )
        sessions = {
            "root": info.session_id,
            "child": (await opened(model, f"{name}-c")).session_id or "",
            "grand": grand.session_id or "",
        }
        assert (info.status, info.active_turn_id) == ("running", turn_id)
        started = await rec.wait_for(TurnStarted)
        assert (started.turn_id, started.origin) == (turn_id, "adopted")
        await wait_text(rec, turn_id, AFTER)  # the grandchild and the child ended since
        tree = await oc.session_tree(T)
        assert {s.session_id for s in tree.sessions} == set(sessions.values())
        result = await oc.interrupt_turn(T, turn_id)
        await rec.wait_for("turn.aborted", lambda e: e.turn_id == turn_id, timeout=SLOW)
        assert not await busy(server) & set(sessions.values())
        await rec.close()
    children = {e.session_id for e in rec.of("child.started", T)}
    assert children == {sessions["child"], sessions["grand"]}
    assert {e.session_id for e in rec.of("task.started", T)} == children
    # Nothing missing, nothing twice: before the restart (read back) and after (live).
    assert text_of(rec, turn_id) == "".join(BEFORE) + AFTER
    [built] = [e for e in rec.of("item.completed", T) if e.tool == "bash"]
    assert (built.turn_id, built.status, built.detail) == (turn_id, "completed", "built\n")
    items = [e.item_id for e in rec.of("item.completed", T)]
    assert len(items) == len(set(items)), items
    assert result.turn_id == turn_id and result.stop is not None and result.stop.ok
    calls = {c.tool: c for c in result.partial.tool_calls if c.session_id == info.session_id}
    assert (calls["bash"].status, calls["bash"].output) == ("completed", "built\n")
    assert result.partial.text == "\n".join((*BEFORE, AFTER))  # one line per text part
    check_event_invariants(rec.events, closed=True)
    return rec, result, sessions


# ------------------------------------------------------------------ a host killed mid-turn


async def killed_host(
    server: RealOpenCodeServer,
    model: ScriptedModelServer,
    name: str,
    step: int,
    errors_at: Path,
    script: str | None = None,
) -> dict[str, Any]:
    """Host process A (``adoption_host.py``) sends thread ``t``'s turn running script
    ``name``; once the model request of ``script`` (default ``name``) at ``step`` opened,
    A is killed (``SIGKILL``). What A printed: the cursor, the turn id, the root."""
    with errors_at.open("wb") as errors:
        host = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.real.adoption_host",
            server.base_url,
            str(server.directory),
            "go " + scripted.script_marker(name),
            cwd=ROOT,
            stdout=asyncio.subprocess.PIPE,
            stderr=errors,
        )
    try:
        assert host.stdout is not None
        line = await asyncio.wait_for(host.stdout.readline(), SLOW)
        if not line:
            raise AssertionError(await asyncio.to_thread(errors_at.read_text, errors="replace"))
        said: dict[str, Any] = json.loads(line)
        assert said["status"] == "running"
        await opened(model, script or name, step)
        os.kill(host.pid, signal.SIGKILL)
        assert await asyncio.wait_for(host.wait(), 10) == -signal.SIGKILL
    finally:
        if host.returncode is None:
            host.kill()
            await host.wait()
    return said


async def test_a_host_killed_mid_turn_is_resumed_by_another_with_the_turn_adopted_whole(
    real_server: RealOpenCodeServer,
    scripted_model: ScriptedModelServer,
    unique_name: str,
    tmp_path: Path,
) -> None:
    name = unique_name
    script_tree(scripted_model, name)
    said = await killed_host(
        real_server, scripted_model, name, 0, tmp_path / "host.err", f"{name}-g"
    )
    _, _, sessions = await adopt_and_stop(
        real_server, scripted_model, name, said["resume"], said["turn_id"]
    )
    assert sessions["root"] == said["session_id"]
    assert said["turn_id"] == "turn_" + await first_user_message(real_server, sessions["root"])


#: The root's answer after its bash call: 60 characters, 2 per 0.1 s chunk (about 3 s).
ACROSS = "streamed across the restart of the host, then completed. " + "end"


async def test_a_root_streaming_across_the_restart_ends_with_its_whole_text_once(
    real_server: RealOpenCodeServer,
    scripted_model: ScriptedModelServer,
    unique_name: str,
    tmp_path: Path,
) -> None:
    """Killed while the root streams: its text part began before the new adapter saw it
    (OpenCode stores a streaming part only at its start and end), and ends after."""
    name = unique_name
    scripted_model.script(
        name, [bash("echo built", BEFORE[0]), scripted.Text(ACROSS, chunk_size=2, delay=0.1)]
    )
    said = await killed_host(real_server, scripted_model, name, 1, tmp_path / "host.err")
    streaming = await opened(scripted_model, name, 1)
    async with OpenCodeClient(real_server.base_url, directory=str(real_server.directory)) as c:
        await text_part_stored(c, said["session_id"], 1)  # streaming before the restart
    async with adapter_on(real_server) as oc:
        rec = Recorder(oc)
        resumed_at = time.monotonic()
        info = await oc.start_session(T, resume=said["resume"])
        assert (info.status, info.active_turn_id) == ("running", said["turn_id"])
        answer = request_of(scripted_model, streaming.index)
        assert answer.ended_at is None or answer.ended_at > resumed_at, (
            "the root's answer ended before the resume: the machine is too slow for ACROSS"
        )
        done = await rec.wait_for("turn.completed", timeout=SLOW)
        await rec.close()
    [started] = rec.of(TurnStarted, T)
    assert (started.turn_id, started.origin) == (said["turn_id"], "adopted")
    assert (done.turn_id, done.state) == (said["turn_id"], "completed")
    assert text_of(rec, said["turn_id"]) == BEFORE[0] + ACROSS
    check_event_invariants(rec.events, closed=True)


async def first_user_message(server: RealOpenCodeServer, session_id: str) -> str:
    """The id of the session's first user message, without its ``msg_``."""
    async with OpenCodeClient(server.base_url, directory=str(server.directory)) as client:
        messages = await client.messages(session_id)
    return next(m.info.id for m in messages if m.info.role == "user").removeprefix("msg_")


# ------------------------------------------------------------------ a graceful detach


async def test_a_host_that_detaches_leaves_the_tree_running_and_another_adopts_it(
    real_server: RealOpenCodeServer, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    name = unique_name
    script_tree(scripted_model, name)
    oc = adapter_on(real_server)
    async with oc:
        info = await oc.start_session(T, title=name)
        turn = await oc.send_turn(T, "go " + scripted.script_marker(name))
        grand = await opened(scripted_model, f"{name}-g")
        child = await opened(scripted_model, f"{name}-c")
        await oc.aclose(detach=True)
    tree = {info.session_id, child.session_id, grand.session_id}
    # No abort reached the server: the whole tree still works.
    assert await busy(real_server) >= tree
    assert not request_of(scripted_model, grand.index).disconnected
    await adopt_and_stop(real_server, scripted_model, name, info.resume, turn.turn_id)


# ------------------------------------------------------------------ another client's run


async def test_a_run_another_client_prompts_on_a_watched_thread_is_a_completed_turn(
    real_server: RealOpenCodeServer, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    name = unique_name
    answer = "hello from another worker"
    scripted_model.script(
        name,
        [bash("echo elsewhere", "Another worker here. "), scripted.Text(answer, 3, delay=0.05)],
    )
    async with adapter_on(real_server) as oc:
        rec = Recorder(oc)
        root = (await oc.start_session(T, title=name)).session_id
        body = {"parts": [{"type": "text", "text": "hi " + scripted.script_marker(name)}]}
        async with directory_http(real_server) as other:
            response = await other.post(f"/session/{root}/prompt_async", json=body)
            assert response.status_code == 204, response.text
        done = await rec.wait_for("turn.completed", timeout=SLOW)
        info = oc.session_info(T)
        await rec.close()
    [started] = rec.of(TurnStarted, T)
    assert started.origin == "adopted"
    assert started.turn_id == "turn_" + await first_user_message(real_server, root)
    assert (done.turn_id, done.state) == (started.turn_id, "completed")
    assert (info.status, info.active_turn_id) == ("ready", None)
    assert text_of(rec, started.turn_id) == "Another worker here. " + answer
    [ran] = [e for e in rec.of("item.completed", T) if e.tool == "bash"]
    assert (ran.turn_id, ran.detail) == (started.turn_id, "elsewhere\n")
    check_event_invariants(rec.events, closed=True)


# ------------------------------------------------------------------ two adapters, one thread

#: A's turn must end this soon after B's Stop returned (the aim is "a couple of
#: seconds"; before the fix it waited out the 30 s quiet check). Generous for a loaded machine.
ABORTED_WITHIN = 10.0


@pytest.mark.parametrize(
    ("after_task", "depth"),
    # depth 1: measured on 1.18.34, the root's newest step stays unfinished (its task call
    # `running`, no MessageAbortedError) once another client stopped the tree; the other
    # adapters ended such a turn `completed` before the fix.
    [("hangs", 2), ("answers", 2), ("hangs", 1)],
)
async def test_two_adapters_on_one_thread_share_the_turn_and_either_stops_it(
    real_server: RealOpenCodeServer,
    scripted_model: ScriptedModelServer,
    unique_name: str,
    after_task: str,
    depth: int,
) -> None:
    name = unique_name
    scripted_model.script(f"{name}-g", [scripted.Hang()])
    if depth == 1:
        scripted_model.script(f"{name}-c", [scripted.Hang()])
    else:
        scripted_model.script(
            f"{name}-c",
            [scripted.ToolCalls([scripted.task_call("dig", f"{name}-g")]), scripted.Text("no")],
        )
    # The root's step after its task is cancelled hangs (a slow model) and is aborted too.
    scripted_model.script(
        name,
        [
            bash("echo from-a", "From A. "),
            scripted.ToolCalls([scripted.task_call("look around", f"{name}-c")]),
            scripted.Hang() if after_task == "hangs" else scripted.Text("root done"),
        ],
    )
    # The follow-up is answered by the script the root is bound to then, whatever its
    # step: the prompts carry no marker (an aborted empty step may or may not count).
    scripted_model.script(f"{name}-next", [scripted.Text("the follow-up answer")] * 8)
    async with adapter_on(real_server) as a, adapter_on(real_server) as b:
        rec_a, rec_b = Recorder(a), Recorder(b)
        info = await a.start_session(T, title=name)
        root = info.session_id
        scripted_model.bind_session(root, name)
        sent = await a.send_turn(T, "go")
        deepest = await opened(scripted_model, f"{name}-g" if depth == 2 else f"{name}-c")
        child = await opened(scripted_model, f"{name}-c")
        tree = {root, child.session_id, deepest.session_id}

        resumed = await b.start_session(T, resume=info.resume)
        assert (resumed.status, resumed.active_turn_id) == ("running", sent.turn_id)
        adopted = await rec_b.wait_for(TurnStarted)
        assert (adopted.turn_id, adopted.origin) == (sent.turn_id, "adopted")
        assert "From A. " in text_of(rec_b, sent.turn_id)

        result = await b.interrupt_turn(T, sent.turn_id)
        stopped_at = time.monotonic()
        assert result.turn_id == sent.turn_id and result.stop is not None and result.stop.ok
        assert set(result.stop.session_ids) >= tree
        assert not await busy(real_server) & tree
        assert "From A. " in result.partial.text
        calls = {c.tool: c for c in result.partial.tool_calls if c.session_id == root}
        assert (calls["bash"].status, calls["bash"].output) == ("completed", "from-a\n")

        ended = await rec_a.wait_for("turn.aborted", timeout=45.0)
        took = time.monotonic() - stopped_at
        print(f"A's turn ended {took:.2f} s after B's Stop returned")
        assert ended.turn_id == sent.turn_id
        assert ended.reason == "Aborted outside this adapter."
        assert "From A. " in ended.partial.text
        assert took < ABORTED_WITHIN, f"A's turn ended {took:.2f} s after B's Stop"
        assert {e.status for e in rec_a.of("task.completed", T)} == {"stopped"}

        scripted_model.bind_session(root, f"{name}-next")
        follow = await a.send_turn(T, "and now?")
        done_a = await rec_a.wait_for(
            "turn.completed", lambda e: e.turn_id == follow.turn_id, timeout=SLOW
        )
        done_b = await rec_b.wait_for(
            "turn.completed", lambda e: e.turn_id == follow.turn_id, timeout=SLOW
        )
        await rec_a.close()
        await rec_b.close()
    assert (done_a.state, done_b.state) == ("completed", "completed")
    assert (
        text_of(rec_a, follow.turn_id) == text_of(rec_b, follow.turn_id) == ("the follow-up answer")
    )
    [b_aborted] = [e for e in rec_b.of("turn.aborted", T)]
    assert b_aborted.turn_id == sent.turn_id
    check_event_invariants(rec_a.events, closed=True)
    check_event_invariants(rec_b.events, closed=True)
