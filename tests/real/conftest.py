"""Fixtures of the tests on a real ``opencode serve``: more servers and clients of them.

The session's model and servers (``scripted_model``, ``real_server``, ``command_server``)
and ``unique_name`` are in ``tests/conftest.py``: the real tests of ``tests/acp`` and
``tests/web`` share them. Tests that share a server use script names of their own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from adapter import OpenCodeAdapter, OpenCodeClient
from adapter.testing import RealOpenCodeServer, ScriptedModelServer
from tests.differential.language import BACKGROUND_SUBAGENTS_ENV


@pytest.fixture(scope="module")
def background_server(scripted_model: ScriptedModelServer) -> Iterator[RealOpenCodeServer]:
    """A real OpenCode server like ``real_server`` with background subagents on
    (``OPENCODE_EXPERIMENTAL_BACKGROUND_SUBAGENTS=true``): a ``task`` call with
    ``"background": true`` (``task_call(..., background=True)``) runs its child while the
    root goes on. One server per module that uses it (a start costs a few seconds)."""
    with RealOpenCodeServer(scripted_model.base_url, extra_env=BACKGROUND_SUBAGENTS_ENV) as server:
        yield server


def adapter_on(server: RealOpenCodeServer) -> OpenCodeAdapter:
    """An adapter of ``server`` in its directory (enter it with ``async with``)."""
    return OpenCodeAdapter(server.base_url, directory=str(server.directory))


def directory_http(server: RealOpenCodeServer, timeout: float | None = 10.0) -> httpx.AsyncClient:
    """A plain async client of ``server`` in its directory: another host of the same server."""
    return httpx.AsyncClient(
        base_url=server.base_url,
        headers={"x-opencode-directory": str(server.directory)},
        timeout=timeout,
        trust_env=False,
    )


@pytest.fixture
def opencode_http(real_server: RealOpenCodeServer) -> Iterator[httpx.Client]:
    """A plain httpx client for ``real_server``."""
    with httpx.Client(
        base_url=real_server.base_url,
        auth=real_server.auth,
        timeout=10.0,
        trust_env=False,
    ) as client:
        yield client


@pytest.fixture
async def opencode_client(real_server: RealOpenCodeServer) -> AsyncIterator[OpenCodeClient]:
    """The adapter's client on ``real_server``, in its directory."""
    async with OpenCodeClient(real_server.base_url, directory=str(real_server.directory)) as c:
        yield c
