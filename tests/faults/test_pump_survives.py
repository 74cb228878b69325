"""The event pump never dies: every native event it cannot read or translate is skipped and
reported (a rate-limited ``runtime.warning`` naming its type), and a failure of the pump
itself is restarted as an outage. Each failure kind travels the real wire path (the fake's
``/event`` stream), then a turn must still complete.

A test of internals: of the event pump (``adapter._stream._pump``) and its translator.
It reads the pump's own counters (``bad_events``, ``reconnects``, ``connected``), breaks
its ``_dispatch`` and the translator's ``_title`` on purpose and drives an ``EventPump``
directly: what is pinned is the pump's bookkeeping, which no public view counts."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest

import adapter._stream._pump as pump_module
from adapter import Event, RequestError, RuntimeWarningEvent
from adapter._client._native import NativeEvent
from adapter._client._sse_payloads import MAX_EVENT_DEPTH
from adapter._stream._pump import EventPump
from adapter._stream._translator import Translator
from adapter.testing.fake import FakeOpenCodeServer, Text
from tests.faults.harness import Harness, fast

T = "thread-1"


def frame(payload: bytes) -> bytes:
    return b"data: " + payload + b"\n\n"


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def event_line(kind: str, properties: bytes) -> bytes:
    return frame(b'{"type":"' + kind.encode() + b'","properties":' + properties + b"}")


def skip_warnings(events: list[Event]) -> list[RuntimeWarningEvent]:
    return [e for e in events if isinstance(e, RuntimeWarningEvent) and "skipped" in e.message]


# (name, the native type the warning must name, the SSE bytes; {sid} is the root session)
FAILURES: list[tuple[str, str, Callable[[str], bytes]]] = [
    (
        "nesting past the recursion limit",
        "unknown",
        lambda sid: event_line(
            "session.updated", b'{"sessionID":"' + sid.encode() + b'","x":' + nested(5000) + b"}"
        ),
    ),
    (
        "nesting past MAX_EVENT_DEPTH",
        "session.updated",
        lambda sid: event_line(
            "session.updated",
            b'{"sessionID":"' + sid.encode() + b'","x":' + nested(MAX_EVENT_DEPTH + 1) + b"}",
        ),
    ),
    (
        "a lone surrogate in an id",
        "session.status",
        lambda sid: event_line(
            "session.status", b'{"sessionID":"ses_\\ud800","status":{"type":"idle"}}'
        ),
    ),
    (
        "a status of the wrong type",
        "session.status",
        lambda sid: event_line(
            "session.status", b'{"sessionID":"' + sid.encode() + b'","status":42}'
        ),
    ),
    ("an array", "unknown", lambda sid: frame(b"[1,2,3]")),
    ("a string", "unknown", lambda sid: frame(b'"hello"')),
    ("a number", "unknown", lambda sid: frame(b"42")),
    ("null", "unknown", lambda sid: frame(b"null")),
    ("malformed JSON", "unknown", lambda sid: frame(b'{"type":"session.idle",')),
    ("a type that is not a string", "unknown", lambda sid: frame(b'{"type":5,"properties":{}}')),
    (
        "invalid UTF-8 in an id",
        "session.idle",
        lambda sid: event_line("session.idle", b'{"sessionID":"ses_\xff\xfe"}'),
    ),
    (
        "an integer past the conversion limit",
        "unknown",
        lambda sid: event_line(
            "session.idle", b'{"sessionID":"' + sid.encode() + b'","n":' + b"9" * 5000 + b"}"
        ),
    ),
    (
        "NaN",
        "unknown",
        lambda sid: event_line("session.idle", b'{"sessionID":"' + sid.encode() + b'","n":NaN}'),
    ),
    (
        "Infinity",
        "unknown",
        lambda sid: event_line(
            "session.idle", b'{"sessionID":"' + sid.encode() + b'","n":-Infinity}'
        ),
    ),
    (
        "a part of the wrong type deep inside",
        "message.part.updated",
        lambda sid: event_line(
            "message.part.updated",
            b'{"sessionID":"'
            + sid.encode()
            + b'","part":{"id":"prt_1","sessionID":"'
            + sid.encode()
            + b'","messageID":"msg_1","type":"tool","tool":"bash",'
            b'"state":{"status":5,"input":{},"output":7,"time":"never"}}}',
        ),
    ),
]


@pytest.mark.parametrize(("name", "kind", "line"), FAILURES, ids=[f[0] for f in FAILURES])
async def test_a_native_event_that_cannot_be_read_is_skipped_and_reported(
    fake: FakeOpenCodeServer, name: str, kind: str, line: Callable[[str], bytes], h: Harness
) -> None:
    fake.script("ok", [Text("fine")])
    info = await h.oc.start_session(T)
    pump = h.oc._pumps[None]
    await asyncio.wait_for(pump.connected.wait(), 5)
    fake.emit_raw(line(info.session_id))
    warning = await h.rec.wait_for("runtime.warning", lambda e: "skipped" in e.message, timeout=5)
    assert f"type {kind!r}" in warning.message, warning.message
    assert warning.thread_id == T
    await h.oc.send_turn(T, "go [[script:ok]]")
    completed = await h.rec.wait_for("turn.completed", timeout=5)
    assert completed.state == "completed"
    assert pump.bad_events >= 1
    assert pump.reconnects == 0, "a bad event must not cost the connection"


async def test_an_exception_in_translation_is_skipped_and_reported(
    fake: FakeOpenCodeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: Translator, thread: Any, event: Any) -> None:
        raise KeyError("a bug in translation")

    fake.script("ok", [Text("fine")])
    async with Harness(fake) as h:
        info = await h.oc.start_session(T)
        await asyncio.wait_for(h.oc._pumps[None].connected.wait(), 5)
        monkeypatch.setattr(Translator, "_title", broken)
        sid = info.session_id
        fake.emit("session.updated", {"sessionID": sid, "info": {"id": sid, "title": "x"}})
        warning = await h.rec.wait_for(
            "runtime.warning", lambda e: "skipped" in e.message, timeout=5
        )
        assert warning.message == (
            "skipped 1 native event of type 'session.updated': its translation failed (KeyError)"
        )
        monkeypatch.undo()
        await h.oc.send_turn(T, "go [[script:ok]]")
        assert (await h.rec.wait_for("turn.completed", timeout=5)).state == "completed"


async def test_skips_of_one_type_are_reported_once_per_interval_with_their_count(
    fake: FakeOpenCodeServer,
) -> None:
    async with Harness(fake, timeouts=fast(skip_report=0.05)) as h:
        info = await h.oc.start_session(T)
        await asyncio.wait_for(h.oc._pumps[None].connected.wait(), 5)
        bad = event_line("session.status", b'{"sessionID":"' + info.session_id.encode() + b'"}')
        fake.emit_raw(bad * 5 + frame(b"[]") * 2)
        async with asyncio.timeout(5):
            while sum(c for _, c in counts(h.events)) < 7:
                await asyncio.sleep(0.01)
        reported = [
            ("session.status", 1),
            ("session.status", 4),
            ("unknown", 1),
            ("unknown", 1),
        ]
        # every window (0.05 s) ends within 0.2 s: nothing more is reported meanwhile
        loop = asyncio.get_running_loop()
        quiet_until = loop.time() + 0.2
        while loop.time() < quiet_until:
            assert sorted(counts(h.events)) == reported
            await asyncio.sleep(0.01)
        assert sorted(counts(h.events)) == reported
        first = skip_warnings(h.events)[0].message
        assert first.startswith("skipped 1 native event of type 'session.status': ")
        assert h.oc._pumps[None].bad_events == 7


def counts(events: list[Event]) -> list[tuple[str, int]]:
    """(type, count) of each skip warning."""
    found = []
    for warning in skip_warnings(events):
        match = re.match(r"skipped (\d+) native events? of type '([^']*)'", warning.message)
        assert match is not None, warning.message
        found.append((match.group(2), int(match.group(1))))
    return found


async def test_a_flood_of_invented_types_is_reported_under_a_bounded_set_of_names(
    fake: FakeOpenCodeServer, h: Harness
) -> None:
    await h.oc.start_session(T)
    pump = h.oc._pumps[None]
    await asyncio.wait_for(pump.connected.wait(), 5)
    fake.emit_raw(
        b"".join(frame(b'{"type":"x%d","properties":' % i + nested(200) + b"}") for i in range(500))
    )
    await h.rec.wait_for("runtime.warning", lambda e: "'other'" in e.message, timeout=5)
    await h.consistent()
    assert pump.bad_events == 500
    assert len(skip_warnings(h.events)) <= pump_module.MAX_REPORTED_TYPES + 2


async def test_a_crash_of_the_pump_restarts_it_and_reconciles_the_turn(
    fake: FakeOpenCodeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = EventPump._dispatch
    armed = [False]

    def crash_once(self: EventPump, raw: Any) -> None:
        if armed[0]:
            armed[0] = False
            raise RuntimeError("the pump itself fails")
        original(self, raw)

    monkeypatch.setattr(EventPump, "_dispatch", crash_once)
    fake.script("ok", [Text("fine", chunks=3)])
    async with Harness(fake) as h:
        await h.oc.start_session(T)
        pump = h.oc._pumps[None]
        await asyncio.wait_for(pump.connected.wait(), 5)
        armed[0] = True
        await h.oc.send_turn(T, "go [[script:ok]]")
        assert (await h.rec.wait_for("turn.completed", timeout=10)).state == "completed"
        lost = await h.rec.wait_for("runtime.warning", lambda e: "lost" in e.message)
        assert "RuntimeError" in lost.message and "the pump itself fails" not in lost.message
        assert pump.reconnects == 1
        fake.script("again", [Text("more")])
        second = await h.oc.send_turn(T, "again [[script:again]]")
        await h.rec.wait_for("turn.completed", lambda e: e.turn_id == second.turn_id, timeout=5)


async def test_a_crash_on_every_connection_backs_off_and_never_outlives_the_adapter(
    fake: FakeOpenCodeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = [0]

    def always(self: EventPump, raw: Any) -> None:
        calls[0] += 1
        raise RuntimeError("broken for good")

    monkeypatch.setattr(EventPump, "_dispatch", always)
    async with Harness(fake) as h:
        await h.oc.start_session(T)
        await h.rec.wait_for("runtime.warning", lambda e: "lost" in e.message)
        # Each connection fails on its first event: the waits between them grow, so
        # half a second holds a handful of connections, not a tight loop of them.
        loop = asyncio.get_running_loop()
        half_a_second = loop.time() + 0.5
        while loop.time() < half_a_second:
            assert calls[0] <= 8, calls[0]
            await asyncio.sleep(0.01)
        assert 1 <= calls[0] <= 8, calls[0]


async def test_streams_the_server_drops_again_and_again_are_reopened_promptly(
    fake: FakeOpenCodeServer, h: Harness
) -> None:
    """A stream that opened and was then lost is the server's doing, not a bug of the
    pump: each reconnection waits the first backoff step again, however many drops
    came before (a grown backoff made a new thread wait 5 s for its stream and fail
    with ConnectTimeoutError: seen in the stateful fault test)."""
    fake.script("ok", [Text("fine")])
    await h.oc.start_session(T)
    pump = h.oc._pumps[None]
    for _ in range(8):
        await asyncio.wait_for(pump.connected.wait(), 5)
        fake.drop_event_streams()
        async with asyncio.timeout(5):
            while pump.connected.is_set():
                await asyncio.sleep(0.001)
    # The ninth connection comes after one short wait, not after a grown one.
    await asyncio.wait_for(pump.connected.wait(), 2 * 0.1 * 2 + 1.0)
    await h.oc.send_turn(T, "go [[script:ok]]")
    assert (await h.rec.wait_for("turn.completed", timeout=5)).state == "completed"


class _Stream:
    def __init__(self, fail: Exception) -> None:
        self.fail = fail

    async def __aenter__(self) -> Any:
        raise self.fail

    async def __aexit__(self, *exc: object) -> None:
        return None


class _Client:
    def __init__(self, fail: Exception) -> None:
        self.fail = fail
        self.opened = 0

    def event_stream(self, **kwargs: Any) -> _Stream:
        self.opened += 1
        return _Stream(self.fail)


@pytest.mark.parametrize("fail", [RuntimeError("bug"), RequestError("event_stream", "down")])
async def test_the_pump_stops_restarting_once_it_should_no_longer_run(fail: Exception) -> None:
    client = _Client(fail)
    lost: list[Exception] = []

    class Sink:
        def handle(self, event: NativeEvent) -> None:
            pass

        def lost(self, error: Exception) -> None:
            lost.append(error)

        def restored(self) -> None:
            pass

        def skipped(self, kind: str, count: int, reason: str) -> None:
            pass

        def running(self) -> bool:
            return client.opened < 3

        unreachable_after = None

        def unreachable(self, seconds: float) -> None:
            pass

    pump = EventPump(None, client, Sink())  # type: ignore[arg-type]
    await asyncio.wait_for(pump.run(), 10)  # returns, raises nothing
    assert client.opened == 3
    assert len(lost) == 1 and isinstance(lost[0], RequestError)


def test_the_depth_bound_is_documented() -> None:
    from pathlib import Path

    docs = (Path(__file__).parents[2] / "docs" / "reliability.md").read_text()
    assert f"`MAX_EVENT_DEPTH` ({MAX_EVENT_DEPTH})" in docs


async def test_an_event_stream_whose_body_does_not_decode_is_lost_and_reconnected(
    fake: FakeOpenCodeServer,
) -> None:
    served = [0]

    async def garbage_gzip(request: httpx.Request) -> httpx.Response | None:
        served[0] += 1
        if served[0] > 1:
            return None  # the next connection is the fake's own stream
        return httpx.Response(
            200,
            headers={"content-type": "text/event-stream", "content-encoding": "gzip"},
            content=b"this is not gzip at all",
        )

    fake.on("GET", "/event", garbage_gzip)
    fake.script("ok", [Text("fine")])
    async with Harness(fake) as h:
        await h.oc.start_session(T)
        pump = h.oc._pumps[None]
        async with asyncio.timeout(5):
            while pump.reconnects == 0:
                await asyncio.sleep(0.01)
        await h.oc.send_turn(T, "go [[script:ok]]")
        assert (await h.rec.wait_for("turn.completed", timeout=5)).state == "completed"
