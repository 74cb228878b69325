"""Adoption: a run on the thread's root that this adapter did not start is a turn.

On the fake, each path the real server shows (``tests/real/test_adoption_real.py`` pins
them on ``opencode serve``): a run found working when the thread is resumed (a host
restarted mid-turn), a run another client starts on a watched thread, turn ids every
process derives alike, and the races of the read-back: live output overlapping it, a run
that ends before it, a Stop during it, a follow-up during it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx

from adapter import (
    ContentDelta,
    ItemCompleted,
    OpenCodeAdapter,
    SessionInfo,
    Timeouts,
    TurnStarted,
)
from adapter.testing.fake import FakeOpenCodeServer, Hang, Hold, Permission, Task, Text, Tool
from adapter.testing.pytest_plugin import AdapterFactory
from tests.adapter_support import Recorder, start_scripted_turn

T = "thread"


async def new_session(fake: FakeOpenCodeServer) -> str:
    """A session another host created (what a resume cursor names)."""
    async with fake.client() as http:
        response = await http.post("/session", json={"title": "elsewhere"})
        response.raise_for_status()
        return str(response.json()["id"])


async def prompt(fake: FakeOpenCodeServer, session_id: str, text: str) -> None:
    """Another client (a host process gone since, a second worker) prompts the session."""
    async with fake.client() as http:
        body = {"parts": [{"type": "text", "text": text}]}
        (await http.post(f"/session/{session_id}/prompt_async", json=body)).raise_for_status()


def cursor(session_id: str) -> dict[str, Any]:
    return {"schema": 1, "session_id": session_id, "directory": None}


def user_ids(fake: FakeOpenCodeServer, session_id: str) -> list[str]:
    """The session's user messages, in the order the fake announced them."""
    ids: list[str] = []
    for event in fake.events:
        info = event["properties"].get("info", {}) if event["type"] == "message.updated" else {}
        mine = info.get("sessionID") == session_id and info.get("role") == "user"
        if mine and info["id"] not in ids:
            ids.append(info["id"])
    return ids


def texts(fake: FakeOpenCodeServer, session_id: str) -> list[str]:
    """The text of every text part the fake announced in ``session_id``."""
    return [
        str(e["properties"]["part"].get("text"))
        for e in fake.events
        if e["type"] == "message.part.updated"
        and e["properties"]["part"]["sessionID"] == session_id
        and e["properties"]["part"]["type"] == "text"
    ]


def text(rec: Recorder, turn_id: str) -> str:
    return "".join(
        e.delta
        for e in rec.events
        if isinstance(e, ContentDelta) and e.turn_id == turn_id and e.stream == "assistant_text"
    )


def tree_script(fake: FakeOpenCodeServer) -> None:
    """A root that wrote text and finished a tool, then a subagent whose own subagent
    hangs: a turn a restart finds half done."""
    fake.script("grand", [Hang()])
    fake.script(
        "child", [Tool("read", {"filePath": "notes.md"}, output="notes"), Task("dig", "grand")]
    )
    fake.script(
        "root",
        [
            Text("before the restart"),
            Tool("bash", {"command": "echo built"}, output="built\n"),
            Task("look around", "child"),
        ],
    )


async def working_tree(fake: FakeOpenCodeServer) -> tuple[str, list[str]]:
    """A session whose tree (root, child, grandchild) works, started by another host."""
    tree_script(fake)
    root = await new_session(fake)
    await prompt(fake, root, "go [[script:root]]")
    tree = await fake.wait_for_tree(root, sessions=3, hanging=True)
    return root, tree


async def test_a_run_found_working_at_resume_is_an_adopted_turn_with_its_output_so_far(
    fake: FakeOpenCodeServer,
) -> None:
    root, tree = await working_tree(fake)
    [first_prompt] = user_ids(fake, root)
    async with OpenCodeAdapter(fake.base_url, transport=fake.transport) as oc:
        rec = Recorder(oc)
        info = await oc.start_session(T, resume=cursor(root))
        assert info.status == "running"
        assert info.active_turn_id == "turn_" + first_prompt.removeprefix("msg_")
        [started] = rec.of("turn.started")
        assert isinstance(started, TurnStarted) and started.origin == "adopted"
        assert started.turn_id == info.active_turn_id
        assert text(rec, started.turn_id) == "before the restart"
        [bash] = [e for e in rec.of("item.completed") if e.tool == "bash"]
        assert isinstance(bash, ItemCompleted) and bash.detail == "built\n"
        assert [e.session_id for e in rec.of("child.started")] == tree[1:]
        assert {e.session_id for e in rec.of("task.started")} == set(tree[1:])
        assert [s.session_id for s in (await oc.session_tree(T)).sessions] == tree
        result = await oc.interrupt_turn(T, started.turn_id)
        await rec.close()
    assert result.partial.text == "before the restart"
    calls = {c.tool: c for c in result.partial.tool_calls}
    assert calls["bash"].status == "completed" and calls["bash"].output == "built\n"
    assert calls["read"].status == "completed" and calls["read"].output == "notes"
    [aborted] = rec.of("turn.aborted")
    assert aborted.turn_id == started.turn_id
    assert not any(fake.sessions[s].busy for s in tree)
    # Emitted once: the read-back and the live events never both sent a piece.
    assert len(rec.of("item.completed")) == len({e.item_id for e in rec.of("item.completed")})


async def test_a_run_another_client_starts_on_a_watched_thread_is_a_turn_with_its_text(
    fake: FakeOpenCodeServer,
) -> None:
    fake.script("elsewhere", [Text("hello from another worker", chunks=4)])
    async with OpenCodeAdapter(fake.base_url, transport=fake.transport) as oc:
        rec = Recorder(oc)
        root = (await oc.start_session(T)).session_id
        await prompt(fake, root, "hi [[script:elsewhere]]")
        done = await rec.wait_for("turn.completed")
        assert oc.session_info(T).status == "ready"
        await rec.close()
    [started] = rec.of("turn.started")
    assert isinstance(started, TurnStarted) and started.origin == "adopted"
    assert started.turn_id == "turn_" + user_ids(fake, root)[0].removeprefix("msg_")
    assert done.turn_id == started.turn_id and done.state == "completed"
    assert text(rec, started.turn_id) == "hello from another worker"


async def test_a_sent_turns_id_is_derived_from_its_prompts_message_id(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    info, turn = await start_scripted_turn(oc, fake, T, "root", [Text("one")])
    await rec.wait_for("turn.completed")
    [sent] = user_ids(fake, info.session_id)
    assert turn.turn_id == "turn_" + sent.removeprefix("msg_")
    [started] = rec.of("turn.started")
    assert isinstance(started, TurnStarted) and started.origin == "sent"


async def test_two_adapters_on_one_thread_name_its_turn_alike_and_either_stops_it(
    fake: FakeOpenCodeServer, opencode_adapter_factory: AdapterFactory
) -> None:
    fake.script("long", [Text("from A"), Hang()])
    fake.script("next", [Text("the follow-up")])
    a, b = await opencode_adapter_factory(), await opencode_adapter_factory()
    rec_a, rec_b = Recorder(a), Recorder(b)
    root = (await a.start_session(T)).session_id
    sent = await a.send_turn(T, "go [[script:long]]")
    await fake.wait_hanging(root)
    info = await b.start_session(T, resume=cursor(root))
    assert info.status == "running" and info.active_turn_id == sent.turn_id
    result = await b.interrupt_turn(T, sent.turn_id)
    assert result.turn_id == sent.turn_id and result.partial.text == "from A"
    ended = await rec_a.wait_for("turn.aborted")
    assert ended.turn_id == sent.turn_id
    assert ended.reason == "Aborted outside this adapter."
    follow_up = await a.send_turn(T, "more [[script:next]]")
    await rec_a.wait_for("turn.completed")
    seen = await rec_b.wait_for("turn.completed")
    await rec_a.close()
    await rec_b.close()
    assert seen.turn_id == follow_up.turn_id
    assert text(rec_b, follow_up.turn_id) == "the follow-up"


def hold_full_reads(fake: FakeOpenCodeServer, session_id: str) -> asyncio.Event:
    """Hold every full read of ``session_id``'s messages (the read-back's; a
    ``limit`` read passes) until the returned event is set."""
    release = asyncio.Event()

    async def wait(request: httpx.Request) -> None:
        if "limit" not in request.url.params:
            await release.wait()

    fake.on("GET", f"/session/{session_id}/message", wait)
    return release


async def test_live_deltas_overlapping_the_read_back_leave_the_text_whole_and_once(
    fake: FakeOpenCodeServer,
) -> None:
    whole = "".join(f"<{i:02d}>" for i in range(40))
    fake.script("slow", [Text(whole, chunks=40, delay=0.01)])
    root = await new_session(fake)
    await prompt(fake, root, "go [[script:slow]]")

    def deltas() -> int:
        return sum(e["type"] == "message.part.delta" for e in fake.events)

    await fake.wait_until(lambda: deltas() >= 5)
    release = hold_full_reads(fake, root)
    async with OpenCodeAdapter(fake.base_url, transport=fake.transport) as oc:
        rec = Recorder(oc)
        start = asyncio.create_task(oc.start_session(T, resume=cursor(root)))
        await fake.wait_until(lambda: deltas() >= 20)  # live deltas while the read waits
        release.set()
        await start
        done = await rec.wait_for("turn.completed")
        await rec.close()
    assert text(rec, done.turn_id) == whole


async def test_an_adoption_that_finds_the_run_ended_emits_it_and_ends_it(
    fake: FakeOpenCodeServer,
) -> None:
    fake.script("short", [Text("done already")])
    fake.script("slow", [Text("x", delay=0.2)])
    root = await new_session(fake)
    await prompt(fake, root, "go [[script:slow]]")
    release = hold_full_reads(fake, root)
    async with OpenCodeAdapter(fake.base_url, transport=fake.transport) as oc:
        rec = Recorder(oc)
        start = asyncio.create_task(oc.start_session(T, resume=cursor(root)))
        await fake.wait_until(lambda: not fake.sessions[root].busy)  # ended meanwhile
        release.set()
        await start
        done = await rec.wait_for("turn.completed")
        assert oc.session_info(T).status == "ready"
        await rec.close()
    assert done.state == "completed" and text(rec, done.turn_id) == "x"
    assert [e.type for e in rec.events if e.type.startswith("turn.")][-1] == "turn.completed"


#: The adapter, its recorder, the read-back's hold, the resuming start's task and the
#: adopted turn's start.
HeldAdoption = tuple[OpenCodeAdapter, Recorder, Hold, "asyncio.Task[SessionInfo]", TurnStarted]


@contextlib.asynccontextmanager
async def adopting_held_at_the_read_back(
    fake: FakeOpenCodeServer, root: str
) -> AsyncIterator[HeldAdoption]:
    """An adapter resuming ``root``, found working: its turn started, the adoption held at
    the read-back's walk of the tree (``release()`` the hold to let it on)."""
    tree_read = fake.hold("GET", f"/session/{root}/children")  # the read-back's walk
    async with OpenCodeAdapter(fake.base_url, transport=fake.transport) as oc:
        rec = Recorder(oc)
        start = asyncio.create_task(oc.start_session(T, resume=cursor(root)))
        started = await rec.wait_for("turn.started")
        await tree_read.started.wait()
        yield oc, rec, tree_read, start, started


async def test_a_stop_during_the_read_back_stops_the_tree_and_keeps_what_it_made(
    fake: FakeOpenCodeServer,
) -> None:
    root, tree = await working_tree(fake)
    held = adopting_held_at_the_read_back(fake, root)
    async with held as (oc, rec, tree_read, start, started):
        stop = asyncio.create_task(oc.interrupt_turn(T, started.turn_id))
        tree_read.release()
        result = await stop
        await start
        await rec.close()
    assert result.turn_id == started.turn_id
    assert not any(fake.sessions[s].busy for s in tree)
    calls = {c.tool: c for c in result.partial.tool_calls}
    assert calls["bash"].status == "completed" and calls["bash"].output == "built\n"
    assert [e.type for e in rec.events if e.type.startswith("turn.")].count("turn.aborted") == 1


async def test_a_follow_up_during_the_adoption_joins_the_adopted_turn(
    fake: FakeOpenCodeServer,
) -> None:
    fake.script("long", [Text("first"), Hang()])
    root = await new_session(fake)
    await prompt(fake, root, "go [[script:long]]")
    await fake.wait_hanging(root)
    held = adopting_held_at_the_read_back(fake, root)
    async with held as (oc, rec, tree_read, start, started):
        follow_up = asyncio.create_task(oc.send_turn(T, "and this too"))
        await fake.wait_until(lambda: "and this too" in texts(fake, root))
        tree_read.release()
        await start
        steered = await follow_up
        assert steered.turn_id == started.turn_id  # a steer of the adopted turn
        result = await oc.interrupt_turn(T)
        await rec.close()
    assert result.turn_id == started.turn_id
    assert len(rec.of("turn.started")) == 1


async def test_a_request_opened_before_the_adoption_is_announced_once_and_answered(
    fake: FakeOpenCodeServer,
) -> None:
    fake.script("asks", [Permission("bash", ["make *"]), Text("made")])
    root = await new_session(fake)
    await prompt(fake, root, "go [[script:asks]]")
    await fake.wait_until(lambda: bool(fake.pending_permissions()))
    async with OpenCodeAdapter(fake.base_url, transport=fake.transport) as oc:
        rec = Recorder(oc)
        await oc.start_session(T, resume=cursor(root))
        opened = await rec.wait_for("request.opened")
        assert [r.request_id for r in oc.pending_requests(T)] == [opened.request_id]
        await oc.respond_to_request(T, opened.request_id, "accept")
        done = await rec.wait_for("turn.completed")
        await rec.close()
    assert len(rec.of("request.opened")) == 1
    assert opened.turn_id == done.turn_id
    assert text(rec, done.turn_id) == "made"


async def test_a_run_that_went_on_while_the_server_was_unreachable_is_adopted_again(
    fake: FakeOpenCodeServer,
) -> None:
    # The network, not the server, went away: the turn ended ServerUnreachable, but the run
    # went on; once the server answers again the thread follows it to its end.
    fake.script(
        "long",
        [Text("started"), Tool("bash", {"command": "make"}, output="made\n", duration=1.0)],
    )
    timeouts = Timeouts(unreachable=0.2)
    async with OpenCodeAdapter(fake.base_url, transport=fake.transport, timeouts=timeouts) as oc:
        rec = Recorder(oc)
        await oc.start_session(T)
        sent = await oc.send_turn(T, "go [[script:long]]")
        await fake.wait_for_tool("bash", status="running")
        down = fake.refuse_connections()
        failed = await rec.wait_for("turn.completed")
        assert failed.state == "failed" and failed.turn_id == sent.turn_id
        down.remove()
        again = await rec.wait_for("turn.started", lambda e: e.origin == "adopted")
        done = await rec.wait_for("turn.completed", lambda e: e.state == "completed")
        await rec.close()
    assert again.turn_id == done.turn_id == sent.turn_id
    [made] = [e for e in rec.of("item.completed") if e.turn_id == sent.turn_id]
    assert made.detail == "made\n"


async def test_a_tree_found_working_under_an_idle_root_is_adopted_and_waited_for() -> None:
    # The root answered and went idle; its background subagent still works: the run is
    # the thread's turn until the subagent ends and the root has answered its result.
    async with FakeOpenCodeServer(background_subagents=True) as fake:
        fake.script("child", [Text("child working"), Tool("bash", {"command": "x"}, duration=0.5)])
        fake.script("after", [Text("the child is done")])
        fake.script(
            "root", [Task("bg", "child", background=True, result_script="after"), Text("later")]
        )
        root = await new_session(fake)
        await prompt(fake, root, "go [[script:root]]")
        [_, child] = await fake.wait_for_tree(root, sessions=2)
        await fake.wait_until(lambda: not fake.sessions[root].busy and fake.sessions[child].busy)
        async with OpenCodeAdapter(fake.base_url, transport=fake.transport) as oc:
            rec = Recorder(oc)
            info = await oc.start_session(T, resume=cursor(root))
            assert info.status == "running"
            done = await rec.wait_for("turn.completed")
            await rec.close()
    assert done.turn_id == info.active_turn_id and done.state == "completed"
    assert [e.session_id for e in rec.of("child.started")] == [child]
    assert "the child is done" in text(rec, done.turn_id)


async def test_a_long_run_is_found_from_its_first_message_however_far_back(
    fake: FakeOpenCodeServer,
) -> None:
    # The newest messages are read first: a run longer than that window is widened to.
    steps: list[Any] = []
    for i in range(80):
        steps += [Tool("bash", {"command": f"step {i}"}, output=f"{i}\n"), Text(f"s{i} ")]
    fake.script("long", [*steps, Hang()])
    fake.script("short", [Text("earlier")])
    root = await new_session(fake)
    async with fake.client() as http:
        body = {"parts": [{"type": "text", "text": "first [[script:short]]"}]}
        (await http.post(f"/session/{root}/message", json=body)).raise_for_status()
    await prompt(fake, root, "go [[script:long]]")
    await fake.wait_hanging(root)
    async with fake.client() as http:
        stored = (await http.get(f"/session/{root}/message")).json()
    assert len(stored) > 64  # more than the first window
    run_start = user_ids(fake, root)[1]
    async with OpenCodeAdapter(fake.base_url, transport=fake.transport) as oc:
        rec = Recorder(oc)
        info = await oc.start_session(T, resume=cursor(root))
        await oc.interrupt_turn(T)
        await rec.close()
    assert info.active_turn_id == "turn_" + run_start.removeprefix("msg_")
    assert text(rec, info.active_turn_id).startswith("s0 s1 ")
    assert "earlier" not in text(rec, info.active_turn_id)


async def test_a_run_aborted_elsewhere_while_its_idle_is_being_checked_ends_at_once(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    """The real server's abort sends the root's idle before its step's
    MessageAbortedError, then a second idle. A check of the first idle that reads the
    step unfinished, then (re-reading) aborted, must not leave the turn waiting for
    the watchdog's quiet check (30 s): the abort's events end it."""
    info, turn = await start_scripted_turn(oc, fake, T, "long", [Text("so far"), Hang()])
    root = info.session_id
    await fake.wait_hanging(root)
    reads = 0

    async def abort_before_the_second_read(request: httpx.Request) -> None:
        nonlocal reads
        reads += 1
        if reads == 2:  # the check's re-read: another client's abort lands first
            async with fake.client() as http:
                (await http.post(f"/session/{root}/abort")).raise_for_status()

    hook = fake.on("GET", f"/session/{root}/message", abort_before_the_second_read)
    fake.set_busy(root, False)  # the abort's first idle, its step still unfinished
    ended = await rec.wait_for("turn.aborted", timeout=10)
    assert hook.call_count >= 2
    assert ended.turn_id == turn.turn_id
    assert ended.reason == "Aborted outside this adapter."
    assert ended.partial.text == "so far"
