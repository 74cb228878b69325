"""One tree at one latency in the stop_tree benchmark: its runs and how they are timed.

A ``Case`` also knows its analytic bound and optimal schedule, the yardsticks
every table and goal divides by, and ``load_series`` reads cases back from a
results file (for ``--replot``).
"""

from __future__ import annotations

import gc
import json
import math
import sys
import time
import tracemalloc
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks._stop_tree import P
from benchmarks._stop_tree.backends import Backend
from benchmarks._stop_tree.strategies import STRATEGIES
from benchmarks._stop_tree.trees import optimal_steps


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
