"""The PostgreSQL store on a real server (``conftest.pg_server``): an outage is a
:class:`StoreUnavailableError` on every call, the same store recovers when the
server is back, and the DSN's password never shows."""

from __future__ import annotations

import socket
import traceback

import pytest

from adapter.web import StoreUnavailableError, open_store
from tests.web.store.conftest import make_record
from tests.web.store.postgres_server import PostgresServer

SECRET = "hunter2-s3cret"


async def test_a_stopped_server_is_unavailable_and_the_store_recovers_when_it_is_back(
    pg_server: PostgresServer, pg_dsn: str
) -> None:
    store = await open_store(pg_dsn)
    try:
        await store.create(make_record("before"))
        pg_server.stop()
        try:
            for call in (
                store.create(make_record("during")),
                store.get("before"),
                store.list(),
                store.delete("before"),
            ):
                with pytest.raises(StoreUnavailableError, match="unavailable"):
                    await call
            with pytest.raises(StoreUnavailableError):
                await open_store(pg_dsn)
        finally:
            pg_server.start()
        await store.create(make_record("after"))  # a new connection, by itself
        assert [r.thread_id for r in (await store.list()).records] == ["before", "after"]
    finally:
        await store.aclose()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def test_the_password_of_the_dsn_is_never_shown(pg_server: PostgresServer) -> None:
    down = f"postgresql://postgres:{SECRET}@127.0.0.1:{_closed_port()}/postgres"
    with pytest.raises(StoreUnavailableError) as caught:
        await open_store(down)
    shown = "".join(traceback.format_exception(caught.value)) + repr(caught.value)
    assert SECRET not in shown
    live = pg_server.dsn().replace("postgres@", f"postgres:{SECRET}@")  # trust: ignored
    async with await open_store(live) as store:
        assert SECRET not in repr(store)
