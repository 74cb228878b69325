"""``opencode-tree web``: serve the stop-button page and API (``adapter.web``) with uvicorn.

The app drives an :class:`~adapter.OpenCodeAdapter` over ``--url`` (or
``$OPENCODE_URL``), else over a local ``opencode serve`` the adapter starts itself.
With ``--try`` it runs the pinned local OpenCode against the project's scripted
model instead, as ``make demo`` does, so that any prompt spawns a tree of subagents
(task -> task -> a model call that never ends) and Stop has something to stop.

A token is optional on loopback only: the API starts and stops agent runs, so on
any other address it must not be reachable without one.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._adapter import OpenCodeAdapter
from .._events import SessionStarted
from .._exceptions import InvalidInputError
from .._server_process import free_port
from ._commands import password_from, url_from
from ._render import Out

if TYPE_CHECKING:
    from ..testing._model_server import ScriptedModelServer

__all__ = ["add_web_parser", "listen_settings", "web_command"]

DEFAULT_PORT = 8765
TRY_SCRIPT = "web-try"
TRY_FINISHED = "checked out the build log"


@dataclass(frozen=True)
class ListenSettings:
    """Where the app listens and the token it requires (``None``: no token)."""

    host: str
    port: int
    token: str | None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        fragment = f"#token={self.token}" if self.token else ""
        return f"http://{host}:{self.port}/{fragment}"


def add_web_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Register ``web`` on the ``opencode-tree`` parser."""
    web = sub.add_parser(
        "web",
        parents=[common],
        help="serve the stop-button page and its API (adapter.web)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    web.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback)")
    web.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}; 0: a free port"
    )
    web.add_argument(
        "--token-env",
        metavar="VAR",
        help="require this environment variable's value as a bearer token "
        "(mandatory beyond loopback)",
    )
    web.add_argument(
        "--try",
        dest="try_out",
        action="store_true",
        help="try it out: a local OpenCode with a scripted model; any prompt spawns subagents",
    )


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def listen_settings(args: argparse.Namespace) -> ListenSettings:
    """Check the listening options before anything starts; ``InvalidInputError`` says why not."""
    token: str | None = None
    if args.token_env is not None:
        token = os.environ.get(args.token_env)
        if not token:
            raise InvalidInputError(f"--token-env names {args.token_env}, which is not set")
    if not _is_loopback(args.host) and token is None:
        raise InvalidInputError(
            f"refusing to listen on {args.host} without a token: anyone who reaches it could "
            "start and stop agent runs. Set one with --token-env VAR, or listen on 127.0.0.1"
        )
    if not 0 <= args.port <= 65535:
        raise InvalidInputError(f"--port must be 0..65535, got {args.port}")
    if args.try_out and getattr(args, "url", None):
        raise InvalidInputError("--try runs its own OpenCode server: drop --url")
    port = args.port or free_port(args.host if _is_loopback(args.host) else "127.0.0.1")
    return ListenSettings(args.host, port, token)


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
    from ..testing._model_server import Hang, ToolCall, ToolCalls, task_call

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
    from ..testing._model_server import ScriptedModelServer
    from ..testing._real_server import RealOpenCodeServer, find_opencode_binary

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
    except ImportError as exc:  # the optional extra is missing
        raise InvalidInputError(
            f"opencode-tree web needs the web extra: pip install 'opencode-tree-adapter[web]' "
            f"({exc.name} is missing)"
        ) from exc
    async with _adapter(args, out) as oc:
        app = create_app(oc, token=settings.token)
        out.line(f"serving the stop-button page at {settings.url}", style="bold")
        if args.try_out:
            out.line(
                "try-out: create a thread, type anything, watch the subagents appear, press Stop.",
                style="dim",
            )
        out.line("Ctrl-C to quit.", style="dim")
        await _serve(app, settings)
    return 0
