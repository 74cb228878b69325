"""A local ``opencode serve`` owned by the adapter.

Started on 127.0.0.1 on a free port we pick (``--port 0`` would try 4096
first), in its own process group so that everything it spawns is stopped
with it: SIGTERM to the group, then SIGKILL after a grace period.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
from collections import deque

import httpx

from .._exceptions import ServerExitedError
from .._logging import get_logger
from ._binary import free_port

__all__ = ["ServerProcess"]

_log = get_logger("adapter.server")
_READY = "opencode server listening on"


class ServerProcess:
    """One ``opencode serve`` child process."""

    def __init__(
        self,
        binary: str,
        *,
        password: str | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        ready_timeout: float = 30.0,
        grace: float = 3.0,
    ) -> None:
        self.binary = binary
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._password = password
        self._cwd = cwd
        self._env = env
        self._ready_timeout = ready_timeout
        self._grace = grace
        self._process: asyncio.subprocess.Process | None = None
        self._output: deque[str] = deque(maxlen=200)
        self._reader: asyncio.Task[None] | None = None
        self.exited = asyncio.Event()

    def __repr__(self) -> str:
        return f"ServerProcess(binary={self.binary!r}, base_url={self.base_url!r})"

    @property
    def returncode(self) -> int | None:
        return None if self._process is None else self._process.returncode

    def output_tail(self, lines: int = 20) -> str:
        return "\n".join(list(self._output)[-lines:])

    def _resolve_binary(self) -> str:
        resolved = shutil.which(self.binary)
        if resolved is None and os.path.isfile(self.binary):
            resolved = self.binary
        if resolved is None:
            raise ServerExitedError(
                f"cannot start OpenCode: {self.binary!r} was not found "
                "(install it, pass binary=, or connect to a running server with base_url=)"
            )
        return resolved

    async def start(self) -> None:
        resolved = self._resolve_binary()
        env = dict(os.environ if self._env is None else self._env)
        env.pop("OPENCODE_SERVER_PASSWORD", None)
        if self._password is not None:
            env["OPENCODE_SERVER_PASSWORD"] = self._password
        self._process = await asyncio.create_subprocess_exec(
            resolved,
            "serve",
            "--hostname",
            "127.0.0.1",
            "--port",
            str(self.port),
            cwd=self._cwd,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        ready = asyncio.Event()
        self._reader = asyncio.create_task(self._read_output(ready), name="opencode-server-output")
        try:
            async with asyncio.timeout(self._ready_timeout):
                await self._wait_ready(ready)
        except BaseException as exc:
            await self.stop()
            if isinstance(exc, TimeoutError):
                raise ServerExitedError(
                    f"OpenCode did not become ready within {self._ready_timeout} s; "
                    f"last output:\n{self.output_tail()}"
                ) from None
            raise
        _log.info("server.started", base_url=self.base_url, pid=self._process.pid)

    async def _read_output(self, ready: asyncio.Event) -> None:
        assert self._process is not None and self._process.stdout is not None
        try:
            async for raw in self._process.stdout:
                line = raw.decode("utf-8", "replace").rstrip()
                self._output.append(line)
                if _READY in line:
                    ready.set()
            await self._process.wait()
        finally:
            self.exited.set()

    async def _wait_ready(self, ready: asyncio.Event) -> None:
        auth = httpx.BasicAuth("opencode", self._password) if self._password else None
        async with httpx.AsyncClient(
            base_url=self.base_url, auth=auth, timeout=2.0, trust_env=False
        ) as http:
            while not ready.is_set():
                if self.exited.is_set():
                    raise ServerExitedError(
                        f"OpenCode exited during start-up (code {self.returncode}); "
                        f"last output:\n{self.output_tail()}"
                    )
                with contextlib.suppress(httpx.HTTPError):
                    response = await http.get("/global/health")
                    if response.status_code == 200:
                        return
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(0.1):
                        await ready.wait()

    async def stop(self) -> None:
        """Terminate the process group: SIGTERM, then SIGKILL after the grace period."""
        process = self._process
        if process is None:
            return
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                async with asyncio.timeout(self._grace):
                    await process.wait()
            except TimeoutError:
                _log.warning("server.kill", pid=process.pid)
        # Whatever the leader left behind in its group goes too.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        await process.wait()
        if self._reader is not None:
            await self._reader
        _log.info("server.stopped", pid=process.pid, returncode=process.returncode)
