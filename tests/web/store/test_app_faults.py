"""The store's faults as the app answers them: a 503 with the error shape (never a 500)
on the routes that need the store, reads that do not need it still served, recovery
without a restart of the app when the store is back, and no acknowledged thread lost.

The app is in-process (``httpx.ASGITransport`` over ``create_app`` and an adapter on
the fake server); the stores are real: the throwaway PostgreSQL server of
``conftest.py`` (stopped and started with ``pg_ctl``) and SQLite files.
"""

from __future__ import annotations

import contextlib
import resource
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from adapter import OpenCodeAdapter, Timeouts
from adapter.testing.fake import FakeOpenCodeServer, Text
from adapter.web import ThreadRecord, ThreadStore, create_app, open_store
from tests.web.store.conftest import CURSOR
from tests.web.store.postgres_server import PostgresServer


@contextlib.asynccontextmanager
async def serving(
    fake: FakeOpenCodeServer, timeouts: Timeouts, target: str
) -> AsyncIterator[tuple[httpx.AsyncClient, OpenCodeAdapter, ThreadStore]]:
    async with (
        OpenCodeAdapter(
            fake.base_url, transport=fake.transport, timeouts=timeouts, on_close="detach"
        ) as oc,
        await open_store(target) as store,
    ):
        app = create_app(oc, ping=0, store=store)
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://app"
        ) as http:
            yield http, oc, store


def unavailable(answer: httpx.Response) -> None:
    assert answer.status_code == 503, answer.text
    assert answer.headers["retry-after"] == "1"
    error: dict[str, Any] = answer.json()["error"]
    assert error["type"] == "store_unavailable"
    assert error["message"].startswith("the thread store is unavailable"), error


async def stored_ids(target: str) -> list[str]:
    """The ids a store opened afresh holds (what a restarted backend finds)."""
    async with await open_store(target) as store:
        return [r.thread_id for r in (await store.list()).records]


async def test_a_stopped_postgresql_answers_503_then_the_app_recovers_without_a_restart(
    pg_server: PostgresServer, pg_dsn: str, fake: FakeOpenCodeServer, timeouts: Timeouts
) -> None:
    async with serving(fake, timeouts, pg_dsn) as (http, oc, _):
        assert (await http.post("/threads", json={"thread_id": "kept"})).status_code == 201
        pg_server.stop()
        try:
            unavailable(await http.get("/threads"))
            unavailable(await http.get("/threads/elsewhere"))  # not held here: a lookup
            unavailable(await http.post("/threads", json={"thread_id": "new"}))
            unavailable(await http.post("/threads/kept/fork", json={"thread_id": "forked"}))
            assert not oc.has_session("new") and not oc.has_session("forked")
            assert not any(s.busy for s in fake.sessions.values())
            # A thread this worker holds is served from the adapter, store or not; a turn
            # sent runs (its status write fails and is logged, not answered 503).
            assert (await http.get("/threads/kept")).status_code == 200
            fake.script("down", [Text("while the store is down")])
            assert (
                await http.post("/threads/kept/turns", json={"text": "[[script:down]]"})
            ).status_code == 202
        finally:
            pg_server.start()
        made = await http.post("/threads", json={"thread_id": "new"})
        assert made.status_code == 201, made.text
        listed = [t["thread_id"] for t in (await http.get("/threads")).json()]
        assert listed == ["kept", "new"]
    assert await stored_ids(pg_dsn) == ["kept", "new"]


async def test_a_corrupt_postgresql_record_is_listed_as_such_and_the_others_load(
    pg_dsn: str, fake: FakeOpenCodeServer, timeouts: Timeouts
) -> None:
    async with serving(fake, timeouts, pg_dsn) as (http, _, _):
        for thread_id in ("good", "bad"):
            assert (await http.post("/threads", json={"thread_id": thread_id})).status_code == 201
        with psycopg.connect(pg_dsn, autocommit=True) as db:
            db.execute("""UPDATE threads SET resume = '{"schema": 9}' WHERE thread_id = 'bad'""")
    async with serving(fake, timeouts, pg_dsn) as (http, _, _):
        listed = (await http.get("/threads")).json()
        assert [(t["thread_id"], t["status"]) for t in listed] == [
            ("good", "ready"),
            ("bad", "corrupt"),
        ]
        assert "resume" in listed[1]["error"]
        refused = await http.get("/threads/bad")
        assert refused.status_code == 502 and refused.json()["error"]["type"] == "corrupt_record"
        assert (await http.get("/threads/good")).status_code == 200
        assert (await http.post("/threads", json={"thread_id": "bad"})).status_code == 409


@contextlib.contextmanager
def no_file_may_grow() -> Iterator[None]:
    """Every write that would grow a file fails (``EFBIG``), as on a full disk: the
    store's file is unwritable to this process (root writes a file whatever its mode),
    while what is already written can be read."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)


async def test_an_unwritable_sqlite_store_answers_503_on_writes_and_serves_reads(
    tmp_path: Path, fake: FakeOpenCodeServer, timeouts: Timeouts, captured_logs: list[Any]
) -> None:
    target = str(tmp_path / "threads.sqlite3")
    async with (
        serving(fake, timeouts, target) as (http, _, _),
        serving(fake, timeouts, target) as (other, _, _),
    ):
        assert (await http.post("/threads", json={"thread_id": "kept"})).status_code == 201
        assert (await http.get("/threads")).status_code == 200  # every route imported once
        with no_file_may_grow():
            refused = await http.post("/threads", json={"thread_id": "new"})
            listed = await other.get("/threads")
            resumed = await other.get("/threads/kept")  # another worker: read from the store
        unavailable(refused)
        assert listed.status_code == 200
        assert [t["thread_id"] for t in listed.json()] == ["kept"]
        assert resumed.status_code == 200, resumed.text
        assert not any(s.busy for s in fake.sessions.values())
        assert (await http.post("/threads", json={"thread_id": "new"})).status_code == 201
    assert await stored_ids(target) == ["kept", "new"]


async def test_a_record_of_another_opencode_server_is_refused_with_409(
    tmp_path: Path, fake: FakeOpenCodeServer, timeouts: Timeouts
) -> None:
    target = str(tmp_path / "threads.sqlite3")
    async with serving(fake, timeouts, target) as (http, oc, store):
        elsewhere = "http://127.0.0.1:4097"
        assert elsewhere != oc.base_url
        await store.create(ThreadRecord.new("far", elsewhere, dict(CURSOR)))
        sessions = set(fake.sessions)
        for answer in (
            await http.get("/threads/far"),
            await http.post("/threads/far/turns", json={"text": "hi"}),
            await http.post("/threads/far/stop", json={}),
        ):
            assert answer.status_code == 409, answer.text
            error = answer.json()["error"]
            assert error["type"] == "conflict"
            assert elsewhere in error["message"] and "another OpenCode server" in error["message"]
        assert not oc.has_session("far") and set(fake.sessions) == sessions  # nothing resumed
        listed = {t["thread_id"]: t for t in (await http.get("/threads")).json()}
        assert listed["far"]["status"] == "ready"  # listed as stored, never resumed here


@pytest.fixture
def timeouts() -> Timeouts:
    return Timeouts(connect=2.0, abort=2.0, tree=2.0)
