"""Contract tests of ``interrupt_turn``: the whole tree stops, and what finished is kept."""

from __future__ import annotations

import asyncio

import pytest

from adapter import (
    InterruptResult,
    InvalidInputError,
    OpenCodeAdapter,
    RequestError,
    Timeouts,
    TreeStopError,
    TurnCancelledError,
)
from adapter.testing import caught_up
from adapter.testing.fake import FakeOpenCodeServer, Hang, Hold, Permission, Task, Text, Tool
from tests.adapter_support import Record, Recorder, emit_session_error, held_abort, refuse

T = "thread-1"


@pytest.fixture
def timeouts() -> Timeouts:
    return Timeouts(abort=2.0, tree=2.0)


# One stop aborts the root three times: its abort, and two more 5 and 25 ms later (so
# that OpenCode starts no extra model step: adapter/_stop/_stop_tree.py).
ROOT_ABORTS_PER_STOP = 3


def aborts(fake: FakeOpenCodeServer, sid: str) -> int:
    return sum(1 for r in fake.requests if r.method == "POST" and r.path == f"/session/{sid}/abort")


async def running_tree(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder, *, then_hang: bool = False
) -> tuple[str, str]:
    """Root -> task child -> task grandchild (hanging).

    With ``then_hang`` the root keeps working after its task is cancelled.
    """
    fake.script("grandchild", [Hang()])
    fake.script("child", [Task("deeper", "grandchild")])
    tail = [Hang()] if then_hang else []
    fake.script(
        "root",
        [Tool("bash", {"command": "echo hi"}, output="hi\n"), Task("explore", "child"), *tail],
    )
    info = await oc.start_session(T)
    turn = await oc.send_turn(T, "go [[script:root]]")
    await rec.wait_for("child.started", lambda e: e.parent_id != info.session_id)
    return info.session_id, turn.turn_id


@pytest.fixture
async def tree(oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder) -> tuple[str, str]:
    """``running_tree`` on ``oc``: its root session and turn."""
    return await running_tree(oc, fake, rec)


async def stop_held_at_a_busy_child(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, root: str
) -> tuple[str, Hold, asyncio.Task[InterruptResult]]:
    """A busy API child added under ``root``, then ``interrupt_turn`` started and held at
    the child's abort: the child, the hold (``release()`` it) and the stop's task."""
    child = fake.add_session(parent_id=root, busy=True)
    hold, stop = await held_abort(fake, child, oc.interrupt_turn(T))
    return child, hold, stop


async def test_interrupt_stops_the_whole_tree_and_nothing_else(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder, tree: tuple[str, str]
) -> None:
    root, turn_id = tree
    api_child = fake.add_session(parent_id=root, busy=True)
    unrelated = fake.add_session(busy=True)
    unrelated_kid = fake.add_session(parent_id=unrelated, busy=True)
    result = await oc.interrupt_turn(T, turn_id)
    assert result.turn_id == turn_id
    assert result.stop is not None and result.stop.ok
    stopped = set(result.stop.session_ids)
    assert api_child in stopped and root in stopped and len(stopped) == 4
    assert all(not fake.sessions[s].busy for s in stopped)
    assert fake.sessions[unrelated].busy and fake.sessions[unrelated_kid].busy
    touched = {r.session_id for r in fake.requests}
    assert unrelated not in touched and unrelated_kid not in touched
    aborted = await rec.wait_for("turn.aborted")
    assert aborted.turn_id == turn_id and aborted.reason == "Interrupted by user."
    assert aborted.partial is result.partial
    [info] = oc.list_sessions()
    assert info.status == "ready" and info.active_turn_id is None
    await caught_up(fake, oc)
    assert rec.of("turn.completed", T) == []
    assert fake.max_in_flight <= 8


async def test_partial_result_keeps_what_finished(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script(
        "work",
        [
            Tool("bash", {"command": "echo done"}, output="done\n"),
            Text("partial answer so far"),
            Tool("bash", {"command": "sleep 100"}, duration=float("inf")),
        ],
    )
    await oc.start_session(T)
    await oc.send_turn(T, "go [[script:work]]")
    await rec.wait_for("item.updated", lambda e: e.input.get("command") == "sleep 100")
    result = await oc.interrupt_turn(T)
    partial = result.partial
    assert "partial answer so far" in partial.text
    by_command = {c.input.get("command"): c for c in partial.tool_calls}
    assert (
        by_command["echo done"].status == "completed" and by_command["echo done"].output == "done\n"
    )
    assert by_command["sleep 100"].status == "interrupted"
    assert "done" in partial.to_prompt()


async def test_concurrent_interrupts_share_one_abort(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder, tree: tuple[str, str]
) -> None:
    root, turn_id = tree
    hold = fake.hold("POST", f"/session/{root}/abort")
    calls = [asyncio.create_task(oc.interrupt_turn(T, turn_id)) for _ in range(50)]
    await hold.wait_started()
    await caught_up(fake, oc)  # every interrupt has joined the held stop
    hold.release()
    results = await asyncio.gather(*calls)
    assert all(r is results[0] for r in results)
    assert aborts(fake, root) == ROOT_ABORTS_PER_STOP
    await caught_up(fake, oc)
    assert len(rec.of("turn.aborted", T)) == 1


async def test_inactive_turn_id_is_a_noop_and_repeat_returns_at_once(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, tree: tuple[str, str]
) -> None:
    _root, turn_id = tree
    before = len(fake.requests)
    noop = await oc.interrupt_turn(T, "turn_not_this_one")
    assert noop.stop is None and len(fake.requests) == before
    first = await oc.interrupt_turn(T, turn_id)
    count = len(fake.requests)
    again = await oc.interrupt_turn(T, turn_id)
    assert again is first and len(fake.requests) == count


async def test_idle_during_a_pending_abort_does_not_complete_the_turn(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder, tree: tuple[str, str]
) -> None:
    root, _turn_id = tree
    hold, stop = await held_abort(fake, root, oc.interrupt_turn(T))
    fake.emit("session.status", {"sessionID": root, "status": {"type": "idle"}})
    fake.emit("session.idle", {"sessionID": root})
    await caught_up(fake, oc)
    assert rec.of("turn.completed", T) == []
    assert oc.list_sessions()[0].status == "stopping"
    hold.release()
    await stop
    await caught_up(fake, oc)
    assert [
        e.type for e in rec.events if e.type.startswith("turn.") and e.type != "turn.usage"
    ] == [
        "turn.started",
        "turn.stopping",
        "turn.aborted",
        "turn.stopped",
    ]


async def test_failed_root_abort_keeps_the_turn_and_a_retry_works(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    root, turn_id = await running_tree(oc, fake, rec, then_hang=True)
    refusal = refuse(fake, "POST", f"/session/{root}/abort", "refused", times=None)
    with pytest.raises(TreeStopError) as caught:
        await oc.interrupt_turn(T)
    assert caught.value.first_failure is not None and caught.value.first_failure.session_id == root
    assert len(caught.value.report) == 3, "the walk ran even though the root abort failed"
    [info] = oc.list_sessions()
    assert info.status == "running" and info.active_turn_id == turn_id
    assert rec.of("turn.aborted", T) == []
    refusal.remove()
    result = await oc.interrupt_turn(T)
    assert result.turn_id == turn_id
    await rec.wait_for("turn.aborted")


async def test_idle_held_during_a_failed_stop_is_replayed(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder, tree: tuple[str, str]
) -> None:
    # The root abort fails, but the walk cancels the task child, so the root
    # finishes its script: the idle held back during the stop completes the turn.
    root, turn_id = tree
    fake.fail("POST", f"/session/{root}/abort", status=400, times=1)
    with pytest.raises(TreeStopError):
        await oc.interrupt_turn(T)
    done = await rec.wait_for("turn.completed")
    assert done.turn_id == turn_id and done.state == "completed"
    assert rec.of("turn.aborted", T) == []


async def test_failed_child_abort_fails_the_interrupt_after_every_attempt(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, tree: tuple[str, str]
) -> None:
    root, turn_id = tree
    a = fake.add_session(parent_id=root, busy=True)
    b = fake.add_session(parent_id=root, busy=True)
    fake.fail("POST", f"/session/{a}/abort", status=400, times=None)
    with pytest.raises(TreeStopError) as caught:
        await oc.interrupt_turn(T)
    assert caught.value.first_failure is not None and caught.value.first_failure.session_id == a
    assert aborts(fake, b) == 1 and not fake.sessions[b].busy
    assert oc.list_sessions()[0].active_turn_id == turn_id


async def a_turn_held_by_a_failed_child_abort(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> tuple[str, str]:
    """``running_tree``, a busy child whose abort always fails, and the failed Stop: the
    turn (held) and that child."""
    root, turn_id = await running_tree(oc, fake, rec)
    child = fake.add_session(parent_id=root, busy=True)
    fake.fail("POST", f"/session/{child}/abort", status=400, times=None)
    with pytest.raises(TreeStopError):
        await oc.interrupt_turn(T)
    return turn_id, child


async def test_a_turn_held_by_a_failed_child_abort_ends_aborted_once_the_tree_is_idle(
    fake: FakeOpenCodeServer, record: Record
) -> None:
    """The root was aborted but a child's abort failed: the turn does not settle on the
    root's idle (the child still runs), and ends, aborted, once nothing of the tree runs."""
    timeouts = Timeouts(abort=2.0, tree=2.0, watchdog=0.05)  # a held turn is looked at often
    async with OpenCodeAdapter(fake.base_url, transport=fake.transport, timeouts=timeouts) as oc:
        rec = record(oc)
        turn_id, a = await a_turn_held_by_a_failed_child_abort(oc, fake, rec)
        # Several watchdog looks (each reads the status) while the child is busy.
        looks = len(fake.calls("GET", "/session/status")) + 3
        await fake.wait_until(
            lambda: len(fake.calls("GET", "/session/status")) >= looks,
            description="three more watchdog looks at the held turn's tree",
        )
        await caught_up(fake, oc)
        assert not rec.of("turn.aborted", T) and not rec.of("turn.completed", T)
        assert oc.list_sessions()[0].active_turn_id == turn_id
        fake.set_busy(a, False)
        aborted = await rec.wait_for("turn.aborted", timeout=3.0)
        assert aborted.turn_id == turn_id
        assert aborted.reason is not None and "stop failed for part of the tree" in aborted.reason
        assert oc.list_sessions()[0].active_turn_id is None


async def test_a_held_turn_fails_when_the_server_stops_answering(
    fake: FakeOpenCodeServer, record: Record
) -> None:
    """A held turn waits for the tree's status; a server that no longer answers must not
    leave it ``running`` forever."""
    timeouts = Timeouts(
        abort=2.0, tree=2.0, idle_confirm=0.5, idle_confirm_backoff_max=0.1, watchdog=0.05
    )
    async with OpenCodeAdapter(fake.base_url, transport=fake.transport, timeouts=timeouts) as oc:
        rec = record(oc)
        turn_id, _child = await a_turn_held_by_a_failed_child_abort(oc, fake, rec)
        fake.fail("GET", "/session/status", status=503, times=None)
        done = await rec.wait_for("turn.completed", timeout=5.0)
        assert done.turn_id == turn_id and done.state == "failed"
        assert done.error is not None and "did not answer for 0.5 s" in done.error
        [error] = rec.of("runtime.error", T)
        assert error.error_name == "ServerUnavailable"


async def test_abort_timeout_releases_stop_and_send_waiters(fake: FakeOpenCodeServer) -> None:
    async with OpenCodeAdapter(
        fake.base_url,
        transport=fake.transport,
        timeouts=Timeouts(abort=0.2, tree=0.2),
    ) as oc:
        rec = Recorder(oc)
        root, _ = await running_tree(oc, fake, rec)
        hold, stop = await held_abort(fake, root, oc.interrupt_turn(T))
        send = asyncio.create_task(oc.send_turn(T, "next"))
        with pytest.raises(TreeStopError):
            await stop
        with pytest.raises(TreeStopError):
            await send
        hold.release()
        fake.script("ok", [Text("ok")])
        await oc.interrupt_turn(T)
        await oc.send_turn(T, "works [[script:ok]]")
        await rec.wait_for("turn.completed")
        await rec.close()


async def test_turnless_stop_still_aborts(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    info = await oc.start_session(T)
    child = fake.add_session(parent_id=info.session_id, busy=True)
    result = await oc.interrupt_turn(T)
    assert result.turn_id is None and result.partial.is_empty
    assert aborts(fake, info.session_id) == ROOT_ABORTS_PER_STOP and not fake.sessions[child].busy
    await caught_up(fake, oc)
    assert rec.of("turn.aborted", T) == []


async def test_send_waits_for_a_pending_stop_then_starts_a_new_turn(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder, tree: tuple[str, str]
) -> None:
    root, turn_id = tree
    _, hold, stop = await stop_held_at_a_busy_child(oc, fake, root)
    prompts_before = sum(1 for r in fake.requests if r.path.endswith("/prompt_async"))
    fake.script("ok", [Text("next")])
    send = asyncio.create_task(oc.send_turn(T, "next [[script:ok]]"))
    await caught_up(fake, oc)
    assert not send.done()
    assert sum(1 for r in fake.requests if r.path.endswith("/prompt_async")) == prompts_before
    [info] = oc.list_sessions()
    assert info.status == "stopping" and info.active_turn_id == turn_id
    hold.release()
    await stop
    nxt = await send
    assert nxt.turn_id != turn_id
    done = await rec.wait_for("turn.completed")
    assert done.turn_id == nxt.turn_id


async def test_genuine_error_during_a_stop_stays_visible(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder, tree: tuple[str, str]
) -> None:
    root, _turn_id = tree
    child, hold, stop = await stop_held_at_a_busy_child(oc, fake, root)
    emit_session_error(fake, root, "APIError", "quota")
    failed = await rec.wait_for("turn.completed")
    assert failed.state == "failed" and failed.error == "quota"
    assert (await rec.wait_for("runtime.error")).error_name == "APIError"
    assert not stop.done(), "the stop still finishes the tree"
    hold.release()
    await stop
    assert not fake.sessions[child].busy
    await caught_up(fake, oc)
    assert rec.of("turn.aborted", T) == []


async def test_a_prompt_in_flight_lands_before_the_stop_aborts_its_run(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    """Given up on, a prompt already on the wire could reach the server after the abort
    and start a run nothing stops: the stop waits for its request, then aborts."""
    fake.script("hang", [Hang()])
    info = await oc.start_session(T)
    hold = fake.hold("POST", "/session/{id}/prompt_async")
    send = asyncio.create_task(oc.send_turn(T, "slow to accept [[script:hang]]"))
    await hold.wait_started()
    stop = asyncio.create_task(oc.interrupt_turn(T))
    done, _ = await asyncio.wait([stop], timeout=0.3)
    assert not done, "the stop went on while the prompt was on its way"
    assert aborts(fake, info.session_id) == 0
    hold.release()
    started = await send
    result = await stop
    assert result.turn_id == started.turn_id and result.stop is not None and result.stop.ok
    assert (await rec.wait_for("turn.aborted")).turn_id == started.turn_id
    assert not fake.sessions[info.session_id].busy
    [prompt] = fake.calls("POST", "/session/{id}/prompt_async")
    assert prompt.status == 204


async def test_a_prompt_whose_request_never_ends_is_cancelled_at_the_abort_bound(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    info = await oc.start_session(T)
    hold = fake.hold("POST", "/session/{id}/prompt_async")
    send = asyncio.create_task(oc.send_turn(T, "slow to accept"))
    await hold.wait_started()
    result = await oc.interrupt_turn(T)
    with pytest.raises(TurnCancelledError):
        await send
    assert result.turn_id is not None
    await rec.wait_for("turn.aborted")
    hold.release()
    fake.script("ok", [Text("fresh")])
    await oc.send_turn(T, "again [[script:ok]]")
    await rec.wait_for("turn.completed")
    assert aborts(fake, info.session_id) == ROOT_ABORTS_PER_STOP


async def test_late_events_of_a_stopped_turn_are_suppressed(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("talk", [Text("before stop"), Hang()])
    info = await oc.start_session(T)
    await oc.send_turn(T, "go [[script:talk]]")
    delta = await rec.wait_for("content.delta")
    await oc.interrupt_turn(T)
    await caught_up(fake, oc)
    count = len(rec.of("content.delta", T))
    old_message = (
        delta.raw["properties"].get("messageID") or delta.raw["properties"]["part"]["messageID"]
    )
    fake.emit(
        "message.part.delta",
        {
            "sessionID": info.session_id,
            "messageID": old_message,
            "partID": delta.item_id,
            "field": "text",
            "delta": " late",
        },
    )
    fake.emit("session.status", {"sessionID": info.session_id, "status": {"type": "busy"}})
    fake.emit("session.idle", {"sessionID": info.session_id})
    emit_session_error(fake, info.session_id, "MessageAbortedError", "Aborted")
    fake.script("next", [Hang()])
    await oc.send_turn(T, "next [[script:next]]")
    await caught_up(fake, oc)
    assert len(rec.of("content.delta", T)) == count
    assert rec.of("turn.completed", T) == []
    assert len(rec.of("turn.aborted", T)) == 1
    assert oc.list_sessions()[0].status == "running"


async def test_pending_requests_of_the_tree_are_resolved_as_cancelled(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("child", [Permission("edit", ["*.py"])])
    fake.script("root", [Task("edit things", "child")])
    await oc.start_session(T)
    await oc.send_turn(T, "go [[script:root]]")
    opened = await rec.wait_for("request.opened")
    await oc.interrupt_turn(T)
    resolved = await rec.wait_for("request.resolved")
    assert resolved.request_id == opened.request_id and resolved.decision == "cancelled"
    with pytest.raises(Exception, match="no pending request"):
        await oc.respond_to_request(T, opened.request_id, "accept")


async def test_stop_session_during_a_pending_stop(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder, tree: tuple[str, str]
) -> None:
    root, _ = tree
    _, hold, stop = await stop_held_at_a_busy_child(oc, fake, root)
    send = asyncio.create_task(oc.send_turn(T, "waiting"))
    await caught_up(fake, oc)  # the send waits for the pending stop
    closing = asyncio.create_task(oc.stop_session(T))
    with pytest.raises(TurnCancelledError):
        await send
    hold.release()
    await stop
    await closing
    await caught_up(fake, oc)
    assert len(rec.of("session.exited", T)) == 1


async def test_interrupt_validates_the_thread(oc: OpenCodeAdapter) -> None:
    with pytest.raises(Exception, match="no OpenCode session"):
        await oc.interrupt_turn("missing")
    with pytest.raises((InvalidInputError, RequestError)):
        await oc.send_turn("missing", "")


async def test_partial_covers_this_turn_only_but_the_whole_tree_is_stopped(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("kid", [Text("kid done")])
    fake.script("first", [Task("earlier work", "kid"), Text("first done")])
    fake.script("hang", [Hang()])
    fake.script("second", [Task("current work", "hang")])
    info = await oc.start_session(T)
    await oc.send_turn(T, "one [[script:first]]")
    await rec.wait_for("turn.completed")
    [old_child] = fake.sessions[info.session_id].children
    await oc.send_turn(T, "two [[script:second]]")
    await rec.wait_for("child.started", lambda e: e.session_id != old_child)
    before = len(fake.requests)
    result = await oc.interrupt_turn(T)
    assert result.stop is not None and old_child in result.stop.session_ids
    assert old_child not in result.partial.sessions
    assert [c.input.get("description") for c in result.partial.tool_calls] == ["current work"]
    fetched = [r.path for r in fake.requests[before:] if r.path.endswith("/message")]
    assert f"/session/{old_child}/message" not in fetched


async def test_a_failed_interrupt_carries_what_the_turn_had_produced(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    """A child's abort fails every attempt (a 4xx is not retried): the raised error names
    that session and carries ``.partial``, the root's streamed text and the usage so far."""
    fake.script("child", [Hang()])
    fake.script(
        "root",  # a finished step (the tool's) has its usage; then text, then the child
        [
            Tool("bash", {"command": "ls"}, output="a\n"),
            Text("Looking into it. "),
            Task("x", "child"),
        ],
    )
    info = await oc.start_session(T)
    turn = await oc.send_turn(T, "go [[script:root]]")
    child = (await rec.wait_for("child.started")).session_id
    reported = (await rec.wait_for("turn.usage")).usage  # the tool's step, finished
    fake.fail("POST", f"/session/{child}/abort", status=400, times=None)
    with pytest.raises(TreeStopError) as caught:
        await oc.interrupt_turn(T)
    error = caught.value
    assert error.first_failure is not None and error.first_failure.session_id == child
    assert error.report[child].outcome == "failed"
    partial = error.partial
    assert partial is not None
    assert partial.turn_id == turn.turn_id and partial.root_session_id == info.session_id
    assert partial.text == "Looking into it. "
    assert partial.usage.total_tokens == reported.total_tokens > 0
    assert partial.usage.cost == reported.cost
    failed = await rec.wait_for("turn.stop_failed")
    assert failed.partial is partial, "every subscriber learns what was kept, not only the caller"


async def test_a_failed_interrupt_with_no_turn_carries_an_empty_partial(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer
) -> None:
    info = await oc.start_session(T)
    fake.fail("POST", f"/session/{info.session_id}/abort", status=400, times=None)
    with pytest.raises(TreeStopError) as caught:
        await oc.interrupt_turn(T)
    partial = caught.value.partial
    assert partial is not None and partial.turn_id is None and partial.text == ""
    assert partial.root_session_id == info.session_id and partial.tool_calls == ()
