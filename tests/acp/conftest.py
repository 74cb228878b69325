"""Fixtures of the ACP tests on the fake: short stop timeouts, and the agent connected to
the SDK's client over a socket pair (:func:`tests.acp.client_side.connected`)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from adapter import OpenCodeAdapter, Timeouts
from tests.acp.client_side import Harness, connected


@pytest.fixture
def timeouts() -> Timeouts:
    return Timeouts(connect=2.0, abort=2.0, tree=2.0)


@pytest.fixture
async def acp_client(oc: OpenCodeAdapter) -> AsyncIterator[Harness]:
    async with connected(oc) as harness:
        yield harness
