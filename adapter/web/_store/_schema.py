"""The store's schema, versioned: each version's DDL for SQLite and PostgreSQL.

Why versions: several worker processes, and later versions of this package, open
the same database. At start a store reads ``schema_version`` (one row) and applies,
in one transaction that holds the database's write lock (SQLite's ``BEGIN
IMMEDIATE``, PostgreSQL's advisory lock), every migration past it; a worker that
finds the work done does nothing. A database whose version is newer than
:data:`VERSION` was written by a later package: it is refused
(:class:`SchemaTooNewError`), never read with the wrong columns or migrated back.

A new version appends one entry to each dialect's list (never edits a released
one) and bumps :data:`VERSION`; ``_rows`` reads the columns.
"""

from __future__ import annotations

from typing import Literal

from ._errors import SchemaTooNewError

__all__ = ["MIGRATIONS", "VERSION", "VERSION_TABLE", "Dialect", "check_version", "pending"]

Dialect = Literal["sqlite", "postgres"]

#: The schema this package reads and writes.
VERSION = 1

#: ``MIGRATIONS[dialect][n - 1]``: the statements that take a database from version
#: ``n - 1`` to ``n`` (version 0: no tables yet).
MIGRATIONS: dict[Dialect, list[tuple[str, ...]]] = {
    "sqlite": [
        (
            """CREATE TABLE threads (
                thread_id   TEXT PRIMARY KEY NOT NULL,
                base_url    TEXT NOT NULL,
                resume      TEXT NOT NULL,
                title       TEXT,
                model       TEXT,
                agent       TEXT,
                permissions TEXT,
                status      TEXT,
                turn_id     TEXT,
                created_at  TEXT NOT NULL,
                updated_at  TEXT NOT NULL
            )""",
        ),
    ],
    "postgres": [
        (
            """CREATE TABLE threads (
                thread_id   text PRIMARY KEY,
                base_url    text NOT NULL,
                resume      jsonb NOT NULL,
                title       text,
                model       text,
                agent       text,
                permissions jsonb,
                status      text,
                turn_id     text,
                created_at  timestamptz NOT NULL,
                updated_at  timestamptz NOT NULL
            )""",
        ),
    ],
}

#: The table that says which version a database is at (created by the store itself).
VERSION_TABLE = "CREATE TABLE IF NOT EXISTS schema_version (version integer NOT NULL)"

assert all(len(steps) == VERSION for steps in MIGRATIONS.values())


def check_version(found: int) -> None:
    """Refuse a database from a newer schema."""
    if found > VERSION:
        raise SchemaTooNewError(found, VERSION)


def pending(dialect: Dialect, found: int) -> list[tuple[int, tuple[str, ...]]]:
    """The migrations to apply to a database at version ``found``: (version, statements)."""
    check_version(found)
    return [(n, MIGRATIONS[dialect][n - 1]) for n in range(found + 1, VERSION + 1)]
