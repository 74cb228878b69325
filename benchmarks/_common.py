# ruff: noqa: RUF001  (the printed tables use multiplication signs and dashes on purpose)
"""Helpers shared by the benchmark scripts: machine facts, tables, JSON output.

Benchmarks are scripts that print figures; they are not tests and assert nothing.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
T = TypeVar("T")


def quiet_logging() -> None:
    """Filter the library's structlog output at WARNING, as a host would.

    Left unconfigured, structlog prints every event, DEBUG included, to stdout:
    one line per request would be measured along with the walk.
    """
    from adapter import configure_logging

    configure_logging(level=logging.WARNING)


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mhz = None
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("cpu MHz"):
                    mhz = float(line.split(":", 1)[1])
                    break
    except (OSError, ValueError):
        pass
    versions: dict[str, str] = {}
    for name in ("httpx", "httpx-sse", "h11", "structlog", "tenacity"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "missing"
    return {
        "nproc": os.cpu_count(),
        "cpu_model": cpu,
        "cpu_mhz": mhz,
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "packages": versions,
    }


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown table (also readable on a terminal)."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, c in enumerate(row):
            widths[i] = max(widths[i], len(c))
    right = [
        all(_numeric(row[i]) for row in cells if row[i] not in ("", "–")) and bool(cells)
        for i in range(len(headers))
    ]

    def fmt(row: Sequence[str]) -> str:
        parts = [c.rjust(widths[i]) if right[i] else c.ljust(widths[i]) for i, c in enumerate(row)]
        return "| " + " | ".join(parts) + " |"

    sep = "|" + "|".join(
        ("-" * (w + 1) + ":") if right[i] else ("-" * (w + 2)) for i, w in enumerate(widths)
    )
    return "\n".join([fmt(list(headers)), sep + "|", *(fmt(r) for r in cells)])


def _cell(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _numeric(text: str) -> bool:
    t = text.replace(",", "").replace("×", "").replace("%", "").strip()
    try:
        float(t)
    except ValueError:
        return False
    return True


def arguments(doc: str | None, *, quick: str, output: str) -> argparse.ArgumentParser:
    """The command line every figure-writing benchmark starts from.

    The description is the first paragraph of the script's docstring; ``--quick``
    (help: ``quick``) and ``--output`` (help: ``output``) mean the same in each.
    """
    parser = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=quick)
    parser.add_argument("--output", default=None, help=output)
    return parser


def write_json(name: str, data: dict[str, Any]) -> Path:
    """Write ``data`` to ``benchmarks/results/NAME`` (``.json`` added when missing)."""
    if not name.endswith(".json"):
        name += ".json"
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / name
    path.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
    return path


def say_written(path: Path) -> None:
    """Tell where the results went (relative to the checkout when inside it), on stderr."""
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    print(f"results written to {shown}", file=sys.stderr)


def kib(nbytes: float | None) -> str:
    return "–" if nbytes is None else f"{nbytes / 1024:,.0f}"


# (path fragment, component): the first match names a frame's component; frames
# that match none (the standard library: json aside, urllib, http.cookiejar, re...)
# count for the component of their caller.
COMPONENTS: tuple[tuple[str, str], ...] = (
    ("/httpx_sse/", "httpx-sse (SSE parsing)"),
    ("/httpx/", "httpx (request building, send, response)"),
    ("/h11/", "h11"),
    ("adapter/_stop/_stop_tree.py", "adapter/_stop/_stop_tree.py (the walk)"),
    ("adapter/_adapter.py", "adapter/_adapter.py (routing, mapping)"),
    ("/_partial_", "adapter/*/_partial_*.py (partial results)"),
    ("adapter/_client/_native.py", "adapter/_client/_native.py (events parsed once)"),
    ("adapter/_client/", "adapter/_client/ (OpenCodeClient)"),
    (
        "adapter/_types/_events.py",
        "adapter/_types/_events.py + _stream/_hub.py (events, fan-out)",
    ),
    (
        "adapter/_stream/_hub.py",
        "adapter/_types/_events.py + _stream/_hub.py (events, fan-out)",
    ),
    ("/adapter/", "adapter: ids, models, logging"),
    ("/structlog/", "structlog"),
    ("/benchmarks/", "the benchmark itself (simulated server, consumer)"),
    ("/json/", "json (stdlib decoder)"),
    ("/msgspec/", "msgspec (JSON decoder)"),
    ("/asyncio/", "asyncio event loop (scheduling, tasks, queues)"),
)


def _component(path: str) -> str | None:
    p = path.replace("\\", "/")
    for fragment, name in COMPONENTS:
        if fragment in p:
            return name
    return None


def aggregate_profile(root: Any) -> list[tuple[str, float]]:
    """Self time per component of a pyinstrument frame tree, largest first."""
    totals: dict[str, float] = {}
    stack: list[tuple[Any, str]] = [(root, "other")]
    while stack:
        frame, inherited = stack.pop()
        own = _component(frame.file_path or "") or inherited
        if frame.is_synthetic_leaf:
            totals[own] = totals.get(own, 0.0) + frame.time
        for child in frame.children:
            stack.append((child, own))
    return sorted(totals.items(), key=lambda kv: -kv[1])


async def profiled(
    work: Callable[[], Awaitable[T]], text_file: str
) -> tuple[T, dict[str, Any]] | None:
    """Run ``work`` once under pyinstrument; None (and a line on stderr) without it.

    Returns what ``work`` returned and the profile: the time under the profiler,
    the call tree's file (written to ``benchmarks/results/TEXT_FILE``) and the
    self time per component of ``COMPONENTS``, largest first.
    """
    try:
        from pyinstrument import Profiler
    except ImportError:
        print("pyinstrument is not installed: skipping the profile", file=sys.stderr)
        return None
    profiler = Profiler(interval=0.0005, async_mode="disabled")
    profiler.start()
    t0 = time.perf_counter()
    result = await work()
    elapsed = time.perf_counter() - t0
    profiler.stop()
    session = profiler.last_session
    assert session is not None
    components = aggregate_profile(session.root_frame())
    total = sum(t for _, t in components)
    out = RESULTS / text_file
    RESULTS.mkdir(parents=True, exist_ok=True)
    out.write_text(profiler.output_text(unicode=True, color=False), encoding="utf-8")
    return result, {
        "elapsed_under_profiler_s": elapsed,
        "profile_text": str(out.relative_to(ROOT)),
        "components": [
            {"component": c, "seconds": t, "share": t / total if total else 0.0}
            for c, t in components
        ],
    }


def profile_section(heading: str, caption: str, profile: dict[str, Any]) -> list[str]:
    """The lines of a Markdown section: the self time per component of a ``profiled`` run."""
    components = table(
        ["component", "self time s", "share"],
        [
            [c["component"], f"{c['seconds']:.3f}", f"{c['share'] * 100:.1f} %"]
            for c in profile["components"]
        ],
    )
    return ["", f"## {heading}", "", caption, "", components]
