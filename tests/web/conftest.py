"""The web app over the adapter on the fake server (``tests/conftest.py``: ``fake``, ``oc``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from starlette.applications import Starlette

from adapter import OpenCodeAdapter, Timeouts
from adapter.testing.fake import FakeOpenCodeServer
from adapter.web import create_app
from tests.web.support import SseClient


@pytest.fixture
async def oc(fake: FakeOpenCodeServer) -> AsyncIterator[OpenCodeAdapter]:
    async with OpenCodeAdapter(
        fake.base_url, transport=fake.transport, timeouts=Timeouts(abort=2.0, tree=2.0)
    ) as adapter:
        yield adapter


@pytest.fixture
def app(oc: OpenCodeAdapter) -> Starlette:
    return create_app(oc, ping=0)


@pytest.fixture
async def client(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://app"
    ) as http:
        yield http


@pytest.fixture
async def streams(app: Starlette) -> AsyncIterator[list[SseClient]]:
    """Every SSE client a test opens, closed at its end whatever happened."""
    opened: list[SseClient] = []
    yield opened
    for sse in opened:
        await sse.aclose()
