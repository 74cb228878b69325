"""Several workers over one thread store: any worker serves any thread, a restarted
backend loses nothing, and an event id another worker issued starts a gap and the
thread's snapshot.

Each "worker" is what a uvicorn worker process holds: its own ``OpenCodeAdapter``
(``on_close="detach"``) on the one fake server, its own store connection to one
SQLite file in ``tmp_path``, and its own ``create_app``, driven in-process through
``httpx.ASGITransport``.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.types import Receive, Scope, Send

from adapter import OpenCodeAdapter, Timeouts
from adapter.testing.fake import FakeOpenCodeServer, Hang, Text, Tool
from adapter.web import ThreadStore, create_app
from adapter.web._store import SqliteThreadStore  # the SQLite backend itself: no public name
from tests.adapter_support import Recorder
from tests.web.app_driver import SseClient
from tests.web.browser_support import blocked, chromium, serving

W = "w"


@dataclass
class Worker:
    oc: OpenCodeAdapter
    store: ThreadStore
    app: Starlette
    http: httpx.AsyncClient
    rec: Recorder


StartWorker = Callable[[], Awaitable[Worker]]


@pytest.fixture
async def start_worker(
    fake: FakeOpenCodeServer, timeouts: Timeouts, tmp_path: Path, record: Callable[..., Recorder]
) -> AsyncIterator[StartWorker]:
    """Starts a worker on the fake and the test's SQLite file; all closed (detached) at
    the end."""
    made: list[Worker] = []

    async def start() -> Worker:
        oc = OpenCodeAdapter(
            fake.base_url, transport=fake.transport, timeouts=timeouts, on_close="detach"
        )
        await oc.__aenter__()
        store = await SqliteThreadStore.open(tmp_path / "threads.sqlite3", busy_timeout=0.3)
        app = create_app(oc, ping=0, store=store)
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app")
        made.append(Worker(oc, store, app, http, record(oc)))
        return made[-1]

    yield start
    for worker in made:
        await worker.http.aclose()
        await worker.oc.aclose()
        await worker.store.aclose()


async def running_turn(worker: Worker, fake: FakeOpenCodeServer, name: str) -> str:
    """A turn on ``W`` whose root finished ``echo hi`` and then hangs; its turn id."""
    fake.script(name, [Tool("bash", {"command": "echo hi"}, output="hi\n"), Hang()])
    sent = await worker.http.post(f"/threads/{W}/turns", json={"text": f"[[script:{name}]]"})
    assert sent.status_code == 202, sent.text
    turn_id = str(sent.json()["turn_id"])
    await worker.rec.wait_for("item.completed", lambda e: e.turn_id == turn_id)
    return turn_id


def tree_idle(fake: FakeOpenCodeServer) -> bool:
    return not any(session.busy for session in fake.sessions.values())


async def test_a_thread_created_on_one_worker_is_served_by_another(
    start_worker: StartWorker, fake: FakeOpenCodeServer
) -> None:
    a, b = await start_worker(), await start_worker()
    created = await a.http.post("/threads", json={"thread_id": W, "title": "shared"})
    assert created.status_code == 201
    turn_id = await running_turn(a, fake, "shared")

    seen = await b.http.get(f"/threads/{W}")
    assert seen.status_code == 200, seen.text
    assert seen.json()["session_id"] == created.json()["session_id"]
    assert seen.json()["status"] == "running"
    assert seen.json()["active_turn_id"] == turn_id  # the same id in every process

    stopped = await b.http.post(f"/threads/{W}/stop")
    assert stopped.status_code == 200, stopped.text
    body = stopped.json()
    assert body["turn_id"] == turn_id
    assert any(t["output"] == "hi\n" for t in body["partial"]["tool_calls"]), body["partial"]
    assert tree_idle(fake)
    await a.rec.wait_for("turn.aborted", lambda e: e.turn_id == turn_id)
    listed = {t["thread_id"]: t for t in (await a.http.get("/threads")).json()}
    assert listed[W]["status"] == "ready"


async def test_concurrent_creates_of_one_id_give_one_201_and_leave_one_session(
    start_worker: StartWorker, fake: FakeOpenCodeServer
) -> None:
    a, b = await start_worker(), await start_worker()
    hold = fake.hold("POST", "/session")  # both starts reach the server before either claims
    posts = [asyncio.create_task(w.http.post("/threads", json={"thread_id": W})) for w in (a, b)]
    async with asyncio.timeout(5):
        while len(hold.requests) < 2:
            await asyncio.sleep(0.01)
    hold.release()
    answers = await asyncio.gather(*posts)
    assert sorted(r.status_code for r in answers) == [201, 409]
    assert answers[1 - [r.status_code for r in answers].index(201)].json()["error"]["type"] == (
        "conflict"
    )
    winner, loser = (a, b) if answers[0].status_code == 201 else (b, a)
    session_id = answers[[r.status_code for r in answers].index(201)].json()["session_id"]
    assert winner.oc.has_session(W) and not loser.oc.has_session(W)
    stored = await a.store.get(W)
    assert stored is not None and stored.resume["session_id"] == session_id
    # The loser's own session (started before its claim failed) is not running, and the
    # loser now serves the winner's thread.
    assert tree_idle(fake)
    served = await loser.http.get(f"/threads/{W}")
    assert served.status_code == 200 and served.json()["session_id"] == session_id


async def test_concurrent_requests_for_an_unknown_id_resume_it_once(
    start_worker: StartWorker, fake: FakeOpenCodeServer
) -> None:
    a, b = await start_worker(), await start_worker()
    assert (await a.http.post("/threads", json={"thread_id": W})).status_code == 201
    answers = await asyncio.gather(*(b.http.get(f"/threads/{W}") for _ in range(20)))
    assert {r.status_code for r in answers} == {200}
    assert len(b.rec.of("session.started")) == 1


async def test_a_restarted_backend_lists_the_thread_shows_its_turn_and_stops_it(
    start_worker: StartWorker, fake: FakeOpenCodeServer
) -> None:
    first = await start_worker()
    assert (await first.http.post("/threads", json={"thread_id": W})).status_code == 201
    turn_id = await running_turn(first, fake, "before")
    await first.oc.aclose()  # detach: the tree goes on on the server

    again = await start_worker()
    listed = (await again.http.get("/threads")).json()
    assert [(t["thread_id"], t["status"], t["active_turn_id"]) for t in listed] == [
        (W, "running", turn_id)
    ]
    sse = SseClient(again.app, f"/threads/{W}/events?replay=1")
    try:
        assert await sse.started() == 200
        frames = await sse.until("item.completed")
        started = [f.json() for f in frames if f.event == "turn.started"]
        assert [(s["turn_id"], s["origin"]) for s in started] == [(turn_id, "adopted")]
        assert frames[-1].json()["detail"] == "hi\n"
    finally:
        await sse.aclose()
    stopped = await again.http.post(f"/threads/{W}/stop")
    assert stopped.status_code == 200
    assert stopped.json()["turn_id"] == turn_id
    assert any(t["output"] == "hi\n" for t in stopped.json()["partial"]["tool_calls"])
    assert tree_idle(fake)


async def test_an_event_id_of_another_worker_starts_a_gap_then_the_thread(
    start_worker: StartWorker, fake: FakeOpenCodeServer
) -> None:
    a, b = await start_worker(), await start_worker()
    assert (await a.http.post("/threads", json={"thread_id": W})).status_code == 201
    on_a = SseClient(a.app, f"/threads/{W}/events")
    assert await on_a.started() == 200
    turn_id = await running_turn(a, fake, "gap")
    last = (await on_a.until("item.completed"))[-1].id
    await on_a.aclose()
    assert last is not None

    on_b = SseClient(b.app, f"/threads/{W}/events", {"Last-Event-ID": last})
    try:
        assert await on_b.started() == 200
        frames = await on_b.until("item.completed")
    finally:
        await on_b.aclose()
    gap = frames[0].json()
    assert frames[0].event == "stream.gap" and frames[0].id is None
    assert gap["reason"] == "expired"
    assert gap["thread"]["status"] == "running" and gap["thread"]["active_turn_id"] == turn_id
    kinds = [f.event for f in frames[1:]]
    assert kinds.count("turn.started") == 1 and kinds.count("stream.gap") == 0
    assert frames[-1].json()["detail"] == "hi\n"
    replayed = [f.id for f in frames[1:]]
    assert len(set(replayed)) == len(replayed)

    # An id of A's epoch whose event id B also issued is still A's: never looked up.
    a_epoch = last.partition(".")[0]
    b_id = str(frames[-1].id).partition(".")[2]
    collided = SseClient(b.app, f"/threads/{W}/events", {"Last-Event-ID": f"{a_epoch}.{b_id}"})
    try:
        assert await collided.started() == 200
        assert (await collided.next()).event == "stream.gap"  # type: ignore[union-attr]
    finally:
        await collided.aclose()
    # B's own id resumes right after it, with no gap.
    own = SseClient(b.app, f"/threads/{W}/events", {"Last-Event-ID": str(frames[1].id)})
    try:
        assert await own.started() == 200
        assert (await own.next()).id == frames[2].id  # type: ignore[union-attr]
    finally:
        await own.aclose()


async def test_a_locked_store_answers_503_and_the_backend_recovers(
    start_worker: StartWorker, tmp_path: Path, fake: FakeOpenCodeServer
) -> None:
    a = await start_worker()
    assert (await a.http.post("/threads", json={"thread_id": "kept"})).status_code == 201
    blocker = sqlite3.connect(tmp_path / "threads.sqlite3", isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another process writing, past the busy timeout
    try:
        refused = await a.http.post("/threads", json={"thread_id": "new"})
        assert refused.status_code == 503, refused.text
        assert refused.headers["retry-after"] == "1"
        assert refused.json()["error"]["type"] == "store_unavailable"
        assert not a.oc.has_session("new") and tree_idle(fake)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert (await a.http.post("/threads", json={"thread_id": "new"})).status_code == 201
    listed = [t["thread_id"] for t in (await a.http.get("/threads")).json()]
    assert listed == ["kept", "new"]


async def test_a_corrupt_record_is_listed_as_such_and_the_others_are_served(
    start_worker: StartWorker, tmp_path: Path
) -> None:
    a, b = await start_worker(), await start_worker()
    for thread_id in ("good", "bad"):
        assert (await a.http.post("/threads", json={"thread_id": thread_id})).status_code == 201
    with sqlite3.connect(tmp_path / "threads.sqlite3") as db:
        db.execute("UPDATE threads SET resume = '{not json' WHERE thread_id = 'bad'")
        db.execute(
            "INSERT INTO threads SELECT 'a/../b', base_url, resume, title, model, agent, "
            "permissions, status, turn_id, created_at, updated_at FROM threads "
            "WHERE thread_id = 'good'"
        )
    listed = (await b.http.get("/threads")).json()
    assert [t["thread_id"] for t in listed if t["status"] != "corrupt"] == ["good"]
    corrupt = {t["thread_id"]: t for t in listed if t["status"] == "corrupt"}
    assert set(corrupt) == {"bad", "a/../b"} and "JSON" in corrupt["bad"]["error"]
    refused = await b.http.get("/threads/bad")
    assert refused.status_code == 502 and refused.json()["error"]["type"] == "corrupt_record"
    assert (await b.http.get("/threads/good")).status_code == 200
    taken = await b.http.post("/threads", json={"thread_id": "bad"})
    assert taken.status_code == 409


async def test_a_stored_session_that_is_gone_is_replaced_once_for_every_worker(
    start_worker: StartWorker, fake: FakeOpenCodeServer
) -> None:
    a, b, c = await start_worker(), await start_worker(), await start_worker()
    created = (await a.http.post("/threads", json={"thread_id": W})).json()
    async with httpx.AsyncClient(transport=fake.transport, base_url=fake.base_url) as server:
        assert (await server.delete(f"/session/{created['session_id']}")).status_code == 200
    fresh = (await b.http.get(f"/threads/{W}")).json()["session_id"]
    assert fresh != created["session_id"]
    stored = await c.store.get(W)
    assert stored is not None and stored.resume["session_id"] == fresh
    assert (await c.http.get(f"/threads/{W}")).json()["session_id"] == fresh


async def test_the_page_shows_a_turn_once_across_a_worker_switch_and_stops_it(
    start_worker: StartWorker, fake: FakeOpenCodeServer
) -> None:
    """The page follows a turn on A; A goes away (detached) and its stream ends; the
    page reconnects to B with A's Last-Event-ID, gets the gap and B's replay of the
    adopted turn, and draws it once (before: the text twice and the tool call twice,
    B's event ids taken for ones already seen); its Stop stops the tree on B."""
    a, b = await start_worker(), await start_worker()
    target: list[Starlette] = [a.app]

    async def balancer(scope: Scope, receive: Receive, send: Send) -> None:
        await target[0](scope, receive, send)

    assert (await a.http.post("/threads", json={"thread_id": W})).status_code == 201
    fake.script(
        "switch",
        [
            Text("hello from the first worker"),
            Tool("bash", {"command": "echo hi"}, output="hi\n"),
            Hang(),
        ],
    )
    errors: list[str] = []
    async with serving(balancer) as url, chromium() as browser:
        page = await browser.new_page()
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda message: errors.extend(blocked(message)))
        await page.goto(f"{url}?thread={W}")
        await page.wait_for_function("() => document.body.dataset.ready === 'true'")
        await page.fill("#prompt", "[[script:switch]]")
        await page.click("#send")
        tool = page.locator('[data-tool="bash"]')
        await tool.locator(".tool-detail").filter(has_text="hi").wait_for()
        target[0] = b.app
        await a.oc.aclose()  # detached: its stream ends, the tree goes on
        await page.wait_for_function(
            "() => document.getElementById('connection').textContent.includes('expired')",
            timeout=15_000,
        )
        await page.locator('[data-tool="bash"][data-status="completed"]').wait_for()
        texts = await page.locator(".text.answer").all_text_contents()
        assert texts == ["hello from the first worker"], texts
        assert await page.locator('[data-tool="bash"]').count() == 1
        assert await page.locator(".user").all_text_contents() == ["[[script:switch]]"]
        await page.click("#stop")
        await page.wait_for_function(
            "() => document.getElementById('stop-status').dataset.state === 'stopped'"
        )
        assert "hi" in (await page.locator("#partial").text_content() or "")
    assert tree_idle(fake) and not errors, errors
