"""Fixtures of the fake's own tests: a client on the fake, and its event log."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from adapter import Timeouts
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


@pytest.fixture
def timeouts() -> Timeouts:
    """The kit's own tests run the plugin's adapters with its defaults (``Timeouts()``), not
    the suite's (``tests/conftest.py`` feeds ``timeouts`` to ``opencode_adapter_options``)."""
    return Timeouts()
