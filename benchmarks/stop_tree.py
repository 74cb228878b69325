# ruff: noqa: RUF001  (the printed tables use multiplication signs and dashes on purpose)
"""Benchmark ``stop_tree`` against other ways of walking a session tree.

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
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import (
    RESULTS,
    arguments,
    machine,
    profile_section,
    quiet_logging,
    say_written,
    table,
    write_json,
)
from benchmarks._stop_tree import P
from benchmarks._stop_tree.backends import Backend, FakeBackend
from benchmarks._stop_tree.cases import Case, load_series, run_case
from benchmarks._stop_tree.costs import per_request_costs, profile_l0
from benchmarks._stop_tree.plot import PLOT, plot
from benchmarks._stop_tree.report import bound_table, case_table, evaluate_goals
from benchmarks._stop_tree.strategies import STOP_TREE, STRATEGIES
from benchmarks._stop_tree.trees import Tree, bushy, deep, diamonds, random_tree, wide


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
        lines += profile_section(
            f"Where the time goes: stop_tree(verify=False), {profile['tree']}, L = 0",
            f"pyinstrument, {profile['elapsed_under_profiler_s']:.2f} s under the profiler "
            f"({profile['elapsed_s']:.2f} s without); self time per component, standard-library "
            f"frames counted for their caller; the call tree is in {profile['profile_text']}",
            profile,
        )
    return "\n".join(lines)


def main() -> None:
    parser = arguments(
        __doc__,
        quick="small trees, about a minute",
        output="file name under benchmarks/results/ (default stop_tree.json, "
        "stop_tree-quick.json with --quick)",
    )
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
    say_written(write_json(name, result))


if __name__ == "__main__":
    main()
