"""Where a stop_tree request's time goes at L = 0: layer by layer, then profiled.

The cost floor of any walk is the client and transport's per-request CPU; the
layers are timed one at a time so a slower walk can be told from a slower stack.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from benchmarks._common import profiled
from benchmarks._stop_tree import P
from benchmarks._stop_tree.backends import Backend, FakeBackend
from benchmarks._stop_tree.strategies import run_stop_tree
from benchmarks._stop_tree.trees import Tree


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
    """stop_tree(verify=False) on ``tree`` at L = 0, timed plain and then profiled."""
    backend = Backend(tree)
    backend.configure(0.0, 0.0, 1)
    try:
        await run_stop_tree(backend, verify=False)  # warm
        gc.collect()
        t0 = time.perf_counter()
        await run_stop_tree(backend, verify=False)
        plain = time.perf_counter() - t0
        gc.collect()
        done = await profiled(lambda: run_stop_tree(backend, verify=False), "stop_tree_profile.txt")
    finally:
        await backend.aclose()
    if done is None:
        return None
    return {"tree": tree.name, "elapsed_s": plain, **done[1]}
