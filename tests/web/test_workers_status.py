"""The stored status follows the turns of the threads a worker holds, in the background.

A turn that ends by itself (no request to the worker that holds the thread) is listed
``ready`` by every other worker, which lists the store; a store that fails the write
then is retried and the listing catches up. The workers are ``test_workers.py``'s:
in-process apps, each with its own adapter and store connection to one SQLite file.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

from starlette.applications import Starlette

from adapter.testing.fake import FakeOpenCodeServer, Hang, Text
from tests.web.test_workers import StartWorker, W, Worker, start_worker, tree_idle

__all__ = ["start_worker"]  # the fixture, shared with test_workers.py


async def listed(worker: Worker, thread_id: str = W) -> dict[str, Any]:
    threads = (await worker.http.get("/threads")).json()
    [thread] = [t for t in threads if t["thread_id"] == thread_id]
    return dict(thread)


async def until_listed(worker: Worker, status: str) -> dict[str, Any]:
    """The thread as ``worker`` lists it once its status is ``status`` (5 s at most)."""
    async with asyncio.timeout(5):
        while (thread := await listed(worker))["status"] != status:
            await asyncio.sleep(0.02)
    return thread


async def turn_held_at_its_end(a: Worker, fake: FakeOpenCodeServer, name: str) -> tuple[str, Any]:
    """A turn on ``W`` sent through ``a``, whose run is held after its text (no idle yet)."""
    session_id = (await a.http.get(f"/threads/{W}")).json()["session_id"]
    hold = fake.hold_run_end(session_id)
    fake.script(name, [Text("all done")])
    sent = await a.http.post(f"/threads/{W}/turns", json={"text": f"[[script:{name}]]"})
    assert sent.status_code == 202, sent.text
    await hold.wait_started()
    return str(sent.json()["turn_id"]), hold


async def test_a_turn_that_ends_in_the_background_is_listed_ready_by_another_worker(
    start_worker: StartWorker, fake: FakeOpenCodeServer
) -> None:
    """Before: B listed the thread ``running`` until a request reached A again."""
    a, b = await start_worker(), await start_worker()
    assert (await a.http.post("/threads", json={"thread_id": W})).status_code == 201
    turn_id, hold = await turn_held_at_its_end(a, fake, "background")
    assert (await listed(b))["status"] == "running"
    assert (await listed(b))["active_turn_id"] == turn_id

    hold.release()  # the turn ends on its own; no request to A from here on
    await a.rec.wait_for("turn.completed", lambda e: e.turn_id == turn_id)
    shown = await until_listed(b, "ready")
    assert shown["active_turn_id"] is None
    stored = await b.store.get(W)
    assert stored is not None and (stored.status, stored.turn_id) == ("ready", turn_id)


async def test_a_write_the_store_refuses_is_retried_and_the_listing_catches_up(
    start_worker: StartWorker, fake: FakeOpenCodeServer, tmp_path: Path, captured_logs: list[Any]
) -> None:
    a, b = await start_worker(), await start_worker()
    assert (await a.http.post("/threads", json={"thread_id": W})).status_code == 201
    turn_id, hold = await turn_held_at_its_end(a, fake, "refused")
    blocker = sqlite3.connect(tmp_path / "threads.sqlite3", isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another writer, past the workers' busy timeout
    try:
        hold.release()
        await a.rec.wait_for("turn.completed", lambda e: e.turn_id == turn_id)
        async with asyncio.timeout(5):
            while not any(e["event"] == "web.status_write_failed" for e in captured_logs):
                await asyncio.sleep(0.02)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert (await until_listed(b, "ready"))["active_turn_id"] is None
    failed = [e for e in captured_logs if e["event"] == "web.status_write_failed"]
    assert failed[0]["thread_id"] == W and failed[0]["error_type"] == "StoreUnavailableError"
    # The follower went on: the next turn's start and end are written too.
    fake.script("next", [Text("again")])
    sent = await a.http.post(f"/threads/{W}/turns", json={"text": "[[script:next]]"})
    await a.rec.wait_for("turn.completed", lambda e: e.turn_id == sent.json()["turn_id"])
    async with asyncio.timeout(5):
        while (record := await b.store.get(W)) is None or record.turn_id != sent.json()["turn_id"]:
            await asyncio.sleep(0.02)
    assert (await until_listed(b, "ready"))["active_turn_id"] is None


async def test_a_thread_stopped_on_another_worker_is_written_by_both_as_ready(
    start_worker: StartWorker, fake: FakeOpenCodeServer
) -> None:
    a, b = await start_worker(), await start_worker()
    assert (await a.http.post("/threads", json={"thread_id": W})).status_code == 201
    fake.script("hang", [Text("working"), Hang()])
    sent = await a.http.post(f"/threads/{W}/turns", json={"text": "[[script:hang]]"})
    turn_id = sent.json()["turn_id"]
    await a.rec.wait_for("turn.started", lambda e: e.turn_id == turn_id)
    assert (await b.http.post(f"/threads/{W}/stop")).status_code == 200
    await a.rec.wait_for("turn.aborted", lambda e: e.turn_id == turn_id)
    c = await start_worker()
    assert (await until_listed(c, "ready"))["active_turn_id"] is None
    assert tree_idle(fake)


async def test_a_record_left_running_is_corrected_when_a_worker_resumes_it(
    start_worker: StartWorker, fake: FakeOpenCodeServer
) -> None:
    """A turn that ended while no worker followed it (every worker had stopped)."""
    a = await start_worker()
    assert (await a.http.post("/threads", json={"thread_id": W})).status_code == 201
    turn_id, hold = await turn_held_at_its_end(a, fake, "unfollowed")
    await a.oc.aclose()  # detached: the run goes on, no one follows it
    hold.release()
    async with asyncio.timeout(5):
        while not tree_idle(fake):
            await asyncio.sleep(0.02)
    b = await start_worker()
    assert (await listed(b))["status"] == "running"  # as the store last saw it
    assert (await b.http.get(f"/threads/{W}")).json()["status"] == "ready"
    c = await start_worker()
    assert (await listed(c))["status"] == "ready"
    stored = await c.store.get(W)
    assert stored is not None and stored.turn_id == turn_id


async def test_the_lifespan_starts_the_follower_before_any_request(
    start_worker: StartWorker, fake: FakeOpenCodeServer
) -> None:
    """A host that runs the app's lifespan: a thread its adapter holds (resumed by the
    host itself, no request to the app) has its turn written as it ends."""
    a = await start_worker()
    assert (await a.http.post("/threads", json={"thread_id": W})).status_code == 201
    record = await a.store.get(W)
    assert record is not None
    fresh = await start_worker()
    await fresh.oc.start_session(W, resume=record.resume)
    app: Starlette = fresh.app
    async with app.router.lifespan_context(app):
        fake.script("life", [Text("hello")])
        turn = await fresh.oc.send_turn(W, "[[script:life]]")
        await fresh.rec.wait_for("turn.completed", lambda e: e.turn_id == turn.turn_id)
        async with asyncio.timeout(5):
            # A holds the thread too (it adopts fresh's turn): both write, both end ready.
            while (stored := await a.store.get(W)) is None or (stored.status, stored.turn_id) != (
                "ready",
                turn.turn_id,
            ):
                await asyncio.sleep(0.02)
