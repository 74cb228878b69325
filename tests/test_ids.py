"""The message ids the adapter mints (B33): OpenCode's own shape and ordering.

The adapter names each prompt's user message itself (``messageID`` of the prompt body)
so that it can recognise the server's echo. OpenCode orders a session's messages by
id, and its prompt loop compares the last user message's id with the last assistant
message's, so a minted id must be an id OpenCode could have minted: ``msg_``, then 12
hex digits, the low 48 bits of ``milliseconds * 0x1000 + counter`` (the counter
starts at 1 in each millisecond), then 14 base62 characters (OpenCode's
``packages/opencode/src/id/id.ts``, ``Identifier.create``).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator

import httpx
from hypothesis import given, settings
from hypothesis import strategies as st

from adapter import OpenCodeAdapter
from adapter._base._ids import _MonotonicIdClock, mint_message_id, validate_id
from adapter.testing.fake import FakeOpenCodeServer, Text
from tests.adapter_support import Recorder, start_scripted_turn

T = "thread-1"

#: Exactly OpenCode's ascending id: 12 lowercase hex digits, 14 base62 characters.
MESSAGE_ID = re.compile(r"msg_(?P<stamp>[0-9a-f]{12})(?P<random>[0-9A-Za-z]{14})")
MASK48 = (1 << 48) - 1


def stamp_of(message_id: str) -> int:
    match = MESSAGE_ID.fullmatch(message_id)
    assert match is not None, f"not an OpenCode message id: {message_id!r}"
    return int(match["stamp"], 16)


def opencode_stamp(ms: int, counter: int) -> int:
    """What OpenCode's ``Identifier.create`` encodes for the ``counter``-th id of ``ms``."""
    return (ms * 0x1000 + counter) & MASK48


class FrozenClock:
    """A wall clock in milliseconds that moves only when told to."""

    def __init__(self, ms: int) -> None:
        self.ms = ms

    def __call__(self) -> int:
        return self.ms


def stamps(clock: _MonotonicIdClock, n: int) -> Iterator[int]:
    for _ in range(n):
        yield clock.next()


def test_a_minted_id_is_msg_then_12_lowercase_hex_then_14_base62() -> None:
    ids = [mint_message_id() for _ in range(200)]
    for message_id in ids:
        assert MESSAGE_ID.fullmatch(message_id), message_id
        assert len(message_id) == 30
        assert validate_id("msg", message_id) == message_id
    # The 14 characters are random (OpenCode's are too): 200 ids never repeat one.
    assert len({i[16:] for i in ids}) == len(ids)


def test_the_hex_part_is_the_wall_clock_millisecond_times_0x1000_plus_a_counter() -> None:
    before = int(time.time() * 1000)
    stamp = stamp_of(mint_message_id())
    after = int(time.time() * 1000)
    # The millisecond is the 36 bits above the counter; allow a few for ids this
    # process minted in a burst earlier (the counter then runs into later milliseconds).
    assert (before & (MASK48 >> 12)) <= stamp >> 12 <= (after & (MASK48 >> 12)) + 2
    assert stamp & 0xFFF != 0, "OpenCode's counter starts at 1"


def test_stamps_are_opencodes_counter_within_a_millisecond_and_reset_in_the_next() -> None:
    now = FrozenClock(1_796_130_693_472)
    clock = _MonotonicIdClock(now)
    assert list(stamps(clock, 3)) == [opencode_stamp(now.ms, c) for c in (1, 2, 3)]
    now.ms += 1
    assert clock.next() == opencode_stamp(now.ms, 1)
    # Kept to 48 bits (6 bytes), as OpenCode's ``Buffer.alloc(6)``: 12 hex digits.
    assert opencode_stamp(now.ms, 1) < now.ms * 0x1000


def test_stamps_never_go_back_when_the_wall_clock_does() -> None:
    now = FrozenClock(1_796_130_693_472)
    clock = _MonotonicIdClock(now)
    first = clock.next()
    now.ms -= 5_000  # NTP stepped the clock back
    assert clock.next() == first + 1


@settings(max_examples=100, deadline=None)
@given(
    start=st.integers(min_value=1_700_000_000_000, max_value=1_900_000_000_000),
    steps=st.lists(st.integers(min_value=-3, max_value=3), min_size=1, max_size=300),
)
def test_ids_sort_in_mint_order_even_within_one_millisecond(start: int, steps: list[int]) -> None:
    """Whatever the wall clock does between mints (stand still, step, go back), a
    later id sorts after an earlier one, as text: the order OpenCode sorts by. (The
    48 bits wrap every 2^36 ms, about 2.2 years, as OpenCode's do; ``start`` is kept
    away from a wrap.)"""
    start = start - start % (1 << 36) + (1 << 35)  # the middle of a 48-bit period
    now = FrozenClock(start)
    clock = _MonotonicIdClock(now)
    tail = "0" * 14
    ids: list[str] = []
    for step in steps:
        now.ms += step
        ids.append(f"msg_{clock.next():012x}{tail}")
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)


async def test_the_prompt_body_carries_the_minted_id_and_the_server_stores_it(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    sent: list[str] = []

    async def capture(request: httpx.Request) -> httpx.Response | None:
        sent.append(json.loads(request.content)["messageID"])
        return None  # handled as usual

    fake.on("POST", "/session/{id}/prompt_async", capture)
    info, first = await start_scripted_turn(oc, fake, T, "ok", [Text("fine")])
    await rec.wait_for("turn.completed", lambda e: e.turn_id == first.turn_id)
    second = await oc.send_turn(T, "go [[script:ok]]")
    await rec.wait_for("turn.completed", lambda e: e.turn_id == second.turn_id)
    assert len(sent) == 2
    for message_id in sent:
        assert MESSAGE_ID.fullmatch(message_id), message_id
    assert sent == sorted(sent), "the second prompt's id sorts after the first"
    users = [m.id for m in fake.sessions[info.session_id].messages if m.role == "user"]
    assert users == sent, "the server stored the user messages under the minted ids"


def test_a_burst_of_minted_ids_sorts_in_mint_order() -> None:
    """Thousands of ids in a few milliseconds: the counter orders them, as text."""
    ids = [mint_message_id() for _ in range(5000)]
    assert ids == sorted(ids)
