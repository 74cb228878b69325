"""Streamed text reaches the host once, exactly as the server wrote it (B88, B89).

A part's text arrives twice: as deltas (``message.part.delta``) and as snapshots of the
whole text so far (``message.part.updated``, and the stored messages read back after an
event-stream outage). The translator emits what a snapshot adds to what it emitted,
nothing more (``Translator._part``, ``adapter._stream._seen_text.SeenText.new_in``); deltas are
emitted as received, however much they look like a repetition
(``Translator._delta``). Each test asserts the text the host accumulated, character for
character, not only that the turn ended.
"""

from __future__ import annotations

from typing import Any

import pytest

from adapter import OpenCodeAdapter
from adapter.testing.fake import FakeOpenCodeServer, Hang, Text
from tests.adapter_support import Recorder, start_scripted_turn

T = "thread-1"
#: The part the tests stream into, on the turn's own assistant message.
PART = "prt_reconciliationtest01"
#: A second part, streamed last: once its delta is seen, every event before it was handled.
FENCE = "prt_reconciliationfence1"


def deltas(rec: Recorder, part_id: str = PART) -> list[str]:
    """The text deltas the host was given for one part, in order."""
    return [e.delta for e in rec.of("content.delta", T) if e.item_id == part_id]


class Stream:
    """Writes text events of one part of the running turn's answer, as OpenCode does."""

    def __init__(self, fake: FakeOpenCodeServer, session_id: str, message_id: str) -> None:
        self.fake = fake
        self.session_id = session_id
        self.message_id = message_id

    def delta(self, text: str, part_id: str = PART) -> None:
        self.fake.emit(
            "message.part.delta",
            {
                "sessionID": self.session_id,
                "messageID": self.message_id,
                "partID": part_id,
                "field": "text",
                "delta": text,
            },
        )

    def snapshot(self, text: str, part_id: str = PART) -> None:
        part: dict[str, Any] = {
            "id": part_id,
            "messageID": self.message_id,
            "sessionID": self.session_id,
            "type": "text",
            "text": text,
            "time": {"start": 1},
        }
        self.fake.emit("message.part.updated", {"sessionID": self.session_id, "part": part})

    async def handled(self, rec: Recorder) -> None:
        """Wait until the adapter handled every event written so far (the stream is
        ordered: a delta of another part written last comes out last)."""
        before = len(deltas(rec, FENCE))
        self.delta(f"[{before}]", FENCE)  # never looks like an overlap
        await rec.wait_for("content.delta", lambda e: len(deltas(rec, FENCE)) > before)


@pytest.fixture
async def stream(oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder) -> Stream:
    """The answer (an assistant message) of a turn whose run started it and then hangs."""
    info, _ = await start_scripted_turn(oc, fake, T, "hang", [Hang()])
    session = fake.sessions[info.session_id]
    await fake.wait_until(lambda: any(m.role == "assistant" for m in session.messages))
    [answer] = [m.id for m in session.messages if m.role == "assistant"]
    stream = Stream(fake, info.session_id, answer)
    await stream.handled(rec)  # the answer's message.updated reached the adapter
    return stream


# -- B88: a snapshot ahead of the deltas adds only its new suffix -----------------------------


async def test_a_snapshot_ahead_of_the_deltas_emits_only_its_new_suffix(
    stream: Stream, rec: Recorder
) -> None:
    stream.delta("Hel")
    stream.delta("lo")
    stream.snapshot("Hello, world")  # ahead of the deltas: ", world" is new
    stream.delta("!")
    stream.snapshot("Hello, world!")  # caught up: nothing new
    stream.snapshot("Hello")  # behind (a late copy): nothing new
    await stream.handled(rec)
    assert deltas(rec) == ["Hel", "lo", ", world", "!"]
    assert "".join(deltas(rec)) == "Hello, world!"


async def test_a_first_snapshot_before_any_delta_is_emitted_whole_once(
    stream: Stream, rec: Recorder
) -> None:
    stream.snapshot("All at once")
    stream.snapshot("All at once")
    stream.delta(", then more")
    await stream.handled(rec)
    assert deltas(rec) == ["All at once", ", then more"]


async def test_after_an_event_stream_outage_the_stored_text_adds_only_what_was_missed(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    """The run streams one text part; the event stream drops after its first delta and
    the run finishes while the adapter is blind. The stored message holds the whole
    text; the replay (``Translator.replay``) emits only what the host had not seen."""
    answer = "the first words, then everything the outage hid from the adapter"
    info, turn = await start_scripted_turn(
        oc, fake, T, "slow", [Text(answer, chunks=8, delay=0.05)]
    )
    first = await rec.wait_for("content.delta")
    reconnect = fake.hold("GET", "/event")
    fake.drop_event_streams()
    await rec.wait_for("runtime.warning")
    await fake.wait_until(lambda: not fake.sessions[info.session_id].busy)
    seen_live = "".join(e.delta for e in rec.of("content.delta", T))
    assert answer.startswith(seen_live) and seen_live != answer, "the outage hid a suffix"
    reconnect.release()
    done = await rec.wait_for("turn.completed", timeout=5)
    assert done.turn_id == turn.turn_id and done.state == "completed"
    shown = [e for e in rec.of("content.delta", T) if e.item_id == first.item_id]
    assert "".join(e.delta for e in shown) == answer, "each character exactly once"
    replayed = [e.delta for e in shown if e.raw is None]  # from the stored messages
    assert replayed == [answer[len(seen_live) :]]


# -- B89: no stripping of text that merely looks like an overlap ------------------------------


async def test_deltas_that_repeat_the_end_of_the_text_are_appended_as_received(
    stream: Stream, rec: Recorder
) -> None:
    for piece in ["ab", "bc", "hello ", "hello ", "o", "o", ""]:
        stream.delta(piece)
    await stream.handled(rec)
    assert deltas(rec) == ["ab", "bc", "hello ", "hello ", "o", "o"]  # an empty delta is none
    assert "".join(deltas(rec)) == "abbchello hello oo"
    # The snapshot of that text (the server's concatenation) confirms it: nothing new.
    stream.snapshot("abbchello hello oo")
    await stream.handled(rec)
    assert "".join(deltas(rec)) == "abbchello hello oo"


async def test_a_snapshot_that_diverges_from_the_emitted_text_adds_nothing_and_later_deltas_append(
    stream: Stream, rec: Recorder, captured_logs: list[dict[str, Any]]
) -> None:
    """A snapshot that does not continue what the host was shown (another text under the
    same part id) is not a continuation: the host's text is neither replaced nor
    extended by it, and the deltas that follow are appended to what the host has."""
    stream.delta("hello world")
    stream.snapshot("goodbye world, and more")  # same length and longer, other text
    stream.snapshot("hello there, world")  # starts the same, then differs
    stream.delta("!")
    await stream.handled(rec)
    assert deltas(rec) == ["hello world", "!"]
    diverged = [e for e in captured_logs if e["event"] == "adapter.snapshot_diverged"]
    assert [e["part_id"] for e in diverged] == [PART, PART]
