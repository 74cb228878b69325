"""``opencode-tree web`` as a subprocess over a real ``opencode serve``, for restart tests.

:class:`WebCommand` starts the command in a process group of its own on a given port
and store (so a SIGKILL of the group is a crash of the command and all its workers),
waits, off the event loop, until it prints its URL (every worker serves), and records
how long that took (:func:`read_to_url`, which the other web command tests use too).
:func:`frames` reads an event stream frame by frame; :func:`follow_events` reads one
thread's event stream through it (``?replay=1``, as the page subscribes) into a list.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx

from adapter.testing import RealOpenCodeServer
from tests.web.app_driver import Frame, parse_frame

#: The bearer token every command of a test takes (``--token-env WEB_T``): the page
#: keeps it across a restart, as it would a host's fixed token.
TOKEN_ENV = "WEB_T"


def read_to_url(out: IO[str], port: int) -> bool:
    """Reads ``out``, a web command's stdout, up to the URL line it prints once it listens
    on ``port`` (every worker serving); False if the output ends first."""
    return any(f"127.0.0.1:{port}/" in line for line in out)


async def frames(response: httpx.Response) -> AsyncIterator[Frame]:
    """Each frame of an open event stream, as it comes."""
    block = ""
    async for line in response.aiter_lines():
        if line:
            block += line + "\n"
            continue
        frame = parse_frame(block)
        block = ""
        if frame is not None:
            yield frame


@dataclass
class WebCommand:
    """One ``opencode-tree web --url --store --port --token-env`` process."""

    server: RealOpenCodeServer
    store: Path
    port: int
    log: Path
    token: str
    workers: int = 1
    process: subprocess.Popen[str] | None = None
    started_at: float = 0.0
    serving_at: float = 0.0
    _drain: threading.Thread | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    @property
    def startup(self) -> float:
        """Seconds from the spawn to the printed URL."""
        return self.serving_at - self.started_at

    async def start(self) -> WebCommand:
        self._spawn()
        assert self.process is not None
        served = await asyncio.to_thread(self._wait_for_url)
        if not served:
            code = await asyncio.to_thread(self.process.wait, 15)
            raise AssertionError(f"web ended ({code}): {self.log.read_text()[-3000:]}")
        self.serving_at = time.monotonic()
        return self

    def _spawn(self) -> None:
        argv = [
            *("web", "--url", self.server.base_url, "--directory", str(self.server.directory)),
            *("--store", str(self.store), "--port", str(self.port), "--token-env", TOKEN_ENV),
            *("--workers", str(self.workers)),
        ]
        self.started_at = time.monotonic()
        with self.log.open("a") as sink:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "adapter", *argv],
                env={**os.environ, TOKEN_ENV: self.token, "PYTHONUNBUFFERED": "1"},
                stdout=subprocess.PIPE,
                stderr=sink,
                text=True,
                start_new_session=True,
            )

    def _wait_for_url(self) -> bool:
        """Reads stdout until the URL line (printed once every worker serves); then
        drains the rest in a thread, so the command never blocks on a full pipe."""
        assert self.process is not None and self.process.stdout is not None
        out = self.process.stdout
        if read_to_url(out, self.port):
            self._drain = threading.Thread(target=out.read, daemon=True)
            self._drain.start()
            return True
        return False

    def kill(self) -> None:
        """SIGKILL of the whole process group: a crash, nothing sent to OpenCode."""
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)

    def terminate(self) -> None:
        """SIGTERM to the command (its parent; it stops its workers)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)

    async def wait(self, timeout: float = 30) -> int:
        assert self.process is not None
        return await asyncio.to_thread(self.process.wait, timeout)

    async def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.kill()
        if self.process is not None:
            await self.wait(15)

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.url.rstrip("/"),
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=60,
            trust_env=False,
        )


@contextlib.asynccontextmanager
async def web_command(
    server: RealOpenCodeServer, store: Path, port: int, log: Path, token: str, workers: int = 1
) -> AsyncIterator[WebCommand]:
    """A started :class:`WebCommand`; killed (its group) at the end if still running."""
    command = WebCommand(server, store, port, log, token, workers)
    try:
        yield await command.start()
    finally:
        await command.close()


async def follow_events(
    http: httpx.AsyncClient,
    thread_id: str,
    into: list[dict[str, Any]],
    times: list[float] | None = None,
) -> None:
    """Appends every frame of ``thread_id``'s event stream (``?replay=1``) to ``into`` as
    its data, gap frames included, until the response ends or the task is cancelled;
    and to ``times`` when each came (``time.monotonic()``)."""
    async with http.stream(
        "GET", f"/threads/{thread_id}/events", params={"replay": "1"}, timeout=None
    ) as response:
        assert response.status_code == 200, await response.aread()
        async for frame in frames(response):
            if frame.data:
                into.append(json.loads(frame.data))
                if times is not None:
                    times.append(time.monotonic())
