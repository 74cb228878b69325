# ruff: noqa: RUF001  (the printed tables use multiplication signs and dashes on purpose)
"""The web backend's thread store: what it costs per request, and a restart's time.

Why: with a store (``create_app(oc, store=...)``) any worker serves any
thread and a restarted backend loses nothing, but requests now go through the store:
a thread the worker does not hold is read from it and resumed before the request is
served, and a turn's ``POST`` writes the thread's status before its 202. This script
measures that price, and how long a restarted backend takes to serve threads whose
turns kept running on OpenCode meanwhile.

1. **Per request**, store = none, SQLite (a file in a temporary directory, as
   ``open_store`` opens it: WAL, ``synchronous=FULL``) and PostgreSQL (a throwaway
   server from Debian's binaries, ``tests/web/store/postgres_server.py``, started as
   uid 65534 when run as root; ``fsync`` on unless ``--pg-no-fsync``). Each store has
   its own in-process ``FakeOpenCodeServer`` (``--latency-ms`` per request, 1 ms by
   default so that the store's share is visible next to OpenCode's) and two "workers"
   on it, A and B: each its own ``OpenCodeAdapter`` (``on_close="detach"``), store
   connection and ``create_app``, driven through ``httpx.ASGITransport``. Timed, one
   request at a time, ``--requests`` of each: ``GET /threads/{id}`` and ``POST
   /threads/{id}/turns`` (a one-text scripted answer; the turn's end is awaited after
   each post, untimed) of a thread A holds; the same two on B for a thread A created
   and B does not hold yet (its first request resumes it from the store: ``--cold``
   threads each); ``GET /threads`` (the listing: the store's records); and the store's
   own ``get`` and ``update`` of one record. The stores are measured in the same run,
   interleaved in ``--batches`` rounds (the order rotated each round), so a change in
   the machine's load falls on all three.
2. **Restart**, per store: A creates ``--threads`` threads and sends each a turn whose
   model never answers (the fake's ``Hang``), A detaches (its adapter closes with
   ``on_close="detach"``: the turns run on), then a "restarted backend" on the same
   store and fake: the store opened, a new adapter entered, ``create_app``, one ``GET
   /threads``, then ``GET /threads/{id}`` of every thread at once. Timed: each phase,
   each thread's ``GET`` (median, worst), and the whole from the store's open to the
   last answer; "served" counts the threads answered ``running`` with the turn id A
   gave. ``--restart-repeats`` fresh fixtures each.

A script that prints figures, not a test: nothing is asserted. Only 127.0.0.1 is used
(PostgreSQL); the rest is in process.

    .venv/bin/python benchmarks/web_store.py             # ~35 s on 2 cores
    .venv/bin/python benchmarks/web_store.py --quick     # fewer requests, one restart each
    .venv/bin/python benchmarks/web_store.py --profile   # + cProfile of one SQLite restart

Writes ``benchmarks/results/web_store.json`` (every sample's summary, every repeat).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import functools
import io
import math
import os
import pstats
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from adapter import OpenCodeAdapter, Timeouts
from adapter.testing.fake import FakeOpenCodeServer, Hang, Text
from adapter.web import ThreadStore, create_app, open_store
from benchmarks._common import ROOT, machine, quiet_logging, table, write_json
from tests.web.store.postgres_server import PostgresServer, postgres_bin

KINDS = ("none", "sqlite", "postgresql")
#: The restart's baseline: no app, no store; a new adapter resumes each thread from the
#: cursor its host kept (``start_session(resume=)``, all at once).
ADAPTER_ONLY = "adapter only"
QUICK = "[[script:quick]]"
HANG = "[[script:hang]]"


# -- the stores --------------------------------------------------------------------------


class BenchPostgres(PostgresServer):
    """The tests' throwaway server, with ``fsync`` on unless asked (the tests turn it off:
    a benchmark of a durable store should pay for a durable commit)."""

    def __init__(self, bin_dir: Path, *, fsync: bool) -> None:
        super().__init__(bin_dir)
        self.fsync = fsync

    def start(self) -> None:
        options = (
            f"-k {self.root} -c listen_addresses=127.0.0.1 -p {self.port} "
            f"-c fsync={'on' if self.fsync else 'off'}"
        )
        self._run(
            str(self._bin / "pg_ctl"),
            *("-D", str(self.data), "-o", options, "-l", str(self.root / "server.log")),
            *("-w", "start"),
        )

    def database(self) -> str:
        """A DSN of a new, empty database on this server."""
        import psycopg

        name = f"bench_{secrets.token_hex(6)}"
        with psycopg.connect(self.dsn(), autocommit=True) as admin:
            admin.execute(f"CREATE DATABASE {name}")
        return self.dsn(name)


class Stores:
    """Where each kind of store is made: ``target(kind)`` is a fresh one's ``open_store``
    target (``None`` for no store); PostgreSQL is ``None`` in ``skipped`` when it cannot
    run here."""

    def __init__(self, *, postgres: bool, fsync: bool) -> None:
        self._dir = Path(tempfile.mkdtemp(prefix="web-store-bench-"))
        self._pg: BenchPostgres | None = None
        self.skipped: dict[str, str] = {}
        self.pg_version = "–"
        if not postgres:
            self.skipped["postgresql"] = "--no-postgres"
            return
        bin_dir = postgres_bin()
        if bin_dir is None:
            self.skipped["postgresql"] = (
                "PostgreSQL's server binaries are missing (make postgres installs them)"
            )
            return
        try:
            import psycopg  # noqa: F401  (the postgres extra)
        except ImportError:
            self.skipped["postgresql"] = "psycopg is not installed (the postgres extra)"
            return
        server = BenchPostgres(bin_dir, fsync=fsync)
        try:
            server.init()
            server.start()
        except (OSError, RuntimeError) as exc:
            server.remove()
            self.skipped["postgresql"] = f"the server did not start: {exc}"
            return
        self._pg = server
        self.pg_version = bin_dir.parent.name

    @property
    def kinds(self) -> list[str]:
        return [k for k in KINDS if k not in self.skipped]

    def target(self, kind: str) -> str | None:
        if kind == "none":
            return None
        if kind == "sqlite":
            return str(self._dir / f"threads-{secrets.token_hex(4)}.sqlite3")
        assert self._pg is not None
        return self._pg.database()

    def close(self) -> None:
        if self._pg is not None:
            with contextlib.suppress(RuntimeError):
                self._pg.stop()
            self._pg.remove()
        for path in self._dir.iterdir():
            path.unlink()
        self._dir.rmdir()


# -- a worker ----------------------------------------------------------------------------


@dataclass
class Worker:
    """What one uvicorn worker process holds: an adapter, a store connection, the app."""

    oc: OpenCodeAdapter
    store: ThreadStore | None
    http: httpx.AsyncClient
    phases: dict[str, float] = field(default_factory=dict)

    async def close(self) -> None:
        await self.http.aclose()
        await self.oc.aclose()  # on_close="detach": the turns run on
        if self.store is not None:
            await self.store.aclose()


async def start_worker(fake: FakeOpenCodeServer, target: str | None) -> Worker:
    started = time.perf_counter()
    store = None if target is None else await open_store(target)
    opened = time.perf_counter()
    oc = OpenCodeAdapter(
        fake.base_url, transport=fake.transport, timeouts=Timeouts(), on_close="detach"
    )
    await oc.__aenter__()
    entered = time.perf_counter()
    app = create_app(oc, ping=0, store=store)
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app")
    phases = {"store_open_s": opened - started, "adapter_enter_s": entered - opened}
    return Worker(oc, store, http, phases)


def new_fake(latency: float, seed: int) -> FakeOpenCodeServer:
    fake = FakeOpenCodeServer(latency=latency, seed=seed)
    fake.script("quick", [Text("a quick answer")])
    fake.script("hang", [Text("working on it"), Hang()])
    return fake


async def create(worker: Worker, thread_id: str) -> None:
    answer = await worker.http.post("/threads", json={"thread_id": thread_id})
    if answer.status_code != 201:
        raise RuntimeError(f"POST /threads {thread_id}: {answer.status_code} {answer.text}")


async def turn_ended(oc: OpenCodeAdapter, thread_id: str, timeout: float = 10.0) -> None:
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        info = oc.session_info(thread_id)
        if info.active_turn_id is None and info.status == "ready":
            return
        await asyncio.sleep(0.0005)
    raise RuntimeError(f"the turn of {thread_id} did not end in {timeout} s")


async def gathered(jobs: Sequence[Callable[[], Awaitable[None]]], limit: int = 16) -> None:
    permits = asyncio.Semaphore(limit)

    async def one(job: Callable[[], Awaitable[None]]) -> None:
        async with permits:
            await job()

    await asyncio.gather(*(one(job) for job in jobs))


# -- 1. per-request cost ---------------------------------------------------------------


@dataclass
class Rig:
    """One store's fake, its workers A and B, and the threads made for the timings."""

    kind: str
    fake: FakeOpenCodeServer
    a: Worker
    b: Worker
    cold_get: list[str]
    cold_post: list[str]
    samples: dict[str, list[float]] = field(default_factory=dict)
    failures: dict[str, list[str]] = field(default_factory=dict)

    def add(self, row: str, seconds: float) -> None:
        self.samples.setdefault(row, []).append(seconds)

    def fail(self, row: str, what: str) -> None:
        self.failures.setdefault(row, []).append(what)


ROWS = (
    ("get", "GET /threads/{id}, held"),
    ("post", "POST /threads/{id}/turns, held"),
    ("cold_get", "GET /threads/{id}, not held (resumed)"),
    ("cold_post", "POST /threads/{id}/turns, not held (resumed)"),
    ("list", "GET /threads"),
    ("store_get", "store.get alone"),
    ("store_update", "store.update alone"),
)


async def build_rig(kind: str, target: str | None, args: argparse.Namespace, seed: int) -> Rig:
    fake = new_fake(args.latency_ms / 1000, seed)
    await fake.__aenter__()
    a = await start_worker(fake, target)
    b = await start_worker(fake, target)
    await create(a, "warm")
    cold = 0 if target is None else args.cold
    cold_get = [f"cg{i}" for i in range(cold)]
    cold_post = [f"cp{i}" for i in range(cold)]
    await gathered([functools.partial(create, a, t) for t in cold_get + cold_post])
    return Rig(kind, fake, a, b, cold_get, cold_post)


async def timed(rig: Rig, row: str, request: Awaitable[httpx.Response], ok: int) -> bool:
    started = time.perf_counter()
    answer = await request
    seconds = time.perf_counter() - started
    if answer.status_code != ok:
        rig.fail(row, f"{answer.status_code} {answer.text[:120]}")
        return False
    rig.add(row, seconds)
    return True


async def one_batch(rig: Rig, n: int) -> None:
    a, b = rig.a, rig.b
    for _ in range(n):
        await timed(rig, "get", a.http.get("/threads/warm"), 200)
    for _ in range(n):
        if await timed(rig, "post", a.http.post("/threads/warm/turns", json={"text": QUICK}), 202):
            await turn_ended(a.oc, "warm")
    for _ in range(min(n, len(rig.cold_get))):
        tid = rig.cold_get.pop()
        await timed(rig, "cold_get", b.http.get(f"/threads/{tid}"), 200)
    for _ in range(min(n, len(rig.cold_post))):
        tid = rig.cold_post.pop()
        post = b.http.post(f"/threads/{tid}/turns", json={"text": QUICK})
        if await timed(rig, "cold_post", post, 202):
            await turn_ended(b.oc, tid)
    for _ in range(max(1, n // 5)):
        await timed(rig, "list", a.http.get("/threads"), 200)
    store = a.store
    if store is None:
        return
    record = await store.get("warm")
    assert record is not None
    for _ in range(n):
        started = time.perf_counter()
        await store.get("warm")
        rig.add("store_get", time.perf_counter() - started)
    for _ in range(n):
        started = time.perf_counter()
        await store.update(record)
        rig.add("store_update", time.perf_counter() - started)


def summary(samples: Sequence[float]) -> dict[str, Any]:
    ordered = sorted(samples)
    n = len(ordered)
    return {
        "n": n,
        "median_s": statistics.median(ordered),
        "p99_s": ordered[max(0, math.ceil(0.99 * n) - 1)],
        "min_s": ordered[0],
        "max_s": ordered[-1],
        "mean_s": statistics.fmean(ordered),
    }


async def per_request(args: argparse.Namespace, stores: Stores) -> dict[str, Any]:
    rigs: list[Rig] = []
    try:
        for i, kind in enumerate(stores.kinds):
            rigs.append(await build_rig(kind, stores.target(kind), args, seed=10 + i))
        print("  per request: rigs built", file=sys.stderr)
        per_batch = max(1, args.requests // args.batches)
        for batch in range(args.batches):
            shift = batch % len(rigs)
            for rig in rigs[shift:] + rigs[:shift]:
                await one_batch(rig, per_batch)
            print(f"  per request: batch {batch + 1}/{args.batches}", file=sys.stderr)
        records = {
            rig.kind: len((await rig.a.http.get("/threads")).json()) for rig in rigs
        }  # what the listing listed
        return {
            "latency_ms": args.latency_ms,
            "listed": records,
            "rows": {
                rig.kind: {row: summary(s) for row, s in rig.samples.items() if s} for rig in rigs
            },
            "failures": {rig.kind: rig.failures for rig in rigs if rig.failures},
        }
    finally:
        for rig in rigs:
            await rig.a.close()
            await rig.b.close()
            await rig.fake.aclose()


def per_request_table(result: dict[str, Any], kinds: Sequence[str]) -> str:
    headers = ["request", *(f"{k} {m}" for k in kinds for m in ("median", "p99"))]
    body = []
    for row, label in ROWS:
        cells: list[str] = [label]
        for kind in kinds:
            s = result["rows"].get(kind, {}).get(row)
            cells += ["–", "–"] if s is None else [_ms(s["median_s"]), _ms(s["p99_s"])]
        body.append(cells)
    return table(headers, body)


def delta_table(result: dict[str, Any], kinds: Sequence[str]) -> str:
    """The store's share: each store's median minus none's, same row."""
    base = result["rows"].get("none", {})
    stored = [k for k in kinds if k != "none"]
    headers = ["request", *(f"{k} − none, median" for k in stored)]
    body = []
    for row, label in ROWS[:2] + ROWS[4:5]:
        if row not in base:
            continue
        cells = [label]
        for kind in stored:
            s = result["rows"].get(kind, {}).get(row)
            cells.append("–" if s is None else _ms(s["median_s"] - base[row]["median_s"]))
        body.append(cells)
    return table(headers, body)


# -- 2. restart ------------------------------------------------------------------------


async def restart_once(
    kind: str,
    target: str | None,
    args: argparse.Namespace,
    seed: int,
    profiler: cProfile.Profile | None = None,
) -> dict[str, Any]:
    fake = new_fake(args.latency_ms / 1000, seed)
    await fake.__aenter__()
    workers: list[Worker] = []
    try:
        a = await start_worker(fake, target)
        workers.append(a)
        ids = [f"r{i}" for i in range(args.threads)]
        turns: dict[str, str] = {}
        await gathered([functools.partial(create, a, t) for t in ids])

        async def send(thread_id: str) -> None:
            answer = await a.http.post(f"/threads/{thread_id}/turns", json={"text": HANG})
            turns[thread_id] = str(answer.json()["turn_id"])

        await gathered([functools.partial(send, t) for t in ids])
        deadline = time.perf_counter() + 20
        while any(a.oc.session_info(t).status != "running" for t in ids):
            if time.perf_counter() > deadline:
                raise RuntimeError("the turns did not all start")
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.2)  # the turns' first text is out; nothing in flight
        cursors = {t: dict(a.oc.session_info(t).resume) for t in ids}
        workers.remove(a)
        await a.close()
        fake.reset_stats()

        if profiler is not None:
            profiler.enable()
        started = time.perf_counter()
        b = await start_worker(fake, target)
        workers.append(b)
        ready = listed = time.perf_counter()
        shown: int | None = None
        served: list[tuple[float, bool]] = []

        async def get(thread_id: str) -> None:
            begun = time.perf_counter()
            answer = await b.http.get(f"/threads/{thread_id}")
            body = answer.json()
            ok = (
                answer.status_code == 200
                and body["status"] == "running"
                and body["active_turn_id"] == turns[thread_id]
            )
            served.append((time.perf_counter() - begun, ok))

        async def resume(thread_id: str) -> None:
            # What a host without the app's store does: its own cursors, the adapter alone.
            begun = time.perf_counter()
            info = await b.oc.start_session(thread_id, resume=cursors[thread_id])
            ok = info.status == "running" and info.active_turn_id == turns[thread_id]
            served.append((time.perf_counter() - begun, ok))

        if kind != ADAPTER_ONLY:
            listing = await b.http.get("/threads")
            listed = time.perf_counter()
            shown = sum(
                t.get("status") == "running" and turns.get(t["thread_id"]) == t["active_turn_id"]
                for t in listing.json()
            )
        gets = time.perf_counter()
        await asyncio.gather(*((resume if kind == ADAPTER_ONLY else get)(t) for t in ids))
        ended = time.perf_counter()
        if profiler is not None:
            profiler.disable()
        per_thread = [s for s, _ in served]
        return {
            "store_open_s": b.phases["store_open_s"],
            "adapter_enter_s": b.phases["adapter_enter_s"],
            "ready_s": ready - started,
            "list_s": None if shown is None else listed - ready,
            "listed_running": shown,
            "gets_wall_s": ended - gets,
            "per_thread_median_s": statistics.median(per_thread),
            "per_thread_worst_s": max(per_thread),
            "total_s": ended - started,
            "served": sum(ok for _, ok in served),
            "requests": len(fake.requests),
            "peak_in_flight": fake.max_in_flight,
        }
    finally:
        for worker in workers:
            await worker.close()
        await fake.aclose()


async def restarts(args: argparse.Namespace, stores: Stores) -> list[dict[str, Any]]:
    rows = []
    for repeat in range(args.restart_repeats):
        for i, kind in enumerate([ADAPTER_ONLY, *stores.kinds]):
            target = None if kind == ADAPTER_ONLY else stores.target(kind)
            run = await restart_once(kind, target, args, seed=100 + 10 * repeat + i)
            rows.append({"kind": kind, "repeat": repeat, **run})
            print(
                f"  restart {kind} #{repeat + 1}: {_ms(run['total_s'])} ms, "
                f"{run['served']}/{args.threads} served",
                file=sys.stderr,
            )
    return rows


def restart_table(rows: Sequence[dict[str, Any]], kinds: Sequence[str], threads: int) -> str:
    headers = [
        "store",
        "repeats",
        "store open ms",
        "adapter ms",
        "GET /threads ms",
        "listed running",
        "per thread median ms",
        "per thread worst ms",
        "all GETs ms",
        "total ms (median)",
        "total ms (worst)",
        "served running",
        "requests to OpenCode",
        "peak in flight",
    ]
    body = []
    for kind in [ADAPTER_ONLY, *kinds]:
        runs = [r for r in rows if r["kind"] == kind]
        if not runs:
            continue

        def med(key: str, runs: list[dict[str, Any]] = runs) -> str:
            values = [r[key] for r in runs if r[key] is not None]
            return _ms(statistics.median(values)) if values else "–"

        listed = [r["listed_running"] for r in runs if r["listed_running"] is not None]

        body.append(
            [
                kind,
                len(runs),
                med("store_open_s"),
                med("adapter_enter_s"),
                med("list_s"),
                f"{min(listed)}/{threads}" if listed else "–",
                med("per_thread_median_s"),
                _ms(max(r["per_thread_worst_s"] for r in runs)),
                med("gets_wall_s"),
                med("total_s"),
                _ms(max(r["total_s"] for r in runs)),
                f"{min(r['served'] for r in runs)}/{threads}",
                f"{statistics.median(r['requests'] for r in runs):g}",
                max(r["peak_in_flight"] for r in runs),
            ]
        )
    return table(headers, body)


def profile_restart(args: argparse.Namespace, stores: Stores) -> str:
    """cProfile of one SQLite restart (the restarted backend only, from the store's open
    to the last answer): own time, then cumulative."""
    profiler = cProfile.Profile()
    asyncio.run(restart_once("sqlite", stores.target("sqlite"), args, 999, profiler))
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(r"/adapter/", 30)
    return out.getvalue()


def profile_listing(args: argparse.Namespace, stores: Stores, records: int = 400) -> str:
    """cProfile of 20 ``GET /threads`` of ``records`` SQLite records on a worker that
    holds none of them (each listed as the store last saw it), by own time."""
    profiler = cProfile.Profile()

    async def run() -> None:
        fake = new_fake(0.0, 998)
        await fake.__aenter__()
        target = stores.target("sqlite")
        a = await start_worker(fake, target)
        b = await start_worker(fake, target)
        try:
            await gathered([functools.partial(create, a, f"l{i}") for i in range(records)])
            await b.http.get("/threads")
            profiler.enable()
            for _ in range(20):
                await b.http.get("/threads")
            profiler.disable()
        finally:
            await a.close()
            await b.close()
            await fake.aclose()

    asyncio.run(run())
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(20)
    return out.getvalue()


# -- the script ----------------------------------------------------------------------------


def code_version() -> dict[str, Any]:
    """The commit measured, and whether ``adapter/`` differed from it (``None``: no git)."""
    import subprocess

    def git(*argv: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(ROOT), *argv], capture_output=True, text=True)
        except OSError:
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    return {
        "commit": git("rev-parse", "HEAD"),
        "adapter_changes": git("status", "--short", "adapter"),
    }


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}" if seconds < 0.1 else f"{seconds * 1000:.0f}"


async def main_async(args: argparse.Namespace, stores: Stores) -> dict[str, Any]:
    quiet_logging()
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    cost = await per_request(args, stores) if "cost" in args.sections else None
    restart = await restarts(args, stores) if "restart" in args.sections else []
    return {
        "machine": machine(),
        "postgresql": stores.pg_version,
        "pg_fsync": not args.pg_no_fsync,
        "skipped": stores.skipped,
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
        "wall_s": time.perf_counter() - started,
        "args": {k: v for k, v in vars(args).items() if k != "sections"},
        "code": code_version(),
        "per_request": cost,
        "restart": restart,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 requests, 1 restart each")
    parser.add_argument("--requests", type=int, default=500, help="timed requests per row")
    parser.add_argument("--cold", type=int, default=200, help="threads B resumes, per row")
    parser.add_argument("--batches", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--latency-ms", type=float, default=1.0, help="the fake's latency")
    parser.add_argument("--threads", type=int, default=100, help="running threads, restart")
    parser.add_argument("--restart-repeats", type=int, default=3)
    parser.add_argument("--no-postgres", action="store_true", help="skip PostgreSQL")
    parser.add_argument("--pg-no-fsync", action="store_true", help="PostgreSQL with fsync=off")
    parser.add_argument("--sections", default="cost,restart", help="subset of cost,restart")
    parser.add_argument("--profile", action="store_true", help="cProfile one SQLite restart")
    parser.add_argument(
        "--profile-listing", action="store_true", help="cProfile GET /threads of --cold×2 records"
    )
    parser.add_argument("--note", default="", help="free text kept in the JSON")
    args = parser.parse_args()
    if args.quick:
        args.requests, args.cold, args.restart_repeats = 100, 50, 1
    args.sections = set(args.sections.split(","))
    stores = Stores(postgres=not args.no_postgres, fsync=not args.pg_no_fsync)
    try:
        for kind, why in stores.skipped.items():
            print(f"skipped: {kind}: {why}")
        result = asyncio.run(main_async(args, stores))
        kinds = stores.kinds
        cost = result["per_request"]
        if cost is not None:
            print(
                f"\nPer request, ms (one at a time; fake latency {args.latency_ms:g} ms; "
                f"{args.requests} of each held row, {args.cold} of each not-held row, "
                f"{args.batches} interleaved batches; GET /threads lists "
                f"{', '.join(f'{k}: {n}' for k, n in cost['listed'].items())} threads)\n"
            )
            print(per_request_table(cost, kinds))
            print("\nThe store's share (median minus none's), ms\n")
            print(delta_table(cost, kinds))
            if cost["failures"]:
                print(f"\nfailed requests: {cost['failures']}")
        if result["restart"]:
            print(
                f"\nRestart: {args.threads} threads with running turns, a new adapter and "
                f"app on the same store and fake; {args.restart_repeats} repeats\n"
            )
            print(restart_table(result["restart"], kinds, args.threads))
        print(
            f"\nPostgreSQL {stores.pg_version} (fsync {'on' if result['pg_fsync'] else 'off'}); "
            f"load average {result['load_before']:.2f} before, {result['load_after']:.2f} "
            f"after; wall time {result['wall_s']:.0f} s"
        )
        if args.profile and "sqlite" in kinds:
            text = profile_restart(args, stores)
            result["profile"] = text
            print(f"\ncProfile, one SQLite restart of {args.threads} threads:\n{text}")
        if args.profile_listing and "sqlite" in kinds:
            text = profile_listing(args, stores)
            result["profile_listing"] = text
            print(f"\ncProfile, 20 GET /threads of 400 records, none held:\n{text}")
    finally:
        stores.close()
    name = "web_store" + ("-quick" if args.quick else "")
    print(f"JSON: {write_json(name, result)}")


if __name__ == "__main__":
    main()
