"""The stores under test, on real databases: an SQLite file in ``tmp_path`` and a
throwaway PostgreSQL server (``postgres_server.py``), one per test session (per
xdist worker), with a database of its own for each test.

Without PostgreSQL's binaries the PostgreSQL tests are skipped, outside CI; in CI
(``CI`` set) ``make test`` has installed them (``make postgres``), so they fail.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from adapter.web import ThreadRecord
from tests.web.store.postgres_server import PostgresServer, throwaway_postgres

CURSOR = {"schema": 1, "session_id": "ses_0123456789abcdef", "directory": None}


def make_record(thread_id: str = "t1", **fields: Any) -> ThreadRecord:
    return ThreadRecord.new(thread_id, "http://127.0.0.1:4096", dict(CURSOR), **fields)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PostgresServer]:
    with throwaway_postgres() as server:
        yield server


@pytest.fixture
def pg_dsn(pg_server: PostgresServer) -> Iterator[str]:
    """A fresh database on the session's server, dropped after the test."""
    name = f"t_{secrets.token_hex(6)}"
    with psycopg.connect(pg_server.dsn(), autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    yield pg_server.dsn(name)
    with psycopg.connect(pg_server.dsn(), autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@dataclass
class Backend:
    """One kind of store under test: its ``open_store`` target, and a raw connection
    of the driver for what a person would do by hand (edit a row, bump the version)."""

    name: str
    target: str
    execute: Callable[[str], None]


def _sqlite_execute(path: Path) -> Callable[[str], None]:
    import sqlite3

    def execute(sql: str) -> None:
        db = sqlite3.connect(path, isolation_level=None)
        try:
            db.execute(sql)
        finally:
            db.close()

    return execute


def _pg_execute(dsn: str) -> Callable[[str], None]:
    def execute(sql: str) -> None:
        with psycopg.connect(dsn, autocommit=True) as db:
            db.execute(sql.encode())

    return execute


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "sqlite":
        path = tmp_path / "threads.sqlite3"
        return Backend("sqlite", str(path), _sqlite_execute(path))
    dsn: str = request.getfixturevalue("pg_dsn")
    return Backend("postgres", dsn, _pg_execute(dsn))
