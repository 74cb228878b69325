"""Load: one adapter, many threads, turns interrupted at random, for a fixed time.

200 threads on one in-process fake server with latency; each thread loops:
send a turn (a script that streams text, runs a tool, then works until
stopped), wait a random moment, press Stop, check the result. Reports stops
per second, interrupt latency percentiles, errors (the goal is 0), and the
tasks and memory held at the end compared with the start.

    .venv/bin/python benchmarks/load.py                 # 200 threads, 20 s
    .venv/bin/python benchmarks/load.py --quick         # 50 threads, 5 s
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import statistics
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from adapter import OpenCodeAdapter, Timeouts
from adapter.testing.fake import FakeOpenCodeServer, Hang, Task, Text, Tool
from benchmarks._common import machine, quiet_logging, table, write_json


async def worker(
    oc: OpenCodeAdapter,
    thread: str,
    deadline: float,
    rng: random.Random,
    latencies: list[float],
    errors: list[str],
) -> int:
    stops = 0
    await oc.start_session(thread)
    while time.monotonic() < deadline:
        try:
            await oc.send_turn(thread, "work [[script:load]]")
            await asyncio.sleep(rng.uniform(0.0, 0.2))
            t0 = time.perf_counter()
            result = await oc.interrupt_turn(thread)
            latencies.append(time.perf_counter() - t0)
            if result.stop is None or not result.stop.ok:
                errors.append(f"{thread}: stop not ok")
            stops += 1
        except Exception as exc:  # every error counts; the goal is none
            errors.append(f"{thread}: {type(exc).__name__}: {exc}")
    return stops


async def run(threads: int, seconds: float, latency: float) -> dict[str, Any]:
    quiet_logging()
    rng = random.Random(7)
    fake = FakeOpenCodeServer(latency=latency, jitter=latency / 2, seed=7)
    fake.script("child", [Text("sub work"), Hang()])
    fake.script(
        "load",
        [
            Text("thinking", chunks=2),
            Tool("bash", {"command": "echo x"}, output="x\n"),
            Task("help", "child"),
            Hang(),
        ],
    )
    gc.collect()
    tasks_before = len(asyncio.all_tasks())
    tracemalloc.start()
    mem_before = tracemalloc.get_traced_memory()[0]
    latencies: list[float] = []
    errors: list[str] = []
    started = time.monotonic()
    oc = OpenCodeAdapter(fake.base_url, transport=fake.transport, timeouts=Timeouts(connect=30))
    async with oc:
        events = oc.events()
        counted = asyncio.create_task(_drain(events))
        deadline = time.monotonic() + seconds
        stops = await asyncio.gather(
            *(worker(oc, f"t{i}", deadline, rng, latencies, errors) for i in range(threads))
        )
        elapsed = time.monotonic() - started
        peak = tracemalloc.get_traced_memory()[1]
    event_count = await counted
    await fake.aclose()
    fake_max_in_flight = fake.max_in_flight
    del fake, oc  # the fake keeps its own history; what is left after this is ours
    gc.collect()
    mem_after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    await asyncio.sleep(0)
    tasks_after = len(asyncio.all_tasks())
    total = sum(stops)
    lat_ms = sorted(x * 1000 for x in latencies)
    return {
        "threads": threads,
        "seconds": seconds,
        "latency_ms": latency * 1000,
        "stops": total,
        "stops_per_s": total / elapsed,
        "events": event_count,
        "p50_ms": statistics.median(lat_ms) if lat_ms else None,
        "p99_ms": lat_ms[min(len(lat_ms) - 1, int(len(lat_ms) * 0.99))] if lat_ms else None,
        "max_ms": lat_ms[-1] if lat_ms else None,
        "errors": len(errors),
        "error_samples": errors[:5],
        "tasks_before": tasks_before,
        "tasks_after": tasks_after,
        "memory_before_kib": mem_before / 1024,
        "memory_peak_kib": peak / 1024,
        "memory_after_kib": mem_after / 1024,
        "fake_max_in_flight": fake_max_in_flight,
    }


async def _drain(events: Any) -> int:
    n = 0
    async for _ in events:
        n += 1
    return n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", type=int)
    parser.add_argument("--seconds", type=float)
    parser.add_argument("--latency-ms", type=float, default=5.0)
    args = parser.parse_args()
    threads = args.threads or (50 if args.quick else 200)
    seconds = args.seconds or (5.0 if args.quick else 20.0)
    result = asyncio.run(run(threads, seconds, args.latency_ms / 1000))
    rows = [
        ["threads", result["threads"]],
        ["duration (s)", result["seconds"]],
        ["simulated latency per request (ms)", result["latency_ms"]],
        ["stops", result["stops"]],
        ["stops per second", f"{result['stops_per_s']:.1f}"],
        ["canonical events delivered", result["events"]],
        ["interrupt latency p50 (ms)", f"{result['p50_ms']:.1f}"],
        ["interrupt latency p99 (ms)", f"{result['p99_ms']:.1f}"],
        ["interrupt latency max (ms)", f"{result['max_ms']:.1f}"],
        ["errors", result["errors"]],
        ["asyncio tasks before / after", f"{result['tasks_before']} / {result['tasks_after']}"],
        [
            "traced memory before / peak / after (KiB)",
            f"{result['memory_before_kib']:.0f} / {result['memory_peak_kib']:.0f} / "
            f"{result['memory_after_kib']:.0f}",
        ],
        ["peak requests in flight at the server", result["fake_max_in_flight"]],
    ]
    print(table(["figure", "value"], rows))
    for sample in result["error_samples"]:
        print("error:", sample)
    path = write_json("load" + ("-quick" if args.quick else ""), {"machine": machine(), **result})
    print(f"\nJSON: {path}")


if __name__ == "__main__":
    main()
