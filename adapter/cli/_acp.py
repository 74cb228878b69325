"""``opencode-tree acp``: serve the Agent Client Protocol over stdio (``adapter.acp``).

An editor (Zed, JetBrains, any ACP host) starts this command and talks JSON-RPC on
its stdin/stdout. It drives ``--url`` (or ``$OPENCODE_URL``), else its own
``opencode serve`` (``--binary``; by default ``$OPENCODE_BIN``, the project's pinned
install, then ``opencode`` on PATH), stopped when the editor disconnects.

stdout carries the protocol and nothing else: logs go to stderr, or to
``--log-file``. The agent ends when its input does (the editor closed the pipe), on
Ctrl-C, and on SIGTERM or SIGHUP, each time closing the adapter (and the server it
started).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Awaitable
from typing import TextIO

from .._adapter import OpenCodeAdapter
from .._logging import WellFormedFormatter, configure_logging, get_logger
from .._server._binary import find_opencode_binary
from ._commands import password_from, url_from

__all__ = ["acp_command", "add_acp_arguments"]

_log = get_logger("adapter.acp")
#: The signals a host stops an agent with. Their default action ends the process at
#: once, leaving the ``opencode serve`` it started running.
_STOP_SIGNALS = tuple(
    s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s is not None
)


def add_acp_arguments(acp: argparse.ArgumentParser) -> None:
    """``acp``'s own options (the common ones and its ``--help`` come from the package)."""
    acp.add_argument(
        "--log-file",
        metavar="PATH",
        help="append logs to this file instead of stderr (stdout is the protocol)",
    )


def _binary(args: argparse.Namespace) -> str:
    """``--binary`` if given, else the pinned project install when there is one."""
    if args.binary != "opencode" or os.environ.get("OPENCODE_BIN"):
        return str(args.binary)
    try:
        return str(find_opencode_binary())
    except FileNotFoundError:
        return "opencode"


def _log_to(stream: TextIO, args: argparse.Namespace) -> None:
    level = logging.DEBUG if args.verbose else logging.INFO
    # The one configuration: tracebacks without locals, well-formed text.
    configure_logging(format=args.log_format, level=level, file=stream)
    # The SDK logs through the standard library: the same place, never stdout.
    handler = logging.StreamHandler(stream)
    handler.setFormatter(WellFormedFormatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    logging.getLogger().addHandler(handler)
    logging.getLogger().setLevel(level)


def _open_log(path: str | None) -> TextIO | None:
    return open(path, "a", buffering=1) if path else None  # closed by the caller


async def acp_command(args: argparse.Namespace) -> int:
    try:
        from ..acp import run_acp
    except ImportError:
        print(
            "error: the ACP agent needs the acp extra: pip install 'opencode-tree-adapter[acp]'",
            file=sys.stderr,
        )
        return 2
    log_file = _open_log(args.log_file)
    try:
        _log_to(log_file or sys.stderr, args)
        async with OpenCodeAdapter(
            url_from(args),
            password=password_from(args),
            binary=_binary(args),
            directory=args.directory,
            transport=getattr(args, "transport", None),
        ) as adapter:
            await _until_signal(run_acp(adapter))
        _log.info("acp.closed")
    finally:
        if log_file is not None:
            log_file.close()
    return 0


async def _until_signal(serving: Awaitable[None]) -> None:
    """Await ``serving``; a stop signal cancels it, and is then a normal end."""
    task = asyncio.ensure_future(serving)
    loop = asyncio.get_running_loop()
    received: list[str] = []

    def stop(signum: signal.Signals) -> None:
        received.append(signum.name)
        task.cancel()

    installed: list[signal.Signals] = []
    for signum in _STOP_SIGNALS:
        with contextlib.suppress(NotImplementedError, RuntimeError):  # no handlers (Windows)
            loop.add_signal_handler(signum, stop, signum)
            installed.append(signum)
    try:
        await task  # the SDK's receive loop may end on the cancel without raising it
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if not received or (current is not None and current.cancelling()):
            raise  # Ctrl-C or the caller's cancel, not our signal
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)
    if received:
        _log.info("acp.signal", signal=received[0])
