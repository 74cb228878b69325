"""The SQLite store on real files: shared by processes (WAL, one winner per id),
owner-only, and each fault a :class:`StoreUnavailableError` it recovers from."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import resource
import signal
import sqlite3
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from adapter.web import (
    CorruptRecordError,
    StoreUnavailableError,
    ThreadExistsError,
    open_store,
)
from adapter.web._store import SqliteThreadStore  # the SQLite backend itself: no public name
from tests.web.store.conftest import make_record

ROOT = Path(__file__).resolve().parents[3]
IDS = [f"p-{n}" for n in range(30)]


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_the_file_is_owner_only_in_a_new_owner_only_directory_in_wal_mode(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state" / "opencode-tree" / "threads.sqlite3"
    old = os.umask(0o022)
    try:
        store = await open_store(path)
    finally:
        os.umask(old)
    try:
        await store.create(make_record())
        assert _mode(path) == 0o600
        assert _mode(Path(f"{path}-wal")) == 0o600  # SQLite copies the file's mode
        assert _mode(path.parent) == _mode(path.parent.parent) == 0o700
        db = sqlite3.connect(path)
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        db.close()
    finally:
        await store.aclose()


async def test_an_existing_directory_keeps_its_mode(tmp_path: Path) -> None:
    os.chmod(tmp_path, 0o755)
    async with await open_store(tmp_path / "threads.sqlite3"):
        pass
    assert _mode(tmp_path) == 0o755


def _create_all(path: str, barrier: Any, results: Any) -> None:
    async def run() -> list[str]:
        won: list[str] = []
        async with await open_store(path) as store:
            barrier.wait()
            for thread_id in IDS:
                try:
                    await store.create(make_record(thread_id))
                    won.append(thread_id)
                except ThreadExistsError:
                    pass
        return won

    results.put(asyncio.run(run()))


def test_two_processes_creating_the_same_ids_each_id_has_exactly_one_winner(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "threads.sqlite3")
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(2)
    results = context.Queue()
    workers = [context.Process(target=_create_all, args=(path, barrier, results)) for _ in "ab"]
    for worker in workers:
        worker.start()
    won = [results.get(timeout=60), results.get(timeout=60)]
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    assert sorted(won[0] + won[1]) == sorted(IDS)  # each id once: no loss, no double


async def test_a_locked_database_is_unavailable_then_recovers(tmp_path: Path) -> None:
    path = tmp_path / "threads.sqlite3"
    store = await SqliteThreadStore.open(path, busy_timeout=0.2)
    try:
        await store.create(make_record("before"))
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")  # another process's long write transaction
        try:
            with pytest.raises(StoreUnavailableError, match="locked"):
                await store.create(make_record("during"))
            assert await store.get("before") is not None  # WAL: reads go on
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        await store.create(make_record("during"))
        assert [r.thread_id for r in (await store.list()).records] == ["before", "during"]
    finally:
        await store.aclose()


async def test_a_path_that_cannot_be_created_is_unavailable(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(StoreUnavailableError, match="cannot be created"):
        await open_store(tmp_path / "file" / "threads.sqlite3")


async def test_a_file_that_is_not_a_database_is_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "threads.sqlite3"
    path.write_bytes(b"this is not a database, it is a text file " * 100)
    with pytest.raises(StoreUnavailableError, match="not a database"):
        await open_store(path)


_UNWRITABLE_CHILD = """
import asyncio, sys
from adapter.web import StoreUnavailableError, open_store
from tests.web.store.conftest import make_record

async def main():
    try:
        store = await open_store(sys.argv[1])
        try:
            assert (await store.get("t1")) is not None
            await store.create(make_record("t2"))
        finally:
            await store.aclose()
    except StoreUnavailableError as exc:
        print("StoreUnavailableError:", exc)
        return
    print("written")

asyncio.run(main())
"""


def _no_file_growth() -> None:
    """In the child, before it runs: a write that would grow a file fails (``EFBIG``)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))


def _readable_by_everyone(path: Path) -> bool:
    return all(_mode(p) & 0o005 == 0o005 for p in (path, *path.parents) if p.is_dir())


def test_an_unwritable_file_is_unavailable(tmp_path: Path) -> None:
    """A file the worker may read but not write (root writes any file: the worker
    then runs as ``nobody``, as the PostgreSQL server does; where ``nobody`` cannot read
    the checkout, as in a private CI clone, the worker runs as root under a file-size
    limit of 1 byte instead: no write can grow a file, as on a full disk)."""
    root = os.geteuid() == 0
    as_nobody = root and _readable_by_everyone(ROOT) and _readable_by_everyone(Path(sys.executable))
    limited = root and not as_nobody
    root = as_nobody
    folder = Path(tempfile.mkdtemp(prefix="opencode-tree-ro-")) if root else tmp_path
    try:
        path = folder / "threads.sqlite3"

        async def fill() -> None:
            async with await open_store(path) as store:
                await store.create(make_record("t1"))

        asyncio.run(fill())
        path.chmod(0o644 if root else 0o444)
        folder.chmod(0o755 if root else 0o555)
        prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
        result = subprocess.run(
            [*(prefix if root else []), sys.executable, "-c", _UNWRITABLE_CHILD, str(path)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=60,
            preexec_fn=_no_file_growth if limited else None,
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("StoreUnavailableError: the thread store"), result.stdout
    finally:
        folder.chmod(0o700)
        if root:
            import shutil

            shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize(
    ("column", "value", "reason"),
    [("resume", "'{not json'", "not valid JSON"), ("created_at", "'yesterday'", "created_at")],
)
async def test_bad_json_or_a_bad_time_in_a_column_is_a_corrupt_record(
    tmp_path: Path, column: str, value: str, reason: str
) -> None:
    path = tmp_path / "threads.sqlite3"
    async with await open_store(path) as store:
        await store.create(make_record("good"))
        await store.create(make_record("bad"))
    db = sqlite3.connect(path, isolation_level=None)
    db.execute(f"UPDATE threads SET {column} = {value} WHERE thread_id = 'bad'")
    db.close()
    async with await open_store(path) as store:
        with pytest.raises(CorruptRecordError, match=reason):
            await store.get("bad")
        listing = await store.list()
        assert [r.thread_id for r in listing.records] == ["good"]
        assert listing.corrupt_ids == ("bad",)


async def test_a_closed_store_is_unavailable(tmp_path: Path) -> None:
    store = await open_store(tmp_path / "threads.sqlite3")
    await store.aclose()
    await store.aclose()
    with pytest.raises(StoreUnavailableError, match="closed"):
        await store.get("t1")
