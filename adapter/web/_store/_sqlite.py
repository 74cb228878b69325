"""The embedded store: one SQLite file the workers of one host share.

Why the standard library's ``sqlite3`` and not a wrapper: it is maintained with
CPython and needs no install; what ``aiosqlite`` adds, a thread per connection
that runs its calls off the event loop, is the one executor below. Every call of
the store runs there, in order, on one connection.

How several processes share the file: WAL journal mode (readers never block the
writer nor the writer them; set once, it stays with the file), a busy timeout
(a writer waits that long for another's transaction, then the call is
:class:`StoreUnavailableError`), ``synchronous=FULL`` (a record the store
acknowledged survives a power cut), and the primary key on ``thread_id`` (of two
processes inserting one id, one wins). The file is created owner-only (0600, and
its directory 0700 when the store creates it); SQLite gives its ``-wal`` and
``-shm`` files the database's permissions.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from .._thread_ids import thread_id_problem
from ._errors import StoreUnavailableError, ThreadExistsError, ThreadNotFoundError
from ._record import ThreadRecord
from ._rows import COLUMNS, listing_of, record_of, row_of
from ._schema import VERSION, VERSION_TABLE, check_version, pending
from ._store import Listing, ThreadStore

__all__ = ["DEFAULT_BUSY_TIMEOUT", "SqliteThreadStore"]

#: Seconds a write waits for another process's transaction before the call fails.
DEFAULT_BUSY_TIMEOUT = 5.0

_T = TypeVar("_T")
_SELECT = f"SELECT {', '.join(COLUMNS)} FROM threads"
_INSERT = f"INSERT INTO threads ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})"
_CHANGED = [c for c in COLUMNS if c not in ("thread_id", "created_at")]
_UPDATE = f"UPDATE threads SET {', '.join(f'{c} = ?' for c in _CHANGED)} WHERE thread_id = ?"


class SqliteThreadStore(ThreadStore):
    """A :class:`ThreadStore` in one SQLite file; make one with :meth:`open`."""

    def __init__(self, path: Path, connection: sqlite3.Connection, executor: ThreadPoolExecutor):
        self.path = path
        self._connection: sqlite3.Connection | None = connection
        self._executor = executor

    def __repr__(self) -> str:
        return f"SqliteThreadStore({str(self.path)!r})"

    @classmethod
    async def open(
        cls, path: str | os.PathLike[str], *, busy_timeout: float = DEFAULT_BUSY_TIMEOUT
    ) -> SqliteThreadStore:
        """The store in ``path``, created (0600) with its directory (0700) if missing,
        migrated to the current schema. :class:`StoreUnavailableError` when the file
        cannot be created, opened or locked; :class:`SchemaTooNewError` when a newer
        package wrote it."""
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="thread-store")
        loop = asyncio.get_running_loop()
        try:
            where, connection = await loop.run_in_executor(executor, _connect, path, busy_timeout)
        except BaseException:
            executor.shutdown(wait=False)
            raise
        return cls(where, connection, executor)

    async def _run(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        connection = self._connection
        if connection is None:
            raise StoreUnavailableError("the thread store is closed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, _guarded, work, connection)

    async def create(self, record: ThreadRecord) -> None:
        row = row_of(record, times_as_text=True)

        def insert(db: sqlite3.Connection) -> None:
            try:
                db.execute(_INSERT, row)
            except sqlite3.IntegrityError:
                raise ThreadExistsError(record.thread_id) from None

        await self._run(insert)

    async def get(self, thread_id: str) -> ThreadRecord | None:
        if thread_id_problem(thread_id) is not None:
            return None  # never stored: the record's own checks refuse such an id
        rows = await self._run(
            lambda db: db.execute(f"{_SELECT} WHERE thread_id = ?", (thread_id,)).fetchall()
        )
        return record_of(rows[0]) if rows else None

    async def list(self) -> Listing:
        rows = await self._run(
            lambda db: db.execute(f"{_SELECT} ORDER BY created_at, thread_id").fetchall()
        )
        return listing_of(rows)

    async def update(self, record: ThreadRecord) -> None:
        values = dict(zip(COLUMNS, row_of(record, times_as_text=True), strict=True))
        params = (*(values[c] for c in _CHANGED), record.thread_id)
        changed = await self._run(lambda db: db.execute(_UPDATE, params).rowcount)
        if changed == 0:
            raise ThreadNotFoundError(record.thread_id)

    async def delete(self, thread_id: str) -> bool:
        if thread_id_problem(thread_id) is not None:
            return False
        removed = await self._run(
            lambda db: db.execute("DELETE FROM threads WHERE thread_id = ?", (thread_id,)).rowcount
        )
        return bool(removed)

    async def aclose(self) -> None:
        connection, self._connection = self._connection, None
        if connection is None:
            return
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._executor, connection.close)
        finally:
            self._executor.shutdown(wait=False)


def _guarded(work: Callable[[sqlite3.Connection], _T], connection: sqlite3.Connection) -> _T:
    """``work`` on the store's thread; a driver error is the store being unavailable."""
    try:
        return work(connection)
    except sqlite3.IntegrityError:
        raise
    except sqlite3.Error as exc:
        raise StoreUnavailableError(f"the thread store is unavailable: {exc}") from None


def _connect(given: str | os.PathLike[str], busy_timeout: float) -> tuple[Path, sqlite3.Connection]:
    path = Path(given).expanduser().absolute()
    try:
        _create_owner_only(path)
    except OSError as exc:
        raise StoreUnavailableError(
            f"the thread store cannot be created: {exc.strerror or exc}"
        ) from None
    connection: sqlite3.Connection | None = None
    try:
        # Autocommit (isolation_level None): one statement is one transaction, and
        # the migration opens its own with BEGIN IMMEDIATE.
        connection = sqlite3.connect(
            path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
        )
        connection.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        mode = _use_wal(connection, busy_timeout)
        if mode != "wal":
            raise StoreUnavailableError(f"the thread store cannot use WAL mode (got {mode!r})")
        connection.execute("PRAGMA synchronous = FULL")
        _migrate(connection)
        return path, connection
    except sqlite3.Error as exc:
        if connection is not None:
            connection.close()
        raise StoreUnavailableError(f"the thread store is unavailable: {exc}") from None
    except BaseException:
        if connection is not None:
            connection.close()
        raise


def _use_wal(connection: sqlite3.Connection, busy_timeout: float) -> str:
    """Switch the file to WAL (a no-op once it is), within the busy timeout.

    Why a loop: the switch takes the file's exclusive lock and SQLite does not call
    the busy handler for it, so of several workers opening a new file together,
    all but one got "database is locked" at once (1 open in 240, measured).
    """
    deadline = time.monotonic() + busy_timeout
    pause = 0.005
    while True:
        try:
            return str(connection.execute("PRAGMA journal_mode = WAL").fetchone()[0]).lower()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(pause)  # on the store's own thread, never the event loop
        pause = min(pause * 2, 0.1)


def _create_owner_only(path: Path) -> None:
    """The directory (0700) and the empty file (0600), for what does not exist yet."""
    missing = [p for p in (path.parent, *path.parent.parents) if not p.exists()]
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=0o700)
        except FileExistsError:
            continue  # another worker made it first
        os.chmod(directory, 0o700)  # the umask may have taken bits from mkdir's mode
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    os.fchmod(fd, 0o600)
    os.close(fd)


def _version(connection: sqlite3.Connection) -> int:
    exists = connection.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
    ).fetchone()
    if exists is None:
        return 0
    found = connection.execute("SELECT max(version) FROM schema_version").fetchone()[0]
    return int(found or 0)


def _migrate(connection: sqlite3.Connection) -> None:
    found = _version(connection)
    if found == VERSION:
        return
    check_version(found)
    connection.execute("BEGIN IMMEDIATE")  # one worker migrates, the others wait
    try:
        connection.execute(VERSION_TABLE)
        found = _version(connection)
        for _, statements in pending("sqlite", found):
            for statement in statements:
                connection.execute(statement)
        if found != VERSION:
            connection.execute("DELETE FROM schema_version")
            connection.execute("INSERT INTO schema_version (version) VALUES (?)", (VERSION,))
        connection.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            connection.execute("ROLLBACK")
        raise
