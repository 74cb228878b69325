"""``opencode-tree web``: serve the stop-button page and API (``adapter.web``) with uvicorn.

The app drives an :class:`~adapter.OpenCodeAdapter` over ``--url`` (or
``$OPENCODE_URL``), else over a local ``opencode serve`` the adapter starts itself.
With ``--try`` it runs the pinned local OpenCode against the project's scripted
model instead, as ``make demo`` does, so that any prompt spawns a tree of subagents
(task -> task -> a model call that never ends) and Stop has something to stop.

The API starts agent runs that can execute commands, so it needs a token by
default: a fresh one each run (or ``--token-env VAR``'s), printed once inside the
URL's fragment (``http://127.0.0.1:8765/#token=...``), which the browser never
sends to a server or in a Referer; the page keeps it and removes it from the
address bar. ``--no-token`` is for loopback only. Whatever the token, the app
refuses cross-site and DNS-rebinding requests (``docs/web.md``).

The threads are kept in a thread store (``adapter.web._store``): ``--store``, else
``$OPENCODE_TREE_STORE``, else the SQLite default; ``--no-store`` keeps them in this
process only, as ``--try`` does. ``--workers N`` serves from N processes sharing the
store (``adapter.cli._web_workers``); the OpenCode server the command may start is
started once, in this process. SIGTERM stops the command cleanly: with a store and
an external server (``--url``) the running trees are left running (detached) for
the next process to adopt; otherwise they are stopped.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import os
import secrets
import signal
import urllib.parse
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._adapter import OpenCodeAdapter
from .._client._base_url import is_loopback
from .._exceptions import InvalidInputError
from .._server._binary import find_opencode_binary, free_port
from .._types._events import SessionStarted
from ._commands import password_from, url_from
from ._render import Out
from ._web_worker import (
    STORE_ENV,
    WorkerSettings,
    build_app,
    describe_store,
    serving_resources,
)

if TYPE_CHECKING:
    from ..testing.model import ScriptedModelServer

__all__ = [
    "Terminated",
    "add_web_arguments",
    "describe_store",
    "listen_settings",
    "store_target",
    "web_command",
    "worker_count",
]

DEFAULT_PORT = 8765
#: How often the command looks whether uvicorn listens yet, before it prints the URL.
_LISTEN_POLL = 0.02
TRY_SCRIPT = "web-try"
TRY_FINISHED = "checked out the build log"
TOKEN_BYTES = 32  # of randomness in a made token (43 URL-safe characters)
MAX_WORKERS = 64


class Terminated(Exception):
    """SIGTERM arrived: the command stops cleanly (exit code 0)."""


@dataclass(frozen=True)
class ListenSettings:
    """Where the app listens, the token it requires (``None``: no token) and the extra
    host names it answers to (``--allow-host``)."""

    host: str
    port: int
    token: str | None
    allowed_hosts: tuple[str, ...] = ()

    @property
    def url(self) -> str:
        """The URL to open. Listening on every address (``0.0.0.0``, ``::``) is no
        address to open: that URL names loopback instead."""
        host = self.host
        if _is_unspecified(host):
            host = "::1" if ":" in host else "127.0.0.1"
        shown = f"[{host}]" if ":" in host else host
        fragment = f"#token={self.token}" if self.token else ""
        return f"http://{shown}:{self.port}/{fragment}"


def add_web_arguments(web: argparse.ArgumentParser) -> None:
    """``web``'s own options (the common ones and its ``--help`` come from the package)."""
    web.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback)")
    web.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}; 0: a free port"
    )
    web.add_argument(
        "--token-env",
        metavar="VAR",
        help="require this environment variable's value as the bearer token "
        "(default: a fresh random token, printed in the URL)",
    )
    web.add_argument(
        "--no-token",
        action="store_true",
        help="require no token (loopback only: any local program can then drive the agent)",
    )
    web.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also answer requests for this host name (the app is reached under it, "
        "e.g. a LAN name or a proxy's); loopback names and the listening address always are",
    )
    web.add_argument(
        "--try",
        dest="try_out",
        action="store_true",
        help="try it out: a local OpenCode with a scripted model; any prompt spawns subagents",
    )
    web.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help=f"serve from N processes sharing the thread store (1..{MAX_WORKERS}, default 1)",
    )
    web.add_argument(
        "--store",
        metavar="PATH_OR_URL",
        help=f"the thread store: an SQLite file path or sqlite:///PATH (default: ${STORE_ENV}, "
        "which may also hold a postgresql:// DSN, else the SQLite file in "
        "$XDG_STATE_HOME/opencode-tree/)",
    )
    web.add_argument(
        "--no-store",
        action="store_true",
        help="keep the threads in this process only (one worker; lost when it exits)",
    )


def _is_unspecified(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def _token(args: argparse.Namespace) -> str | None:
    if args.no_token and args.token_env is not None:
        raise InvalidInputError("--no-token and --token-env contradict each other: give one")
    if args.token_env is not None:
        token = os.environ.get(args.token_env)
        if not token:
            raise InvalidInputError(f"--token-env names {args.token_env}, which is not set")
        return token
    if args.no_token:
        if not is_loopback(args.host):
            raise InvalidInputError(
                f"refusing to listen on {args.host} without a token: anyone who reaches it "
                "could start and stop agent runs. Drop --no-token, or listen on 127.0.0.1"
            )
        return None
    return secrets.token_urlsafe(TOKEN_BYTES)


def worker_count(args: argparse.Namespace) -> int:
    """``--workers``, checked: more than one needs a shared store."""
    count = getattr(args, "workers", 1)
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_WORKERS:
        raise InvalidInputError(f"--workers must be 1..{MAX_WORKERS}, got {count!r:.20}")
    if count > 1 and args.try_out:
        raise InvalidInputError("--try serves from one process: drop --workers")
    if count > 1 and getattr(args, "no_store", False):
        raise InvalidInputError(
            "--workers needs the thread store the workers share: drop --no-store"
        )
    return count


def store_target(args: argparse.Namespace) -> str | None:
    """The thread store to open: ``--store``, else ``$OPENCODE_TREE_STORE``, else the
    SQLite default (an absolute path); ``None`` for ``--no-store`` and ``--try`` (a
    try-out's threads name a throwaway server: they are never kept, whatever
    ``$OPENCODE_TREE_STORE`` says).

    The flag wins over the variable, as ``--url`` over ``$OPENCODE_URL``. A URL with a
    password is refused on the command line (``ps`` shows it), without repeating it:
    a PostgreSQL DSN holding one goes in ``$OPENCODE_TREE_STORE``."""
    store: str | None = getattr(args, "store", None)
    no_store = getattr(args, "no_store", False)
    if store is not None and no_store:
        raise InvalidInputError("--store and --no-store contradict each other: give one")
    if args.try_out:
        if store is not None:
            raise InvalidInputError(
                "--try keeps no threads (its server is thrown away): drop --store"
            )
        return None
    if no_store:
        return None
    if store is not None:
        if not store.strip():
            raise InvalidInputError("--store is empty: give a file path or sqlite:///PATH")
        if _has_password(store):
            raise InvalidInputError(
                f"--store must not hold a password (the process list shows it): "
                f"put the URL in ${STORE_ENV} instead"
            )
        return store
    from_env = os.environ.get(STORE_ENV, "")
    if from_env.strip():
        return from_env
    from ..web._store import default_store_path

    return str(default_store_path())


def _has_password(target: str) -> bool:
    if "://" not in target:
        return False
    try:
        parts = urllib.parse.urlsplit(target)
        password = parts.password
    except ValueError:
        return True  # cannot tell: refused rather than shown
    query = urllib.parse.parse_qs(parts.query)
    return password is not None or "password" in {k.lower() for k in query}


def listen_settings(args: argparse.Namespace) -> ListenSettings:
    """Check the listening options before anything starts; ``InvalidInputError`` says why not."""
    token = _token(args)
    if not 0 <= args.port <= 65535:
        raise InvalidInputError(f"--port must be 0..65535, got {args.port}")
    if args.try_out and getattr(args, "url", None):
        raise InvalidInputError("--try runs its own OpenCode server: drop --url")
    port = args.port or free_port(args.host if is_loopback(args.host) else "127.0.0.1")
    return ListenSettings(args.host, port, token, tuple(args.allow_host))


def try_scripts(model: ScriptedModelServer) -> None:
    """Any prompt of a bound root session: a bash call that finishes, then a task whose
    subagent spawns another whose model call never ends. The pair repeats, so the next
    prompt of the thread (whatever step it lands on) spawns a tree again."""
    from ..testing.model import Hang, ToolCall, ToolCalls, task_call

    model.script(f"{TRY_SCRIPT}-leaf", [Hang(text_before="still researching…")])
    model.script(
        f"{TRY_SCRIPT}-mid", [ToolCalls([task_call("deeper analysis", f"{TRY_SCRIPT}-leaf")])]
    )
    bash = ToolCall("bash", {"command": f"echo {TRY_FINISHED}", "description": "read the log"})
    step_pair = [
        ToolCalls([bash], text="Let me look at this. "),
        ToolCalls([task_call("investigation", f"{TRY_SCRIPT}-mid")]),
    ]
    model.script(TRY_SCRIPT, step_pair * 50)


@contextlib.asynccontextmanager
async def _try_adapter(out: Out) -> AsyncIterator[OpenCodeAdapter]:
    from ..testing import RealOpenCodeServer
    from ..testing.model import ScriptedModelServer

    try:
        find_opencode_binary()
    except FileNotFoundError as exc:
        raise InvalidInputError(
            "--try needs the pinned OpenCode server: run `make opencode` (needs Node.js/npm)"
        ) from exc
    with ScriptedModelServer(default_text="(the scripted model has nothing more to say)") as model:
        try_scripts(model)
        server = RealOpenCodeServer(model.base_url)
        out.line("starting the pinned OpenCode with a scripted model (--try)…", style="dim")
        await asyncio.to_thread(server.start)
        try:
            async with OpenCodeAdapter(server.base_url, directory=str(server.directory)) as oc:
                binder = asyncio.create_task(_bind_roots(oc, model))
                try:
                    yield oc
                finally:
                    binder.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await binder
        finally:
            await asyncio.to_thread(server.close)


async def _bind_roots(oc: OpenCodeAdapter, model: ScriptedModelServer) -> None:
    """Every thread's root session follows the try-out script, whatever is typed."""
    async with oc.events() as stream:
        async for event in stream:
            if isinstance(event, SessionStarted):
                model.bind_session(event.session_id, TRY_SCRIPT)


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    """SIGTERM raises :class:`Terminated` while the command runs, so that every
    ``async with`` unwinds (the adapter closes, a server it started stops) instead of
    the process dying where it stands. uvicorn handles the signal itself while it
    serves (graceful shutdown) and raises it again once it has stopped: here."""

    def terminated(signum: int, frame: object) -> None:
        raise Terminated("SIGTERM")

    try:
        previous = signal.signal(signal.SIGTERM, terminated)
    except ValueError:  # not the main thread (an embedding host): left alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


async def _serve(app: Any, settings: ListenSettings, announce: Callable[[], None]) -> None:
    """Serve ``app``; ``announce`` (the URL) once uvicorn listens, not before: a client
    that reads the URL and connects at once must not be refused."""
    import uvicorn

    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level="warning",
        lifespan="off",
        timeout_graceful_shutdown=5,
    )
    server = uvicorn.Server(config)
    serving = asyncio.ensure_future(server.serve())
    try:
        while not server.started and not serving.done():
            await asyncio.wait([serving], timeout=_LISTEN_POLL)
        if server.started:
            announce()
        await serving
    finally:
        if not serving.done():
            serving.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await serving


async def _check_store(target: str) -> None:
    """Open the store once before anything starts: a bad target or a store that is
    down fails here (exit 1 or 2), and the schema is migrated before the workers open
    it."""
    from ..web._store import open_store

    store = await open_store(target)
    await store.aclose()


def _announce(out: Out, args: argparse.Namespace, settings: ListenSettings, **facts: Any) -> None:
    out.line(f"serving the stop-button page at {settings.url}", style="bold")
    if facts.get("store"):
        out.line(f"threads kept in {facts['store']}", style="dim")
    if facts.get("workers", 1) > 1:
        out.line(f"{facts['workers']} worker processes", style="dim")
    if settings.token is None:
        out.line("no token: any program on this machine can drive the agent.", style="dim")
    if args.try_out:
        out.line(
            "try-out: create a thread, type anything, watch the subagents appear, press Stop.",
            style="dim",
        )
    out.line("Ctrl-C to quit.", style="dim")


async def web_command(args: argparse.Namespace, out: Out) -> int:
    settings = listen_settings(args)
    workers = worker_count(args)
    target = store_target(args)
    try:
        from ..web._guard import allowed_host_names
    except ImportError as exc:  # the optional extra is missing
        raise InvalidInputError(
            f"opencode-tree web needs the web extra: pip install 'opencode-tree-adapter[web]' "
            f"({exc.name} is missing)"
        ) from exc
    allowed_host_names(settings.allowed_hosts, option="--allow-host")  # before anything starts
    url = None if args.try_out else url_from(args)
    password = password_from(args)
    # The store's URL may hold a password: a server this command starts (and the agent's
    # shell commands) must not inherit it. The workers are given it explicitly.
    os.environ.pop(STORE_ENV, None)
    with _sigterm_raises():
        try:
            if target is not None:
                await _check_store(target)
            if workers > 1:
                from ._web_workers import serve_workers

                return await serve_workers(
                    args,
                    out,
                    settings,
                    count=workers,
                    url=url,
                    password=password,
                    target=target,
                    announce=_announce,
                )
            if args.try_out:
                async with _try_adapter(out) as oc:
                    app = build_app(_worker_settings(settings, None, None), oc, None)
                    await _serve(app, settings, lambda: _announce(out, args, settings))
                return 0
            if url is None:
                out.line("starting a local opencode serve…", style="dim")
            worker = WorkerSettings(
                base_url=url,
                store=target,
                token=settings.token,
                password=password,
                directory=args.directory,
                allowed_hosts=settings.allowed_hosts,
                on_close="detach" if url is not None and target is not None else "abort",
            )
            async with serving_resources(
                worker, binary=args.binary, transport=getattr(args, "transport", None)
            ) as (oc, store):
                app = build_app(worker, oc, store)
                stored = target and describe_store(target)
                await _serve(app, settings, lambda: _announce(out, args, settings, store=stored))
        except Terminated:
            pass
    return 0


def _worker_settings(
    settings: ListenSettings, url: str | None, target: str | None
) -> WorkerSettings:
    return WorkerSettings(
        base_url=url, store=target, token=settings.token, allowed_hosts=settings.allowed_hosts
    )
