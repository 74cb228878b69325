"""Fixtures of the fake's own tests: a client on the fake, and its event log."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from adapter.testing.fake import FakeOpenCodeServer
from tests.testing.fake_support import BASE, EventLog


@pytest.fixture
async def fake_http(fake: FakeOpenCodeServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=fake.transport, base_url=BASE) as c:
        yield c


@pytest.fixture
async def log(fake: FakeOpenCodeServer, fake_http: httpx.AsyncClient) -> AsyncIterator[EventLog]:
    events = await EventLog(fake_http).start(fake)
    yield events
    await events.stop()
