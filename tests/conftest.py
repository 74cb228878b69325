"""Shared fixtures. Logs are captured, not printed, so tests can assert on them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import respx
import structlog

from adapter import OpenCodeAdapter, Timeouts
from adapter.testing.fake import FakeOpenCodeServer
from tests.adapter_support import Record, Recorder
from tests.support import BASE


@pytest.fixture(autouse=True)
def captured_logs() -> Iterator[list[dict[str, Any]]]:
    """Every structlog event of the test, as dicts (also keeps test output quiet).

    The configuration is reset first: a CLI test configures structlog globally
    (with a level filter), which must not leak into the next test.
    """
    structlog.reset_defaults()
    with structlog.testing.capture_logs() as logs:
        yield logs
    structlog.reset_defaults()


@pytest.fixture
def router() -> Iterator[respx.MockRouter]:
    """A respx mock of the OpenCode API at ``BASE``, for the client's contract tests."""
    with respx.mock(base_url=BASE, assert_all_called=False) as mock:
        yield mock


# -- the adapter on the in-process fake: the fixtures of the adapter tests ------------


@pytest.fixture
def fake_options() -> dict[str, Any]:
    """The arguments of ``fake`` (a module overrides this fixture, not ``fake``, to change them)."""
    return {"seed": 7}


@pytest.fixture
async def fake(fake_options: dict[str, Any]) -> AsyncIterator[FakeOpenCodeServer]:
    """A fresh fake OpenCode server."""
    async with FakeOpenCodeServer(**fake_options) as server:
        yield server


@pytest.fixture
def timeouts() -> Timeouts:
    """The timeouts of ``oc`` (a module overrides this fixture, not ``oc``, to change them)."""
    return Timeouts(connect=2.0)


@pytest.fixture
async def oc(fake: FakeOpenCodeServer, timeouts: Timeouts) -> AsyncIterator[OpenCodeAdapter]:
    """An adapter on ``fake``."""
    async with OpenCodeAdapter(
        fake.base_url, transport=fake.transport, timeouts=timeouts
    ) as adapter:
        yield adapter


@pytest.fixture
async def rec(oc: OpenCodeAdapter, record: Record) -> Recorder:
    """Every canonical event ``oc`` emits during the test."""
    return record(oc)


@pytest.fixture
async def record() -> AsyncIterator[Record]:
    """Records the events of another adapter than ``oc`` (one a test opens itself);
    every recorder is closed at the end of the test."""
    made: list[Recorder] = []

    def recorder_of(adapter: OpenCodeAdapter) -> Recorder:
        made.append(Recorder(adapter))
        return made[-1]

    yield recorder_of
    for recorder in made:
        await recorder.close()
