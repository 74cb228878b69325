"""Benchmark what well-formed, locals-free logging and CLI output cost.

``configure_logging`` adds one processor (every string of the event made well
formed, ``adapter._base._unicode``), a locals-free exception formatter and, on the
console, one scan of the rendered line. This prints the time per log line of the
shipped chain next to the bare structlog chain it replaced (same renderer, no
well-formed step), for a typical request line, a line with a lone surrogate and a
line with a traceback; and the time per write of the CLI's well-formed stream
against a plain ``write``. Lines go to an in-memory stream: the figure is the
formatting, not the terminal.

Run: ``.venv/bin/python benchmarks/log_lines.py [--lines N]``.
"""

from __future__ import annotations

import argparse
import io
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import structlog

from adapter._logging import configure_logging
from adapter.cli._render import WellFormedStream
from benchmarks._common import machine, table

Format = Literal["console", "json"]
TYPICAL = {
    "operation": "children",
    "session_id": "ses_dd7efa1f9ffeZiI27qUHW4nN7U",
    "status": 200,
    "attempt": 1,
    "duration_ms": 3.21,
}


def _shipped(fmt: Format, stream: io.StringIO) -> None:
    configure_logging(format=fmt, file=stream)


def _bare(fmt: Format, stream: io.StringIO) -> None:
    """The chain the shipped one replaced: no well-formed step, structlog's default tracebacks."""
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        logger_factory=structlog.PrintLoggerFactory(file=stream),
        cache_logger_on_first_use=False,
    )


def _per_call(fn: Callable[[], object], count: int) -> float:
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(count):
            fn()
        best = min(best, time.perf_counter() - started)
    return best / count * 1e6


def _fail() -> None:
    raise RuntimeError("boom")


def log_rows(lines: int) -> list[list[Any]]:
    rows: list[list[Any]] = []
    formats: tuple[Format, ...] = ("console", "json")
    for fmt in formats:
        setups: list[tuple[str, Callable[[Format, io.StringIO], None]]] = [
            ("before (bare)", _bare),
            ("shipped", _shipped),
        ]
        for name, setup in setups:
            stream = io.StringIO()
            setup(fmt, stream)
            log = structlog.get_logger("adapter.client")

            def typical(log: Any = log) -> None:
                log.info("opencode.request", **TYPICAL)

            def surrogate(log: Any = log) -> None:
                log.info("opencode.request", title="cut \ud83d", **TYPICAL)

            def exception(log: Any = log) -> None:
                try:
                    _fail()
                except RuntimeError:
                    log.error("failed", exc_info=True)

            cases = [typical, exception]
            if name == "shipped" or fmt == "json":  # the bare console chain writes it raw
                cases.insert(1, surrogate)
            cells = {c.__name__: f"{_per_call(c, lines):.1f}" for c in cases}
            if name != "shipped" and fmt == "json":  # it wrote `"exc_info": true`, no traceback
                cells["exception"] += " (not rendered)"
            rows.append(
                [
                    fmt,
                    name,
                    cells["typical"],
                    cells.get("surrogate", "crashes on a strict stream"),
                    cells["exception"],
                ]
            )
    structlog.reset_defaults()
    return rows


def stream_rows(writes: int) -> list[list[Any]]:
    target = io.StringIO()
    wrapped = WellFormedStream(target)
    delta = "x" * 40 + " streamed text "
    return [
        ["plain write", f"{_per_call(lambda: target.write(delta), writes):.2f}"],
        ["WellFormedStream.write", f"{_per_call(lambda: wrapped.write(delta), writes):.2f}"],
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lines", type=int, default=5000)
    args = parser.parse_args()
    facts = machine()
    print(f"python {facts['python']} on {facts['cpu_model']} ({facts['nproc']} CPUs)")
    print(f"\nmicroseconds per log line (best of 3 x {args.lines} lines):\n")
    print(
        table(
            ["format", "chain", "typical", "with a lone surrogate", "with a traceback"],
            log_rows(args.lines),
        )
    )
    writes = args.lines * 20
    print(f"\nmicroseconds per CLI write of a 55-character delta (best of 3 x {writes}):\n")
    print(table(["stream", "µs"], stream_rows(writes)))


if __name__ == "__main__":
    main()
