"""A hypothesis fuzz of native events fed to the event pump of a live adapter, on the wire.

Each example takes an event recorded from OpenCode 1.18.34
(``tests/fixtures/events-kinds-1.18.34.jsonl``), often re-aimed at the adapter's own
thread, and makes it hostile: fields replaced by values of the wrong type, lone
surrogates, nesting deeper than the bound (and past the recursion limit), integers past
64 bits and past the conversion limit, ``NaN``/``Infinity``, fields removed; or sends a
line that is no event at all (garbage bytes, invalid UTF-8, JSON that is not an object).
It goes out on the fake server's ``/event`` stream like any event, followed by a marker
event the test waits for, so each example is fully dispatched before the next.

After each example the pump is alive and never had to restart (one ``GET /event``); no
example may hang (``asyncio.timeout``); at the end a turn completes, and the harness's
leak checks pass. One adapter serves every example: damage would carry over.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapter import Event

# No public name holds the depth bound (docs/reliability.md states it): read at its source.
from adapter._client._sse_payloads import MAX_EVENT_DEPTH
from adapter.testing.fake import FakeOpenCodeServer, Text
from tests.faults.harness import Harness

FIXTURE = Path(__file__).parents[1] / "fixtures" / "events-kinds-1.18.34.jsonl"
SHAPES: list[dict[str, Any]] = [
    json.loads(line)["event"] for line in FIXTURE.read_text().splitlines() if line.strip()
]
EXAMPLES = 500


class Splice:
    """Text spliced verbatim into the JSON (what ``json.dumps`` cannot or will not write)."""

    def __init__(self, text: str) -> None:
        self.text = text


def nested(depth: int) -> Splice:
    return Splice("[" * depth + "]" * depth)


HOSTILE: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.integers(min_value=2**64, max_value=2**400),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(["", "\ud800", "ses_\udfff", "x\ud83d", "\ude00\ud83d", "\x00", "\u202e"]),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=3),
    st.sampled_from([MAX_EVENT_DEPTH - 8, MAX_EVENT_DEPTH, MAX_EVENT_DEPTH + 1, 400, 5000]).map(
        nested
    ),
    st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "9" * 5000, "-0", "1e-999"]).map(
        Splice
    ),
)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path to a value inside ``value`` (keys and indexes), parents first."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*prefix, key)
            yield from paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield (*prefix, index)
            yield from paths(item, (*prefix, index))


def retarget(value: Any, root: str) -> Any:
    """``value`` with every session id replaced by the adapter's root session."""
    if isinstance(value, dict):
        return {k: retarget(v, root) for k, v in value.items()}
    if isinstance(value, list):
        return [retarget(v, root) for v in value]
    if isinstance(value, str) and value.startswith("ses_"):
        return root
    return value


def serialise(event: Any, ascii_only: bool) -> bytes:
    splices: list[str] = []

    def default(value: object) -> str:
        assert isinstance(value, Splice)
        splices.append(value.text)
        return f"\x00splice{len(splices) - 1}\x00"

    text = json.dumps(event, ensure_ascii=ascii_only, default=default)
    for index, splice in enumerate(splices):
        placeholder = json.dumps(f"\x00splice{index}\x00", ensure_ascii=ascii_only)
        text = text.replace(placeholder, splice, 1)
    # Without ensure_ascii a lone surrogate becomes bytes no UTF-8 decoder accepts.
    return text.encode("utf-8", "surrogatepass")


@st.composite
def hostile_lines(draw: st.DrawFn, root: str) -> bytes:
    kind = draw(st.sampled_from(["event", "event", "event", "event", "garbage", "not an object"]))
    if kind == "garbage":
        return draw(st.binary(max_size=80)).replace(b"\n", b" ").replace(b"\r", b" ")
    if kind == "not an object":
        return serialise(draw(HOSTILE), ascii_only=True)
    event: Any = draw(st.sampled_from(SHAPES))
    if draw(st.booleans()):
        event = retarget(event, root)
    event = json.loads(json.dumps(event))  # a private copy
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        where = list(paths(event))
        if not where:
            break
        path = draw(st.sampled_from(where))
        parent = event
        for step in path[:-1]:
            parent = parent[step]
        if isinstance(parent, dict) and draw(st.booleans()):
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(HOSTILE)
    return serialise(event, ascii_only=draw(st.booleans()))


def skipped(events: list[Event]) -> int:
    """The native events the adapter said it skipped so far (its ``runtime.warning``
    counts: one report per type and ``Timeouts.skip_report`` window, so it lags)."""
    said = (re.match(r"skipped (\d+) native event", getattr(e, "message", "")) for e in events)
    return sum(int(m.group(1)) for m in said if m)


def test_hostile_native_events_never_stop_the_pump() -> None:
    loop = asyncio.new_event_loop()
    tried = [0]
    fake = FakeOpenCodeServer(seed=21)
    fake.script("ok", [Text("still fine")])
    harness = Harness(fake)

    async def start() -> tuple[str, asyncio.Task[Any]]:
        await harness.__aenter__()
        info = await harness.oc.start_session("fuzz")  # returns once the stream is open
        task = next(t for t in asyncio.all_tasks() if t.get_name().endswith("pump:None"))
        return info.session_id, task

    root, pump_task = loop.run_until_complete(start())

    async def feed(line: bytes) -> None:
        tried[0] += 1
        title = f"fuzz mark {tried[0]}"
        async with asyncio.timeout(5):
            fake.emit_raw(b"data: " + line + b"\n\n")
            fake.emit("session.updated", {"sessionID": root, "info": {"id": root, "title": title}})
            await harness.rec.wait_for(
                "thread.metadata.updated", lambda e: e.title == title, timeout=5
            )

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(st.data())
    def one(data: st.DataObject) -> None:
        loop.run_until_complete(feed(data.draw(hostile_lines(root))))
        assert not pump_task.done()
        assert len(fake.calls("GET", "/event")) == 1, "the event stream was reopened"

    async def finish() -> None:
        await harness.oc.send_turn("fuzz", "go [[script:ok]]")
        await harness.rec.wait_for("turn.completed", timeout=10)
        current = asyncio.current_task()
        assert current is not None
        harness.tasks_before.add(current)  # entered in another task: this one is the test's
        await harness.__aexit__(None, None, None)

    try:
        one()
        loop.run_until_complete(finish())
    finally:
        loop.run_until_complete(fake.aclose())
        loop.close()
    print(f"\nfuzz: {tried[0]} hostile native events fed, {skipped(harness.events)} skips reported")
    assert tried[0] >= EXAMPLES
