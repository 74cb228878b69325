# ruff: noqa: RUF001  (the plot title uses a multiplication sign on purpose)
"""The stop_tree benchmark's plot: elapsed time, and distance from the bound, by tree size.

matplotlib is optional: without it the plot is skipped and the run goes on.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from benchmarks._common import ROOT
from benchmarks._stop_tree import P
from benchmarks._stop_tree.cases import Case

PLOT = ROOT / "docs" / "benchmarks-stop-tree.png"


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
