"""The session graphs the stop_tree benchmark walks, and the best schedule on each.

A ``Tree`` is what the server would report (id -> listed children); its
breadth-first order, depths and discovering parents are derived once, since
every strategy and bound reads them.
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from dataclasses import dataclass, field

from benchmarks._stop_tree import P


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
