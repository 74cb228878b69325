"""``opencode-tree web --workers N``: one parent, N worker processes, one socket.

Why not uvicorn's own ``--workers``: the parent must start the OpenCode server once
(an adapter that starts its own server cannot detach, and N servers would not share
their runs), keep it for the workers' whole life and stop it last; it must hand the
workers their settings through the environment (a token, a password, a DSN never
go on a command line); and it must print the URL only once every worker serves.
So the parent binds the listening socket itself, starts each worker as
a worker process (:data:`WORKER_MAIN`) with the socket inherited (the kernel spreads
the connections over the workers' accepts), and waits until each has written its
pid on a readiness pipe (its lifespan startup done: store opened, adapter entered).

On SIGTERM or SIGINT the parent sends SIGTERM to every worker (each closes its
adapter, detaching from an external server) and waits for them (SIGKILL after
:data:`STOP_GRACE`), then stops the OpenCode server if it started one. A worker
that dies while serving is replaced; one that dies before it served is a failed
start (exit 1). A parent killed outright leaves its workers to notice and stop by
themselves (``_web_worker._watch_parent``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol, TypeVar

from .._exceptions import OpenCodeError
from .._logging import get_logger
from .._server._process import ServerProcess
from ._render import Out
from ._web_worker import LISTEN_FD_ENV, READY_FD_ENV, WORKER_ENV, WorkerSettings, describe_store

__all__ = ["WorkerPool", "WorkerStartError", "bind_socket", "serve_workers"]

T = TypeVar("T")


class ListenSettings(Protocol):
    """Where to listen and what the app requires (``_web.ListenSettings``)."""

    @property
    def host(self) -> str: ...
    @property
    def port(self) -> int: ...
    @property
    def token(self) -> str | None: ...
    @property
    def allowed_hosts(self) -> tuple[str, ...]: ...


_log = get_logger("adapter.cli.web")

#: A worker's command line (``python -m adapter.cli._web_worker`` would import the
#: module twice: ``adapter.cli`` imports it first). Nothing secret: see the environment.
WORKER_MAIN = "from adapter.cli._web_worker import main; raise SystemExit(main())"
#: Seconds a worker may take from its start to serving.
READY_TIMEOUT = 60.0
#: Seconds the workers get to close (detach) after SIGTERM before they are killed.
STOP_GRACE = 20.0


class WorkerStartError(OpenCodeError):
    """A worker ended before it served (its own error is on stderr above)."""


def bind_socket(host: str, port: int) -> socket.socket:
    """The listening socket the workers share (inheritable)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise OpenCodeError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


class WorkerPool:
    """``count`` worker processes serving ``sock`` with the settings in ``env``."""

    def __init__(
        self,
        count: int,
        sock: socket.socket,
        env: Mapping[str, str],
        *,
        on_replaced: Callable[[int, int], None] | None = None,
    ) -> None:
        self._count = count
        self._sock = sock
        self._settings = dict(env)
        self._on_replaced = on_replaced
        self._workers: dict[int, asyncio.subprocess.Process] = {}
        self._ready: set[int] = set()
        self._ready_changed = asyncio.Event()
        self._stopping = False
        self._failed: WorkerStartError | None = None
        self._ready_read, self._ready_write = os.pipe()
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def pids(self) -> tuple[int, ...]:
        return tuple(self._workers)

    def _environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in WORKER_ENV}
        env.update(self._settings)
        env[LISTEN_FD_ENV] = str(self._sock.fileno())
        env[READY_FD_ENV] = str(self._ready_write)
        env.setdefault("PYTHONUNBUFFERED", "1")
        return env

    async def _spawn(self) -> None:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            WORKER_MAIN,
            env=self._environment(),
            stdin=asyncio.subprocess.DEVNULL,
            pass_fds=(self._sock.fileno(), self._ready_write),
        )
        self._workers[process.pid] = process
        self._track(self._watch(process))

    def _track(self, coro: object) -> None:
        task = asyncio.ensure_future(coro)  # type: ignore[call-overload]
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def start(self) -> None:
        """Start the workers and wait until every one serves (:class:`WorkerStartError`
        if one ends first or none is ready within :data:`READY_TIMEOUT`)."""
        loop = asyncio.get_running_loop()
        loop.add_reader(self._ready_read, self._read_ready)
        for _ in range(self._count):
            await self._spawn()
        try:
            async with asyncio.timeout(READY_TIMEOUT):
                while len(self._ready & set(self._workers)) < self._count:
                    if self._failed is not None:
                        raise self._failed
                    self._ready_changed.clear()
                    await self._ready_changed.wait()
        except TimeoutError:
            raise WorkerStartError(
                f"the workers did not start within {READY_TIMEOUT:.0f} s"
            ) from None
        if self._failed is not None:
            raise self._failed

    def _read_ready(self) -> None:
        try:
            data = os.read(self._ready_read, 4096)
        except BlockingIOError:  # pragma: no cover
            return
        for line in data.decode("ascii", "replace").split():
            with contextlib.suppress(ValueError):
                self._ready.add(int(line))
        self._ready_changed.set()

    async def _watch(self, process: asyncio.subprocess.Process) -> None:
        code = await process.wait()
        self._workers.pop(process.pid, None)
        served = process.pid in self._ready
        self._ready.discard(process.pid)
        if self._stopping:
            return
        if not served:
            self._failed = WorkerStartError(
                f"a worker ended before it served (exit code {code}): see its error above"
            )
            self._ready_changed.set()
            return
        _log.warning("web.worker_replaced", pid=process.pid, exit_code=code)
        await self._spawn()
        if self._on_replaced is not None:
            self._on_replaced(process.pid, code)

    async def wait_failed(self) -> None:
        """Return when a worker failed to start (a replacement included)."""
        while self._failed is None:
            self._ready_changed.clear()
            await self._ready_changed.wait()

    async def stop(self) -> None:
        """SIGTERM every worker and wait (each detaches or aborts as told), killing
        those still there after :data:`STOP_GRACE`; idempotent."""
        self._stopping = True
        with contextlib.suppress(ValueError, OSError):
            asyncio.get_running_loop().remove_reader(self._ready_read)
        workers = list(self._workers.values())
        for process in workers:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        if workers:
            waits = [asyncio.ensure_future(p.wait()) for p in workers]
            _, late = await asyncio.wait(waits, timeout=STOP_GRACE)
            if late:
                _log.warning("web.workers_killed", count=len(late))
                for process in workers:
                    if process.returncode is None:
                        with contextlib.suppress(ProcessLookupError):
                            process.kill()
                await asyncio.wait(waits)
        for task in list(self._tasks):
            task.cancel()
        for fd in (self._ready_read, self._ready_write):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._ready_read = self._ready_write = -1


async def _until_stopped(work: Awaitable[T], stop: asyncio.Event) -> T | None:
    """``work``'s result, or ``None`` (``work`` cancelled) when ``stop`` is set first."""
    job = asyncio.ensure_future(work)
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait((job, stopped), return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
    if job.done():
        return job.result()
    job.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await job
    return None


async def serve_workers(
    args: argparse.Namespace,
    out: Out,
    settings: ListenSettings,
    *,
    count: int,
    url: str | None,
    password: str | None,
    target: str | None,
    announce: Callable[..., None],
) -> int:
    """The parent of ``--workers N``: the socket, the OpenCode server when no ``--url``
    (started here, once), the workers; until SIGTERM or SIGINT, then all stopped in
    that order reversed. 0 on SIGTERM, 130 on SIGINT, 1 when a worker could not start."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    got: list[signal.Signals] = []

    def arrived(sig: signal.Signals) -> None:
        got.append(sig)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, arrived, sig)
    server: ServerProcess | None = None
    sock = bind_socket(settings.host, settings.port)
    try:
        if url is None:
            out.line("starting a local opencode serve…", style="dim")
            env = {k: v for k, v in os.environ.items() if k not in WORKER_ENV}
            server = ServerProcess(args.binary, password=password, cwd=args.directory, env=env)
            if await _until_stopped(_started(server), stop) is None:
                return 130 if signal.SIGINT in got else 0
        worker = WorkerSettings(
            base_url=url if server is None else server.base_url,
            store=target,
            token=settings.token,
            password=password,
            directory=args.directory,
            allowed_hosts=settings.allowed_hosts,
            # A server started here stops with this command: its trees are stopped
            # first. An external one keeps them for the next process to adopt.
            on_close="abort" if server is not None else "detach",
        )
        pool = WorkerPool(count, sock, worker.to_env())
        try:
            if await _until_stopped(_started(pool), stop) is None:
                return 130 if signal.SIGINT in got else 0
            announce(out, args, settings, store=target and describe_store(target), workers=count)
            if await _until_stopped(_failed(pool), stop) is not None:
                return 1
            return 130 if signal.SIGINT in got else 0  # as one process does on Ctrl-C
        finally:
            await pool.stop()
    finally:
        sock.close()
        try:
            if server is not None:
                await server.stop()
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)


async def _started(thing: ServerProcess | WorkerPool) -> bool:
    await thing.start()
    return True


async def _failed(pool: WorkerPool) -> bool:
    await pool.wait_failed()
    return True
