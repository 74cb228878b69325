"""``opencode-tree acp`` as an editor runs it: a subprocess speaking ACP on stdio."""

from __future__ import annotations

import asyncio
import json
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


INITIALIZE = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'


@pytest.mark.parametrize("stdin", ["dev-null", "file"])
async def test_the_agent_reads_files_as_stdio_to_their_end_and_exits(
    tmp_path: Path, stdin: str
) -> None:
    """Stdio that the event loop cannot poll (``< /dev/null``, a recorded session replayed
    from a file, stdout redirected to a file) is read to its end: the agent answers what
    it read and exits 0, instead of waiting forever on a reader that was never started."""
    source = Path("/dev/null") if stdin == "dev-null" else tmp_path / "in.jsonl"
    if stdin == "file":
        source.write_bytes(INITIALIZE)
    out = tmp_path / "out.jsonl"
    args = ["-m", "adapter", "acp", "--url", "http://127.0.0.1:9"]
    args += ["--log-file", str(tmp_path / "acp.log")]
    with source.open("rb") as given, out.open("wb") as taken:
        process = await asyncio.create_subprocess_exec(
            sys.executable, *args, stdin=given, stdout=taken
        )
        try:
            assert await asyncio.wait_for(process.wait(), 30) == 0
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    lines = [json.loads(line) for line in out.read_bytes().splitlines()]
    if stdin == "file":
        [answer] = lines
        assert answer["id"] == 1 and answer["result"]["agentInfo"]["name"] == "opencode-tree"
    else:
        assert lines == []
