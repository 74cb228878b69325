# ruff: noqa: RUF001  (the printed tables use multiplication signs and dashes on purpose)
"""The stop_tree benchmark's tables and its goals, met or missed, from measured cases."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from benchmarks._common import kib, table
from benchmarks._stop_tree import P
from benchmarks._stop_tree.cases import Case
from benchmarks._stop_tree.strategies import COMPLETE_OTHERS, STOP_TREE


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
