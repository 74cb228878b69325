"""``opencode-tree acp`` as an editor runs it: a subprocess speaking ACP on stdio."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, cast

import acp
import pytest
from acp import RequestError

from tests.acp.client_side import RecordingClient


async def test_the_command_serves_acp_on_stdio_and_logs_elsewhere(tmp_path: Path) -> None:
    """Nothing listens on the URL: initialize still answers (it needs no server), a new
    session fails as a JSON-RPC error naming the cause, and the agent exits cleanly when
    the client goes away. The logs went to --log-file, not stdout (the SDK's reader would
    have choked on them)."""
    log = tmp_path / "acp.log"
    client = RecordingClient()
    args = ["-m", "adapter", "acp", "--url", "http://127.0.0.1:9", "--log-file", str(log)]
    async with acp.spawn_agent_process(cast(acp.Client, client), sys.executable, *args) as (
        conn,
        process,
    ):
        info = await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        assert info.agent_info is not None and info.agent_info.name == "opencode-tree"
        assert info.agent_capabilities is not None and info.agent_capabilities.load_session
        with pytest.raises(RequestError, match="could not start an OpenCode session") as failed:
            await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        assert failed.value.code == -32603 and "connection failed" in str(failed.value)
    assert process.returncode == 0
    assert "stream_lost" in log.read_text()


def test_the_acp_command_is_registered() -> None:
    from adapter.cli import _parser  # the parser is private; the command line is the API

    args: Any = _parser().parse_args(["acp", "--url", "http://x", "--log-file", "/tmp/x.log"])
    assert args.command == "acp" and args.log_file == "/tmp/x.log"
