"""Recording a thread's native event stream (B93, B94; ``docs/reliability.md``,
"Recording the native stream"): every native event of the thread's tree, mapped or not,
reaches the recorder under its thread id, in stream order; the recorder never slows or
stops the pump, its backlog is bounded, and the server password never reaches it."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx

from adapter import (
    NativeFileRecorder,
    NativeRecord,
    NativeRecordGap,
    OpenCodeAdapter,
    RuntimeWarningEvent,
    Timeouts,
    read_native_recording,
)
from adapter.testing.fake import FakeOpenCodeServer, Step, Task, Text, Tool
from tests.adapter_support import Recorder

A = "thread-a"
B = "thread-b"


class ListRecorder:
    """Keeps what the adapter hands it (a plain function: the simplest recorder)."""

    def __init__(self) -> None:
        self.items: list[NativeRecord | NativeRecordGap] = []

    def __call__(self, item: NativeRecord | NativeRecordGap) -> None:
        self.items.append(item)

    def records(self, thread_id: str | None = None) -> list[NativeRecord]:
        return [
            r
            for r in self.items
            if isinstance(r, NativeRecord) and (thread_id is None or r.thread_id == thread_id)
        ]


@contextlib.asynccontextmanager
async def adapter_on(fake: FakeOpenCodeServer, **kwargs: Any) -> AsyncIterator[OpenCodeAdapter]:
    kwargs.setdefault("timeouts", Timeouts(connect=2.0, teardown=0.5))
    async with OpenCodeAdapter(fake.base_url, transport=fake.transport, **kwargs) as oc:
        yield oc


async def run_turn(oc: OpenCodeAdapter, rec: Recorder, thread_id: str, prompt: str) -> None:
    """Send a turn and wait until it completes."""
    turn_id = (await oc.send_turn(thread_id, prompt)).turn_id
    await rec.wait_for("turn.completed", lambda e: e.turn_id == turn_id)


def session_of(envelope: dict[str, Any]) -> str | None:
    """The session a native event names, as OpenCode writes it: ``properties.sessionID``,
    else its ``part``'s or its message ``info``'s ``sessionID``, else (a session's own
    event) its ``info.id``; ``None`` for an event of no session."""
    props = envelope["properties"]
    part, info = props.get("part"), props.get("info")
    if "sessionID" in props:
        return str(props["sessionID"])
    if isinstance(part, dict):
        return str(part["sessionID"])
    if isinstance(info, dict):
        return str(info.get("sessionID") or info["id"])
    return None


async def test_every_native_event_of_the_tree_is_recorded_under_its_thread_in_stream_order(
    fake: FakeOpenCodeServer,
) -> None:
    fake.script("child", [Tool("bash", {"command": "ls"}, output="a\nb"), Text("child done")])
    fake.script("tree", [Task("look around", "child"), Text("root done")])
    recorder = ListRecorder()
    async with adapter_on(fake, native_recorder=recorder) as oc:
        rec = Recorder(oc)
        root = (await oc.start_session(A)).session_id
        other = (await oc.start_session(B)).session_id
        await oc.send_turn(A, "go [[script:tree]]")
        child = (await rec.wait_for("child.started")).session_id
        # Events the adapter maps to nothing (a child's todo list) still belong to it.
        todos = [{"content": "x", "status": "pending", "priority": "low"}]
        todo = fake.emit("todo.updated", {"sessionID": child, "todos": todos})
        await rec.wait_for("turn.completed", lambda e: e.thread_id == A)
        await run_turn(oc, rec, B, "hello")
        await rec.close()
    # aclose handed the recorder everything queued: the comparison is complete.
    tree = {root, child}
    # Compared by the events' unique ids: the fake's own log holds its live session
    # objects, which later events change in place.
    expected = [e for e in fake.events if session_of(e) in tree]
    recorded = recorder.records(A)
    if recorded[0].event["id"] != expected[0]["id"]:
        # The root's own session.created may be read before the thread owns its session.
        assert expected[0]["type"] == "session.created" and session_of(expected[0]) == root
        expected = expected[1:]
    assert [r.event["id"] for r in recorded] == [e["id"] for e in expected]
    assert [r.session_id for r in recorded] == [session_of(e) for e in expected]
    assert next(r.event for r in recorded if r.event["type"] == "todo.updated") == todo
    types = {r.event["type"] for r in recorded}
    assert {"session.diff", "todo.updated", "message.updated", "session.created"} <= types
    assert child in {r.session_id for r in recorded}
    assert all(r.session_id == other for r in recorder.records(B))
    assert not [r for r in recorder.records(A) if r.session_id == other]
    times = [r.received_at for r in recorder.records()]
    assert times == sorted(times)


async def test_a_raising_recorder_never_stops_the_pump_and_is_reported_once(
    fake: FakeOpenCodeServer, captured_logs: list[dict[str, Any]]
) -> None:
    calls = 0

    async def broken(item: NativeRecord | NativeRecordGap) -> None:
        nonlocal calls
        calls += 1
        raise OSError("disk full")

    async with adapter_on(fake, native_recorder=broken) as oc:
        rec = Recorder(oc)
        await oc.start_session(A)
        await run_turn(oc, rec, A, "one")
        await run_turn(oc, rec, A, "two")
        await rec.close()
        warnings = [e for e in rec.events if isinstance(e, RuntimeWarningEvent)]
    assert calls > 10  # every event was still offered to it
    assert len(warnings) == 1 and "recorder failed (OSError)" in warnings[0].message
    assert [log["event"] for log in captured_logs].count("adapter.recorder_failed") == 1


async def test_a_recorder_that_never_returns_is_cancelled_at_aclose(
    fake: FakeOpenCodeServer,
) -> None:
    cancelled = asyncio.Event()

    async def hangs(item: NativeRecord | NativeRecordGap) -> None:
        try:
            await asyncio.Event().wait()
        finally:
            cancelled.set()

    before = asyncio.all_tasks()
    async with asyncio.timeout(5):
        async with adapter_on(fake, native_recorder=hangs) as oc:
            rec = Recorder(oc)
            await oc.start_session(A)
            await run_turn(oc, rec, A, "hello")
            assert [t for t in asyncio.all_tasks() if "native-recorder" in t.get_name()]
            await rec.close()
    assert cancelled.is_set()
    assert not asyncio.all_tasks() - before  # the adapter left no task behind


PASSWORD = "s3cret-pässword"


async def test_the_server_password_never_reaches_a_record() -> None:
    credential = base64.b64encode(f"opencode:{PASSWORD}".encode()).decode()
    recorder = ListRecorder()
    async with (
        FakeOpenCodeServer(password=PASSWORD) as fake,
        adapter_on(fake, password=PASSWORD, native_recorder=recorder) as oc,
    ):
        rec = Recorder(oc)
        root = (await oc.start_session(A)).session_id
        # A hostile server echoes the secret everywhere it can.
        fake.emit(
            "session.diff",
            {
                "sessionID": root,
                "diff": [{"file": f"x{PASSWORD}y", "before": f"Basic {credential}"}],
                PASSWORD: {"nested": [[PASSWORD]], "quoted": f'"{PASSWORD}"'},
            },
        )
        await run_turn(oc, rec, A, f"my password is {PASSWORD}")
        await rec.close()
    lines = json.dumps([r.to_json() for r in recorder.records(A)], ensure_ascii=False)
    assert "session.diff" in lines and '"x[redacted]y"' in lines
    assert PASSWORD not in lines and credential not in lines


async def test_a_recorded_file_stays_within_its_byte_bound(
    fake: FakeOpenCodeServer, tmp_path: Any
) -> None:
    path = tmp_path / "recording.jsonl"
    fake.script("long", [Text("word " * 400, chunks=40)])
    with NativeFileRecorder(path, max_bytes=4096) as recorder:
        async with adapter_on(fake, native_recorder=recorder) as oc:
            rec = Recorder(oc)
            await oc.start_session(A)
            await run_turn(oc, rec, A, "[[script:long]]")
            await rec.close()
    data = path.read_bytes()
    assert len(data) <= 4096
    assert path.stat().st_mode & 0o777 == 0o600  # it holds the conversation
    items = read_native_recording(path)
    assert all(isinstance(item, NativeRecord) for item in items[:-1])
    last = items[-1]
    assert isinstance(last, NativeRecordGap) and last.thread_id is None and last.dropped > 0
    first = json.loads(data.splitlines()[0])
    assert set(first) == {"thread_id", "session_id", "received_at", "event"}
    assert first["thread_id"] == A


def comparable(events: list[Any], root: str) -> list[dict[str, Any]]:
    """What a host sees of thread A, without what differs from run to run: event ids,
    times, turn ids and the root session's id (the replay's root is a new session)."""
    varying = {"event_id", "created_at", "turn_id"}
    mine = [e for e in events if e.thread_id == A]
    # turn.usage is throttled in time: where it falls depends on the pace of the events,
    # so only the last one (the totals) is compared.
    usage = [e for e in mine if e.type == "turn.usage"][-1:]
    shown = [
        {k: v for k, v in e.to_dict().items() if k not in varying}
        for e in [*(e for e in mine if e.type != "turn.usage"), *usage]
    ]
    result: list[dict[str, Any]] = json.loads(json.dumps(shown).replace(root, "ROOT"))
    return result


async def test_a_recording_replayed_into_the_fake_reproduces_the_canonical_events(
    tmp_path: Any,
) -> None:
    path = tmp_path / "bug.jsonl"
    script: list[Step] = [
        Tool("bash", {"command": "ls"}, output="a\nb"),
        Task("look", "child"),
        Text("done"),
    ]
    async with FakeOpenCodeServer(seed=1) as fake:
        fake.script("child", [Text("child says hi", chunks=3)])
        fake.script("bug", script)
        with NativeFileRecorder(path) as recorder:
            async with adapter_on(fake, native_recorder=recorder) as oc:
                rec = Recorder(oc)
                recorded_root = (await oc.start_session(A)).session_id
                await run_turn(oc, rec, A, "[[script:bug]]")
                await rec.close()
    original = comparable(rec.events, recorded_root)
    records = read_native_recording(path)
    recorded_user = next(
        r.event["properties"]["info"]["id"]
        for r in records
        if isinstance(r, NativeRecord)
        and r.event["type"] == "message.updated"
        and r.event["properties"]["info"]["role"] == "user"
    )

    async with FakeOpenCodeServer(seed=2) as fake:
        prompts: list[str] = []

        async def accept_only(request: Any) -> Any:
            # The recording is the run: the fake accepts the prompt and does nothing.
            prompts.append(json.loads(request.content)["messageID"])
            return httpx.Response(204)

        fake.on("POST", "/session/{id}/prompt_async", accept_only)
        async with adapter_on(fake) as oc:
            rec = Recorder(oc)
            root = (await oc.start_session(A)).session_id
            await oc.send_turn(A, "[[script:bug]]")
            emitted = fake.replay_native(
                records, ids={recorded_root: root, recorded_user: prompts[0]}
            )
            await rec.wait_for("turn.completed")
            await rec.close()
    assert emitted == sum(isinstance(r, NativeRecord) for r in records)
    assert comparable(rec.events, root) == original
