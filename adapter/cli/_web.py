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
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import os
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._adapter import OpenCodeAdapter
from .._client._base_url import is_loopback
from .._exceptions import InvalidInputError
from .._server._binary import find_opencode_binary, free_port
from .._types._events import SessionStarted
from ._commands import documented_command, password_from, url_from
from ._render import Out

if TYPE_CHECKING:
    from ..testing.model import ScriptedModelServer

__all__ = ["add_web_parser", "listen_settings", "web_command"]

DEFAULT_PORT = 8765
TRY_SCRIPT = "web-try"
TRY_FINISHED = "checked out the build log"
TOKEN_BYTES = 32  # of randomness in a made token (43 URL-safe characters)


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


def add_web_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Register ``web`` on the ``opencode-tree`` parser."""
    web = documented_command(
        sub, common, "web", help="serve the stop-button page and its API (adapter.web)", doc=__doc__
    )
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


def listen_settings(args: argparse.Namespace) -> ListenSettings:
    """Check the listening options before anything starts; ``InvalidInputError`` says why not."""
    token = _token(args)
    if not 0 <= args.port <= 65535:
        raise InvalidInputError(f"--port must be 0..65535, got {args.port}")
    if args.try_out and getattr(args, "url", None):
        raise InvalidInputError("--try runs its own OpenCode server: drop --url")
    port = args.port or free_port(args.host if is_loopback(args.host) else "127.0.0.1")
    return ListenSettings(args.host, port, token, tuple(args.allow_host))


@contextlib.asynccontextmanager
async def _adapter(args: argparse.Namespace, out: Out) -> AsyncIterator[OpenCodeAdapter]:
    if args.try_out:
        async with _try_adapter(out) as oc:
            yield oc
        return
    url = url_from(args)
    if url is None:
        out.line("starting a local opencode serve…", style="dim")
    async with OpenCodeAdapter(
        url,
        password=password_from(args),
        binary=args.binary,
        directory=args.directory,
        transport=getattr(args, "transport", None),
    ) as oc:
        yield oc


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


async def _serve(app: Any, settings: ListenSettings) -> None:
    import uvicorn

    config = uvicorn.Config(
        app, host=settings.host, port=settings.port, log_level="warning", lifespan="off"
    )
    await uvicorn.Server(config).serve()


async def web_command(args: argparse.Namespace, out: Out) -> int:
    settings = listen_settings(args)
    try:
        from ..web import create_app
        from ..web._guard import allowed_host_names
    except ImportError as exc:  # the optional extra is missing
        raise InvalidInputError(
            f"opencode-tree web needs the web extra: pip install 'opencode-tree-adapter[web]' "
            f"({exc.name} is missing)"
        ) from exc
    allowed_host_names(settings.allowed_hosts, option="--allow-host")  # before anything starts
    async with _adapter(args, out) as oc:
        app = create_app(oc, token=settings.token, allowed_hosts=settings.allowed_hosts)
        out.line(f"serving the stop-button page at {settings.url}", style="bold")
        if settings.token is None:
            out.line("no token: any program on this machine can drive the agent.", style="dim")
        if args.try_out:
            out.line(
                "try-out: create a thread, type anything, watch the subagents appear, press Stop.",
                style="dim",
            )
        out.line("Ctrl-C to quit.", style="dim")
        await _serve(app, settings)
    return 0
