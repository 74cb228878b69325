"""``opencode-tree tree | stop | run``."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator
from typing import Any

from rich.live import Live
from rich.status import Status

from .._adapter import OpenCodeAdapter
from .._client import OpenCodeClient
from .._client._base_url import checked_base_url
from .._exceptions import InvalidInputError, TreeStopError
from .._server._process import ServerProcess
from .._stop._stop_tree import StopReport, stop_tree
from .._timeouts import Timeouts
from .._types._events import (
    ChildStarted,
    ContentDelta,
    Event,
    ItemEvent,
    RequestEvent,
    RuntimeEvent,
    TurnEvent,
)
from ._render import Out, partial_lines, report_tree, session_tree

__all__ = ["run_command", "stop_command", "tree_command"]


def password_from(args: argparse.Namespace) -> str | None:
    """The password comes from an environment variable named on the command line, never argv."""
    name = getattr(args, "password_env", None)
    if name is None:
        return None
    value = os.environ.get(name)
    if value is None:
        raise InvalidInputError(f"--password-env names {name}, which is not set")
    return value


def url_from(args: argparse.Namespace) -> str | None:
    """--url, else $OPENCODE_URL, refused (before anything starts) if it carries a credential."""
    url = getattr(args, "url", None)
    name = "--url"
    if not url:
        url, name = os.environ.get("OPENCODE_URL"), "$OPENCODE_URL"
    if not url:
        return None
    checked_base_url(url, name=name, password_hint="--password-env", directory_hint="--directory")
    return url


def adapter_from(args: argparse.Namespace, *, timeouts: Timeouts | None = None) -> OpenCodeAdapter:
    """An adapter for --url / $OPENCODE_URL, else for a local server it starts itself."""
    return OpenCodeAdapter(
        url_from(args),
        password=password_from(args),
        binary=args.binary,
        directory=args.directory,
        transport=getattr(args, "transport", None),
        timeouts=timeouts,
    )


@contextlib.asynccontextmanager
async def connect(args: argparse.Namespace) -> AsyncIterator[OpenCodeClient]:
    """A client for --url / OPENCODE_URL, or for a local server started for the command."""
    password = password_from(args)
    url = url_from(args)
    server: ServerProcess | None = None
    transport = getattr(args, "transport", None)
    if url is None:
        server = ServerProcess(args.binary, password=password, cwd=args.directory)
        await server.start()
        url = server.base_url
    try:
        async with OpenCodeClient(
            url,
            password=password,
            directory=args.directory,
            timeout=args.timeout,
            transport=transport,
        ) as client:
            yield client
    finally:
        if server is not None:
            await server.stop()


async def read_tree(
    client: OpenCodeClient, root: str
) -> tuple[dict[str, tuple[str | None, str]], dict[str, str]]:
    root_session = await client.get_session(root)
    sessions: dict[str, tuple[str | None, str]] = {root: (None, root_session.title)}
    queue = [root]
    while queue:
        batch, queue = queue[:8], queue[8:]
        results = await asyncio.gather(*(client.children(sid) for sid in batch))
        for parent, kids in zip(batch, results, strict=True):
            for kid in kids:
                if kid.id not in sessions:
                    sessions[kid.id] = (parent, kid.title)
                    queue.append(kid.id)
    statuses: dict[str, str] = {sid: st.type for sid, st in (await client.status()).items()}
    return sessions, statuses


async def tree_command(args: argparse.Namespace, out: Out) -> int:
    async with connect(args) as client:
        if args.watch and out.rich:
            sessions, statuses = await read_tree(client, args.session)
            with Live(
                session_tree(args.session, sessions, statuses)[0], console=out.console
            ) as live:
                while True:
                    await asyncio.sleep(args.watch)
                    sessions, statuses = await read_tree(client, args.session)
                    live.update(session_tree(args.session, sessions, statuses)[0])
        sessions, statuses = await read_tree(client, args.session)
        if args.json:
            out.json(
                {
                    "root": args.session,
                    "sessions": [
                        {
                            "id": sid,
                            "parent_id": parent,
                            "title": title,
                            "status": statuses.get(sid, "idle"),
                        }
                        for sid, (parent, title) in sessions.items()
                    ],
                }
            )
        else:
            out.tree(*session_tree(args.session, sessions, statuses))
    return 0


async def stop_command(args: argparse.Namespace, out: Out) -> int:
    failures = 0
    async with connect(args) as client:
        reports: list[dict[str, Any]] = []
        for root in args.sessions:
            status = Status(f"stopping {root}…", console=out.err) if out.err.is_terminal else None

            def progress(
                done: int, known: int, status: Status | None = status, root: str = root
            ) -> None:
                if status is not None:
                    status.update(f"stopping {root}: {done} of {known} sessions")

            if status is not None:
                status.start()
            try:
                report = await stop_tree(
                    client,
                    root,
                    concurrency=args.concurrency,
                    timeout=args.timeout,
                    progress=progress,
                    # The CLI knows no tree beforehand; the root's second abort still
                    # keeps the root from starting one more model step (docs/interrupt.md).
                    abort_root_twice=True,
                )
                error: TreeStopError | None = None
            except TreeStopError as exc:
                report, error = exc.report, exc
            finally:
                if status is not None:
                    status.stop()
            reports.append(_report_json(report, error))
            if not args.json:
                out.tree(*report_tree(report))
                out.line(report.summary())
            if error is not None:
                failures += 1
                out.error(str(error))
        if args.json:
            out.json({"reports": reports})
    return 1 if failures else 0


def _report_json(report: StopReport, error: TreeStopError | None) -> dict[str, Any]:
    return {
        "root_id": report.root_id,
        "ok": error is None,
        "error": str(error) if error else None,
        "first_failure": error.first_failure.session_id if error and error.first_failure else None,
        "sessions": [
            {
                "session_id": s.session_id,
                "parent_id": s.parent_id,
                "depth": s.depth,
                "outcome": s.outcome,
                "failed_step": s.failed_step,
                "error": str(s.error) if s.error else None,
                "started_ms": None if s.started is None else round(s.started * 1000, 2),
                "ended_ms": None if s.ended is None else round(s.ended * 1000, 2),
            }
            for s in report
        ],
        "max_in_flight": report.max_in_flight,
        "concurrency": report.concurrency,
        "requests": report.requests,
        "verify_rounds": report.verify_rounds,
        "elapsed_ms": round(report.elapsed * 1000, 2),
    }


async def run_command(args: argparse.Namespace, out: Out) -> int:
    """Start a turn and stream it; Ctrl-C interrupts the turn, a second Ctrl-C exits."""
    loop = asyncio.get_running_loop()
    interrupt = asyncio.Event()
    main = asyncio.current_task()
    presses = 0

    def on_sigint() -> None:
        nonlocal presses
        presses += 1
        if presses == 1:
            interrupt.set()
        elif main is not None:
            main.cancel()

    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGINT, on_sigint)
    try:
        async with adapter_from(args) as oc:
            events = oc.events()
            info = await oc.start_session("cli", title=args.title, model=args.model)
            out.line(f"session {info.session_id}", style="dim")
            turn = await oc.send_turn("cli", args.prompt, model=args.model, agent=args.agent)
            return await _stream(oc, events, turn.turn_id, interrupt, out)
    except asyncio.CancelledError:
        out.line("\nexiting", style="dim")
        return 130
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGINT)


async def _stream(
    oc: OpenCodeAdapter, events: Any, turn_id: str, interrupt: asyncio.Event, out: Out
) -> int:
    waiter = asyncio.ensure_future(interrupt.wait())
    try:
        iterator = events.__aiter__()
        while True:
            nxt = asyncio.ensure_future(iterator.__anext__())
            done, _ = await asyncio.wait([nxt, waiter], return_when=asyncio.FIRST_COMPLETED)
            if waiter in done:
                nxt.cancel()
                out.line("\n⏹  interrupting the turn (Ctrl-C again to exit)…", style="bold yellow")
                result = await oc.interrupt_turn("cli", turn_id)
                if result.stop is not None:
                    out.tree(*report_tree(result.stop))
                    out.line(result.stop.summary())
                out.line("partial result:", style="bold")
                for line in partial_lines(result.partial):
                    out.line("  " + line)
                return 130
            try:
                event = nxt.result()
            except StopAsyncIteration:
                return 1
            code = _print_event(event, turn_id, out)
            if code is not None:
                return code
    finally:
        waiter.cancel()


def _print_event(event: Event, turn_id: str, out: Out) -> int | None:
    if isinstance(event, ContentDelta):
        out.write(event.delta)
    elif isinstance(event, ItemEvent):
        if event.type == "item.started":
            out.line(f"\n▶ {event.tool} {event.title or ''}".rstrip(), style="cyan")
        elif event.type == "item.completed":
            detail = " ".join((event.detail or "").split())[:120]
            out.line(
                f"{'✔' if event.status == 'completed' else '✘'} {event.tool} {detail}", style="cyan"
            )
    elif isinstance(event, ChildStarted):
        out.line(f"\n↳ subagent {event.title or ''} {event.session_id}", style="magenta")
    elif isinstance(event, RequestEvent) and event.type in (
        "request.opened",
        "user-input.requested",
    ):
        out.line(
            f"\n? {event.type} {event.permission or ''} (answer it in another client)",
            style="yellow",
        )
    elif isinstance(event, RuntimeEvent):
        out.line(
            f"\n{event.type}: {event.message}",
            style="red" if event.type == "runtime.error" else "yellow",
        )
    elif isinstance(event, TurnEvent) and event.turn_id == turn_id:
        if event.type == "turn.completed":
            out.line("")
            if event.state == "failed":
                out.error(event.error or "the turn failed")
                return 1
            return 0
        if event.type == "turn.aborted":
            out.line(f"\nturn aborted: {event.reason}", style="yellow")
            return 1
    return None
