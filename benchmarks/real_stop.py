"""Stop a real OpenCode tree three ways and time it, read from the server.

For nested ``task`` trees and API-created trees of growing size and depth,
each strategy stops a fresh, fully busy tree:

- ``root-only``: ``POST /session/{root}/abort`` and nothing else;
- ``walk-no-verify``: ``stop_tree(verify=False)`` (root first, then the walk);
- ``eager-walk-no-verify``: the same with ``eager_root_listing=True`` (the root's
  children are listed and stopped while the root abort is in flight);
- ``interrupt_turn``: the adapter's Stop (root abort raced against the
  acknowledgement, the eager walk, the verification pass, partial results).

Measured per run: time from the start of the stop until every tree session is
idle for good according to ``GET /session/status`` (polled every 5 ms until 1 s
after the call returned; "never" if some
stay busy), the time the call itself took, the model requests of the tree that
started while the call ran (each one an extra model step OpenCode began during
the stop: billed input tokens on a real provider), and those that started after
the call returned (within 1 s). Medians and ranges over repeated runs.

``--cost`` measures the extra model steps on their own, over many runs of the
shapes where OpenCode starts them: nested ``task`` chains, a ``task`` child (or
grandchild) blocked on a ``bash`` permission request, and API children. For
``interrupt_turn`` it also records whether the text of such a step reached the
caller as output of the stopped turn (``content.delta``) or its partial result.

    .venv/bin/python benchmarks/real_stop.py            # full (a few minutes)
    .venv/bin/python benchmarks/real_stop.py --quick    # fewer runs and sizes
    .venv/bin/python benchmarks/real_stop.py --cost [--quick]   # extra model steps
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from adapter import (
    Event,
    InterruptResult,
    OpenCodeAdapter,
    OpenCodeClient,
    TreeStopError,
    stop_tree,
)
from adapter.testing import RealOpenCodeServer, ScriptedModelServer
from adapter.testing.model import Hang, Text, ToolCall, ToolCalls, script_marker, task_call
from benchmarks._common import machine, quiet_logging, table, write_json

IDLE_DEADLINE = 3.0
AFTER_WINDOW = 1.0
STRATEGIES = ("root-only", "walk-no-verify", "eager-walk-no-verify", "interrupt_turn")
COST_STRATEGIES = ("root-only", "interrupt_turn")
# Subagents ask before running bash (a session's own "ask" rule is not inherited by the
# subagents its task tool creates: only deny and external_directory rules are, by source).
ASK_BASH = {"agent": {"general": {"permission": {"bash": "ask"}}}}
EXTRA = "EXTRA-STEP-TEXT"  # what an inner session's model says if it gets a step after its task


@dataclass(frozen=True)
class Shape:
    """A tree: ``kind`` task (subagents), perm (task subagents whose leaf waits on a
    ``bash`` permission request) or api (children by parentID); fan-out per level."""

    kind: str
    fanout: tuple[int, ...]

    @property
    def size(self) -> int:
        total, level = 1, 1
        for f in self.fanout:
            level *= f
            total += level
        return total

    @property
    def depth(self) -> int:
        return len(self.fanout)

    @property
    def label(self) -> str:
        return f"{self.kind} n={self.size} d={self.depth}"


FULL = [
    Shape("api", ()),
    Shape("api", (9,)),
    Shape("api", (3, 2)),
    Shape("api", (1, 1, 1, 1)),
    Shape("api", (7, 6)),
    Shape("task", (1,)),
    Shape("task", (1, 1, 1)),
    Shape("task", (3, 2)),
    Shape("task", (7, 6)),
]
QUICK = [Shape("api", (9,)), Shape("task", (1, 1, 1)), Shape("task", (3, 2))]
COST = [
    Shape("task", (1, 1)),
    Shape("task", (1, 1, 1)),
    Shape("perm", (1,)),
    Shape("perm", (1, 1)),
    Shape("api", (3,)),
]


class Bench:
    def __init__(self, model: ScriptedModelServer, server: RealOpenCodeServer) -> None:
        self.model = model
        self.server = server
        self.counter = 0
        self._http: httpx.AsyncClient | None = None
        # More strategies by name, for experiments: (client, root, tree sessions) -> stop.
        self.custom: dict[str, Callable[[OpenCodeClient, str, list[str]], Awaitable[object]]] = {}
        # Requests left pending by earlier runs (root-only stops reject nothing).
        self.ghosts: set[str] = set()

    def name(self, what: str) -> str:
        self.counter += 1
        return f"b{self.counter}-{what}"

    @property
    def http(self) -> httpx.AsyncClient:
        """Plain HTTP to the server, for what the adapter's client does not do."""
        if self._http is None:
            self._http = httpx.AsyncClient(
                base_url=self.server.base_url,
                headers={"x-opencode-directory": str(self.server.directory)},
                timeout=10.0,
                trust_env=False,
            )
        return self._http

    async def _wait_for_permissions(self, count: int) -> None:
        """Until ``count`` permission requests more than before are pending on the server."""
        async with asyncio.timeout(60):
            while True:
                pending = {str(r["id"]) for r in (await self.http.get("/permission")).json()}
                if len(pending - self.ghosts) >= count:
                    return
                await asyncio.sleep(0.02)

    async def build(
        self, oc: OpenCodeAdapter, client: OpenCodeClient, shape: Shape
    ) -> tuple[str, str, list[str]]:
        """A fully busy tree: every leaf's model call hangs. Returns (thread, root, sessions)."""
        thread = self.name("thread")
        hang = self.name("hang")
        self.model.script(hang, [Hang()])
        if shape.kind == "perm":
            # The leaves ask before running bash (the server's subagents ask: ASK_BASH).
            self.model.script(
                hang, [ToolCalls([ToolCall("bash", {"command": "echo leaf"})]), Text("ran")]
            )
        info = await oc.start_session(thread, title=thread)
        root = info.session_id
        if shape.kind in ("task", "perm"):
            scripts = [hang]
            for fan in reversed(shape.fanout):
                level = self.name("lvl")
                calls = ToolCalls([task_call(f"part {i}", scripts[-1]) for i in range(fan)])
                self.model.script(level, [calls, Text(f"{EXTRA} {level}")])
                scripts.append(level)
            await oc.send_turn(thread, "go " + script_marker(scripts[-1]))
            leaves = 1
            for f in shape.fanout:
                leaves *= f
            if shape.kind == "perm":
                await self._wait_for_permissions(leaves)
            else:
                await self.model.wait_for_async(
                    lambda reqs: len([r for r in reqs if r.script == hang and r.open]) >= leaves,
                    timeout=60,
                )
        else:
            await oc.send_turn(thread, "go " + script_marker(hang))
            parents = [root]
            for fan in shape.fanout:
                nxt = []
                for parent in parents:
                    for i in range(fan):
                        kid = await client.create_session(title=f"kid {i}", parent_id=parent)
                        await client.prompt_async(kid.id, "work " + script_marker(hang))
                        nxt.append(kid.id)
                parents = nxt
            await self.model.wait_for_async(
                lambda reqs: (
                    len({r.session_id for r in reqs if r.script == hang and r.open}) >= shape.size
                ),
                timeout=60,
            )
        sessions = [root]
        for sid in sessions:
            sessions.extend(c.id for c in await client.children(sid) if c.id not in sessions)
        return thread, root, sessions

    async def run(self, shape: Shape, strategy: str) -> dict[str, Any]:
        async with (
            OpenCodeAdapter(self.server.base_url, directory=str(self.server.directory)) as oc,
            OpenCodeClient(self.server.base_url, directory=str(self.server.directory)) as client,
        ):
            thread, root, tree = await self.build(oc, client, shape)
            assert len(tree) == shape.size, (len(tree), shape)
            seen: list[Event] = []
            collector = asyncio.create_task(_collect(oc, thread, seen))
            await asyncio.sleep(0)
            until = asyncio.Event()
            watcher = asyncio.create_task(_idle_time(client, tree, until))
            t0 = time.monotonic()
            error = None
            result: InterruptResult | None = None
            try:
                if strategy == "root-only":
                    await client.abort(root)
                elif strategy == "walk-no-verify":
                    await stop_tree(client, root, verify=False)
                elif strategy == "eager-walk-no-verify":
                    await stop_tree(client, root, verify=False, eager_root_listing=True)
                elif strategy in self.custom:
                    await self.custom[strategy](client, root, tree)
                else:
                    result = await oc.interrupt_turn(thread)
            except TreeStopError as exc:
                error = str(exc)
            returned = time.monotonic()
            await asyncio.sleep(AFTER_WINDOW)
            until.set()
            idle_at = await watcher
            started = self.model.requests_after(t0, session_ids=tree)
            during = [r for r in started if r.started_at <= returned]
            late = [r for r in started if r.started_at > returned]
            # Leave nothing running for the next run.
            await oc.interrupt_turn(thread)
            collector.cancel()
            await asyncio.gather(collector, return_exceptions=True)
            self.ghosts |= {str(r["id"]) for r in (await self.http.get("/permission")).json()}
        emitted = [e for e in seen if e.type == "content.delta" and EXTRA in repr(e)]
        return {
            "shape": shape.label,
            "strategy": strategy,
            "sessions": len(tree),
            "call_ms": (returned - t0) * 1000,
            "idle_ms": None if idle_at is None else (idle_at - t0) * 1000,
            "during_requests": len(during),
            "during_after_stop_ms": [round((r.started_at - t0) * 1000, 1) for r in during],
            "during_sessions": ["root" if r.session_id == root else "child" for r in during],
            "late_requests": len(late),
            "extra_text_emitted": bool(emitted),
            "extra_text_in_partial": result is not None and EXTRA in result.partial.text,
            "error": error,
        }

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()


async def _collect(oc: OpenCodeAdapter, thread: str, into: list[Event]) -> None:
    """Every canonical event of ``thread`` from now on (cancelled by the caller)."""
    async for event in oc.events():
        if event.thread_id == thread:
            into.append(event)


async def _idle_time(client: OpenCodeClient, tree: list[str], until: asyncio.Event) -> float | None:
    """When the tree went idle for good: the first all-idle poll after the last busy one.

    A root can go busy again after an idle (one more model step), so the first
    idle observation is not enough; polling goes on until ``until`` is set.
    None if some session was still busy at the end.
    """
    members = set(tree)
    idle_since: float | None = None
    deadline = time.monotonic() + IDLE_DEADLINE + AFTER_WINDOW
    while time.monotonic() < deadline:
        statuses = await client.status()
        now = time.monotonic()
        if any(statuses.get(s) is not None and statuses[s].is_busy for s in members):
            idle_since = None
        elif idle_since is None:
            idle_since = now
        if until.is_set():
            break
        await asyncio.sleep(0.005)
    return idle_since


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    idle = [r["idle_ms"] for r in rows if r["idle_ms"] is not None]
    calls = [r["call_ms"] for r in rows]
    return {
        "runs": len(rows),
        "idle_median_ms": statistics.median(idle) if idle else None,
        "idle_range_ms": [min(idle), max(idle)] if idle else None,
        "never_idle": sum(1 for r in rows if r["idle_ms"] is None),
        "call_median_ms": statistics.median(calls),
        "late_requests": sum(r["late_requests"] for r in rows),
        "during_requests": sum(r["during_requests"] for r in rows),
        "runs_with_during_requests": sum(1 for r in rows if r["during_requests"]),
        "extra_text_emitted": sum(1 for r in rows if r["extra_text_emitted"]),
        "extra_text_in_partial": sum(1 for r in rows if r["extra_text_in_partial"]),
        "errors": sum(1 for r in rows if r["error"]),
    }


async def main_async(args: argparse.Namespace) -> None:
    quiet_logging()
    strategies: tuple[str, ...]
    if args.cost:
        shapes, strategies = COST, COST_STRATEGIES
        runs = args.runs or (5 if args.quick else 20)
    else:
        shapes, strategies = (QUICK if args.quick else FULL), STRATEGIES
        runs = args.runs or (2 if args.quick else 3)
    results: list[dict[str, Any]] = []
    with ScriptedModelServer() as model:
        server = RealOpenCodeServer(
            model.base_url, subagent_depth=5, config_overrides=ASK_BASH if args.cost else None
        )
        await asyncio.to_thread(server.start)
        bench = Bench(model, server)
        try:
            await bench.run(Shape("api", (1,)), "interrupt_turn")  # warm-up: first prompt is slow
            for shape in shapes:
                for strategy in strategies:
                    rows = [await bench.run(shape, strategy) for _ in range(runs)]
                    results.append(
                        {"shape": shape.label, "strategy": strategy, **_summary(rows), "rows": rows}
                    )
                    print(f"  {shape.label:<18} {strategy:<15} done", file=sys.stderr)
        finally:
            await bench.aclose()
            await asyncio.to_thread(server.close)
    print(_cost_table(results) if args.cost else _table(results))
    name = "real_stop" + ("-cost" if args.cost else "") + ("-quick" if args.quick else "")
    path = write_json(name, {"machine": machine(), "runs": runs, "results": results})
    print(f"\nJSON: {path}")


def _table(results: list[dict[str, Any]]) -> str:
    headers = [
        "tree",
        "strategy",
        "all idle after (median, range) ms",
        "never idle",
        "call ms",
        "model requests during stop",
        "late model requests",
    ]
    body = []
    for r in results:
        idle = (
            f"{r['idle_median_ms']:.0f} ({r['idle_range_ms'][0]:.0f}–{r['idle_range_ms'][1]:.0f})"  # noqa: RUF001
            if r["idle_median_ms"] is not None
            else "never"
        )
        body.append(
            [
                r["shape"],
                r["strategy"],
                idle,
                f"{r['never_idle']}/{r['runs']}",
                f"{r['call_median_ms']:.0f}",
                r["during_requests"],
                r["late_requests"],
            ]
        )
    return table(headers, body)


def _cost_table(results: list[dict[str, Any]]) -> str:
    headers = [
        "tree",
        "strategy",
        "runs with model requests during stop",
        "requests during stop",
        "requests in the 1 s after",
        "call ms (median)",
        "all idle after ms (median)",
        "extra text emitted / in partial",
    ]
    body = []
    for r in results:
        idle = f"{r['idle_median_ms']:.0f}" if r["idle_median_ms"] is not None else "never"
        body.append(
            [
                r["shape"],
                r["strategy"],
                f"{r['runs_with_during_requests']}/{r['runs']}",
                r["during_requests"],
                r["late_requests"],
                f"{r['call_median_ms']:.0f}",
                idle,
                f"{r['extra_text_emitted']}/{r['extra_text_in_partial']}",
            ]
        )
    return table(headers, body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--runs", type=int)
    parser.add_argument("--cost", action="store_true", help="extra model steps during a stop")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
