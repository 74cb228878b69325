# ruff: noqa: RUF001  (the printed tables use multiplication signs and dashes on purpose)
"""Benchmark ``stop_tree`` against other ways of walking a session tree (issue 7).

Everything runs in one process, against a simulated OpenCode session API where
every request takes a configurable latency. Every strategy drives the real
``adapter.OpenCodeClient`` (one client per backend, shared by all strategies)
over the same tree, so the only thing that differs is the schedule of requests.

Strategies:

* ``stop_tree`` -- the project's walk, with ``verify=False`` and with the
  default verification pass (one extra ``GET /session/status``);
* ``reference`` -- a Python port of the reference walk (t3code #9005): abort a
  node, list its children, visit the new children 8 at a time per parent, one
  shared semaphore of 8 around every request;
* ``level-bfs`` -- breadth-first, one level at a time (each session of a level
  is aborted then listed, 8 requests at most in flight, and the next level
  starts only when the whole level is done);
* ``sequential`` -- one request at a time;
* ``root-only`` -- aborts the root and nothing else (incomplete; for scale);
* ``ideal`` -- the same R requests as ``stop_tree(verify=False)`` issued by P
  always-busy workers with no dependencies between them: what a perfect
  scheduler could reach on this client and this server.

The analytic bound is ``max(ceil(R / P) * L, 2 * (depth + 1) * L)``: P
permits can overlap at most P requests, and the deepest session needs its
ancestors' abort and listing, one after the other, before its own.

The "optimal schedule" is the best makespan a walk that knew the tree in
advance could reach (see ``optimal_steps``): the part of the bound that the
tree's shape, not the scheduler, makes unreachable.

Run ``python benchmarks/stop_tree.py --quick`` (about a minute) or without
``--quick`` for the full set (about 4.5 minutes on 2 cores); ``--sections``
runs a subset, ``--replot`` only redraws the plot from the last results.
Figures are printed as Markdown tables and written to
``benchmarks/results/stop_tree.json``; the plot goes to
``docs/benchmarks-stop-tree.png`` when matplotlib is installed (otherwise the
script says so and goes on), the pyinstrument profile of the L = 0 case to
``benchmarks/results/stop_tree_profile.txt`` when pyinstrument is installed.
See ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import heapq
import json
import math
import os
import random
import sys
import time
import tracemalloc
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
from _common import (
    RESULTS,
    ROOT,
    aggregate_profile,
    kib,
    machine,
    quiet_logging,
    table,
    write_json,
)

from adapter import NotFoundError, OpenCodeClient, OpenCodeError, stop_tree
from adapter.testing import FakeOpenCodeServer

P = 8  # permits: stop_tree's default concurrency, and the reference's semaphore
T = TypeVar("T")
PLOT = ROOT / "docs" / "benchmarks-stop-tree.png"
_JSON_HEADERS = {"content-type": "application/json"}

# --------------------------------------------------------------------------- trees


@dataclass
class Tree:
    """A session graph as the server would report it: id -> listed children."""

    name: str
    root: str
    children: dict[str, list[str]]
    family: str  # "wide", "deep", "bushy", "random", "graph"
    order: list[str] = field(default_factory=list)  # breadth-first, each session once
    depth: dict[str, int] = field(default_factory=dict)
    parent: dict[str, str] = field(default_factory=dict)  # who discovers it first

    def __post_init__(self) -> None:
        self.depth = {self.root: 0}
        self.order = [self.root]
        queue = deque([self.root])
        while queue:
            sid = queue.popleft()
            for child in self.children.get(sid, ()):
                if child not in self.depth:
                    self.depth[child] = self.depth[sid] + 1
                    self.parent[child] = sid
                    self.order.append(child)
                    queue.append(child)

    @property
    def n(self) -> int:
        return len(self.order)

    @property
    def max_depth(self) -> int:
        return max(self.depth.values())

    @property
    def requests(self) -> int:
        """R: one abort and one listing per session."""
        return 2 * self.n

    def jobs(self) -> list[tuple[str, str]]:
        """The R requests of the walk, in breadth-first order (for the ideal schedule)."""
        return [(kind, sid) for sid in self.order for kind in ("abort", "children")]


def optimal_steps(tree: Tree, permits: int = P) -> int:
    """The makespan, in request latencies, of the best schedule any walk could have.

    The walk's requests form an out-tree: abort(s) -> children(s) -> abort(each
    child). With unit-time requests and ``permits`` machines, the optimum is
    found by Hu's highest-level-first rule run on the reversed tree (an
    in-tree), whose makespan equals the out-tree's. It knows the whole tree in
    advance, which no real walk does: a lower bound that respects dependencies,
    unlike ``ceil(R / P)``. (For a graph: over its breadth-first spanning tree.)
    """
    index = {sid: i for i, sid in enumerate(tree.order)}
    jobs = 2 * tree.n
    parent_job = [-1] * jobs  # job 2i aborts order[i], job 2i + 1 lists it
    for i, sid in enumerate(tree.order):
        parent_job[2 * i + 1] = 2 * i
        if i:
            parent_job[2 * i] = 2 * index[tree.parent[sid]] + 1
    level = [0] * jobs
    waiting = [0] * jobs
    for j in range(jobs):  # a job's parent always has a smaller number
        p = parent_job[j]
        level[j] = 1 if p < 0 else level[p] + 1
        if p >= 0:
            waiting[p] += 1
    ready = [(-level[j], j) for j in range(jobs) if waiting[j] == 0]
    heapq.heapify(ready)
    steps = 0
    while ready:
        batch = [heapq.heappop(ready) for _ in range(min(permits, len(ready)))]
        steps += 1
        for _, j in batch:
            p = parent_job[j]
            if p >= 0:
                waiting[p] -= 1
                if waiting[p] == 0:
                    heapq.heappush(ready, (-level[p], p))
    return steps


def _ids(tag: str, n: int) -> list[str]:
    return [f"ses_{tag}{i:06d}" for i in range(n)]


def wide(n_children: int) -> Tree:
    ids = _ids("w", n_children + 1)
    kids: dict[str, list[str]] = {sid: [] for sid in ids}
    kids[ids[0]] = ids[1:]
    return Tree(f"wide-{n_children}", ids[0], kids, "wide")


def deep(n: int) -> Tree:
    ids = _ids("d", n)
    kids = {sid: ids[i + 1 : i + 2] for i, sid in enumerate(ids)}
    return Tree(f"deep-{n}", ids[0], kids, "deep")


def bushy(branching: int, depth: int) -> Tree:
    n = sum(branching**k for k in range(depth + 1))
    ids = _ids("b", n)
    kids: dict[str, list[str]] = {sid: [] for sid in ids}
    for i in range(1, n):
        kids[ids[(i - 1) // branching]].append(ids[i])
    return Tree(f"bushy-{branching}^{depth}", ids[0], kids, "bushy")


def _random_parents(n: int, rng: random.Random) -> list[int]:
    # A random recursive tree: each session's parent is uniform among the earlier
    # ones, so branching varies from 0 to ~ln(n) per node and depth is ~e*ln(n).
    return [-1] + [rng.randrange(i) for i in range(1, n)]


def random_tree(n: int, seed: int = 7) -> Tree:
    rng = random.Random(seed * 1_000_003 + n)
    ids = _ids("r", n)
    kids: dict[str, list[str]] = {sid: [] for sid in ids}
    for i, parent in enumerate(_random_parents(n, rng)):
        if parent >= 0:
            kids[ids[parent]].append(ids[i])
    return Tree(f"random-{n}", ids[0], kids, "random")


def diamonds(n: int, seed: int = 11) -> Tree:
    """A random tree plus shared children (diamonds) and edges back up (cycles).

    10% of the sessions are also listed by a second, earlier session (never one
    of their descendants: a diamond); 2% list one of their own ancestors (a
    cycle; some list the root), and 0.5% list themselves.
    """
    rng = random.Random(seed)
    ids = _ids("g", n)
    parents = _random_parents(n, rng)
    kids: dict[str, list[str]] = {sid: [] for sid in ids}
    for i, parent in enumerate(parents):
        if parent >= 0:
            kids[ids[parent]].append(ids[i])
    for i in rng.sample(range(2, n), n // 10):
        other = rng.randrange(i)  # earlier index: never a descendant in this construction
        if other != parents[i] and ids[i] not in kids[ids[other]]:
            kids[ids[other]].append(ids[i])
    for i in rng.sample(range(1, n), n // 50):
        ancestor, steps = i, rng.randint(1, 6)
        while steps and parents[ancestor] >= 0:
            ancestor, steps = parents[ancestor], steps - 1
        kids[ids[i]].append(ids[ancestor])
    for i in rng.sample(range(1, n), max(1, n // 200)):
        kids[ids[i]].append(ids[i])
    return Tree(f"diamonds+cycles-{n}", ids[0], kids, "graph")


# --------------------------------------------------------------------------- backends


class SimServer(httpx.AsyncBaseTransport):
    """The minimal simulated session API: abort, children, status; latency L (+ jitter).

    Children bodies are encoded once, up front, with the fields a real server
    sends; every request sleeps ``latency + uniform(0, jitter)`` before its answer.
    In-flight and request counts are taken here, at the server side.
    """

    def __init__(self, tree: Tree) -> None:
        self.tree = tree
        self.bodies: dict[str, bytes] = {}
        created = {sid: 1_795_965_973_000 + i for i, sid in enumerate(tree.order)}
        for sid, kids in tree.children.items():
            self.bodies[sid] = json.dumps(
                [
                    {
                        "id": kid,
                        "slug": "lucky-knight",
                        "version": "1.18.34",
                        "projectID": "global",
                        "directory": "/home/dev/project",
                        "parentID": sid,
                        "title": f"Child session {kid[-6:]}",
                        "time": {"created": created.get(kid, 0), "updated": created.get(kid, 0)},
                    }
                    for kid in kids
                ],
                separators=(",", ":"),
            ).encode()
        self.latency = 0.0
        self.jitter = 0.0
        self.rng = random.Random(0)
        self.requests = 0
        self.in_flight = 0
        self.peak = 0
        self.aborted: set[str] = set()

    def configure(self, latency: float, jitter: float, seed: int) -> None:
        self.latency, self.jitter = latency, jitter
        self.rng = random.Random(seed)  # same latency sequence for every strategy

    def reset_stats(self) -> None:
        self.requests = self.peak = 0
        self.aborted = set()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        self.in_flight += 1
        if self.in_flight > self.peak:
            self.peak = self.in_flight
        try:
            delay = self.latency
            if self.jitter:
                delay += self.rng.random() * self.jitter
            await asyncio.sleep(delay)
            parts = request.url.path.split("/")
            if len(parts) == 4 and parts[1] == "session":
                sid = parts[2]
                if parts[3] == "abort" and request.method == "POST":
                    self.aborted.add(sid)
                    return httpx.Response(200, content=b"true", headers=_JSON_HEADERS)
                if parts[3] == "children" and sid in self.bodies:
                    return httpx.Response(200, content=self.bodies[sid], headers=_JSON_HEADERS)
            elif request.url.path == "/session/status":
                return httpx.Response(200, content=b"{}", headers=_JSON_HEADERS)
            body = b'{"name":"NotFoundError","data":{"message":"Session not found"}}'
            return httpx.Response(404, content=body, headers=_JSON_HEADERS)
        finally:
            self.in_flight -= 1


class Backend:
    """A simulated server with one real ``OpenCodeClient`` on it."""

    name = "sim"

    def __init__(self, tree: Tree) -> None:
        self.tree = tree
        self.server = SimServer(tree)
        self.client = OpenCodeClient("http://sim-opencode", transport=self.server)
        self.root = tree.root
        self.jobs = tree.jobs()

    def configure(self, latency: float, jitter: float, seed: int) -> None:
        self.server.configure(latency, jitter, seed)

    def reset_stats(self) -> None:
        self.server.reset_stats()

    def stats(self) -> tuple[int, int, int]:
        """(requests, peak in flight, distinct sessions aborted) since the reset."""
        return self.server.requests, self.server.peak, len(self.server.aborted)

    async def aclose(self) -> None:
        await self.client.aclose()


class FakeBackend(Backend):
    """The same tree in ``adapter.testing.FakeOpenCodeServer`` (trees only: no diamonds)."""

    name = "fake"

    def __init__(self, tree: Tree) -> None:
        if tree.family == "graph":
            raise ValueError("the fake cannot express diamonds or cycles")
        self.tree = tree
        self.fake = FakeOpenCodeServer(seed=3)
        parent_of = {kid: sid for sid in tree.order for kid in tree.children[sid]}
        mapping: dict[str, str] = {}
        for sid in tree.order:
            parent = parent_of.get(sid)
            mapping[sid] = self.fake.add_session(
                parent_id=mapping[parent] if parent else None, title=sid
            )
        self.root = mapping[tree.root]
        self.jobs = [(kind, mapping[sid]) for kind, sid in tree.jobs()]
        self.client = OpenCodeClient(self.fake.base_url, transport=self.fake.transport)
        self._before: dict[str, int] = {}

    def configure(self, latency: float, jitter: float, seed: int) -> None:
        self.fake.latency, self.fake.jitter = latency, jitter

    def reset_stats(self) -> None:
        self.fake.reset_stats()
        self._before = {sid: s.abort_count for sid, s in self.fake.sessions.items()}

    def stats(self) -> tuple[int, int, int]:
        aborted = sum(
            1 for sid, s in self.fake.sessions.items() if s.abort_count > self._before.get(sid, 0)
        )
        return len(self.fake.requests), self.fake.max_in_flight, aborted

    async def aclose(self) -> None:
        await self.client.aclose()
        await self.fake.aclose()


# --------------------------------------------------------------------------- strategies

Strategy = Callable[[Backend], Awaitable[None]]


async def run_stop_tree(backend: Backend, *, verify: bool) -> None:
    await stop_tree(backend.client, backend.root, concurrency=P, timeout=3600, verify=verify)


async def run_ideal(backend: Backend) -> None:
    client = backend.client
    jobs = iter(backend.jobs)

    async def worker() -> None:
        for kind, sid in jobs:
            if kind == "abort":
                await client.abort(sid)
            else:
                await client.children(sid)

    async with asyncio.TaskGroup() as tg:
        for _ in range(P):
            tg.create_task(worker())


async def run_sequential(backend: Backend) -> None:
    client = backend.client
    seen = {backend.root}
    queue = deque([backend.root])
    while queue:
        sid = queue.popleft()
        try:
            await client.abort(sid)
            kids = await client.children(sid)
        except NotFoundError:
            continue
        for kid in kids:
            if kid.id not in seen:
                seen.add(kid.id)
                queue.append(kid.id)


async def run_level_bfs(backend: Backend) -> None:
    client = backend.client
    permits = asyncio.Semaphore(P)
    seen = {backend.root}

    async def one(sid: str) -> list[str]:
        try:
            async with permits:
                await client.abort(sid)
            async with permits:
                return [kid.id for kid in await client.children(sid)]
        except NotFoundError:
            return []

    level = [backend.root]
    while level:
        found = await asyncio.gather(*(one(sid) for sid in level))
        level = []
        for kids in found:
            for kid in kids:
                if kid not in seen:
                    seen.add(kid)
                    level.append(kid)


async def _for_each(items: Sequence[str], fn: Callable[[str], Awaitable[T]], limit: int) -> list[T]:
    """Effect.forEach(items, fn, {concurrency: limit}): in order, ``limit`` at a time."""
    results: list[Any] = [None] * len(items)
    feed = iter(enumerate(items))

    async def worker() -> None:
        for i, item in feed:
            results[i] = await fn(item)

    async with asyncio.TaskGroup() as tg:
        for _ in range(min(limit, len(items))):
            tg.create_task(worker())
    return results


async def run_reference(backend: Backend) -> None:
    """The reference's recursive walk, re-expressed with asyncio.

    As in the reference: the root is aborted first, on its own; then the walk
    visits the root without aborting it again. A visit aborts its session (if
    asked), lists its children, keeps those not seen before, and visits them
    with at most 8 visits running per parent; every abort and listing holds a
    permit of one semaphore of 8 shared by the whole walk. 404 counts as done;
    the first other failure is returned after everything was attempted.
    """
    client = backend.client
    permits = asyncio.Semaphore(P)
    seen = {backend.root}

    async def visit(sid: str, abort: bool) -> OpenCodeError | None:
        failure: OpenCodeError | None = None
        if abort:
            try:
                async with permits:
                    await client.abort(sid)
            except NotFoundError:
                pass
            except OpenCodeError as exc:
                failure = exc
        try:
            async with permits:
                kids = await client.children(sid)
        except NotFoundError:
            kids = []
        except OpenCodeError as exc:
            return failure or exc
        new = [kid.id for kid in kids if kid.id not in seen]
        seen.update(new)
        results = await _for_each(new, lambda kid: visit(kid, True), limit=8)
        return failure or next((r for r in results if r is not None), None)

    await client.abort(backend.root)
    failure = await visit(backend.root, False)
    if failure is not None:
        raise failure


async def run_root_only(backend: Backend) -> None:
    await backend.client.abort(backend.root)


STRATEGIES: dict[str, Strategy] = {
    "ideal": run_ideal,
    "stop_tree(verify=False)": lambda b: run_stop_tree(b, verify=False),
    "stop_tree": lambda b: run_stop_tree(b, verify=True),
    "reference": run_reference,
    "level-bfs": run_level_bfs,
    "sequential": run_sequential,
    "root-only": run_root_only,
}
STOP_TREE = ("stop_tree(verify=False)", "stop_tree")
COMPLETE_OTHERS = ("reference", "level-bfs", "sequential")

# --------------------------------------------------------------------------- measuring


@dataclass
class Run:
    strategy: str
    rep: int = 0
    elapsed: float | None = None
    cpu: float | None = None
    requests: int | None = None
    peak_in_flight: int | None = None
    aborted: int | None = None
    complete: bool | None = None
    skipped: str | None = None
    peak_memory: int | None = None

    @property
    def label(self) -> str:
        return self.strategy if self.rep == 0 else f"{self.strategy} #{self.rep + 1}"


@dataclass
class Case:
    backend: str
    tree: str
    family: str
    n: int
    depth: int
    latency: float
    jitter: float
    optimal_steps: int
    runs: list[Run] = field(default_factory=list)

    @property
    def mean_latency(self) -> float:
        return self.latency + self.jitter / 2

    @property
    def requests(self) -> int:
        return 2 * self.n

    def bound(self, *, verify: bool = False) -> float:
        lat = self.mean_latency
        walk = max(math.ceil(self.requests / P) * lat, 2 * (self.depth + 1) * lat)
        return walk + lat if verify else walk

    def optimal(self) -> float:
        return self.optimal_steps * self.mean_latency

    def runs_of(self, strategy: str) -> list[Run]:
        return [r for r in self.runs if r.strategy == strategy and r.elapsed is not None]

    def run(self, strategy: str) -> Run | None:
        runs = self.runs_of(strategy)
        return runs[0] if runs else None

    def ideal_for(self, rep: int) -> float | None:
        ideals = self.runs_of("ideal")
        match = next((r for r in ideals if r.rep == rep), ideals[0] if ideals else None)
        return match.elapsed if match else None

    @property
    def ideal(self) -> float | None:
        return self.ideal_for(0)

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "backend": self.backend,
            "tree": self.tree,
            "family": self.family,
            "n": self.n,
            "depth": self.depth,
            "latency_s": self.latency,
            "jitter_s": self.jitter,
            "requests_R": self.requests,
            "permits_P": P,
            "bound_s": self.bound(),
            "bound_verify_s": self.bound(verify=True),
            "optimal_steps": self.optimal_steps,
            "optimal_s": self.optimal(),
            "ideal_s": self.ideal,
            "runs": [],
        }
        for r in self.runs:
            row = dict(r.__dict__)
            if r.elapsed is not None:
                ideal = self.ideal_for(r.rep)
                row["x_ideal"] = r.elapsed / ideal if ideal else None
                row["x_bound"] = (
                    r.elapsed / self.bound(verify=r.strategy == "stop_tree")
                    if self.latency
                    else None
                )
                row["cpu_us_per_session"] = (r.cpu or 0) / self.n * 1e6
            out["runs"].append(row)
        return out


async def measure(
    backend: Backend, strategy: str, *, rep: int = 0, trace_memory: bool = False
) -> Run:
    backend.reset_stats()
    gc.collect()
    if trace_memory:
        tracemalloc.start()
        tracemalloc.reset_peak()
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    try:
        await STRATEGIES[strategy](backend)
    finally:
        elapsed = time.perf_counter() - t0
        cpu = time.process_time() - cpu0
        peak = None
        if trace_memory:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
    requests, in_flight, aborted = backend.stats()
    return Run(
        strategy=strategy,
        rep=rep,
        elapsed=elapsed,
        cpu=cpu,
        requests=requests,
        peak_in_flight=in_flight,
        aborted=aborted,
        complete=aborted == backend.tree.n,
        peak_memory=peak,
    )


async def run_case(
    backend: Backend,
    latency: float,
    jitter: float,
    strategies: Sequence[str],
    *,
    sequential_cap: float,
    memory: bool = False,
    repeated: Sequence[str] = (),
    reps: int = 1,
    seed: int = 1,
) -> Case:
    """Run ``strategies`` on one tree at one latency.

    ``repeated`` strategies run ``reps`` times, interleaved (ideal, stop_tree,
    ideal, stop_tree, ...), so every stop_tree run has an ideal run measured
    right next to it; the others run once, afterwards.
    """
    tree = backend.tree
    case = Case(
        backend.name,
        tree.name,
        tree.family,
        tree.n,
        tree.max_depth,
        latency,
        jitter,
        optimal_steps(tree),
    )
    order = [(s, rep) for rep in range(reps) for s in strategies if s in repeated]
    order += [(s, 0) for s in strategies if s not in repeated]
    backend.configure(0.0, 0.0, seed)
    await measure(backend, "stop_tree(verify=False)")  # warm caches and allocator
    for strategy, rep in order:
        predicted = tree.requests * case.mean_latency
        if strategy == "sequential" and predicted > sequential_cap:
            skipped = f"≥ R·L = {predicted:.0f} s by construction"
            case.runs.append(Run(strategy, skipped=skipped))
            continue
        backend.configure(latency, jitter, seed)
        run = await measure(backend, strategy, rep=rep)
        if memory and rep == 0:
            # A second pass at L = 0 with tracemalloc on (it slows Python down
            # several times, so the timed pass above runs without it).
            backend.configure(0.0, 0.0, seed)
            run.peak_memory = (await measure(backend, strategy, trace_memory=True)).peak_memory
        case.runs.append(run)
        print(
            f"  [{backend.name}] {tree.name:<22} L={latency * 1000:g}ms J={jitter * 1000:g}ms "
            f"{run.label:<26} {run.elapsed:8.3f} s  {run.requests} requests",
            file=sys.stderr,
            flush=True,
        )
    return case


# --------------------------------------------------------------------------- reporting


def case_table(cases: Sequence[Case]) -> str:
    headers = [
        "tree",
        "N",
        "strategy",
        "elapsed s",
        "× ideal",
        "× bound",
        "requests",
        "peak in flight",
        "CPU µs/session",
        "peak mem KiB",
        "complete",
    ]
    rows: list[list[Any]] = []
    for case in cases:
        for r in case.runs:
            if r.skipped:
                rows.append([case.tree, case.n, r.label, f"skipped: {r.skipped}"] + [""] * 7)
                continue
            assert r.elapsed is not None and r.cpu is not None
            ideal = case.ideal_for(r.rep)
            bound = case.bound(verify=r.strategy == "stop_tree")
            rows.append(
                [
                    case.tree,
                    case.n,
                    r.label,
                    f"{r.elapsed:.3f}",
                    f"{r.elapsed / ideal:.3f}" if ideal else None,
                    f"{r.elapsed / bound:.3f}" if case.latency else None,
                    r.requests,
                    r.peak_in_flight,
                    f"{r.cpu / case.n * 1e6:.0f}",
                    kib(r.peak_memory),
                    "yes" if r.complete else f"no ({r.aborted}/{case.n})",
                ]
            )
    return table(headers, rows)


def bound_table(cases: Sequence[Case]) -> str:
    rows = [
        [
            c.tree,
            c.n,
            c.depth,
            c.requests,
            f"{math.ceil(c.requests / P) * c.mean_latency:.3f}",
            f"{2 * (c.depth + 1) * c.mean_latency:.3f}",
            f"{c.bound():.3f}",
            f"{c.optimal():.3f}",
            f"{c.ideal:.3f}" if c.ideal else None,
        ]
        for c in cases
    ]
    headers = [
        "tree",
        "N",
        "depth",
        "R",
        "⌈R/P⌉·L s",
        "critical path s",
        "bound s",
        "optimal schedule s",
        "ideal (measured) s",
    ]
    return table(headers, rows)


def evaluate_goals(cases: Sequence[Case], cfg: dict[str, Any]) -> list[dict[str, Any]]:
    goals: list[dict[str, Any]] = []

    def find(tree: str, latency: float) -> Case | None:
        return next(
            (
                c
                for c in cases
                if (c.tree, c.latency, c.jitter, c.backend) == (tree, latency, 0.0, "sim")
            ),
            None,
        )

    for tree, latency, limit in cfg["ratio_goals"]:
        case = find(tree, latency)
        if case is None or case.ideal is None:
            continue
        structural = case.optimal() / case.bound()
        for name in STOP_TREE:
            pairs = [(r.elapsed, case.ideal_for(r.rep)) for r in case.runs_of(name)]
            ratios = [e / i for e, i in pairs if e and i]
            if not ratios:
                continue
            detail = ", ".join(f"{e:.3f} s / {i:.3f} s" for e, i in pairs if e and i)
            goals.append(
                {
                    "goal": f"{name} ≤ {limit:.2f} × ideal, {tree}, L = {latency * 1000:g} ms",
                    "measured": " and ".join(f"{x:.3f} ×" for x in ratios) + f" ({detail})",
                    "ratios": ratios,
                    "structural_floor": structural,
                    "met": all(x <= limit for x in ratios),
                }
            )
    spreads = []
    for case in cases:
        ideals = [r.elapsed for r in case.runs_of("ideal") if r.elapsed]
        if len(ideals) > 1:
            spreads.append((max(ideals) / min(ideals) - 1, case.tree, case.latency))
    for name in STOP_TREE:
        for with_latency in (True, False):
            worst: tuple[float, str] | None = None
            slower: list[str] = []
            for case in cases:
                if bool(case.latency) != with_latency:
                    continue
                mine = case.run(name)
                others = [r for s in COMPLETE_OTHERS if (r := case.run(s)) and r.complete]
                if mine is None or mine.elapsed is None or not others:
                    continue
                best = min(others, key=lambda r: r.elapsed or math.inf)
                assert best.elapsed is not None
                ratio = mine.elapsed / best.elapsed
                where = (
                    f"{case.tree}, L = {case.latency * 1000:g} ms"
                    + (f" + {case.jitter * 1000:g} ms jitter" if case.jitter else "")
                    + f" [{case.backend}], vs {best.strategy}"
                )
                if ratio > 1.0:
                    slower.append(f"{where}: {ratio:.3f} ×")
                if worst is None or ratio > worst[0]:
                    worst = (ratio, where)
            if worst is None:
                continue
            scope = "L > 0" if with_latency else "L = 0 (CPU cost only)"
            goals.append(
                {
                    "goal": f"{name} never slower than another complete strategy, {scope}",
                    "measured": f"worst {worst[0]:.3f} × the best other ({worst[1]}); "
                    f"slower in {len(slower)} case(s)",
                    "slower_cases": slower,
                    "met": not slower,
                }
            )
    for tree in cfg["l0_trees"]:
        case = find(tree, 0.0)
        if case is None:
            continue
        for name in STOP_TREE:
            run = case.run(name)
            if run is None or run.elapsed is None or not run.requests:
                continue
            per = run.elapsed / run.requests * 1e6
            goals.append(
                {
                    "goal": f"{name}, {tree} at L = 0: well under a second (< 0.5 s)",
                    "measured": f"{run.elapsed:.3f} s ({per:.0f} µs per request, "
                    f"{run.requests} requests)",
                    "met": run.elapsed < 0.5,
                }
            )
    if spreads:
        worst_spread = max(spreads)
        goals.append(
            {
                "goal": "(noise) spread between repeated ideal runs of one case",
                "measured": f"up to {worst_spread[0] * 100:.1f} % ({worst_spread[1]}, "
                f"L = {worst_spread[2] * 1000:g} ms)",
                "met": None,
            }
        )
    return goals


# --------------------------------------------------------------------------- overhead & profile


async def per_request_costs(tree: Tree, count: int) -> list[dict[str, Any]]:
    """µs per request at L = 0, P = 8, layer by layer (the cost floor of any walk)."""
    rows: list[dict[str, Any]] = []
    sim = Backend(tree)
    fake = FakeBackend(tree)
    try:
        ids = tree.order

        async def pump(label: str, call: Callable[[int], Awaitable[object]]) -> None:
            feed = iter(range(count))

            async def worker() -> None:
                for i in feed:
                    await call(i)

            gc.collect()
            cpu0, t0 = time.process_time(), time.perf_counter()
            async with asyncio.TaskGroup() as tg:
                for _ in range(P):
                    tg.create_task(worker())
            wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            rows.append(
                {"layer": label, "us_per_request": wall / count * 1e6, "cpu_us": cpu / count * 1e6}
            )

        server = sim.server
        n = len(ids)
        requests = [
            httpx.Request("POST", f"http://sim-opencode/session/{sid}/abort") for sid in ids
        ]
        await pump(
            "sim server alone (transport.handle_async_request)",
            lambda i: server.handle_async_request(requests[i % n]),
        )

        async with httpx.AsyncClient(transport=server, base_url="http://sim-opencode") as raw:
            await pump(
                "httpx.AsyncClient.post on the sim server",
                lambda i: raw.post(f"/session/{ids[i % n]}/abort"),
            )

        def sync_cost(label: str, call: Callable[[int], object]) -> None:
            gc.collect()
            t0 = time.perf_counter()
            for i in range(count):
                call(i)
            rows.append(
                {
                    "layer": label,
                    "us_per_request": (time.perf_counter() - t0) / count * 1e6,
                    "cpu_us": None,
                }
            )

        http = sim.client._http  # the client's own httpx.AsyncClient, to time its parts
        sync_cost(
            "  of which httpx build_request (as OpenCodeClient calls it)",
            lambda i: http.build_request("POST", f"/session/{ids[i % n]}/abort"),
        )
        headers, timeout = http.headers, {"timeout": http.timeout.as_dict()}
        sync_cost(
            "  httpx.Request built directly (same URL, headers, timeout)",
            lambda i: httpx.Request(
                "POST",
                f"http://sim-opencode/session/{ids[i % n]}/abort",
                headers=headers,
                extensions=timeout,
            ),
        )
        await pump("OpenCodeClient.abort on the sim server", lambda i: sim.client.abort(ids[i % n]))
        await pump(
            "OpenCodeClient.children on the sim server",
            lambda i: sim.client.children(ids[i % n]),
        )
        fids = [sid for kind, sid in fake.jobs if kind == "abort"]
        async with fake.fake.client() as raw_fake:
            await pump(
                "httpx.AsyncClient.post on FakeOpenCodeServer",
                lambda i: raw_fake.post(f"/session/{fids[i % n]}/abort"),
            )
        fake.reset_stats()
        await pump(
            "OpenCodeClient.abort on FakeOpenCodeServer", lambda i: fake.client.abort(fids[i % n])
        )
        fake.reset_stats()
        await pump(
            "OpenCodeClient.children on FakeOpenCodeServer",
            lambda i: fake.client.children(fids[i % n]),
        )
        fake.reset_stats()
    finally:
        await sim.aclose()
        await fake.aclose()
    return rows


async def profile_l0(tree: Tree) -> dict[str, Any] | None:
    try:
        from pyinstrument import Profiler
    except ImportError:
        print("pyinstrument is not installed: skipping the profile", file=sys.stderr)
        return None
    backend = Backend(tree)
    backend.configure(0.0, 0.0, 1)
    try:
        await run_stop_tree(backend, verify=False)  # warm
        gc.collect()
        t0 = time.perf_counter()
        await run_stop_tree(backend, verify=False)
        plain = time.perf_counter() - t0
        gc.collect()
        profiler = Profiler(interval=0.0005, async_mode="disabled")
        profiler.start()
        t0 = time.perf_counter()
        await run_stop_tree(backend, verify=False)
        elapsed = time.perf_counter() - t0
        profiler.stop()
    finally:
        await backend.aclose()
    session = profiler.last_session
    assert session is not None
    components = aggregate_profile(session.root_frame())
    total = sum(t for _, t in components)
    text = profiler.output_text(unicode=True, color=False, show_all=False)
    out = RESULTS / "stop_tree_profile.txt"
    RESULTS.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return {
        "tree": tree.name,
        "elapsed_s": plain,
        "elapsed_under_profiler_s": elapsed,
        "profile_text": str(out.relative_to(ROOT)),
        "components": [
            {"component": c, "seconds": t, "share": t / total if total else 0.0}
            for c, t in components
        ],
    }


# --------------------------------------------------------------------------- plot


def plot(series: Sequence[Case], path: Path) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: skipping the plot (pip install matplotlib)"
    if not series:
        return "no random-tree series to plot"
    latency = series[0].latency
    styles = {
        "ideal": ("black", "o", "-"),
        "stop_tree(verify=False)": ("tab:blue", "s", "-"),
        "stop_tree": ("tab:cyan", "^", "--"),
        "reference": ("tab:orange", "D", "-"),
        "level-bfs": ("tab:green", "v", "-"),
        "sequential": ("tab:red", "x", "-"),
    }
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 5), gridspec_kw={"width_ratios": [3, 2]})
    ns = [c.n for c in series]
    ax.plot(ns, [c.bound() for c in series], color="grey", ls=":", lw=2, label="analytic bound")
    ax.plot(
        ns,
        [c.optimal() for c in series],
        color="grey",
        ls="--",
        lw=1,
        label="optimal schedule (knows the tree)",
    )
    for name, (color, marker, ls) in styles.items():
        pts = [(c.n, r.elapsed) for c in series if (r := c.run(name)) and r.elapsed]
        if pts:
            ax.plot(*zip(*pts, strict=True), color=color, marker=marker, ls=ls, label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("sessions in the tree (random trees)")
    ax.set_ylabel("elapsed (s)")
    ax.set_title(f"Stopping a tree, L = {latency * 1000:g} ms per request, P = {P}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    for name, (color, marker, ls) in styles.items():
        if name == "sequential":
            continue
        pts = [(c.n, r.elapsed / c.bound()) for c in series if (r := c.run(name)) and r.elapsed]
        if pts:
            ax2.plot(*zip(*pts, strict=True), color=color, marker=marker, ls=ls, label=name)
    ax2.axhline(1.0, color="grey", ls=":", lw=2)
    ax2.plot(
        ns,
        [c.optimal() / c.bound() for c in series],
        color="grey",
        ls="--",
        lw=1,
        label="optimal schedule",
    )
    ax2.set_xscale("log")
    ax2.set_xlabel("sessions in the tree (random trees)")
    ax2.set_ylabel("elapsed / analytic bound")
    ax2.set_title("Distance from the bound (sequential: ~8×, off scale)")
    ax2.grid(True, which="both", alpha=0.3)
    ax2.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return f"plot written to {path.relative_to(ROOT)}"


# --------------------------------------------------------------------------- main


def load_series(path: Path) -> list[Case]:
    """The plotted series (random trees at the matrix latency) from a results file."""
    data = json.loads(path.read_text(encoding="utf-8"))
    fields = set(Run.__dataclass_fields__)
    cases = []
    for section in data["sections"]:
        for c in section["cases"]:
            case = Case(
                c["backend"],
                c["tree"],
                c["family"],
                c["n"],
                c["depth"],
                c["latency_s"],
                c["jitter_s"],
                c["optimal_steps"],
                [Run(**{k: v for k, v in r.items() if k in fields}) for r in c["runs"]],
            )
            if (case.family, case.backend, case.latency, case.jitter) == (
                "random",
                "sim",
                0.005,
                0,
            ):
                cases.append(case)
    return sorted(cases, key=lambda c: c.n)


def plan(quick: bool) -> dict[str, Any]:
    if quick:
        return {
            "l0_trees": [random_tree(5000)],
            "matrix_trees": [wide(200), deep(50), bushy(4, 3), random_tree(100), diamonds(200)],
            "matrix_latency": 0.005,
            "series": [random_tree(30), random_tree(300)],
            "goal_cases": [(random_tree(1000), 0.005, 1)],
            "jitter_trees": [random_tree(300)],
            "jitter": (0.005, 0.010),
            "fake_check": (random_tree(300), 0.005),
            "sequential_cap": 3.0,
            "overhead_requests": 3000,
            "ratio_goals": [("random-1000", 0.005, 1.05)],
            "memory": False,
        }
    return {
        "l0_trees": [random_tree(5000), wide(5000)],
        "matrix_trees": [
            wide(1000),
            deep(200),
            bushy(4, 5),
            random_tree(100),
            random_tree(1000),
            diamonds(1000),
        ],
        "matrix_latency": 0.005,
        "series": [random_tree(300), random_tree(2000)],
        "goal_cases": [(random_tree(5000), 0.005, 2), (random_tree(1000), 0.020, 2)],
        "jitter_trees": [random_tree(1000)],
        "jitter": (0.005, 0.010),
        "fake_check": (random_tree(1000), 0.020),
        "sequential_cap": 6.0,
        "overhead_requests": 5_000,
        "ratio_goals": [("random-1000", 0.020, 1.03), ("random-5000", 0.005, 1.05)],
        "memory": True,
    }


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    cfg = plan(args.quick)
    every = list(STRATEGIES)
    sections: list[tuple[str, list[Case]]] = []
    cases: list[Case] = []
    started = time.perf_counter()
    load_before = os.getloadavg()

    async def on_trees(
        title: str,
        trees: Sequence[Tree],
        latency: float,
        jitter: float = 0.0,
        strategies: Sequence[str] = every,
        *,
        backend_cls: type[Backend] = Backend,
        **kwargs: Any,
    ) -> list[Case]:
        print(f"{title} ...", file=sys.stderr, flush=True)
        out = []
        for tree in trees:
            backend = backend_cls(tree)
            try:
                out.append(
                    await run_case(
                        backend,
                        latency,
                        jitter,
                        strategies,
                        sequential_cap=cfg["sequential_cap"],
                        **kwargs,
                    )
                )
            finally:
                await backend.aclose()
        cases.extend(out)
        sections.append((title, out))
        return out

    def want(section: str) -> bool:
        return args.sections is None or section in args.sections

    overhead: list[dict[str, Any]] = []
    if want("costs"):
        print("per-request cost at L = 0 ...", file=sys.stderr, flush=True)
        overhead = await per_request_costs(random_tree(1000), cfg["overhead_requests"])

    if want("l0"):
        await on_trees("L = 0: the CPU cost of each walk", cfg["l0_trees"], 0.0)
    lat = cfg["matrix_latency"]
    matrix: list[Case] = []
    if want("matrix"):
        matrix = await on_trees(
            f"L = {lat * 1000:g} ms, every tree and strategy",
            cfg["matrix_trees"],
            lat,
            memory=cfg["memory"],
        )
    extra: list[Case] = []
    if want("series"):
        extra = await on_trees(f"More random trees, L = {lat * 1000:g} ms", cfg["series"], lat)
    goal_cases: list[Case] = []
    for tree, latency, reps in cfg["goal_cases"] if want("goals") else []:
        goal_cases += await on_trees(
            f"Goal case: {tree.name}, L = {latency * 1000:g} ms",
            [tree],
            latency,
            repeated=("ideal", "stop_tree(verify=False)"),
            reps=reps,
        )
    base, spread = cfg["jitter"]
    if want("jitter"):
        await on_trees(
            f"L = {base * 1000:g} ms + uniform [0, {spread * 1000:g}) ms jitter "
            f"(mean {(base + spread / 2) * 1000:g} ms)",
            cfg["jitter_trees"],
            base,
            spread,
            [s for s in every if s != "sequential"],
        )
    if cfg["fake_check"] is not None and want("fake"):
        tree, latency = cfg["fake_check"]
        await on_trees(
            f"Cross-check on adapter.testing.FakeOpenCodeServer, {tree.name}, "
            f"L = {latency * 1000:g} ms",
            [tree],
            latency,
            strategies=["ideal", *STOP_TREE],
            backend_cls=FakeBackend,
        )

    profile = None
    if not args.no_profile and want("profile"):
        print("profile ...", file=sys.stderr, flush=True)
        profile = await profile_l0(random_tree(5000))

    series = sorted(
        [
            c
            for c in matrix + extra + goal_cases
            if c.family == "random" and c.latency == lat and c.backend == "sim"
        ],
        key=lambda c: c.n,
    )
    goals = evaluate_goals(
        cases,
        {"ratio_goals": cfg["ratio_goals"], "l0_trees": [t.name for t in cfg["l0_trees"]]},
    )
    return {
        "benchmark": "stop_tree",
        "mode": "quick" if args.quick else "full",
        "command": " ".join([".venv/bin/python", *sys.argv]),
        "machine": machine(),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "permits": P,
        "wall_time_s": time.perf_counter() - started,
        "per_request_costs": overhead,
        "sections": [
            {"title": title, "cases": [c.as_json() for c in cs]} for title, cs in sections
        ],
        "goals": goals,
        "profile": profile,
        "_sections": sections,
        "_series": series,
    }


def render(result: dict[str, Any]) -> str:
    m = result["machine"]
    lines = [
        f"# stop_tree benchmark ({result['mode']} mode)",
        "",
        f"{m['nproc']} CPUs ({m['cpu_model']}), Python {m['python']}, "
        f"httpx {m['packages']['httpx']}; P = {result['permits']} permits; "
        f"wall time {result['wall_time_s']:.0f} s; load average "
        f"{result['load_average_before'][0]:.2f} before, "
        f"{result['load_average_after'][0]:.2f} after",
        "",
        "## Per-request cost at L = 0, 8 concurrent callers",
        "",
        table(
            ["layer", "µs/request (wall)", "CPU µs/request"],
            [
                [
                    r["layer"],
                    f"{r['us_per_request']:.1f}",
                    None if r["cpu_us"] is None else f"{r['cpu_us']:.1f}",
                ]
                for r in result["per_request_costs"]
            ],
        ),
    ]
    for title, cases in result["_sections"]:
        lines += ["", f"## {title}", ""]
        if any(c.latency for c in cases):
            lines += [bound_table(cases), ""]
        lines.append(case_table(cases))
    lines += ["", "## Goals", ""]
    verdict = {True: "yes", False: "**no**", None: "–"}
    lines.append(
        table(
            ["goal", "measured", "met"],
            [[g["goal"], g["measured"], verdict[g["met"]]] for g in result["goals"]],
        )
    )
    profile = result.get("profile")
    if profile:
        lines += [
            "",
            f"## Where the time goes: stop_tree(verify=False), {profile['tree']}, L = 0",
            "",
            f"pyinstrument, {profile['elapsed_under_profiler_s']:.2f} s under the profiler "
            f"({profile['elapsed_s']:.2f} s without); self time per component, standard-library "
            f"frames counted for their caller; the call tree is in {profile['profile_text']}",
            "",
            table(
                ["component", "self time s", "share"],
                [
                    [c["component"], f"{c['seconds']:.3f}", f"{c['share'] * 100:.1f} %"]
                    for c in profile["components"]
                ],
            ),
        ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small trees, about a minute")
    parser.add_argument("--no-profile", action="store_true", help="skip the pyinstrument run")
    parser.add_argument("--no-plot", action="store_true", help="do not render the PNG")
    parser.add_argument(
        "--replot",
        action="store_true",
        help="only re-render the plot from benchmarks/results/stop_tree.json",
    )
    parser.add_argument(
        "--sections",
        type=lambda text: set(text.split(",")),
        default=None,
        help="run only these parts, comma-separated: "
        "costs,l0,matrix,series,goals,jitter,fake,profile (default: all)",
    )
    parser.add_argument(
        "--output",
        default=None,
        help="file name under benchmarks/results/ (default stop_tree.json, "
        "stop_tree-quick.json with --quick)",
    )
    args = parser.parse_args()
    if args.replot:
        print(plot(load_series(RESULTS / (args.output or "stop_tree.json")), PLOT))
        return
    quiet_logging()
    result = asyncio.run(main_async(args))
    print(render(result))
    series = result.pop("_series")
    result.pop("_sections")
    if not args.no_plot:
        # A quick run must not replace the documented plot of the full run.
        message = plot(series, RESULTS / "stop_tree-quick.png" if args.quick else PLOT)
        print(f"\n{message}", file=sys.stderr)
        result["plot"] = message
    name = args.output or ("stop_tree-quick.json" if args.quick else "stop_tree.json")
    path = write_json(name, result)
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    print(f"results written to {shown}", file=sys.stderr)


if __name__ == "__main__":
    main()
