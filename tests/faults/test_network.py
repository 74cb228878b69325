"""Network faults: refused connections, resets, timeouts, 5xx/429 bursts, slow servers,
dropped event streams, and a server that goes away mid-turn."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from adapter import (
    OpenCodeAdapter,
    OpenCodeClient,
    OpenCodeError,
    RequestError,
    Timeouts,
    TreeStopError,
)
from adapter.testing import caught_up
from adapter.testing.fake import FakeOpenCodeServer, Hang, HookHandler, Permission, Text, Tool
from tests.adapter_support import another_turn_completed, start_scripted_turn
from tests.faults.conftest import FAST_RETRY
from tests.faults.harness import (
    Harness,
    LoopbackServer,
    ResetAfterServing,
    aborts,
    closed_port,
    fast,
    read_request,
    wait_any,
)

T = "thread-1"


def raising(exc_type: type[httpx.TransportError], times: int | None = None) -> HookHandler:
    """A hook handler that raises ``exc_type`` for the first ``times`` requests (all if None)."""
    left = [times]

    async def handler(request: httpx.Request) -> None:
        if left[0] is None or left[0] > 0:
            if left[0] is not None:
                left[0] -= 1
            raise exc_type("injected", request=request)
        return None

    return handler


def prompt_requests(fake: FakeOpenCodeServer) -> int:
    return sum(1 for r in fake.requests if r.path.endswith("/prompt_async"))


# ------------------------------------------------------------------ connection refused


async def test_refused_connections_on_an_idempotent_call_are_retried_until_it_succeeds(
    fake: FakeOpenCodeServer,
    opencode_client: OpenCodeClient,
    captured_logs: list[dict[str, object]],
) -> None:
    root = fake.add_session()
    kid = fake.add_session(parent_id=root)
    hook = fake.on("GET", "/session/{id}/children", raising(httpx.ConnectError, times=2))
    children = await opencode_client.children(root)
    assert [c.id for c in children] == [kid]
    assert hook.call_count == 3
    assert sum(1 for log in captured_logs if log["event"] == "opencode.retry") == 2


async def test_a_closed_loopback_port_gives_a_typed_error_after_the_retries() -> None:
    before = asyncio.all_tasks()
    async with OpenCodeClient(f"http://127.0.0.1:{closed_port()}", retry=FAST_RETRY) as client:
        with pytest.raises(RequestError) as caught:
            await client.abort("ses_anything")
        assert caught.value.status is None and caught.value.operation == "abort"
        assert "after 4 attempts" in str(caught.value)
        with pytest.raises(RequestError) as once:
            await client.health()  # not idempotent: one attempt
        assert "attempts" not in str(once.value)
    await asyncio.sleep(0)
    assert asyncio.all_tasks() - before == set()


async def test_an_adapter_on_a_closed_port_fails_start_session_and_leaves_nothing_behind() -> None:
    before = asyncio.all_tasks()
    oc = OpenCodeAdapter(f"http://127.0.0.1:{closed_port()}", timeouts=Timeouts(connect=0.3))
    async with oc:
        with pytest.raises(RequestError) as caught:
            await oc.start_session(T)
        assert caught.value.operation == "create_session"
        assert not oc.has_session(T) and oc.list_sessions() == []
    await asyncio.sleep(0)
    assert asyncio.all_tasks() - before == set()


async def test_a_refused_prompt_is_never_retried_and_rolls_the_new_turn_back(
    fake: FakeOpenCodeServer, h: Harness
) -> None:
    await h.oc.start_session(T)
    hook = fake.on("POST", "/session/{id}/prompt_async", raising(httpx.ConnectError, 1))
    with pytest.raises(RequestError) as caught:
        await h.oc.send_turn(T, "hello")
    assert caught.value.operation == "prompt_async"
    assert hook.call_count == 1, "a write is never retried"
    aborted = await h.rec.wait_for("turn.aborted")
    assert "not accepted" in aborted.reason
    await h.consistent()
    [info] = h.oc.list_sessions()
    assert info.status == "ready" and info.last_error
    assert (
        await another_turn_completed(h.oc, fake, h.rec, T, "again", "fine")
    ).state == "completed"


# ------------------------------------------------------------------ reset mid-response


@pytest.mark.parametrize("error", [httpx.RemoteProtocolError, httpx.ReadError])
async def test_a_reset_mid_response_on_a_read_is_retried(
    fake: FakeOpenCodeServer, opencode_client: OpenCodeClient, error: type[httpx.TransportError]
) -> None:
    root = fake.add_session()
    hook = fake.on("GET", "/session/{id}/message", raising(error, times=1))
    assert await opencode_client.messages(root) == []
    assert hook.call_count == 2


async def test_a_reset_abort_during_an_interrupt_is_retried_and_the_stop_succeeds(
    fake: FakeOpenCodeServer, h: Harness
) -> None:
    info, turn = await start_scripted_turn(h.oc, fake, T, "work", [Text("some text"), Hang()])
    await h.rec.wait_for("content.delta")
    fake.on("POST", "/session/{id}/abort", raising(httpx.RemoteProtocolError, times=2))
    result = await h.oc.interrupt_turn(T)
    assert result.stop is not None and result.stop.ok
    # the two reset attempts and at least one that landed (the stop's second root
    # aborts may take the resets too, so the total is not fixed)
    assert aborts(fake, info.session_id) >= 3
    assert not fake.sessions[info.session_id].busy
    assert "some text" in result.partial.text, "output before the fault is kept"
    aborted = await h.rec.wait_for("turn.aborted")
    assert aborted.turn_id == turn.turn_id
    await h.consistent()


async def test_a_prompt_whose_response_is_lost_after_acceptance_keeps_its_turn(
    fake: FakeOpenCodeServer,
) -> None:
    fake.script("work", [Text("hello"), Tool("bash", {"command": "true"}, duration=0.2)])
    transport = ResetAfterServing(fake.transport, lambda r: r.url.path.endswith("/prompt_async"))
    async with Harness(fake, transport=transport) as h:
        info = await h.oc.start_session(T)
        try:
            turn_id: str | None = (await h.oc.send_turn(T, "go [[script:work]]")).turn_id
        except RequestError:
            turn_id = None
        assert transport.resets == 1
        # The prompt did land: the server ran it (user + assistant messages exist) ...
        await fake.wait_for_event("session.idle", lambda e: True, timeout=3)
        assert [m.role for m in fake.sessions[info.session_id].messages][:2] == [
            "user",
            "assistant",
        ]
        # ... so its turn must be tracked to completion, not declared "not accepted".
        assert turn_id is not None
        done = await h.rec.wait_for("turn.completed")
        assert done.turn_id == turn_id


# ------------------------------------------------------------------ timeouts


async def test_a_server_that_never_answers_times_out_per_attempt_with_a_typed_error() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await asyncio.Event().wait()  # never answers (cancelled when the server closes)

    async with LoopbackServer(silent) as server:
        async with OpenCodeClient(server.url, timeout=0.1, retry=FAST_RETRY) as client:
            started = time.perf_counter()
            with pytest.raises(RequestError) as caught:
                await client.status()
            elapsed = time.perf_counter() - started
        assert "timed out" in str(caught.value) and "after 4 attempts" in str(caught.value)
        assert server.connections == 4
        assert elapsed < 2.0


async def test_a_fake_handler_slower_than_the_client_timeout_times_out(
    fake: FakeOpenCodeServer,
) -> None:
    answer = asyncio.Event()  # set once the client gave up: the handler was slower

    async def slow(request: httpx.Request) -> None:
        await answer.wait()

    fake.on("GET", "/global/health", slow)
    async with OpenCodeClient(fake.base_url, transport=fake.transport, timeout=0.1) as client:
        started = time.perf_counter()
        try:
            with pytest.raises(RequestError, match="timed out"):
                await client.health()
        finally:
            answer.set()
        assert time.perf_counter() - started < 0.5


#: How often the slow-loris server drips one byte: the wall clock is the behaviour under
#: test (a response that never stalls long enough for a read timeout, yet never ends).
DRIP_INTERVAL = 0.05


async def test_a_slow_loris_response_is_bounded_by_the_client_timeout() -> None:
    async def trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        while True:
            writer.write(b"1\r\n \r\n")
            await writer.drain()
            await asyncio.sleep(DRIP_INTERVAL)

    async with (
        LoopbackServer(trickle) as server,
        OpenCodeClient(server.url, timeout=0.2, retry=FAST_RETRY) as client,
    ):
        with pytest.raises(RequestError):
            async with asyncio.timeout(1.5):  # 0.2 s timeout: generous
                await client.health()


async def test_a_prompt_the_server_never_answers_is_bounded_by_submit_timeout(
    fake: FakeOpenCodeServer,
) -> None:
    hold = fake.hold("POST", "/session/{id}/prompt_async")
    async with Harness(fake, timeouts=fast(submit=0.2)) as h:
        await h.oc.start_session(T)
        started = time.perf_counter()
        with pytest.raises(RequestError, match="did not accept the prompt"):
            await h.oc.send_turn(T, "hello")
        assert time.perf_counter() - started < 1.0
        assert fake.in_flight == 0, "the held request was cancelled, not abandoned"
        await h.rec.wait_for("turn.aborted")
        await h.consistent()
        hold.release()


# ------------------------------------------------------------------ 5xx / 429 bursts


@pytest.mark.parametrize("status", [502, 503, 429])
async def test_a_burst_of_transient_statuses_is_retried_then_succeeds(
    fake: FakeOpenCodeServer, opencode_client: OpenCodeClient, status: int
) -> None:
    root = fake.add_session(busy=True)
    hook = fake.fail("GET", "/session/status", status=status, times=3)
    statuses = await opencode_client.status()
    assert statuses[root].is_busy
    assert hook.call_count == 4


@pytest.mark.parametrize("status", [502, 503, 429])
async def test_exhausted_retries_raise_a_request_error_carrying_the_status(
    fake: FakeOpenCodeServer, opencode_client: OpenCodeClient, status: int
) -> None:
    root = fake.add_session()
    hook = fake.fail("POST", "/session/{id}/abort", status=status, times=None)
    with pytest.raises(RequestError) as caught:
        await opencode_client.abort(root)
    assert caught.value.status == status
    assert caught.value.session_id == root and caught.value.operation == "abort"
    assert "injected failure" in str(caught.value) and "after 4 attempts" in str(caught.value)
    assert hook.call_count == 4
    assert fake.sessions[root].abort_count == 0


async def test_a_503_on_a_prompt_is_raised_with_its_status_after_one_attempt(
    fake: FakeOpenCodeServer, h: Harness
) -> None:
    await h.oc.start_session(T)
    fake.fail("POST", "/session/{id}/prompt_async", status=503, times=None)
    with pytest.raises(RequestError) as caught:
        await h.oc.send_turn(T, "hello")
    assert caught.value.status == 503
    assert prompt_requests(fake) == 1
    await h.rec.wait_for("turn.aborted")
    await h.consistent()


async def test_interrupt_rides_out_a_burst_of_503_on_the_walk(
    fake: FakeOpenCodeServer, h: Harness
) -> None:
    fake.script("work", [Hang()])
    info = await h.oc.start_session(T)
    kid = fake.add_session(parent_id=info.session_id, busy=True)
    await h.oc.send_turn(T, "go [[script:work]]")
    fake.fail("GET", "/session/{id}/children", status=503, times=2)
    fake.fail("POST", f"/session/{kid}/abort", status=429, times=2)
    result = await h.oc.interrupt_turn(T)
    assert result.stop is not None and result.stop.ok
    assert not fake.sessions[kid].busy and not fake.sessions[info.session_id].busy
    await h.rec.wait_for("turn.aborted")
    await h.consistent()


# ------------------------------------------------------------------ event stream dropped


@pytest.mark.parametrize("with_error", [True, False], ids=["reset", "clean-eof"])
async def test_a_turn_that_finishes_during_an_event_stream_outage_is_reconciled(
    fake: FakeOpenCodeServer, with_error: bool, h: Harness
) -> None:
    fake.script(
        "work",
        [Text("before the drop"), Tool("bash", {"command": "sleep"}, duration=0.1), Text(" end")],
    )
    info = await h.oc.start_session(T)
    turn = await h.oc.send_turn(T, "go [[script:work]]")
    first = await h.rec.wait_for("content.delta")
    reconnect = fake.hold("GET", "/event")
    fake.drop_event_streams(error=with_error)
    warning = await h.rec.wait_for("runtime.warning")
    assert warning.turn_id == turn.turn_id
    # The turn finishes on the server while the adapter is blind.
    await fake.wait_until(lambda: not fake.sessions[info.session_id].busy, timeout=3)
    assert h.rec.of("turn.completed") == []
    reconnect.release()
    done = await h.rec.wait_for("turn.completed", timeout=5)
    assert done.turn_id == turn.turn_id and done.state == "completed"
    assert first.delta == "before the drop", "what arrived before the drop was delivered"
    assert len(h.rec.of("runtime.warning", T)) == 1, "one warning per outage"
    await h.consistent()
    assert h.oc.list_sessions()[0].status == "ready"


async def test_a_turn_ends_when_its_reconcile_read_fails_longer_than_the_client_retries(
    fake: FakeOpenCodeServer, h: Harness
) -> None:
    """A prompt sent and answered during an event stream outage: its echo, answer and
    idle are only stored. When the stream is back, reading the stored messages fails
    more times in a row than the client retries (a server still recovering). The
    reconcile asks again, as it does for the status, and the turn ends then, with its
    answer said; it stayed running until the watchdog's overdue-echo check (``Timeouts.echo``,
    30 s)."""
    fake.script("unseen", [Text("said in the outage.")])
    info = await h.oc.start_session(T)
    reconnect = fake.hold("GET", "/event")
    fake.drop_event_streams()
    await h.rec.wait_for("runtime.warning")
    turn = await h.oc.send_turn(T, "go [[script:unseen]]")
    await fake.wait_until(lambda: not fake.sessions[info.session_id].busy, timeout=5)
    reads = fake.fail("GET", "/session/{id}/message", status=503, times=5)  # > 4 attempts
    reconnect.release()
    done = await h.rec.wait_for("turn.completed", timeout=10)
    assert done.turn_id == turn.turn_id and done.state == "completed"
    assert reads.call_count > 5  # every failure, then the read that answered
    assert [e.delta for e in h.rec.of("content.delta", T)] == ["said in the outage."]
    await h.consistent()


async def test_what_a_run_did_during_an_outage_is_said_when_the_stream_is_back_before_it_ends(
    fake: FakeOpenCodeServer, h: Harness
) -> None:
    """The stream is back while the run still goes (held at its end): its echo and its
    answer came during the outage and only the stored messages have them. They are said
    then, not lost; a follow-up sent in the run's end window, seen live, answers after
    them, and the turn ends (it waited for the unseen echo forever)."""
    fake.script("unseen", [Text("said in the outage.")])
    fake.script("seen", [Text(" said live.")])
    info = await h.oc.start_session(T)
    reconnect = fake.hold("GET", "/event")
    fake.drop_event_streams()
    await h.rec.wait_for("runtime.warning")
    run_end = fake.hold_run_end(info.session_id)
    turn = await h.oc.send_turn(T, "go [[script:unseen]]")
    await run_end.wait_started()  # answered and stored, unseen; the root is busy
    reconnect.release()
    first = await h.rec.wait_for("content.delta")
    assert first.turn_id == turn.turn_id and first.delta == "said in the outage."
    follow_up = await h.oc.send_turn(T, "go [[script:seen]]")
    assert follow_up.turn_id == turn.turn_id
    run_end.release()
    done = await h.rec.wait_for("turn.completed")
    assert done.turn_id == turn.turn_id and done.state == "completed"
    said = "".join(e.delta for e in h.rec.of("content.delta", T))
    assert said == "said in the outage. said live."
    await h.consistent()


async def test_a_run_that_ends_while_the_reconnect_reads_its_stored_messages_ends_the_turn(
    fake: FakeOpenCodeServer, h: Harness
) -> None:
    """Two prompts of one turn sent during an event stream outage: their echoes are
    only stored. The stream is back while the second run still goes, so the
    reconnection's reconcile finds the root busy and reads the stored messages. The run
    ends while that read waits: its idle arrives while the turn still waits for the
    first prompt's echo. The read then brings that echo, the run is over, and the turn
    ends at once (found by the stateful test: it stayed running until the watchdog's
    quiet check, ``Timeouts.quiet_check``, 30 s)."""
    fake.script("first", [Text("first.")])
    fake.script("second", [Text(" second.")])
    info = await h.oc.start_session(T)
    root = info.session_id
    reconnect = fake.hold("GET", "/event")
    fake.drop_event_streams()
    await h.rec.wait_for("runtime.warning")
    turn = await h.oc.send_turn(T, "go [[script:first]]")
    await fake.wait_until(lambda: len(fake.sessions[root].messages) == 2, timeout=5)
    await fake.wait_until(lambda: not fake.sessions[root].busy, timeout=5)
    run_end = fake.hold_run_end(root)
    await h.oc.send_turn(T, "go [[script:second]]")  # into the same turn
    await run_end.wait_started()  # answered and stored, unseen; the root is busy
    read = fake.hold("GET", f"/session/{root}/message")
    reconnect.release()
    await read.wait_started()  # the reconcile found the root busy and reads
    assert h.oc.session_info(T).active_turn_id == turn.turn_id
    since = fake.event_count
    run_end.release()
    await fake.wait_for_event(
        "session.idle", lambda e: e["properties"]["sessionID"] == root, since=since, timeout=5
    )
    await caught_up(fake, h.oc)  # the idle, seen; the turn waits for the read's echo
    assert h.oc.session_info(T).active_turn_id == turn.turn_id
    read.release()
    done = await h.rec.wait_for("turn.completed", timeout=5)
    assert done.turn_id == turn.turn_id and done.state == "completed"
    assert "".join(e.delta for e in h.rec.of("content.delta", T)) == "first. second."
    await h.consistent()


async def test_output_of_an_outage_is_said_when_the_turn_ends_before_the_reconcile_answers(
    fake: FakeOpenCodeServer, h: Harness
) -> None:
    """The stream is back mid-answer (the run waits on a permission): the text streamed
    during the outage is only stored. The run then ends, seen live, before the
    reconnection's status poll answers: the turn still reads what it missed, and says it
    (after the rest: the order of a read back is not the stream's)."""
    fake.script(
        "gap",
        [
            Text("said in the outage."),
            Permission("bash", ["ls"], tool=Tool("bash", {"command": "ls"}, output="x")),
            Text(" said live."),
        ],
    )
    info = await h.oc.start_session(T)
    reconnect = fake.hold("GET", "/event")
    fake.drop_event_streams()
    await h.rec.wait_for("runtime.warning")
    turn = await h.oc.send_turn(T, "go [[script:gap]]")
    await fake.wait_until(lambda: bool(fake.sessions[info.session_id].pending_requests), timeout=5)
    polls: list[httpx.Request] = []
    answer_poll = asyncio.Event()

    async def first_poll_waits(request: httpx.Request) -> None:
        polls.append(request)
        if len(polls) == 1:
            await answer_poll.wait()

    fake.on("GET", "/session/status", first_poll_waits)
    reconnect.release()
    try:
        opened = await h.rec.wait_for("request.opened")
        await fake.wait_until(lambda: bool(polls), timeout=5)  # the reconcile asks, held
        await h.oc.respond_to_request(T, opened.request_id, "accept")
        done = await h.rec.wait_for("turn.completed")
    finally:
        answer_poll.set()
    assert done.turn_id == turn.turn_id and done.state == "completed"
    # read back when the turn ends, after what came live: each said once
    said = sorted(e.delta for e in h.rec.of("content.delta", T))
    assert said == [" said live.", "said in the outage."]
    await h.consistent()


async def test_event_stream_reconnect_survives_failing_reconnect_attempts(
    fake: FakeOpenCodeServer, h: Harness
) -> None:
    fake.script("work", [Text("a"), Tool("bash", {"command": "x"}, duration=0.3), Text("b")])
    await h.oc.start_session(T)
    turn = await h.oc.send_turn(T, "go [[script:work]]")
    await h.rec.wait_for("content.delta")
    refusals = fake.fail("GET", "/event", status=503, times=2)
    fake.drop_event_streams()
    done = await h.rec.wait_for("turn.completed", timeout=5)
    assert done.turn_id == turn.turn_id
    assert refusals.call_count >= 3
    assert len(h.rec.of("runtime.warning", T)) == 1
    await h.consistent()


async def test_a_turn_aborted_by_another_client_during_an_outage_is_reconciled_as_aborted(
    fake: FakeOpenCodeServer, h: Harness
) -> None:
    info, turn = await start_scripted_turn(h.oc, fake, T, "work", [Text("partial"), Hang()])
    await h.rec.wait_for("content.delta")
    reconnect = fake.hold("GET", "/event")
    fake.drop_event_streams()
    await h.rec.wait_for("runtime.warning")
    async with OpenCodeClient(fake.base_url, transport=fake.transport) as other_client:
        await other_client.abort(info.session_id)  # the TUI's Stop, unseen by the adapter
    reconnect.release()
    ended = await wait_any(h.rec, ["turn.completed", "turn.aborted"])
    assert ended.turn_id == turn.turn_id
    assert ended.type == "turn.aborted", ended


# ------------------------------------------------------------------ the server goes away


async def test_an_external_server_vanishing_mid_turn_releases_every_waiter_with_typed_errors(
    fake: FakeOpenCodeServer,
) -> None:
    fake.script("work", [Text("partial"), Hang()])
    async with Harness(fake) as h:
        info = await h.oc.start_session(T)
        turn = await h.oc.send_turn(T, "go [[script:work]]")
        await h.rec.wait_for("content.delta")
        hold = fake.hold("POST", f"/session/{info.session_id}/abort")
        stops = [asyncio.create_task(h.oc.interrupt_turn(T)) for _ in range(3)]
        await hold.wait_started()
        send = asyncio.create_task(h.oc.send_turn(T, "next"))
        await caught_up(fake, h.oc)
        started = time.perf_counter()
        await fake.aclose()  # the server is gone: streams end, requests are refused
        outcomes = await asyncio.gather(*stops, send, return_exceptions=True)
        assert time.perf_counter() - started < 5.0
        assert all(isinstance(o, TreeStopError) for o in outcomes), outcomes
        assert outcomes[0] is outcomes[1] is outcomes[2], "one stop, shared"
        await h.rec.wait_for("runtime.warning")
        [info_after] = h.oc.list_sessions()
        assert info_after.status == "running" and info_after.active_turn_id == turn.turn_id
        await h.consistent()
        assert fake.in_flight == 0
    # Closing the adapter against the dead server is bounded and ends the turn with the exit.
    [exited] = h.rec.of("session.exited", T)
    assert exited.turn_id == turn.turn_id
    assert isinstance(outcomes[3], OpenCodeError)
