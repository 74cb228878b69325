"""The store for backends on several hosts: PostgreSQL, from a DSN.

Why ``psycopg`` 3: it is libpq's own client, so a DSN means what it means to
``psql`` (``postgresql://`` and ``postgres://`` URLs, key/value strings, and the
``PG*`` environment variables, ``PGPASSWORD`` and ``~/.pgpass`` included: a host
can keep the password out of the URL altogether); it speaks asyncio natively and
ships type hints (``asyncpg`` ships none).

One connection, in autocommit, used by one call at a time: each statement is its
own transaction, and ``thread_id``'s primary key decides between two workers
creating one id. A connection the server dropped (restarted, stopped, a network
cut) fails that call with :class:`StoreUnavailableError` and is opened again by
the next one, so the store recovers by itself when the database is back. Neither
the DSN nor its password is ever part of a message or a ``repr``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pg_errors

from .._thread_ids import thread_id_problem
from ._errors import StoreUnavailableError, ThreadExistsError, ThreadNotFoundError
from ._record import ThreadRecord
from ._rows import COLUMNS, listing_of, record_of, row_of
from ._schema import VERSION, VERSION_TABLE, check_version, pending
from ._store import Listing, ThreadStore

__all__ = ["DEFAULT_CONNECT_TIMEOUT", "DEFAULT_STATEMENT_TIMEOUT", "PostgresThreadStore"]

#: Seconds to open a connection, and for one statement, before the call fails.
DEFAULT_CONNECT_TIMEOUT = 5.0
DEFAULT_STATEMENT_TIMEOUT = 10.0

#: The advisory lock the migration holds (any constant; "oct1" in ASCII).
_MIGRATION_LOCK = 0x6F637431

_T = TypeVar("_T")
_Connection = psycopg.AsyncConnection[tuple[Any, ...]]
# The JSON columns come back as text, as SQLite's do: one decoder reads both.
_READ = ", ".join(f"{c}::text" if c in ("resume", "permissions") else c for c in COLUMNS)
_SELECT = f"SELECT {_READ} FROM threads"
_VALUES = ", ".join("%s::jsonb" if c in ("resume", "permissions") else "%s" for c in COLUMNS)
_INSERT = f"INSERT INTO threads ({', '.join(COLUMNS)}) VALUES ({_VALUES})"
_CHANGED = [c for c in COLUMNS if c not in ("thread_id", "created_at")]
_SET = ", ".join(
    f"{c} = %s::jsonb" if c in ("resume", "permissions") else f"{c} = %s" for c in _CHANGED
)
_UPDATE = f"UPDATE threads SET {_SET} WHERE thread_id = %s"


class PostgresThreadStore(ThreadStore):
    """A :class:`ThreadStore` in a PostgreSQL database; make one with :meth:`open`."""

    def __init__(
        self, dsn: str, connection: _Connection, *, connect_timeout: float, statement_timeout: float
    ) -> None:
        self._dsn = dsn
        self._connection: _Connection | None = connection
        self._connect_timeout = connect_timeout
        self._statement_timeout = statement_timeout
        self._lock = asyncio.Lock()
        self._closed = False

    def __repr__(self) -> str:
        return "PostgresThreadStore(<dsn>)"  # the DSN may hold a password

    @classmethod
    async def open(
        cls,
        dsn: str,
        *,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        statement_timeout: float = DEFAULT_STATEMENT_TIMEOUT,
    ) -> PostgresThreadStore:
        """The store in the database of ``dsn``, migrated to the current schema.
        :class:`StoreUnavailableError` when it cannot be reached;
        :class:`SchemaTooNewError` when a newer package wrote it."""
        connection = await _connect(dsn, connect_timeout, statement_timeout)
        try:
            await _guarded(_migrate(connection))
        except BaseException:
            await connection.close()
            raise
        return cls(
            dsn, connection, connect_timeout=connect_timeout, statement_timeout=statement_timeout
        )

    async def _run(self, work: Callable[[_Connection], Awaitable[_T]]) -> _T:
        async with self._lock:
            if self._closed:
                raise StoreUnavailableError("the thread store is closed")
            if self._connection is None or self._connection.closed:
                self._connection = await _connect(
                    self._dsn, self._connect_timeout, self._statement_timeout
                )
            connection = self._connection
            try:
                return await _guarded(work(connection))
            except StoreUnavailableError:
                # Dropped or in an unknown state: the next call opens a new one.
                self._connection = None
                with contextlib.suppress(Exception):
                    await connection.close()
                raise

    async def create(self, record: ThreadRecord) -> None:
        row = row_of(record, times_as_text=False)

        async def insert(db: _Connection) -> None:
            try:
                await db.execute(_INSERT, row)
            except pg_errors.UniqueViolation:
                raise ThreadExistsError(record.thread_id) from None

        await self._run(insert)

    async def get(self, thread_id: str) -> ThreadRecord | None:
        if thread_id_problem(thread_id) is not None:
            return None  # never stored: the record's own checks refuse such an id

        async def select(db: _Connection) -> list[tuple[Any, ...]]:
            cursor = await db.execute(f"{_SELECT} WHERE thread_id = %s", (thread_id,))
            return await cursor.fetchall()

        rows = await self._run(select)
        return record_of(rows[0]) if rows else None

    async def list(self) -> Listing:
        async def select(db: _Connection) -> list[tuple[Any, ...]]:
            cursor = await db.execute(f"{_SELECT} ORDER BY created_at, thread_id")
            return await cursor.fetchall()

        return listing_of(await self._run(select))

    async def update(self, record: ThreadRecord) -> None:
        values = dict(zip(COLUMNS, row_of(record, times_as_text=False), strict=True))
        params = (*(values[c] for c in _CHANGED), record.thread_id)

        async def change(db: _Connection) -> int:
            return (await db.execute(_UPDATE, params)).rowcount

        if await self._run(change) == 0:
            raise ThreadNotFoundError(record.thread_id)

    async def delete(self, thread_id: str) -> bool:
        if thread_id_problem(thread_id) is not None:
            return False

        async def remove(db: _Connection) -> int:
            return (
                await db.execute("DELETE FROM threads WHERE thread_id = %s", (thread_id,))
            ).rowcount

        return bool(await self._run(remove))

    async def aclose(self) -> None:
        async with self._lock:
            self._closed = True
            connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(Exception):
                await connection.close()


async def _guarded(work: Awaitable[_T]) -> _T:
    """``work``'s result; a driver error (but a duplicate key) is the store being
    unavailable, with the server's first line (libpq's messages hold no password)."""
    try:
        return await work
    except pg_errors.UniqueViolation:
        raise
    except psycopg.Error as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise StoreUnavailableError(f"the thread store is unavailable: {reason}") from None


async def _connect(dsn: str, connect_timeout: float, statement_timeout: float) -> _Connection:
    async def connect() -> _Connection:
        connection = await psycopg.AsyncConnection.connect(
            dsn, autocommit=True, connect_timeout=max(1, round(connect_timeout))
        )
        await connection.execute(f"SET statement_timeout = {int(statement_timeout * 1000)}")
        return connection

    return await _guarded(connect())


async def _migrate(connection: _Connection) -> None:
    async with connection.transaction():
        # One worker migrates; the others wait here, then find the work done.
        await connection.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        await connection.execute(VERSION_TABLE)
        cursor = await connection.execute("SELECT max(version) FROM schema_version")
        row = await cursor.fetchone()
        found = int(row[0] or 0) if row is not None else 0
        check_version(found)
        for _, statements in pending("postgres", found):
            for statement in statements:
                await connection.execute(statement)
        if found != VERSION:
            await connection.execute("DELETE FROM schema_version")
            await connection.execute("INSERT INTO schema_version (version) VALUES (%s)", (VERSION,))
