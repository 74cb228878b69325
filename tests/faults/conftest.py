"""Fixtures of the fault suite: a fresh fake server, a client on it with fast retries, and
an adapter on it with its event log and leak checks (``h``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from adapter import OpenCodeClient, RetryPolicy
from adapter.testing.fake import FakeOpenCodeServer
from tests.faults.harness import Harness

#: The default policy's shape (4 attempts), with waits short enough for a test.
FAST_RETRY = RetryPolicy(attempts=4, initial_wait=0.001, max_wait=0.005)


@pytest.fixture
def fake_options() -> dict[str, Any]:
    return {"seed": 8}


@pytest.fixture
async def opencode_client(fake: FakeOpenCodeServer) -> AsyncIterator[OpenCodeClient]:
    """A client on ``fake``; on exit, asserts it left no request in flight and no task."""
    before = asyncio.all_tasks()
    async with OpenCodeClient(
        fake.base_url, transport=fake.transport, retry=FAST_RETRY, timeout=1.0
    ) as c:
        yield c
    await asyncio.sleep(0)
    assert fake.in_flight == 0
    current = asyncio.current_task()
    assert [t for t in asyncio.all_tasks() - before if not t.done() and t is not current] == []


@pytest.fixture
async def h(fake: FakeOpenCodeServer) -> AsyncIterator[Harness]:
    """An adapter on ``fake`` with fast timeouts and its event log; on exit, the checks
    that it left nothing behind (``Harness``)."""
    async with Harness(fake) as harness:
        yield harness
