"""A hostile or broken server: malformed and mistyped bodies, huge bodies, cyclic and huge
trees, ids built to escape the URL path, events for strangers, repeated and reordered events."""

from __future__ import annotations

import asyncio
import json
import re
import time
import tracemalloc
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx
import pytest

from adapter import (
    InvalidInputError,
    OpenCodeClient,
    ProtocolError,
    TreeStopError,
    stop_tree,
)
from adapter.testing import caught_up
from adapter.testing.fake import FakeOpenCodeServer, Hang, Hook, Text, Tool
from tests.adapter_support import another_turn_completed
from tests.faults.conftest import FAST_RETRY
from tests.faults.harness import Harness, aborts, fast
from tests.mocked_tree_api import session_calls

T = "thread-1"
VALID_PATH = re.compile(
    # GET /config/providers: the context meter's model limits, a fixed path read per client.
    r"^(GET /event|GET /global/health|GET /config/providers|POST /session|GET /session/status"
    r"|(GET|POST) /session/ses_[A-Za-z0-9_-]+(/(abort|children|message|prompt_async))?)$"
)
HOSTILE_IDS = [
    "ses_../../global/dispose",
    "ses_a/abort",
    "..",
    "ses_%2F..%2Fglobal",
    "ses_ünïcode",
    "ses_\u202eevil",
    "nonprefixed_session",
    "ses_",
    "ses_a b",
    "ses_a?x=1",
    "ses_a#frag",
    "ses_" + "x" * 200,
]


def session_json(sid: str, parent: str | None, created: int = 1) -> dict[str, Any]:
    data: dict[str, Any] = {"id": sid, "title": sid, "time": {"created": created, "updated": 1}}
    if parent is not None:
        data["parentID"] = parent
    return data


def json_response(body: Any, status: int = 200) -> httpx.Response:
    return httpx.Response(status, content=json.dumps(body).encode())


def serve_children(fake: FakeOpenCodeServer, graph: Mapping[str, list[str]]) -> Hook:
    """Answer ``GET /session/{id}/children`` from ``graph`` (any shape: cycles included)."""

    async def handler(request: httpx.Request) -> httpx.Response | None:
        sid = request.url.path.split("/")[2]
        if sid not in graph:
            return None
        return json_response([session_json(k, sid, i) for i, k in enumerate(graph[sid])])

    return fake.on("GET", "/session/{id}/children", handler)


def assert_only_valid_paths(fake: FakeOpenCodeServer, *forbidden: str) -> None:
    paths = [f"{r.method} {r.path}" for r in fake.requests]
    bad = [p for p in paths if not VALID_PATH.fullmatch(p)]
    assert bad == [], f"requests outside the API's shape: {bad}"
    # The adapter's own version check at connect is the one legitimate /global request.
    hostile = [p for p in paths if p != "GET /global/health"]
    for needle in forbidden:
        assert not any(needle in p for p in hostile), f"a request carried {needle!r}"


# ------------------------------------------------------------------ malformed / mistyped


@pytest.mark.parametrize(
    ("method", "route", "call"),
    [
        ("GET", "/session/status", lambda c, s: c.status()),
        ("GET", "/session/{id}/children", lambda c, s: c.children(s)),
        ("POST", "/session/{id}/abort", lambda c, s: c.abort(s)),
        ("GET", "/session/{id}", lambda c, s: c.get_session(s)),
        ("GET", "/session/{id}/message", lambda c, s: c.messages(s)),
        ("POST", "/session", lambda c, s: c.create_session()),
    ],
    ids=["status", "children", "abort", "get_session", "messages", "create_session"],
)
@pytest.mark.parametrize(
    "body",
    [b"{not json", b"\xff\xfe\x00", b'"just a string"', b"[1, 2", b"null"],
    ids=["broken", "binary", "string", "truncated", "null"],
)
async def test_a_malformed_body_is_a_protocol_error_never_a_crash(
    fake: FakeOpenCodeServer,
    opencode_client: OpenCodeClient,
    method: str,
    route: str,
    call: Any,
    body: bytes,
) -> None:
    root = fake.add_session()
    fake.fail(method, route, status=200, times=None, body=body)
    with pytest.raises(ProtocolError):
        await call(opencode_client, root)


@pytest.mark.parametrize(
    ("route", "body"),
    [
        ("/session/status", [{"type": "busy"}]),
        ("/session/{id}/children", {"ses_a": 1}),
        ("/session/{id}/children", [{"id": 42}]),
        ("/session/{id}/children", [{"id": "ses_a", "time": {"created": "yesterday"}}]),
        ("/session/{id}/children", [{"id": "ses_a", "parentID": ["ses_b"]}]),
    ],
)
async def test_wrongly_typed_fields_are_protocol_errors(
    fake: FakeOpenCodeServer, opencode_client: OpenCodeClient, route: str, body: Any
) -> None:
    root = fake.add_session()
    fake.fail("GET", route, status=200, times=None, body=body)
    with pytest.raises(ProtocolError):
        if route == "/session/status":
            await opencode_client.status()
        else:
            await opencode_client.children(root)


@pytest.mark.parametrize(
    "entry",
    [{"ses_a": {"type": "exploding"}}, {"not-an-id": {"type": "busy"}}, {"ses_a": "busy"}],
)
async def test_untrusted_status_entries_are_skipped_and_the_rest_kept(
    fake: FakeOpenCodeServer,
    opencode_client: OpenCodeClient,
    entry: dict[str, Any],
    captured_logs: list[dict[str, Any]],
) -> None:
    fake.fail(
        "GET", "/session/status", status=200, times=None, body={**entry, "ses_ok": {"type": "busy"}}
    )
    statuses = await opencode_client.status()
    assert list(statuses) == ["ses_ok"]
    assert any(e["event"] == "opencode.status_entry_skipped" for e in captured_logs)


@pytest.mark.parametrize("answer", [b'"yes"', b"1", b"{}", b""])
async def test_an_abort_answered_with_a_non_boolean_fails_that_session_not_the_walk(
    fake: FakeOpenCodeServer, opencode_client: OpenCodeClient, answer: bytes
) -> None:
    root = fake.add_session(busy=True)
    a = fake.add_session(parent_id=root, busy=True)
    b = fake.add_session(parent_id=root, busy=True)
    fake.fail("POST", f"/session/{a}/abort", status=200, times=None, body=answer)
    with pytest.raises(TreeStopError) as caught:
        await stop_tree(opencode_client, root, timeout=2.0)
    assert caught.value.first_failure is not None
    assert caught.value.first_failure.session_id == a
    assert isinstance(caught.value.report[a].error, ProtocolError)
    assert not fake.sessions[b].busy and caught.value.report[b].outcome == "aborted"


async def test_a_malformed_status_during_verification_fails_the_stop_with_the_report(
    fake: FakeOpenCodeServer, opencode_client: OpenCodeClient
) -> None:
    root = fake.add_session(busy=True)
    fake.fail("GET", "/session/status", status=200, times=None, body=b"<html>")
    with pytest.raises(TreeStopError) as caught:
        await stop_tree(opencode_client, root, timeout=2.0)
    assert isinstance(caught.value.cause, ProtocolError)
    assert caught.value.report[root].outcome == "aborted" and not fake.sessions[root].busy


async def test_a_start_whose_session_has_a_hostile_id_fails_and_leaves_no_thread(
    fake: FakeOpenCodeServer,
) -> None:
    fake.fail("POST", "/session", status=200, times=None, body={"id": "ses_../../global"})
    async with Harness(fake) as h:
        with pytest.raises(ProtocolError):
            await h.oc.start_session(T)
        assert h.oc.list_sessions() == []
        assert_only_valid_paths(fake, "global/")


# ------------------------------------------------------------------ huge bodies


async def test_a_declared_huge_body_is_refused_before_it_is_read(
    fake: FakeOpenCodeServer,
) -> None:
    read = [0]

    async def body() -> AsyncIterator[bytes]:
        for _ in range(1000):
            read[0] += 1
            yield b"x" * 65536

    async def huge(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-length": str(65536 * 1000)}, content=body())

    fake.on("GET", "/session/status", huge)
    async with OpenCodeClient(
        fake.base_url, transport=fake.transport, max_response_bytes=1 << 20, retry=FAST_RETRY
    ) as client:
        with pytest.raises(ProtocolError, match="exceeds the limit"):
            await client.status()
    assert read[0] == 0


async def test_an_endless_chunked_body_is_read_only_up_to_the_limit(
    fake: FakeOpenCodeServer,
) -> None:
    sent = [0]

    async def endless() -> AsyncIterator[bytes]:
        while True:
            sent[0] += 65536
            yield b"[" * 65536

    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=endless())

    fake.on("GET", "/session/{id}/children", handler)
    limit = 1 << 20
    root = fake.add_session()
    async with OpenCodeClient(
        fake.base_url, transport=fake.transport, max_response_bytes=limit, retry=FAST_RETRY
    ) as client:
        tracemalloc.start()
        try:
            with pytest.raises(ProtocolError, match="exceeds the limit"):
                await client.children(root)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert sent[0] <= limit + 65536, "reading stopped at the limit"
    assert peak < 8 * limit


async def test_an_oversized_event_drops_the_stream_which_reconnects(
    fake: FakeOpenCodeServer, h: Harness
) -> None:
    fake.script("ok", [Text("fine")])
    info = await h.oc.start_session(T)
    huge = {"sessionID": info.session_id, "info": {"title": "x" * (5 * 1024 * 1024)}}
    fake.emit("session.updated", huge)
    warning = await h.rec.wait_for("runtime.warning")
    assert "reconnecting" in warning.message
    await h.oc.send_turn(T, "go [[script:ok]]")
    assert (await h.rec.wait_for("turn.completed", timeout=5)).state == "completed"
    assert h.rec.of("thread.metadata.updated") == []
    await h.consistent()


async def bytes_sent_until_cut_off(
    fake: FakeOpenCodeServer, prefix: bytes, chunk: bytes, match: str | None = None
) -> int:
    """The fake's event stream sends ``prefix``, then ``chunk`` over and over (up to 16 MiB,
    so a failing run stays cheap); a client reads it with ``max_event_bytes`` = 1 MiB and
    must raise ``ProtocolError`` (matching ``match``): the bytes of ``chunk`` sent by then."""
    sent = 0

    async def endless() -> AsyncIterator[bytes]:
        nonlocal sent
        if prefix:
            yield prefix
        while sent < 16 * 1024 * 1024:
            sent += len(chunk)
            yield chunk
            await asyncio.sleep(0)

    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=endless())

    fake.on("GET", "/event", handler)
    async with OpenCodeClient(fake.base_url, transport=fake.transport) as client:
        with pytest.raises(ProtocolError, match=match):
            async with client.event_stream(max_event_bytes=1 << 20) as events:
                async for _ in events:
                    pass
    return sent


async def test_an_endless_event_line_is_cut_off_at_max_event_bytes(
    fake: FakeOpenCodeServer,
) -> None:
    assert await bytes_sent_until_cut_off(fake, b"data: ", b"x" * 65536) <= 2 * (1 << 20)


async def test_an_endless_multi_line_event_is_cut_off_at_max_event_bytes(
    fake: FakeOpenCodeServer,
) -> None:
    """Short ``data:`` lines that never end their event (no blank line) pile up in the SSE
    decoder: the event, not only each line, is bounded by ``max_event_bytes``."""
    sent = await bytes_sent_until_cut_off(fake, b"", b"data: x\n" * 8192, match="event exceeds")
    assert sent <= 2 * (1 << 20)


async def test_events_split_anywhere_across_chunks_are_never_refused(
    fake: FakeOpenCodeServer,
) -> None:
    """The event bound finds every event's end, whatever the chunking and line endings."""
    event = b'data: {"type":"server.heartbeat","properties":{}}'
    endings = [b"\n\n", b"\r\n\r\n", b"\r\r", b"\n\r\n"]
    body = b"".join(event + endings[i % len(endings)] for i in range(4000))

    async def chunked() -> AsyncIterator[bytes]:
        start, step = 0, 1
        while start < len(body):
            yield body[start : start + step]
            start, step = start + step, step % 97 + 1

    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=chunked())

    fake.on("GET", "/event", handler)
    async with (
        OpenCodeClient(fake.base_url, transport=fake.transport) as client,
        client.event_stream(max_event_bytes=len(event) + 4) as events,
    ):
        got = [e async for e in events]
    assert len(got) == 4000


# ------------------------------------------------------------------ hostile trees


async def test_a_cyclic_children_graph_stops_each_session_once(
    fake: FakeOpenCodeServer, opencode_client: OpenCodeClient
) -> None:
    root = fake.add_session(busy=True)
    graph = {
        root: ["ses_a", "ses_b"],
        "ses_a": ["ses_a", "ses_b", root],  # self-loop, diamond, back edge to the root
        "ses_b": ["ses_c"],
        "ses_c": [root, "ses_a"],
    }
    serve_children(fake, graph)
    report = await stop_tree(opencode_client, root, timeout=2.0)
    assert sorted(report.session_ids) == sorted([root, "ses_a", "ses_b", "ses_c"])
    for sid in report.session_ids:
        assert aborts(fake, sid) == 1
        assert sum(1 for r in fake.requests if r.path == f"/session/{sid}/children") == 1


async def test_a_hundred_thousand_children_are_refused_beyond_max_sessions(
    fake: FakeOpenCodeServer, opencode_client: OpenCodeClient
) -> None:
    root = fake.add_session(busy=True)
    serve_children(fake, {root: [f"ses_flood{i}" for i in range(100_000)]})
    # The refusal, not the time bound, ends the walk: its message says so. (A bound on
    # the wall time failed here on a loaded machine; the timeout is what bounds it.)
    with pytest.raises(TreeStopError) as caught:
        await stop_tree(opencode_client, root, max_sessions=200, timeout=60.0)
    assert "more than 200 sessions" in str(caught.value)
    assert len(caught.value.report) == 200
    aborted = sum(1 for r in fake.requests if r.path.endswith("/abort"))
    assert aborted == 200, "nothing beyond max_sessions was touched"
    assert not fake.sessions[root].busy


async def test_an_interrupt_on_a_flooded_tree_is_bounded_and_keeps_the_turn(
    fake: FakeOpenCodeServer,
) -> None:
    async with Harness(fake, timeouts=fast(tree=20.0)) as h:
        fake.script("hang", [Hang()])
        info = await h.oc.start_session(T)
        turn = await h.oc.send_turn(T, "go [[script:hang]]")
        flood = serve_children(fake, {info.session_id: [f"ses_flood{i}" for i in range(100_000)]})
        started = time.perf_counter()
        with pytest.raises(TreeStopError, match="refusing to walk further"):
            await h.oc.interrupt_turn(T)
        assert time.perf_counter() - started < 20.0
        # each of the 10,000 sessions the walk takes at most once, and the root's two more
        assert sum(1 for r in fake.requests if r.path.endswith("/abort")) <= 10_000 + 2
        assert h.oc.list_sessions()[0].active_turn_id == turn.turn_id
        flood.remove()  # the flood ends; the close's teardown is bounded either way


async def test_the_report_of_a_deep_chain_renders(
    fake: FakeOpenCodeServer, opencode_client: OpenCodeClient
) -> None:
    root = fake.add_session()
    chain = [f"ses_deep{i}" for i in range(1200)]
    serve_children(fake, {a: [b] for a, b in zip([root, *chain], chain, strict=False)})
    report = await stop_tree(opencode_client, root, timeout=10.0, verify=False)
    assert len(report) == 1201
    rendered = str(report)
    assert rendered.count("\n") == 1201


# ------------------------------------------------------------------ ids that escape the path


@pytest.mark.parametrize("bad", HOSTILE_IDS)
async def test_a_hostile_caller_id_is_refused_before_any_request(
    fake: FakeOpenCodeServer, opencode_client: OpenCodeClient, bad: str
) -> None:
    for call in (*session_calls(opencode_client, bad), stop_tree(opencode_client, bad)):
        with pytest.raises(InvalidInputError):
            await call
    assert fake.requests == []


async def test_a_resume_cursor_with_a_hostile_id_starts_a_fresh_session(
    fake: FakeOpenCodeServer, h: Harness
) -> None:
    for i, bad in enumerate(HOSTILE_IDS):
        info = await h.oc.start_session(f"t{i}", resume={"schema": 1, "session_id": bad})
        assert info.session_id in fake.sessions
    assert_only_valid_paths(fake, "global", "%2F", "..")


async def test_hostile_child_ids_from_the_server_never_reach_a_url(
    fake: FakeOpenCodeServer, h: Harness
) -> None:
    fake.script("hang", [Hang()])
    info = await h.oc.start_session(T)
    await h.oc.send_turn(T, "go [[script:hang]]")
    good = fake.add_session(parent_id=info.session_id, busy=True)

    async def listing(request: httpx.Request) -> httpx.Response | None:
        if request.url.path != f"/session/{info.session_id}/children":
            return None
        body = [session_json(b, info.session_id) for b in HOSTILE_IDS]
        return json_response([*body, session_json(good, info.session_id)])

    fake.on("GET", "/session/{id}/children", listing)
    with pytest.raises(TreeStopError) as caught:
        await h.oc.interrupt_turn(T)
    assert isinstance(caught.value.cause, ProtocolError)
    assert caught.value.first_failure is not None
    assert caught.value.first_failure.failed_step == "children"
    assert good in caught.value.report and not fake.sessions[good].busy
    assert_only_valid_paths(fake, "global", "%2F", "..", "abort/abort")


async def test_hostile_ids_in_events_are_never_adopted_or_requested(
    fake: FakeOpenCodeServer, h: Harness
) -> None:
    fake.script("hang", [Text("x"), Hang()])
    info = await h.oc.start_session(T)
    root = info.session_id
    await h.oc.send_turn(T, "go [[script:hang]]")
    await h.rec.wait_for("content.delta")
    for bad in HOSTILE_IDS:
        fake.emit("session.created", {"sessionID": bad, "info": session_json(bad, root)})
        fake.emit(
            "permission.asked",
            {"id": "per_x", "sessionID": bad, "permission": "bash", "patterns": ["*"]},
        )
        fake.emit(
            "message.part.updated",
            {
                "sessionID": root,
                "part": {
                    "id": "prt_1",
                    "sessionID": root,
                    "messageID": "msg_1",
                    "type": "tool",
                    "tool": "task",
                    "callID": "call_x",
                    "state": {"status": "running", "input": {}, "metadata": {"sessionId": bad}},
                },
            },
        )
    await caught_up(fake, h.oc)
    assert h.rec.of("child.started") == [] and h.rec.of("request.opened") == []
    result = await h.oc.interrupt_turn(T)
    assert result.stop is not None and result.stop.session_ids == (root,)
    assert_only_valid_paths(fake, "global", "%2F", "..")


# ------------------------------------------------------------------ strangers' events


async def test_events_for_unknown_sessions_produce_nothing_and_touch_nothing(
    fake: FakeOpenCodeServer, h: Harness
) -> None:
    info = await h.oc.start_session(T)
    stranger = fake.add_session(busy=True)
    await caught_up(fake, h.oc)
    fake.reset_stats()
    for sid in (stranger, "ses_nonexistent"):
        fake.emit("session.status", {"sessionID": sid, "status": {"type": "idle"}})
        fake.emit("session.idle", {"sessionID": sid})
        fake.emit("session.error", {"sessionID": sid, "error": {"name": "APIError"}})
        fake.emit(
            "message.part.delta",
            {"sessionID": sid, "messageID": "msg_1", "partID": "prt_1", "delta": "boo"},
        )
        fake.emit("session.created", {"sessionID": sid, "info": session_json(sid, None)})
    await caught_up(fake, h.oc)
    assert [e.type for e in h.rec.events if e.type.startswith(("turn", "content", "child"))] == []
    assert h.rec.of("runtime.error") == []
    assert fake.requests == [], "no request for strangers' events"
    assert fake.sessions[stranger].busy
    assert h.oc.list_sessions()[0].session_id == info.session_id
    await h.consistent()


async def test_a_strangers_permission_request_is_looked_up_but_never_surfaced(
    fake: FakeOpenCodeServer, h: Harness
) -> None:
    await h.oc.start_session(T)
    stranger = fake.add_session()
    stranger_kid = fake.add_session(parent_id=stranger)
    fake.emit(
        "permission.asked",
        {"id": "per_1", "sessionID": stranger_kid, "permission": "bash", "patterns": ["*"]},
    )
    await fake.wait_until(lambda: any(r.session_id == stranger for r in fake.requests), timeout=2)
    await caught_up(fake, h.oc)
    assert h.rec.of("request.opened") == []
    methods = {(r.method, r.session_id) for r in fake.requests if r.session_id}
    assert methods <= {("GET", stranger), ("GET", stranger_kid)}, "only ancestry reads"


async def test_a_flood_of_strangers_permission_requests_causes_bounded_lookups(
    fake: FakeOpenCodeServer, h: Harness
) -> None:
    await h.oc.start_session(T)
    stranger = fake.add_session()
    slow = fake.hold("GET", f"/session/{stranger}")
    for i in range(300):
        fake.emit(
            "permission.asked",
            {"id": f"per_{i}", "sessionID": stranger, "permission": "bash", "patterns": []},
        )
    await slow.wait_started()
    await caught_up(fake, h.oc)
    held = len(slow.requests)
    slow.release()
    assert held <= 8, f"{held} concurrent lookups for one stranger"


# ------------------------------------------------------------------ repeated / reordered events


async def test_duplicated_and_reordered_events_change_nothing(
    fake: FakeOpenCodeServer, h: Harness
) -> None:
    info = await h.oc.start_session(T)
    root = info.session_id
    fake.script(
        "work", [Text("hello world"), Tool("bash", {"command": "ls"}, output="a\n"), Hang()]
    )
    turn = await h.oc.send_turn(T, "go [[script:work]]")
    done_item = await h.rec.wait_for("item.completed")
    text = "".join(e.delta for e in h.rec.of("content.delta", T))
    assert text == "hello world"
    # Replay every part snapshot of the turn, twice, newest first.
    snapshots = [e for e in fake.events if e["type"] == "message.part.updated"]
    for envelope in [*reversed(snapshots), *snapshots]:
        fake.emit(envelope["type"], envelope["properties"])
    await caught_up(fake, h.oc)
    assert "".join(e.delta for e in h.rec.of("content.delta", T)) == "hello world"
    assert len([e for e in h.rec.of("item.started") if e.item_id == done_item.item_id]) == 1
    assert len([e for e in h.rec.of("item.completed") if e.item_id == done_item.item_id]) == 1
    # An abort by another client, with its events duplicated, ends the turn once.
    async with fake.client() as other:
        await other.post(f"/session/{root}/abort")
    aborted = {"sessionID": root, "error": {"name": "MessageAbortedError", "data": {}}}
    fake.emit("session.error", aborted)
    await h.rec.wait_for("turn.aborted")
    await caught_up(fake, h.oc)
    assert [e.turn_id for e in h.rec.of("turn.aborted")] == [turn.turn_id]
    assert h.rec.of("runtime.error") == []
    await h.consistent()


async def test_duplicated_idles_complete_a_turn_once(fake: FakeOpenCodeServer, h: Harness) -> None:
    info = await h.oc.start_session(T)
    await another_turn_completed(h.oc, fake, h.rec, T, "go", "fine")
    for _ in range(5):
        fake.emit("session.idle", {"sessionID": info.session_id})
        fake.emit("session.status", {"sessionID": info.session_id, "status": {"type": "idle"}})
    await caught_up(fake, h.oc)
    assert len(h.rec.of("turn.completed")) == 1
    await h.consistent()


async def test_an_idle_with_no_turn_does_nothing(fake: FakeOpenCodeServer, h: Harness) -> None:
    info = await h.oc.start_session(T)
    fake.reset_stats()
    fake.emit("session.idle", {"sessionID": info.session_id})
    fake.emit("session.status", {"sessionID": info.session_id, "status": {"type": "idle"}})
    await caught_up(fake, h.oc)
    assert fake.requests == [], "no status check without a turn"
    assert [e.type for e in h.rec.events] == ["session.started", "thread.started"]
    # ... and it is not remembered: the next turn is not completed by it.
    fake.script("hang", [Hang()])
    await h.oc.send_turn(T, "go [[script:hang]]")
    await caught_up(fake, h.oc)
    assert h.rec.of("turn.completed") == []
    await h.consistent()


def poison_status(fake: FakeOpenCodeServer) -> Hook:
    """The real status map, plus one busy stranger whose id is not a valid session id."""

    async def handler(request: httpx.Request) -> httpx.Response:
        body = {sid: s.status for sid, s in fake.sessions.items() if s.busy}
        body["ses_../stranger"] = {"type": "busy"}
        return json_response(body)

    return fake.on("GET", "/session/status", handler)


async def test_a_malformed_stranger_in_the_status_map_does_not_fail_the_stop(
    fake: FakeOpenCodeServer, opencode_client: OpenCodeClient
) -> None:
    root = fake.add_session(busy=True)
    kid = fake.add_session(parent_id=root, busy=True)
    poison_status(fake)
    report = await stop_tree(opencode_client, root, timeout=2.0)
    assert report.ok and not fake.sessions[kid].busy


async def test_a_malformed_stranger_in_the_status_map_does_not_block_turn_completion(
    fake: FakeOpenCodeServer, h: Harness
) -> None:
    poison_status(fake)
    fake.script("ok", [Text("fine")])
    await h.oc.start_session(T)
    turn = await h.oc.send_turn(T, "go [[script:ok]]")
    done = await h.rec.wait_for("turn.completed", timeout=1.0)
    assert done.turn_id == turn.turn_id


# ------------------------------------------------------------------ lone surrogates


async def test_the_fake_writes_lone_surrogates_escaped_as_opencode_does(
    fake: FakeOpenCodeServer,
) -> None:
    """OpenCode cuts strings by UTF-16 units and ``JSON.stringify`` writes a lone half as
    ``\\ud83d``: the fake does the same on its event stream and in its bodies, and no
    lone surrogate in a request makes it fail."""
    headers = {"content-type": "application/json"}
    async with (
        httpx.AsyncClient(transport=fake.transport, base_url=fake.base_url) as http,
        http.stream("GET", "/event") as stream,
    ):
        chunks = stream.aiter_bytes()
        assert b"server.connected" in await anext(chunks)
        created = await http.post("/session", content=rb'{"title":"cut \ud83d"}', headers=headers)
        assert created.status_code == 200 and b'"cut \\ud83d"' in created.content
        frame = await anext(chunks)
        assert b'"cut \\ud83d"' in frame and frame.decode("utf-8")  # escaped: valid UTF-8
        listed = await http.get("/session")
        assert b'"cut \\ud83d"' in listed.content and listed.content.decode("utf-8")
        sid = created.json()["id"]
        prompts = [
            rb'{"parts":[{"type":"file","mime":"text/plain","url":"data:text/plain,\udc00"}]}',
            rb'{"parts":[{"type":"text","text":"x"}],"agent":"\ud800"}',
            rb'{"parts":[{"type":"bogus\ud800"}]}',
        ]
        for body in prompts:
            answer = await http.post(f"/session/{sid}/prompt_async", content=body, headers=headers)
            assert answer.status_code in (204, 400), answer.content
            answer.content.decode("utf-8")
        fake.emit_raw('{"type":"session.idle","properties":{"sessionID":"ses_\\ud800"}}')
        raw = await anext(chunks)
        while b"ses_\\ud800" not in raw:
            raw = await anext(chunks)
        assert b'data: {"type":"session.idle","properties":{"sessionID":"ses_\\ud800"}}\n\n' in raw
