"""The ``ThreadStore`` contract, the same on SQLite and on PostgreSQL (``backend``):
records round-trip, a duplicate id loses, a hand-corrupted row is refused by ``get``
and skipped by ``list`` while the others load, and the schema is versioned."""

from __future__ import annotations

import asyncio
import logging

import pytest

from adapter import PermissionRule
from adapter.web import (
    CorruptRecordError,
    SchemaTooNewError,
    ThreadExistsError,
    ThreadNotFoundError,
    open_store,
)
from tests.web.store.conftest import Backend, make_record


async def test_a_record_round_trips_with_every_field(backend: Backend) -> None:
    rules = (PermissionRule("bash", "*", "ask"), PermissionRule("*", "*", "allow"))
    record = make_record(
        "thread ünïcode ?#%&",
        title="Fix the build 🛠",
        model="anthropic/claude-sonnet-4",
        agent="build",
        permissions=rules,
        status="running",
        turn_id="turn_1",
    )
    async with await open_store(backend.target) as store:
        await store.create(record)
        assert await store.get(record.thread_id) == record
        assert await store.get("nope") is None
        assert (await store.list()).records == (record,)
    async with await open_store(backend.target) as again:  # durable across opens
        assert await again.get(record.thread_id) == record


async def test_update_replaces_a_record_but_keeps_its_creation_time(backend: Backend) -> None:
    record = make_record(permissions="ask")
    async with await open_store(backend.target) as store:
        await store.create(record)
        changed = record.changed(model="openai/gpt-5", permissions="full-access", status="ready")
        await store.update(changed.changed(created_at=changed.updated_at))
        stored = await store.get("t1")
        assert stored is not None
        assert (stored.model, stored.permissions, stored.status) == (
            "openai/gpt-5",
            "full-access",
            "ready",
        )
        assert stored.created_at == record.created_at
        with pytest.raises(ThreadNotFoundError):
            await store.update(make_record("absent"))
        assert await store.delete("t1") is True
        assert await store.delete("t1") is False
        assert await store.get("t1") is None


async def test_a_taken_id_is_refused_and_the_first_record_stays(backend: Backend) -> None:
    async with await open_store(backend.target) as store:
        await store.create(make_record(title="first"))
        with pytest.raises(ThreadExistsError) as caught:
            await store.create(make_record(title="second"))
        assert caught.value.thread_id == "t1"
        stored = await store.get("t1")
        assert stored is not None and stored.title == "first"


async def test_two_stores_creating_the_same_ids_at_once_each_id_has_one_winner(
    backend: Backend,
) -> None:
    """Two connections (two workers) race on 20 ids: every id is created exactly once."""
    ids = [f"race-{n}" for n in range(20)]
    first = await open_store(backend.target)
    second = await open_store(backend.target)
    try:
        results = await asyncio.gather(
            *(store.create(make_record(i)) for i in ids for store in (first, second)),
            return_exceptions=True,
        )
    finally:
        await first.aclose()
        await second.aclose()
    assert [r for r in results if r is not None and not isinstance(r, ThreadExistsError)] == []
    lost = sorted(r.thread_id for r in results if isinstance(r, ThreadExistsError))
    assert lost == sorted(ids)
    async with await open_store(backend.target) as store:
        assert sorted(r.thread_id for r in (await store.list()).records) == sorted(ids)


@pytest.mark.parametrize(
    ("column", "value", "reason"),
    [
        ("resume", "'\"a string\"'", "resume"),
        ("permissions", '\'{"bash": "ask"}\'', "permissions"),
        ("status", "'exploded'", "status"),
        ("model", "''", "model"),
        ("base_url", "'http://user:s3cret@127.0.0.1:4096'", "credentials"),
        ("thread_id", "'..'", "thread_id"),
    ],
)
async def test_a_corrupt_row_is_refused_and_the_others_still_load(
    backend: Backend, column: str, value: str, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with await open_store(backend.target) as store:
        for thread_id in ("a", "bad", "c"):
            await store.create(make_record(thread_id))
    backend.execute(f"UPDATE threads SET {column} = {value} WHERE thread_id = 'bad'")
    bad_id = ".." if column == "thread_id" else "bad"
    async with await open_store(backend.target) as store:
        with caplog.at_level(logging.WARNING, logger="adapter.web.store"):
            listing = await store.list()
        assert [r.thread_id for r in listing.records] == ["a", "c"]
        assert listing.corrupt_ids == (bad_id,)
        assert reason in listing.corrupt[0].reason
        assert "store.corrupt_record" in caplog.text
        if column != "thread_id":  # an id outside the grammar is never looked up
            with pytest.raises(CorruptRecordError) as caught:
                await store.get("bad")
            assert caught.value.thread_id == "bad" and reason in str(caught.value)
        assert "s3cret" not in repr(listing) + caplog.text
        assert await store.get("a") is not None


async def test_the_schema_is_created_once_by_workers_opening_together(backend: Backend) -> None:
    stores = await asyncio.gather(*(open_store(backend.target) for _ in range(4)))
    for store in stores:
        await store.aclose()
    seen: list[str] = []
    if backend.name == "sqlite":
        import sqlite3

        db = sqlite3.connect(backend.target)
        seen = [str(v) for (v,) in db.execute("SELECT version FROM schema_version")]
        db.close()
    else:
        import psycopg

        with psycopg.connect(backend.target) as pg:
            seen = [str(v) for (v,) in pg.execute("SELECT version FROM schema_version")]
    assert seen == ["1"]


async def test_a_database_from_a_newer_schema_is_refused_and_left_as_it_is(
    backend: Backend,
) -> None:
    async with await open_store(backend.target) as store:
        await store.create(make_record())
    backend.execute("UPDATE schema_version SET version = 99")
    with pytest.raises(SchemaTooNewError) as caught:
        await open_store(backend.target)
    assert (caught.value.found, caught.value.known) == (99, 1)
    assert "99" in str(caught.value) and "upgrade" in str(caught.value)
    backend.execute("UPDATE schema_version SET version = 1")  # untouched: it opens again
    async with await open_store(backend.target) as store:
        assert await store.get("t1") is not None
