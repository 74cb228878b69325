"""A server the adapter was pointed at is not the adapter's to stop (B24), on a real server.

The fake-server tests (``tests/test_server_ownership.py``) spy on ``ServerProcess``;
this one checks the outcome on a real ``opencode serve``: its process outlives an
adapter that started, stopped and closed sessions on it, and it still answers.
"""

from __future__ import annotations

import os

import pytest

from adapter import OpenCodeAdapter, OpenCodeClient
from adapter.testing import RealOpenCodeServer

pytestmark = pytest.mark.real


async def test_closing_an_adapter_leaves_the_configured_server_running_and_answering(
    real_server: RealOpenCodeServer,
) -> None:
    pid = real_server.pid
    async with OpenCodeAdapter(real_server.base_url, directory=str(real_server.directory)) as oc:
        first = await oc.start_session("owner-a")
        await oc.start_session("owner-b")
        await oc.stop_session("owner-a")
    # aclose stopped "owner-b" too; the server process is untouched.
    assert real_server.returncode is None
    os.kill(pid, 0)  # raises if the process is gone
    async with OpenCodeClient(real_server.base_url, directory=str(real_server.directory)) as c:
        assert (await c.health()).version
        assert (await c.get_session(first.session_id)).id == first.session_id
