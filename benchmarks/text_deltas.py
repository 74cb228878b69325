"""Benchmark long streamed text: the loop's longest block and the memory held.

A turn of the in-process fake server (:class:`adapter.testing.FakeOpenCodeServer`)
streams one text part as many ``message.part.delta`` events, through a live
:class:`adapter.OpenCodeAdapter` (client, pump, translator, partial-result
collector, replay history) to one consumer of ``adapter.events()``.

The run hangs after its text, as when a Stop comes mid-answer: the part's final
snapshot (the whole text in one event) is never sent, so only deltas are measured.

* **Time**: ``--count`` deltas of ``--size`` bytes (default 2,000 of 10 KB): the
  time from ``send_turn`` to the consumer's last ``content.delta`` and the longest
  stretch the event loop was blocked (a ticker task sleeping 1 ms measures its own
  lateness).
* **Memory**: ``--mem-count`` deltas of ``--mem-size`` (default 60 of 3 MB) under
  ``tracemalloc``: what the adapter's modules (``adapter/`` without
  ``adapter/testing/``, i.e. not the fake server's own copy of the text) still hold
  after the deltas, after ``interrupt_turn``, after ``stop_session`` and after the
  adapter closed.

Run it on two commits to compare (``git worktree add /tmp/old <commit>`` and
``PYTHONPATH=/tmp/old python benchmarks/text_deltas.py``): the script imports
whatever ``adapter`` is first on the path and prints its location.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import adapter
from adapter import OpenCodeAdapter
from adapter.testing.fake import FakeOpenCodeServer, Hang, Text
from benchmarks._common import quiet_logging

MiB = 1024 * 1024
THREAD = "bench"


async def _deltas(stream: Any, count: int) -> None:
    seen = 0
    async for event in stream:
        if event.type == "content.delta":
            seen += 1
            if seen == count:
                return


async def time_deltas(count: int, size: int) -> dict[str, float]:
    """Seconds from send to the last ``content.delta``, and the loop's longest block."""
    fake = FakeOpenCodeServer(seed=7)
    # The run hangs after its text: the part's final snapshot (the whole text) is
    # not sent, as when a Stop comes mid-answer; what is timed is the deltas.
    fake.script("s", [Text("x" * (count * size), chunks=count), Hang()])
    longest = 0.0
    running = True

    async def ticker() -> None:
        nonlocal longest
        while running:
            before = time.perf_counter()
            await asyncio.sleep(0.001)
            longest = max(longest, time.perf_counter() - before - 0.001)

    try:
        async with OpenCodeAdapter(fake.base_url, transport=fake.transport) as oc:
            await oc.start_session(THREAD)
            stream = oc.events(THREAD, max_queue=count * 4)
            tick = asyncio.create_task(ticker())
            start = time.perf_counter()
            await oc.send_turn(THREAD, "go [[script:s]]")
            await _deltas(stream, count)
            total = time.perf_counter() - start
            running = False
            await tick
            await stream.aclose()
            await oc.interrupt_turn(THREAD)
    finally:
        await fake.aclose()
    return {"total_s": total, "longest_block_s": longest}


def _adapter_bytes() -> int:
    """Bytes the adapter's own modules hold (not the fake server's, not this script's)."""
    snapshot = tracemalloc.take_snapshot().filter_traces(
        (
            tracemalloc.Filter(True, f"{adapter.__path__[0]}/*"),
            tracemalloc.Filter(False, f"{adapter.__path__[0]}/testing/*"),
        )
    )
    return sum(stat.size for stat in snapshot.statistics("filename"))


async def memory_held(count: int, size: int) -> dict[str, float]:
    """MiB the adapter holds after the deltas, after the interrupt and after the stop."""
    fake = FakeOpenCodeServer(seed=7)
    fake.script("s", [Text("x" * (count * size), chunks=count), Hang()])
    out: dict[str, float] = {}
    tracemalloc.start(1)
    try:
        gc.collect()
        base = _adapter_bytes()
        async with OpenCodeAdapter(fake.base_url, transport=fake.transport) as oc:
            await oc.start_session(THREAD)
            stream = oc.events(THREAD, max_queue=count * 4)
            await oc.send_turn(THREAD, "go [[script:s]]")
            await _deltas(stream, count)
            await stream.aclose()
            del stream
            gc.collect()
            out["after_deltas_mib"] = (_adapter_bytes() - base) / MiB
            result = await oc.interrupt_turn(THREAD)
            del result
            gc.collect()
            out["after_interrupt_mib"] = (_adapter_bytes() - base) / MiB
            await oc.stop_session(THREAD)
            gc.collect()
            out["after_stop_mib"] = (_adapter_bytes() - base) / MiB
        gc.collect()
        out["after_close_mib"] = (_adapter_bytes() - base) / MiB
    finally:
        tracemalloc.stop()
        await fake.aclose()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--count", type=int, default=2_000)
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--mem-count", type=int, default=60)
    parser.add_argument("--mem-size", type=int, default=3_000_000)
    args = parser.parse_args()
    quiet_logging()
    print(f"adapter from {adapter.__path__[0]}")
    timing = asyncio.run(time_deltas(args.count, args.size))
    print(
        f"{args.count} deltas of {args.size} bytes: total {timing['total_s']:.2f} s, "
        f"longest event-loop block {timing['longest_block_s'] * 1000:.0f} ms"
    )
    memory = asyncio.run(memory_held(args.mem_count, args.mem_size))
    print(
        f"{args.mem_count} deltas of {args.mem_size} bytes, adapter memory held (tracemalloc): "
        + ", ".join(f"{k.removesuffix('_mib')} {v:.1f} MiB" for k, v in memory.items())
    )


if __name__ == "__main__":
    main()
