# ruff: noqa: RUF001  (the printed tables use multiplication signs and dashes on purpose)
"""Adoption at resume: how long ``start_session(resume=)`` takes on a tree still working.

Why: a host that restarts mid-turn resumes its threads with ``start_session(thread_id,
resume=cursor)``; when the thread's tree is still working, the call returns with the
thread ``running`` only once the run's output so far has been read back from the server
(the root's stored messages, then the tree's children breadth-first, each child's
messages) and emitted as events (``adapter/_turns/_adoption.py``). That read
sits on the restart path of every busy thread, so this script measures it:

1. **one big turn**: a root whose stored history holds ``--messages`` messages (earlier
   short turns, then the running turn's own ``--turn-steps`` tool steps) and whose
   running turn has ``--subagents`` task subagents, ``--hanging`` of them still working,
   the rest finished. Timed: ``start_session(resume=)`` from call to return (the adopted
   turn complete: its history read back and emitted). Next to it, on the same session
   once that turn is stopped: ``start_session(resume=)`` with nothing running (the
   resume alone, for scale). On the in-process fake with each ``--latencies-ms`` per
   request, and with ``--real`` on a real OpenCode server (``.opencode/``, scripted model).
2. **many threads**: ``--threads`` busy sessions (each a root with two earlier turns and
   a running turn whose one subagent hangs) resumed at once by one adapter
   (``asyncio.gather``): each call's time (median, worst), the wall time of the whole
   gather, and one thread alone for scale.

Every fixture is built by "another host" (plain HTTP to the server, latency 0 on the
fake), then the latency is set and a fresh adapter resumes it; that adapter first starts
a new thread, so its connection (health check, event stream) is not in the timings.
Requests per adoption are those the server received from the call until it returned (the
fake records them; on the real server a counting transport does); the turn's settle
check and the pending-request read that follow the return are counted apart. "complete"
counts the repeats whose events, by the time the call returned, held ``turn.started``
(``origin="adopted"``), one ``child.started`` and ``task.started`` per subagent and
every finished root tool call.

A script that prints figures, not a test: nothing is asserted. Only 127.0.0.1 is used.

    .venv/bin/python benchmarks/adoption.py                  # fake, L = 0, 5, 20 ms: ~1 min
    .venv/bin/python benchmarks/adoption.py --real           # + the real server: ~+2 min
    .venv/bin/python benchmarks/adoption.py --quick          # 2 repeats, 5 ms only
    .venv/bin/python benchmarks/adoption.py --profile        # cProfile of 100 threads, L = 0

Writes ``benchmarks/results/adoption.json`` (every repeat, requests by route).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import os
import pstats
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from adapter import (
    ChildStarted,
    Event,
    ItemCompleted,
    OpenCodeAdapter,
    OpenCodeClient,
    TurnStarted,
)
from adapter.testing import RealOpenCodeServer, ScriptedModelServer
from adapter.testing import model as real_model
from adapter.testing.fake import FakeOpenCodeServer, Hang, Task, Tasks, Text, Tool
from benchmarks._common import ROOT, machine, quiet_logging, table, write_json

_ID = re.compile(r"(ses|msg|prt|per|que)_[A-Za-z0-9]+")


@dataclass(frozen=True)
class Shape:
    """The big turn: root messages in all, tool steps of the running turn, subagents."""

    messages: int
    turn_steps: int
    subagents: int
    hanging: int

    @property
    def earlier_turns(self) -> int:
        # The running turn stores a user message and turn_steps + 1 assistant messages
        # (its first step writes text and calls bash; each later step does too; the last
        # calls the tasks); an earlier turn stores two (question, answer).
        return max(0, (self.messages - self.turn_steps - 2) // 2)


@dataclass
class Measured:
    """One ``start_session(resume=)``."""

    seconds: float
    status: str
    requests: int
    after: int
    routes: dict[str, int]
    events: int
    complete: bool
    extra: dict[str, Any] = field(default_factory=dict)


def _route(method: str, path: str) -> str:
    return f"{method} {_ID.sub('{id}', path)}"


class Counting(httpx.AsyncBaseTransport):
    """Counts the requests sent through it (the real server records none for us)."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.log: list[tuple[float, str]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.log.append((time.perf_counter(), _route(request.method, request.url.path)))
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


class Events:
    """Every canonical event of an adapter from now on, collected by a task."""

    def __init__(self, oc: OpenCodeAdapter) -> None:
        self.seen: list[Event] = []
        stream = oc.events()

        async def collect() -> None:
            async for event in stream:
                self.seen.append(event)

        self._task = asyncio.create_task(collect())

    async def settled(self) -> list[Event]:
        """The events emitted so far (the collector drains what is queued)."""
        for _ in range(3):
            await asyncio.sleep(0)
        return list(self.seen)

    async def close(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


def _complete(events: Sequence[Event], thread: str, shape: Shape, status: str) -> bool:
    mine = [e for e in events if e.thread_id == thread]
    adopted = any(isinstance(e, TurnStarted) and e.origin == "adopted" for e in mine)
    children = {e.session_id for e in mine if isinstance(e, ChildStarted)}
    tasks = {getattr(e, "session_id", None) for e in mine if e.type == "task.started"}
    bash = [e for e in mine if isinstance(e, ItemCompleted) and e.tool == "bash"]
    return (
        status == "running"
        and adopted
        and len(children) == shape.subagents
        and len(tasks) == shape.subagents
        and len(bash) >= shape.turn_steps
    )


def cursor(session_id: str) -> dict[str, Any]:
    return {"schema": 1, "session_id": session_id, "directory": None}


# -- the fake -------------------------------------------------------------------------------


def fake_scripts(fake: FakeOpenCodeServer, shape: Shape) -> None:
    fake.script("short", [Text("an answer to an earlier question")])
    fake.script(
        "hang",
        [Text("child reading"), Tool("read", {"filePath": "a.py"}, output="a"), Text("so"), Hang()],
    )
    fake.script(
        "done",
        [Text("child done"), Tool("read", {"filePath": "b.py"}, output="b"), Text("finished")],
    )
    steps: list[Any] = [Text("working on it")]
    for i in range(shape.turn_steps):
        steps += [Tool("bash", {"command": f"echo {i}"}, output=f"{i}\n"), Text(f"step {i} ok")]
    tasks = [
        Task(f"part {i}", "hang" if i < shape.hanging else "done") for i in range(shape.subagents)
    ]
    steps.append(Tasks(tasks))
    fake.script("run", steps)
    # The many-threads tree: text, a finished tool, one subagent that hangs.
    fake.script("small-child", [Text("sub work"), Hang()])
    fake.script(
        "small",
        [
            Text("thinking"),
            Tool("bash", {"command": "echo x"}, output="x\n"),
            Task("help", "small-child"),
        ],
    )


async def fake_prompt(http: httpx.AsyncClient, session_id: str, text: str) -> None:
    body = {"parts": [{"type": "text", "text": text}]}
    (await http.post(f"/session/{session_id}/prompt_async", json=body)).raise_for_status()


async def fake_session(
    fake: FakeOpenCodeServer, http: httpx.AsyncClient, earlier: int, script: str
) -> str:
    """A root with ``earlier`` finished short turns, then a running turn of ``script``."""
    response = await http.post("/session", json={"title": "another host's thread"})
    response.raise_for_status()
    sid = str(response.json()["id"])
    for i in range(earlier):
        await fake_prompt(http, sid, f"question {i} [[script:short]]")
        await fake.wait_until(lambda: not fake.sessions[sid].busy)
    await fake_prompt(http, sid, f"go [[script:{script}]]")
    return sid


async def fake_big(fake: FakeOpenCodeServer, shape: Shape) -> tuple[str, int, int]:
    """The big turn, working; returns (root, root messages, tree messages)."""
    async with fake.client() as http:
        root = await fake_session(fake, http, shape.earlier_turns, "run")
    size = 1 + shape.subagents
    await fake.wait_until(lambda: len(fake.tree(root)) == size, timeout=30)

    def settled() -> bool:
        busy = [s for s in fake.tree(root)[1:] if fake.sessions[s].busy]
        return len(busy) == shape.hanging

    await fake.wait_until(settled, timeout=30)
    for sid in fake.tree(root)[1:]:
        if fake.sessions[sid].busy:
            await fake.wait_hanging(sid)
    tree = fake.tree(root)
    return (
        root,
        len(fake.sessions[root].messages),
        sum(len(fake.sessions[s].messages) for s in tree),
    )


def _fake_counts(fake: FakeOpenCodeServer, until: float) -> tuple[int, int, dict[str, int]]:
    """(requests started by ``until`` (loop time), after it, routes of the former)."""
    before = [r for r in fake.requests if r.started_at <= until]
    routes = Counter(_route(r.method, r.path) for r in before)
    return len(before), len(fake.requests) - len(before), dict(routes)


async def fake_one_big(shape: Shape, latency: float, seed: int) -> tuple[Measured, Measured]:
    """Adopt the big turn once (then resume the same session idle, for scale)."""
    loop = asyncio.get_running_loop()
    fake = FakeOpenCodeServer(seed=seed)
    fake_scripts(fake, shape)
    root, root_messages, tree_messages = await fake_big(fake, shape)
    fake.latency = latency
    results: list[Measured] = []
    for case in ("adopt", "idle"):
        async with OpenCodeAdapter(fake.base_url, transport=fake.transport) as oc:
            events = Events(oc)
            await oc.start_session("warm-up")  # the connection, made once per adapter
            fake.reset_stats()
            t0 = time.perf_counter()
            info = await oc.start_session("t", resume=cursor(root))
            elapsed = time.perf_counter() - t0
            returned = loop.time()
            seen = await events.settled()
            await asyncio.sleep(0.05 + 5 * latency)  # the settle check that follows
            requests, after, routes = _fake_counts(fake, returned)
            complete = _complete(seen, "t", shape, info.status) if case == "adopt" else True
            results.append(
                Measured(
                    elapsed,
                    info.status,
                    requests,
                    after,
                    routes,
                    len(seen),
                    complete,
                    {"root_messages": root_messages, "tree_messages": tree_messages},
                )
            )
            if case == "adopt":
                await oc.interrupt_turn("t")  # the idle case resumes the stopped tree
            await events.close()
    await fake.aclose()
    return results[0], results[1]


async def fake_many(threads: int, latency: float, seed: int) -> dict[str, Any]:
    """``threads`` busy small trees resumed at once by one adapter."""
    loop = asyncio.get_running_loop()
    fake = FakeOpenCodeServer(seed=seed)
    fake_scripts(fake, Shape(0, 0, 1, 1))
    async with fake.client() as http:
        roots = [await fake_session(fake, http, 2, "small") for _ in range(threads)]
    for root in roots:
        await fake.wait_until(lambda r=root: len(fake.tree(r)) == 2)  # type: ignore[misc]
        await fake.wait_hanging(fake.tree(root)[1])
    fake.latency = latency
    times: list[float] = []
    statuses: Counter[str] = Counter()
    async with OpenCodeAdapter(fake.base_url, transport=fake.transport, on_close="detach") as oc:
        await oc.start_session("warm-up")  # the connection, made once
        fake.reset_stats()

        async def one(i: int, root: str) -> None:
            t0 = time.perf_counter()
            info = await oc.start_session(f"t{i}", resume=cursor(root))
            times.append(time.perf_counter() - t0)
            statuses[info.status] += 1

        t0 = time.perf_counter()
        await asyncio.gather(*(one(i, r) for i, r in enumerate(roots)))
        wall = time.perf_counter() - t0
        returned = loop.time()
        await asyncio.sleep(0.05 + 5 * latency)
        requests, after, routes = _fake_counts(fake, returned)
        peak = fake.max_in_flight
    await fake.aclose()
    return {
        "threads": threads,
        "wall_s": wall,
        "median_s": statistics.median(times),
        "worst_s": max(times),
        "running": statuses["running"],
        "requests": requests,
        "after": after,
        "routes": routes,
        "peak_in_flight": peak,
    }


# -- the real server ------------------------------------------------------------------------


class RealBench:
    """The big turn on ``opencode serve`` with the scripted model.

    The model picks a conversation's script by its first user message and the step by
    the number of assistant messages so far, so the root runs one script throughout:
    ``earlier_turns`` text answers (a turn each), then the running turn's bash steps and
    its task calls.
    """

    def __init__(self, shape: Shape, model: ScriptedModelServer, server: RealOpenCodeServer):
        self.shape = shape
        self.model = model
        self.server = server
        self.count = 0
        self.version: str | None = None
        self.bash = [
            real_model.ToolCalls([real_model.ToolCall("bash", {"command": f"echo {i}"})])
            for i in range(shape.turn_steps)
        ]
        model.script(
            "child-hang",
            [
                real_model.ToolCalls([real_model.ToolCall("bash", {"command": "echo c"})]),
                real_model.Hang(),
            ],
        )
        model.script(
            "child-done",
            [
                real_model.ToolCalls([real_model.ToolCall("bash", {"command": "echo d"})]),
                real_model.Text("finished"),
            ],
        )

    def client(self, **kwargs: Any) -> OpenCodeClient:
        return OpenCodeClient(self.server.base_url, directory=str(self.server.directory), **kwargs)

    async def build(self) -> tuple[str, list[str]]:
        shape = self.shape
        self.count += 1
        name = f"root-{self.count}"
        calls = [
            real_model.task_call(f"part {i}", "child-hang" if i < shape.hanging else "child-done")
            for i in range(shape.subagents)
        ]
        answers = [real_model.Text(f"answer {i}") for i in range(shape.earlier_turns)]
        self.model.script(name, [*answers, *self.bash, real_model.ToolCalls(calls)])
        async with self.client() as client:
            root = (await client.create_session(title=name)).id
            for i in range(shape.earlier_turns):
                marker = real_model.script_marker(name) if i == 0 else ""
                await client.prompt_async(root, f"question {i} {marker}")
                await _until(lambda: _idle(client, [root]), 30)
            marker = real_model.script_marker(name) if shape.earlier_turns == 0 else ""
            await client.prompt_async(root, f"go {marker}")
            tree: list[str] = [root]

            async def ready() -> bool:
                kids = [c.id for c in await client.children(root)]
                tree[1:] = kids
                statuses = await client.status()
                busy = [k for k in kids if k in statuses and statuses[k].is_busy]
                hanging = [r for r in self.model.requests if r.open and r.script == "child-hang"]
                return len(kids) == shape.subagents and len(busy) == shape.hanging == len(
                    {r.session_id for r in hanging if r.session_id in kids}
                )

            try:
                await _until(ready, 60)
            except TimeoutError:
                statuses = await client.status()
                states = {s: str(statuses[s].type) for s in tree if s in statuses}
                steps = [(r.script, r.step, r.kind, r.open) for r in self.model.requests[-15:]]
                raise RuntimeError(f"tree not ready: {states}; model: {steps}") from None
        return root, tree

    async def one(self) -> tuple[Measured, Measured]:
        root, tree = await self.build()
        async with self.client() as client:
            root_messages = len(await client.messages(root))
            tree_messages = sum([len(await client.messages(s)) for s in tree])
        results: list[Measured] = []
        for case in ("adopt", "idle"):
            counting = Counting(httpx.AsyncHTTPTransport())
            async with OpenCodeAdapter(
                self.server.base_url, directory=str(self.server.directory), transport=counting
            ) as oc:
                events = Events(oc)
                await oc.start_session("warm-up")  # the connection, made once
                counting.log.clear()
                self.version = oc.server_version
                t0 = time.perf_counter()
                info = await oc.start_session("t", resume=cursor(root))
                elapsed = time.perf_counter() - t0
                returned = time.perf_counter()
                seen = await events.settled()
                await asyncio.sleep(0.2)
                before = [route for at, route in counting.log if at <= returned]
                complete = (
                    _complete(seen, "t", self.shape, info.status) if case == "adopt" else True
                )
                results.append(
                    Measured(
                        elapsed,
                        info.status,
                        len(before),
                        len(counting.log) - len(before),
                        dict(Counter(before)),
                        len(seen),
                        complete,
                        {"root_messages": root_messages, "tree_messages": tree_messages},
                    )
                )
                await oc.interrupt_turn("t")
                await events.close()
        return results[0], results[1]


async def _idle(client: OpenCodeClient, sessions: Sequence[str]) -> bool:
    statuses = await client.status()
    return not any(s in statuses and statuses[s].is_busy for s in sessions)


async def _until(check: Callable[[], Awaitable[bool]], timeout: float) -> None:
    async with asyncio.timeout(timeout):
        while not await check():
            await asyncio.sleep(0.01)


# -- running and reporting ------------------------------------------------------------------


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def _summary(runs: Sequence[Measured], latency: float | None) -> dict[str, Any]:
    times = [r.seconds for r in runs]
    median = statistics.median(times)
    return {
        "median_s": median,
        "worst_s": max(times),
        "x_latency": None if not latency else median / latency,
        "requests": statistics.median([r.requests for r in runs]),
        "requests_after": statistics.median([r.after for r in runs]),
        "events": statistics.median([r.events for r in runs]),
        "complete": sum(r.complete for r in runs),
        "status": sorted({r.status for r in runs}),
        "routes": runs[0].routes,
        "root_messages": runs[0].extra["root_messages"],
        "tree_messages": runs[0].extra["tree_messages"],
        "runs": [{"seconds": r.seconds, "requests": r.requests, "events": r.events} for r in runs],
    }


async def big_section(args: argparse.Namespace, shape: Shape) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for latency_ms in args.latencies_ms:
        latency = latency_ms / 1000
        pairs = [await fake_one_big(shape, latency, seed=100 + i) for i in range(args.repeats)]
        for case, index in (("adopt", 0), ("idle resume", 1)):
            runs = [p[index] for p in pairs]
            rows.append(
                {
                    "server": "fake",
                    "latency_ms": latency_ms,
                    "case": case,
                    **_summary(runs, latency),
                }
            )
        print(f"  big turn, fake, L = {latency_ms:g} ms: done", file=sys.stderr)
    if args.real:
        rows += await real_section(args, shape)
    return rows


async def real_section(args: argparse.Namespace, shape: Shape) -> list[dict[str, Any]]:
    binary = ROOT / ".opencode"
    if not binary.exists():
        print("  no .opencode/ (make opencode): the real server is skipped", file=sys.stderr)
        return []
    rows: list[dict[str, Any]] = []
    with ScriptedModelServer() as model:
        server = RealOpenCodeServer(model.base_url, subagent_depth=3)
        await asyncio.to_thread(server.start)
        try:
            bench = RealBench(shape, model, server)
            started = time.perf_counter()
            pairs = []
            for i in range(args.real_repeats):
                pairs.append(await bench.one())
                print(
                    f"  big turn, real server: repeat {i + 1} "
                    f"({time.perf_counter() - started:.0f} s)",
                    file=sys.stderr,
                )
        finally:
            await asyncio.to_thread(server.close)
    for case, index in (("adopt", 0), ("idle resume", 1)):
        runs = [p[index] for p in pairs]
        rows.append(
            {
                "server": f"real {bench.version}",
                "latency_ms": None,
                "case": case,
                **_summary(runs, None),
            }
        )
    return rows


async def many_section(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for latency_ms in args.latencies_ms:
        for threads in sorted({1, args.threads}):
            runs = [
                await fake_many(threads, latency_ms / 1000, seed=200 + i)
                for i in range(args.repeats)
            ]
            rows.append(
                {
                    "latency_ms": latency_ms,
                    "threads": threads,
                    "median_s": statistics.median([r["median_s"] for r in runs]),
                    "worst_s": max(r["worst_s"] for r in runs),
                    "wall_median_s": statistics.median([r["wall_s"] for r in runs]),
                    "wall_worst_s": max(r["wall_s"] for r in runs),
                    "running": f"{sum(r['running'] for r in runs)}/{threads * len(runs)}",
                    "requests_per_thread": statistics.median([r["requests"] for r in runs])
                    / threads,
                    "after_per_thread": statistics.median([r["after"] for r in runs]) / threads,
                    "peak_in_flight": max(r["peak_in_flight"] for r in runs),
                    "runs": runs,
                }
            )
        print(f"  many threads, L = {latency_ms:g} ms: done", file=sys.stderr)
    return rows


def big_table(rows: Sequence[dict[str, Any]], repeats: int, real_repeats: int) -> str:
    headers = [
        "server",
        "L ms",
        "case",
        "median ms",
        "worst ms",
        "median × L",
        "requests",
        "+ after",
        "events",
        "root / tree messages",
        "complete",
    ]
    body = []
    for r in rows:
        n = real_repeats if r["latency_ms"] is None else repeats
        body.append(
            [
                r["server"],
                "–" if r["latency_ms"] is None else f"{r['latency_ms']:g}",
                r["case"],
                _ms(r["median_s"]),
                _ms(r["worst_s"]),
                "–" if r["x_latency"] is None else f"{r['x_latency']:.1f}",
                f"{r['requests']:g}",
                f"{r['requests_after']:g}",
                f"{r['events']:g}",
                f"{r['root_messages']} / {r['tree_messages']}",
                f"{r['complete']}/{n}" if r["case"] == "adopt" else "–",
            ]
        )
    return table(headers, body)


def many_table(rows: Sequence[dict[str, Any]]) -> str:
    headers = [
        "L ms",
        "threads",
        "per call median ms",
        "per call worst ms",
        "wall median ms",
        "wall worst ms",
        "running",
        "requests / thread",
        "+ after",
        "peak in flight",
    ]
    body = [
        [
            f"{r['latency_ms']:g}",
            r["threads"],
            _ms(r["median_s"]),
            _ms(r["worst_s"]),
            _ms(r["wall_median_s"]),
            _ms(r["wall_worst_s"]),
            r["running"],
            f"{r['requests_per_thread']:.1f}",
            f"{r['after_per_thread']:.1f}",
            r["peak_in_flight"],
        ]
        for r in rows
    ]
    return table(headers, body)


def profile_many(threads: int) -> str:
    """cProfile of ``threads`` resumed at once at L = 0 (the CPU cost, by function)."""
    profiler = cProfile.Profile()
    profiler.enable()
    asyncio.run(fake_many(threads, 0.0, seed=300))
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(40)
    return out.getvalue()


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    quiet_logging()
    shape = Shape(args.messages, args.turn_steps, args.subagents, args.hanging)
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    big = await big_section(args, shape) if "big" in args.sections else []
    many = await many_section(args) if "many" in args.sections else []
    return {
        "machine": machine(),
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
        "wall_s": time.perf_counter() - started,
        "shape": shape.__dict__,
        "repeats": args.repeats,
        "real_repeats": args.real_repeats,
        "big": big,
        "many": many,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 repeats, L = 5 ms only")
    parser.add_argument("--repeats", type=int, default=5, help="repeats per row (fake)")
    parser.add_argument(
        "--latencies-ms", type=float, nargs="+", default=[0.0, 5.0, 20.0], help="fake latencies"
    )
    parser.add_argument("--messages", type=int, default=200, help="root messages, big turn")
    parser.add_argument("--turn-steps", type=int, default=20, help="tool steps, running turn")
    parser.add_argument("--subagents", type=int, default=10)
    parser.add_argument("--hanging", type=int, default=5, help="subagents still working")
    parser.add_argument("--threads", type=int, default=100, help="threads resumed at once")
    parser.add_argument("--real", action="store_true", help="also the real OpenCode server")
    parser.add_argument("--real-repeats", type=int, default=3)
    parser.add_argument("--sections", default="big,many", help="comma-separated subset of big,many")
    parser.add_argument("--profile", action="store_true", help="cProfile many threads at L=0")
    args = parser.parse_args()
    if args.quick:
        args.repeats, args.latencies_ms, args.real_repeats = 2, [5.0], 1
    args.sections = set(args.sections.split(","))
    args.hanging = min(args.hanging, args.subagents)
    result = asyncio.run(main_async(args))
    if result["big"]:
        shape = result["shape"]
        print(
            f"\nOne big turn: {shape['messages']} root messages ({shape['turn_steps']} tool "
            f"steps in the running turn), {shape['subagents']} subagents "
            f"({shape['hanging']} working); median of {args.repeats} repeats on the fake, "
            f"{args.real_repeats} on the real server\n"
        )
        print(big_table(result["big"], args.repeats, args.real_repeats))
    if result["many"]:
        print(
            f"\n{args.threads} threads resumed at once (each: 2 earlier turns, a running turn "
            f"with one hanging subagent), one adapter, one fake server; {args.repeats} repeats\n"
        )
        print(many_table(result["many"]))
    print(
        f"\nload average {result['load_before']:.2f} before, {result['load_after']:.2f} after; "
        f"wall time {result['wall_s']:.0f} s"
    )
    if args.profile:
        text = profile_many(args.threads)
        result["profile"] = text
        print(f"\ncProfile, {args.threads} threads at L = 0 (cumulative):\n{text}")
    name = "adoption" + ("-quick" if args.quick else "")
    print(f"JSON: {write_json(name, result)}")


if __name__ == "__main__":
    main()
