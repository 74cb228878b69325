"""Minted ids sort after every id the server showed us, whatever the server's clock says.

The adapter mints its prompts' message ids with its own clock; the server mints the
assistant messages' ids with its own. OpenCode up to 1.18.3 leaves a prompt whose id
sorts below the session's latest ids unanswered (measured on 1.15.13, 1.17.19 and
1.18.3: ``tests/real/test_skewed_ids_real.py``), so with a server clock ahead of ours a
steer or the next turn's prompt would be stored and never answered. The id clock
therefore follows the stamps of the server's message ids, but only up to an hour ahead
of its own clock, so a hostile server cannot push our ids arbitrarily far.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from adapter import OpenCodeAdapter
from adapter._base import _ids
from adapter._base._ids import _MonotonicIdClock, observe_message_id
from adapter.testing.fake import FakeOpenCodeServer, Permission, Text
from tests.adapter_support import Recorder, start_scripted_turn
from tests.test_ids import MASK48, FrozenClock, opencode_stamp

T = "thread-1"
NOW = 1_796_130_693_472
HOUR = 3_600_000
PERIOD = 1 << 36  # milliseconds after which the 48-bit stamps wrap


@pytest.fixture(autouse=True)
def fresh_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The adapter's id clock, fresh: another test's observations do not leak in."""
    monkeypatch.setattr(_ids, "_clock", _MonotonicIdClock())
    yield


def sent_message_ids(fake: FakeOpenCodeServer) -> list[str]:
    sent: list[str] = []

    async def capture(request: httpx.Request) -> httpx.Response | None:
        sent.append(json.loads(request.content)["messageID"])
        return None  # handled as usual

    fake.on("POST", "/session/{id}/prompt_async", capture)
    return sent


# -- the clock ----------------------------------------------------------------------


def test_a_stamp_minted_ahead_of_our_clock_is_followed() -> None:
    clock = _MonotonicIdClock(FrozenClock(NOW))
    server = opencode_stamp(NOW + 60_000, 7)
    clock.observe(server)
    assert clock.next() == server + 1
    assert clock.next() == server + 2


def test_a_stamp_behind_our_clock_changes_nothing() -> None:
    clock = _MonotonicIdClock(FrozenClock(NOW))
    clock.observe(opencode_stamp(NOW - 60_000, 7))
    assert clock.next() == opencode_stamp(NOW, 1)


def test_a_stamp_more_than_an_hour_ahead_is_ignored() -> None:
    clock = _MonotonicIdClock(FrozenClock(NOW))
    clock.observe(opencode_stamp(NOW + HOUR + 1, 1))
    assert clock.next() == opencode_stamp(NOW, 1)
    clock.observe(opencode_stamp(NOW + HOUR, 0))  # an hour exactly is still followed
    assert clock.next() == opencode_stamp(NOW + HOUR, 1)


def test_a_stamp_just_past_the_48_bit_wrap_is_read_as_ahead_not_behind() -> None:
    before_wrap = 5 * PERIOD - 10  # our clock 10 ms before the stamps wrap to 0
    clock = _MonotonicIdClock(FrozenClock(before_wrap))
    server = opencode_stamp(before_wrap + 1_000, 1)  # past the wrap: a small number
    assert server < opencode_stamp(before_wrap, 1)
    clock.observe(server)
    assert clock.next() == server + 1


def test_a_stamp_just_before_the_wrap_is_behind_a_clock_past_it() -> None:
    after_wrap = 5 * PERIOD + 10
    clock = _MonotonicIdClock(FrozenClock(after_wrap))
    server = opencode_stamp(after_wrap - 1_000, 1)  # a large number, but behind us
    assert server > opencode_stamp(after_wrap, 1)
    clock.observe(server)
    assert clock.next() == opencode_stamp(after_wrap, 1)
    assert opencode_stamp(after_wrap, 1) <= MASK48


def test_only_ids_in_opencodes_scheme_are_observed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_ids, "_clock", _MonotonicIdClock(FrozenClock(NOW)))
    observe_message_id("msg_user_1")  # a test server's readable id: no stamp in it
    assert _ids._clock.next() == opencode_stamp(NOW, 1)
    ahead = opencode_stamp(NOW + 5_000, 3)
    observe_message_id(f"msg_{ahead:012x}{'A' * 14}")
    assert _ids._clock.next() == ahead + 1


# -- through the adapter --------------------------------------------------------------


async def test_a_new_turns_prompt_sorts_after_the_ids_of_a_server_whose_clock_runs_ahead(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.clock_skew_ms = 10 * 60_000
    sent = sent_message_ids(fake)
    info, first = await start_scripted_turn(oc, fake, T, "ok", [Text("fine")])
    await rec.wait_for("turn.completed", lambda e: e.turn_id == first.turn_id)
    shown = [m.id for m in fake.sessions[info.session_id].messages]
    await oc.send_turn(T, "go on [[script:ok]]")
    assert len(sent) == 2
    assert sent[1] > max(shown), "the prompt would sort below the previous answer"


async def test_a_steer_sorts_after_the_running_step_of_a_server_whose_clock_runs_ahead(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.clock_skew_ms = 10 * 60_000
    sent = sent_message_ids(fake)
    info, turn = await start_scripted_turn(
        oc, fake, T, "asks", [Permission("bash", ["ls"]), Text("answered")]
    )
    opened = await rec.wait_for("request.opened")  # the run waits: its step is running
    running = [m.id for m in fake.sessions[info.session_id].messages if m.role == "assistant"]
    assert running
    steer = await oc.send_turn(T, "and also lint")
    assert steer.turn_id == turn.turn_id
    assert sent[1] > max(running), "the steer would sort below the running step"
    await oc.respond_to_request(T, opened.request_id, "accept")
    await rec.wait_for("turn.completed", lambda e: e.turn_id == turn.turn_id)


@pytest.mark.parametrize("where", ["same directory", "forked"])
async def test_the_first_prompt_after_a_resume_sorts_after_the_sessions_stored_ids(
    fake: FakeOpenCodeServer, where: str
) -> None:
    """A resumed (or forked) session's messages were minted by the server's clock before
    this adapter saw any of them: the resume reads the newest one, so the first prompt
    already sorts after it."""
    fake.clock_skew_ms = 10 * 60_000
    fake.script("ok", [Text("fine")])
    async with OpenCodeAdapter(fake.base_url, transport=fake.transport) as first:
        rec = Recorder(first)
        info = await first.start_session(T, directory="/p")
        turn = await first.send_turn(T, "go [[script:ok]]")
        await rec.wait_for("turn.completed", lambda e: e.turn_id == turn.turn_id)
        await rec.close()
    _ids._clock = _MonotonicIdClock()  # another process: it has seen none of those ids
    sent = sent_message_ids(fake)
    directory = "/q" if where == "forked" else "/p"
    async with OpenCodeAdapter(fake.base_url, transport=fake.transport) as again:
        resumed = await again.start_session(T, directory=directory, resume=info.resume)
        shown = [m.id for m in fake.sessions[resumed.session_id].messages]
        assert shown, "the resumed session has its history"
        await again.send_turn(T, "go on [[script:ok]]")
        assert sent[0] > max(shown), "the first prompt would sort below the stored ids"
