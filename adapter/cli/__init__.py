"""``opencode-tree``: see, stop and run OpenCode session trees from a terminal.

``python -m adapter`` is the same program.

The subcommands, one module each: ``tree``, ``stop`` and ``run`` (``_commands``),
``inventory`` (``_inventory``), ``demo`` (``_demo``), ``acp`` (``_acp``), and ``web``
(``_web``), whose ``--workers N`` parent (``_web_workers``) starts worker processes that each
build their adapter, store and app (``_web_worker``); terminal output, rich on a TTY and plain
otherwise (``_render``).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence

import httpx

from .._exceptions import AuthError, NotFoundError, OpenCodeError, RequestError, TreeStopError
from .._logging import configure_logging
from . import _acp, _inventory, _web
from ._acp import acp_command, add_acp_arguments
from ._commands import run_command, stop_command, tree_command
from ._demo import demo_command
from ._inventory import add_inventory_arguments, inventory_command
from ._render import Out
from ._web import Terminated, add_web_arguments, web_command

__all__ = ["amain", "main"]


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--url", help="OpenCode server URL (default: $OPENCODE_URL, else start a local server)"
    )
    common.add_argument(
        "--password-env",
        metavar="VAR",
        help="read the server password from this environment variable "
        "(never pass it on the command line)",
    )
    common.add_argument("--directory", help="project directory (sent as x-opencode-directory)")
    common.add_argument(
        "--binary",
        default=os.environ.get("OPENCODE_BIN", "opencode"),
        help="opencode binary for a local server",
    )
    common.add_argument("--log-format", choices=("console", "json"), default="console")
    common.add_argument("--verbose", "-v", action="store_true", help="debug logs on stderr")
    common.add_argument("--json", action="store_true", help="print JSON instead of text")

    parser = argparse.ArgumentParser(prog="opencode-tree", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    tree = sub.add_parser("tree", parents=[common], help="show a session tree with live status")
    tree.add_argument("session")
    tree.add_argument(
        "--watch", type=float, metavar="SECONDS", help="refresh until Ctrl-C (TTY only)"
    )
    tree.add_argument("--timeout", type=float, default=10.0)

    stop = sub.add_parser("stop", parents=[common], help="stop session trees and print the report")
    stop.add_argument("sessions", nargs="+", metavar="SESSION")
    stop.add_argument("--concurrency", type=int, default=8)
    stop.add_argument("--timeout", type=float, default=10.0)

    run = sub.add_parser("run", parents=[common], help="run a prompt; Ctrl-C interrupts the turn")
    run.add_argument("prompt")
    run.add_argument("--model", help="provider/model")
    run.add_argument("--agent")
    run.add_argument("--title")

    demo = sub.add_parser(
        "demo", parents=[common], help="the whole story: a real tree, Stop, and proof"
    )
    demo.add_argument("--fake", action="store_true", help="use the in-process fake server")

    # The commands whose module says at length what they do: their ``--help`` shows the
    # module's docstring as written; each module adds only its own options.
    for name, summary, module, add_arguments in (
        ("web", "serve the stop-button page and its API (adapter.web)", _web, add_web_arguments),
        (
            "acp",
            "serve the Agent Client Protocol over stdio (for ACP editors)",
            _acp,
            add_acp_arguments,
        ),
        (
            "inventory",
            "models (limits, prices), agents, commands, skills and MCP servers",
            _inventory,
            add_inventory_arguments,
        ),
    ):
        add_arguments(
            sub.add_parser(
                name,
                parents=[common],
                help=summary,
                description=module.__doc__,
                formatter_class=argparse.RawDescriptionHelpFormatter,
            )
        )
    return parser


#: What each command logs on stderr without ``--verbose`` (debug). A one-shot command
#: reports its outcome itself, in one line on failure: the library's warnings (a retry,
#: a failed abort) would repeat that line many times over, so only errors are logged.
#: ``web`` serves until stopped and its stderr is its operator's log: warnings too.
#: ``acp`` sets its own level (info: its stderr, or ``--log-file``, is the editor's log).
_QUIET = logging.ERROR
_LOG_LEVELS = {"web": logging.WARNING}


def _log_level(args: argparse.Namespace) -> int:
    return logging.DEBUG if args.verbose else _LOG_LEVELS.get(args.command, _QUIET)


async def _dispatch(args: argparse.Namespace, out: Out) -> int:
    if args.command == "tree":
        return await tree_command(args, out)
    if args.command == "stop":
        return await stop_command(args, out)
    if args.command == "run":
        return await run_command(args, out)
    if args.command == "web":
        return await web_command(args, out)
    if args.command == "acp":
        return await acp_command(args)
    if args.command == "inventory":
        return await inventory_command(args, out)
    return await demo_command(args, out)


def _describe(exc: BaseException, args: argparse.Namespace) -> str:
    if isinstance(exc, AuthError):
        return (
            "the server rejected the credentials (401): "
            "set --password-env to the variable holding its password"
        )
    if isinstance(exc, NotFoundError):
        return f"not found: {exc.server_message or exc}"
    if isinstance(exc, RequestError) and exc.status is None:
        where = getattr(args, "url", None) or os.environ.get("OPENCODE_URL") or "the local server"
        return f"cannot reach {where}: {exc.detail}"
    return str(exc)


async def amain(
    argv: Sequence[str] | None = None, *, transport: httpx.AsyncBaseTransport | None = None
) -> int:
    """The command line as a coroutine; ``transport`` is the test seam (e.g. the fake server's)."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    args.transport = transport
    configure_logging(format=args.log_format, level=_log_level(args))
    out = Out(force_plain=args.json)
    try:
        return await _dispatch(args, out)
    except TreeStopError as exc:
        out.error(str(exc))
        return 1
    except (OpenCodeError, ValueError) as exc:
        out.error(_describe(exc, args))
        return 2 if isinstance(exc, ValueError) else 1
    finally:
        out.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``opencode-tree`` and ``python -m adapter``."""
    try:
        return asyncio.run(amain(argv))
    except KeyboardInterrupt:
        return 130
    except Terminated:  # SIGTERM while the loop waited: everything was unwound
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
