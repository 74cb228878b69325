"""The walks the stop_tree benchmark compares, each driving the same ``OpenCodeClient``.

Only the schedule of requests differs between them; see the docstring of
``benchmarks/stop_tree.py`` for what each one is.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from adapter import NotFoundError, OpenCodeError, stop_tree
from benchmarks._stop_tree import P
from benchmarks._stop_tree.backends import Backend

T = TypeVar("T")

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
