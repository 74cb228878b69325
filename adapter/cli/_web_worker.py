"""One worker of ``opencode-tree web``: its settings, its adapter and store, its app.

Why its own module: with ``--workers N`` each worker is a process of its own
(started by :mod:`adapter.cli._web_workers`),
and a process's command line is visible to every user of the machine. So a worker
takes nothing on its command line: its settings come from the environment the
parent sets (:class:`WorkerSettings`, ``docs/cli.md``), secrets included (the token,
the OpenCode password, a PostgreSQL DSN), and the listening socket is inherited.

Each worker connects to the OpenCode server as an external one (the parent
started it, once, or ``--url`` names it) and serves the app over the shared thread
store. Its ASGI lifespan opens the store and enters the adapter at startup; at
shutdown (SIGTERM, SIGINT, or the parent gone) the adapter closes with
``on_close``: ``detach`` leaves the running trees on OpenCode for the next process
to adopt (``docs/adapter.md``, "Closing: abort or detach").
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import urllib.parse
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import httpx

from .._adapter import OpenCodeAdapter
from .._exceptions import InvalidInputError
from .._logging import configure_logging, get_logger

if TYPE_CHECKING:
    from starlette.types import Receive, Scope, Send

    from ..web._store import ThreadStore

__all__ = ["WorkerApp", "WorkerSettings", "describe_store", "main", "serving_resources"]

_log = get_logger("adapter.cli.web")

# What a worker reads. OPENCODE_TREE_STORE is also what a user sets for the parent.
STORE_ENV = "OPENCODE_TREE_STORE"
URL_ENV = "OPENCODE_TREE_WEB_URL"
PASSWORD_ENV = "OPENCODE_TREE_WEB_PASSWORD"
DIRECTORY_ENV = "OPENCODE_TREE_WEB_DIRECTORY"
TOKEN_ENV = "OPENCODE_TREE_WEB_TOKEN"
NO_TOKEN_ENV = "OPENCODE_TREE_WEB_NO_TOKEN"
ALLOWED_HOSTS_ENV = "OPENCODE_TREE_WEB_ALLOWED_HOSTS"
ON_CLOSE_ENV = "OPENCODE_TREE_WEB_ON_CLOSE"
LOG_FORMAT_ENV = "OPENCODE_TREE_WEB_LOG_FORMAT"
VERBOSE_ENV = "OPENCODE_TREE_WEB_VERBOSE"
# Set by the parent only: the inherited listening socket and the readiness pipe.
LISTEN_FD_ENV = "OPENCODE_TREE_WEB_LISTEN_FD"
READY_FD_ENV = "OPENCODE_TREE_WEB_READY_FD"
WORKER_ENV = (
    STORE_ENV,
    URL_ENV,
    PASSWORD_ENV,
    DIRECTORY_ENV,
    TOKEN_ENV,
    NO_TOKEN_ENV,
    ALLOWED_HOSTS_ENV,
    ON_CLOSE_ENV,
    LOG_FORMAT_ENV,
    VERBOSE_ENV,
    LISTEN_FD_ENV,
    READY_FD_ENV,
)

#: Seconds uvicorn waits for open connections (event streams) at shutdown before it
#: closes them; the adapter is closed (detached) after that.
GRACEFUL_SHUTDOWN = 5
#: How often a worker checks that the parent that started it is still there.
PARENT_CHECK = 0.5


@dataclass(frozen=True)
class WorkerSettings:
    """Everything one worker needs, from the parent's checked options.

    ``base_url``: the OpenCode server (``None``: the adapter starts its own, in-process
    mode only). ``store``: the thread store's target (``None``: no store, the threads
    live in this process only). ``token``: ``None`` serves without one.
    """

    base_url: str | None
    store: str | None
    token: str | None
    password: str | None = None
    directory: str | None = None
    allowed_hosts: tuple[str, ...] = ()
    on_close: Literal["abort", "detach"] = "abort"

    def __repr__(self) -> str:  # never the token, the password or a DSN
        return f"WorkerSettings(base_url={self.base_url!r}, on_close={self.on_close!r})"

    def to_env(self) -> dict[str, str]:
        """The variables a worker process reads (:meth:`from_env`)."""
        if self.base_url is None:
            raise InvalidInputError("a worker process needs the OpenCode server's URL")
        env = {URL_ENV: self.base_url, ON_CLOSE_ENV: self.on_close}
        if self.store is not None:
            env[STORE_ENV] = self.store
        if self.token is None:
            env[NO_TOKEN_ENV] = "1"
        else:
            env[TOKEN_ENV] = self.token
        if self.password is not None:
            env[PASSWORD_ENV] = self.password
        if self.directory is not None:
            env[DIRECTORY_ENV] = self.directory
        if self.allowed_hosts:
            env[ALLOWED_HOSTS_ENV] = ",".join(self.allowed_hosts)
        return env

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> WorkerSettings:
        """The settings :meth:`to_env` wrote. A worker without a token refuses to start
        unless it was told to serve without one (``OPENCODE_TREE_WEB_NO_TOKEN=1``): a
        variable lost on the way must not open the API."""
        base_url = env.get(URL_ENV)
        if not base_url:
            raise InvalidInputError(f"{URL_ENV} is not set: the worker needs the OpenCode URL")
        token = env.get(TOKEN_ENV) or None
        if token is None and env.get(NO_TOKEN_ENV) != "1":
            raise InvalidInputError(f"{TOKEN_ENV} is not set (and {NO_TOKEN_ENV} is not 1)")
        on_close = env.get(ON_CLOSE_ENV, "detach")
        if on_close not in ("abort", "detach"):
            raise InvalidInputError(f"{ON_CLOSE_ENV} must be abort or detach")
        hosts = tuple(h for h in env.get(ALLOWED_HOSTS_ENV, "").split(",") if h)
        return cls(
            base_url=base_url,
            store=env.get(STORE_ENV) or None,
            token=token,
            password=env.get(PASSWORD_ENV),
            directory=env.get(DIRECTORY_ENV) or None,
            allowed_hosts=hosts,
            on_close="abort" if on_close == "abort" else "detach",
        )


def describe_store(target: str) -> str:
    """Where the store is, for a person, never with a credential: the SQLite file, or
    ``PostgreSQL host:port/dbname`` (no user, password or query)."""
    scheme = target.split(":", 1)[0].lower() if "://" in target else ""
    if scheme in ("postgresql", "postgres"):
        try:
            parts = urllib.parse.urlsplit(target)
            where = parts.hostname or "local socket"
            port = f":{parts.port}" if parts.port else ""
        except ValueError:
            return "PostgreSQL"
        return f"PostgreSQL {where}{port}{parts.path}"
    path = target[len("sqlite:///") :] if scheme == "sqlite" else target
    return f"SQLite {Path(path).expanduser()}"


@contextlib.asynccontextmanager
async def serving_resources(
    settings: WorkerSettings,
    *,
    binary: str = "opencode",
    transport: httpx.AsyncBaseTransport | None = None,
) -> AsyncIterator[tuple[OpenCodeAdapter, ThreadStore | None]]:
    """The store (opened and migrated) and the entered adapter; on exit the adapter is
    closed as ``settings.on_close`` says, then the store."""
    store: ThreadStore | None = None
    if settings.store is not None:
        from ..web._store import open_store

        store = await open_store(settings.store)
    try:
        oc = OpenCodeAdapter(
            settings.base_url,
            password=settings.password,
            binary=binary,
            directory=settings.directory,
            transport=transport,
            on_close=settings.on_close,
        )
        async with oc:
            yield oc, store
    finally:
        if store is not None:
            await store.aclose()


def build_app(settings: WorkerSettings, oc: OpenCodeAdapter, store: ThreadStore | None) -> Any:
    """The stop-button app over ``oc`` (and ``store``, when there is one)."""
    from ..web import create_app

    return create_app(oc, token=settings.token, allowed_hosts=settings.allowed_hosts, store=store)


class WorkerApp:
    """The ASGI app a worker serves: the lifespan builds (and at shutdown closes) the
    adapter, the store and the stop-button app; every other request goes to that app.
    ``on_ready`` is called once the app serves."""

    def __init__(
        self, settings: WorkerSettings, *, on_ready: Callable[[], None] | None = None
    ) -> None:
        self._settings = settings
        self._on_ready = on_ready
        self._app: Any = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if self._app is None:  # uvicorn serves only after the startup completed
            raise RuntimeError("the worker's app is not started")
        await self._app(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        async with contextlib.AsyncExitStack() as stack:
            message = await receive()
            assert message["type"] == "lifespan.startup"
            try:
                oc, store = await stack.enter_async_context(serving_resources(self._settings))
                self._app = build_app(self._settings, oc, store)
                stack.push_async_callback(_cancelled, asyncio.create_task(_watch_parent()))
            except Exception as exc:
                # Once, without a traceback; the store's and the adapter's messages never
                # hold a credential.
                await send({"type": "lifespan.startup.failed", "message": str(exc)})
                return
            await send({"type": "lifespan.startup.complete"})
            if self._on_ready is not None:
                self._on_ready()
            message = await receive()
            assert message["type"] == "lifespan.shutdown"
            _log.info("web.worker_stopping", pid=os.getpid(), on_close=self._settings.on_close)
        self._app = None
        await send({"type": "lifespan.shutdown.complete"})


async def _cancelled(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def _watch_parent() -> None:
    """The parent gone (killed with SIGKILL), the worker stops as on SIGTERM: its
    adapter closes (detaching) and the port is free for the next process."""
    parent = os.getppid()
    while os.getppid() == parent:  # noqa: ASYNC110 (no event says a parent died)
        await asyncio.sleep(PARENT_CHECK)
    _log.warning("web.worker_orphaned", pid=os.getpid())
    os.kill(os.getpid(), signal.SIGTERM)


def _announce(ready_fd: int | None) -> Callable[[], None]:
    def ready() -> None:
        if ready_fd is not None:
            with contextlib.suppress(OSError):
                os.write(ready_fd, f"{os.getpid()}\n".encode())

    return ready


async def _serve(settings: WorkerSettings, sock: socket.socket, ready_fd: int | None) -> None:
    import uvicorn

    app = WorkerApp(settings, on_ready=_announce(ready_fd))
    config = uvicorn.Config(
        app,
        lifespan="on",
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=int(GRACEFUL_SHUTDOWN),
    )
    await uvicorn.Server(config).serve(sockets=[sock])


def main() -> int:
    """A worker process: serve on the inherited socket until
    SIGTERM (or SIGINT, or the parent's death); exit 0 after a clean shutdown."""
    env = os.environ
    configure_logging(
        format="json" if env.get(LOG_FORMAT_ENV) == "json" else "console",
        level="DEBUG" if env.get(VERBOSE_ENV) == "1" else "WARNING",
    )
    try:
        settings = WorkerSettings.from_env(env)
        sock = socket.socket(fileno=int(env[LISTEN_FD_ENV]))
        ready_fd = int(env[READY_FD_ENV]) if env.get(READY_FD_ENV) else None
    except (InvalidInputError, KeyError, ValueError, OSError) as exc:
        print(f"error: opencode-tree web worker: {exc}", file=sys.stderr)
        return 2
    # uvicorn re-raises the signal that stopped it once it has shut down: handled here,
    # so that a worker stopped by SIGTERM exits 0 after its adapter was closed.
    signal.signal(signal.SIGTERM, lambda signum, frame: None)
    try:
        asyncio.run(_serve(settings, sock, ready_fd))
    except KeyboardInterrupt:
        pass
    except SystemExit as exc:  # uvicorn's exit when the lifespan startup failed
        return int(exc.code or 3) if isinstance(exc.code, int) else 3
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
