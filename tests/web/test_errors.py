"""``response_for``: the thread store's failures in the app's one error shape, a 503
for a store that cannot answer now, never a 500 (the routes call the store in the
wiring step; the answers are fixed here, from real store failures), and an error message
holding a lone surrogate as well-formed JSON."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

import adapter
from adapter.web import StoreError, StoreUnavailableError, ThreadExistsError, open_store
from adapter.web._errors import response_for
from adapter.web._store import SqliteThreadStore  # the SQLite backend itself: no public name
from tests.web.store.conftest import make_record

LONE = "cut \ud800 here"  # OpenCode cuts by UTF-16 units; JSON.stringify writes "\ud800"
SHOWN = "cut \ufffd here"  # what leaves the app: the adapter's one rule


def _answer(exc: Exception) -> tuple[int, dict[str, str], str | None]:
    response = response_for(exc)
    body = json.loads(bytes(response.body))
    return response.status_code, body["error"], response.headers.get("retry-after")


async def test_a_locked_store_is_a_503_with_a_clear_message(tmp_path: Path) -> None:
    path = tmp_path / "threads.sqlite3"
    store = await SqliteThreadStore.open(path, busy_timeout=0.1)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StoreUnavailableError) as caught:
            await store.create(make_record())
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        await store.aclose()
    status, error, retry = _answer(caught.value)
    assert (status, error["type"], retry) == (503, "store_unavailable", "1")
    assert "database is locked" in error["message"]


async def test_a_duplicate_is_409_and_a_corrupt_record_502(tmp_path: Path) -> None:
    path = tmp_path / "threads.sqlite3"
    async with await open_store(path) as store:
        await store.create(make_record())
        with pytest.raises(ThreadExistsError) as exists:
            await store.create(make_record())
        db = sqlite3.connect(path, isolation_level=None)
        db.execute("UPDATE threads SET resume = '[]'")
        db.close()
        with pytest.raises(StoreError) as corrupt:
            await store.get("t1")
    assert _answer(exists.value)[:2] == (409, {"type": "conflict", "message": str(exists.value)})
    status, error, _ = _answer(corrupt.value)
    assert (status, error["type"]) == (502, "corrupt_record")
    assert "'t1'" in error["message"] and "resume" in error["message"]


async def test_an_error_message_holding_a_lone_surrogate_is_well_formed() -> None:
    response = response_for(adapter.OpenCodeError(f"the server said {LONE}"))
    assert response.status_code == 502
    assert SHOWN in json.loads(bytes(response.body).decode("utf-8"))["error"]["message"]
