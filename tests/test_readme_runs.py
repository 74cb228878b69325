"""README.md's Python snippets run as printed: a user copies one into a file and
runs it with ``python``.

Each ``python`` block of the README is written to a file and run in a subprocess, the
way a user runs it, against the in-process fake server (``FakeOpenCodeServer``) served on
a loopback port: the snippet reads the server's URL and password from
``OPENCODE_URL`` and ``OPENCODE_SERVER_PASSWORD``, and the test sets them to the fake's.
A snippet that needs an argument (the client's takes a root session id) gets one the
fake knows. The fake requires the password, so a snippet that forgot to send it fails.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

import adapter
from adapter.testing.fake import FakeOpenCodeServer

README = Path(adapter.__file__).resolve().parent.parent / "README.md"
PASSWORD = "readme-password"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def snippets() -> list[str]:
    return _BLOCK.findall(README.read_text())


class OverSocket:
    """The fake's transport behind a loopback HTTP server (an ASGI app forwarding each
    request to it, streaming answers as they come: ``GET /event`` included)."""

    def __init__(self, fake: FakeOpenCodeServer) -> None:
        self._fake = fake

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        query = scope["query_string"].decode()
        request = httpx.Request(
            scope["method"],
            self._fake.base_url + scope["path"] + (f"?{query}" if query else ""),
            headers=[(k.decode(), v.decode()) for k, v in scope["headers"]],
            content=body,
        )
        response = await self._fake.transport.handle_async_request(request)
        headers = [
            (k.encode(), v.encode())
            for k, v in response.headers.items()
            if k.lower() not in ("content-length", "transfer-encoding")
        ]
        await send(
            {"type": "http.response.start", "status": response.status_code, "headers": headers}
        )
        stream: Any = response.stream
        try:
            async for chunk in stream:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        finally:
            await stream.aclose()


@pytest.fixture
async def served_fake() -> AsyncIterator[tuple[FakeOpenCodeServer, str]]:
    fake = FakeOpenCodeServer(password=PASSWORD)
    config = uvicorn.Config(
        OverSocket(fake), host="127.0.0.1", port=0, log_level="error", lifespan="on"
    )
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    while not server.started:  # a condition, polled: uvicorn offers no event for it
        if serving.done():
            serving.result()
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield fake, f"http://127.0.0.1:{port}"
    finally:
        await fake.aclose()  # ends the event streams the snippet may have left open
        server.should_exit = True
        await serving


async def run_snippet(tmp_path: Path, code: str, url: str, *argv: str) -> tuple[int, str, str]:
    script = tmp_path / "snippet.py"
    script.write_text(code)
    env = {**os.environ, "OPENCODE_URL": url, "OPENCODE_SERVER_PASSWORD": PASSWORD}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        *argv,
        env=env,
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def test_the_readme_shows_the_adapter_and_the_client() -> None:
    found = snippets()
    assert len(found) == 2
    assert "OpenCodeAdapter(" in found[0] and "stop_tree(" in found[1]
    for code in found:
        assert "asyncio.run(" in code and "OPENCODE_SERVER_PASSWORD" in code


async def test_the_adapter_snippet_runs_as_printed(
    served_fake: tuple[FakeOpenCodeServer, str], tmp_path: Path
) -> None:
    fake, url = served_fake
    code, out, err = await run_snippet(tmp_path, snippets()[0], url)
    assert code == 0, err[-3000:]
    assert "started turn_" in out
    assert "1 sessions: 1 aborted, 0 already gone, 0 failed" in out
    assert "The previous turn was stopped before it finished" in out
    assert fake.calls("POST", "/session/{id}/abort")


async def test_the_client_snippet_runs_as_printed(
    served_fake: tuple[FakeOpenCodeServer, str], tmp_path: Path
) -> None:
    fake, url = served_fake
    root = fake.add_session(busy=True)
    child = fake.add_session(parent_id=root, busy=True)
    code, out, err = await run_snippet(tmp_path, snippets()[1], url, root)
    assert code == 0, err[-3000:]
    assert "2 sessions: 2 aborted, 0 already gone, 0 failed" in out
    assert {r.session_id for r in fake.calls("POST", "/session/{id}/abort")} == {root, child}
