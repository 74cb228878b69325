"""One backoff for every retry: the client's retries and the pump's reconnections.

Each wait is drawn from ``[step / 2, step]``, where the n-th step is ``first_wait *
2 ** (n - 1)`` capped at ``max_wait``: jittered everywhere (a fleet of adapters does
not reconnect in lock-step, not even at the cap), bounded by ``max_wait``, and never
shorter than half its step (the backoff always grows). ``random.uniform`` is pinned to
either end of its range, so each test sees the exact bounds, and the waits are taken
from ``asyncio.sleep`` without sleeping.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from adapter import OpenCodeClient, RequestError, RetryPolicy
from adapter._stream._pump import EventPump
from tests.mocked_tree_api import BASE

#: The reconnect backoff (docs/reliability.md): first step and cap, in seconds.
RECONNECT_FIRST, RECONNECT_MAX = 0.1, 5.0


def step(first: float, most: float, n: int) -> float:
    return min(first * 2.0 ** (n - 1), most)


def record_waits(monkeypatch: pytest.MonkeyPatch, end: str) -> list[float]:
    """Every ``asyncio.sleep`` delay, returned at once; ``random.uniform`` gives ``end``."""
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(delay: float, result: Any = None) -> Any:
        waits.append(delay)
        return await real_sleep(0, result)

    def uniform(a: float, b: float) -> float:
        return a if end == "low" else b

    monkeypatch.setattr(asyncio, "sleep", sleep)
    monkeypatch.setattr(random, "uniform", uniform)
    return waits


class _ScriptedClient:
    """An ``event_stream`` that is refused, or opens and is ended, as scripted."""

    def __init__(self, script: list[str]) -> None:
        self.script = script
        self.opened = 0

    @asynccontextmanager
    async def event_stream(self, **kwargs: Any) -> AsyncIterator[AsyncIterator[Any]]:
        outcome = self.script[self.opened]
        self.opened += 1
        if outcome == "refused":
            raise RequestError("event_stream", "connection failed (ConnectError)")

        async def nothing() -> AsyncIterator[Any]:
            return
            yield  # an async generator that ends at once: the server ended the stream

        yield nothing()


async def reconnect_waits(
    monkeypatch: pytest.MonkeyPatch, end: str, script: list[str]
) -> list[float]:
    waits = record_waits(monkeypatch, end)
    client = _ScriptedClient(script)

    class Sink:
        """Hears nothing of interest; runs the pump until the script is played."""

        def handle(self, event: Any) -> None:
            pass

        def lost(self, error: Exception) -> None:
            pass

        def restored(self) -> None:
            pass

        def skipped(self, kind: str, count: int, reason: str) -> None:
            pass

        def running(self) -> bool:
            return client.opened < len(script)

        unreachable_after = None

        def unreachable(self, seconds: float) -> None:
            pass

    pump = EventPump(None, client, Sink())  # type: ignore[arg-type]
    await asyncio.wait_for(pump.run(), 10)
    return [w for w in waits if w > 0]


# Twelve refused connections (the steps grow past the cap), then five streams that
# open and are ended by the server (each reconnection waits the first step again).
SCRIPT = ["refused"] * 12 + ["dropped"] * 5 + ["refused"]


@pytest.mark.parametrize("end", ["low", "high"])
async def test_the_reconnect_waits_are_jittered_and_bounded(
    monkeypatch: pytest.MonkeyPatch, end: str
) -> None:
    waits = await reconnect_waits(monkeypatch, end, SCRIPT)
    share = 0.5 if end == "low" else 1.0
    refused = [share * step(RECONNECT_FIRST, RECONNECT_MAX, n) for n in range(1, 13)]
    dropped = [share * RECONNECT_FIRST] * 5
    assert waits == pytest.approx(refused + dropped)
    assert max(waits) <= RECONNECT_MAX


async def test_the_client_retry_waits_follow_the_same_backoff(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    policy = RetryPolicy(attempts=5, initial_wait=0.05, max_wait=0.15)
    for end, share in (("low", 0.5), ("high", 1.0)):
        waits = record_waits(monkeypatch, end)
        transport = httpx.MockTransport(lambda request: httpx.Response(503, json={}))
        async with OpenCodeClient(BASE, retry=policy, transport=transport) as client:
            with pytest.raises(RequestError, match="after 5 attempts"):
                await client.status()
        expected = [share * step(0.05, 0.15, n) for n in range(1, 5)]
        assert [w for w in waits if w > 0] == pytest.approx(expected), end


def test_the_backoff_has_one_definition() -> None:
    from adapter._client import _retry

    assert _retry.Backoff(RECONNECT_FIRST, RECONNECT_MAX) == _retry.RECONNECT_BACKOFF
    assert RetryPolicy(initial_wait=0.05, max_wait=1.0).backoff == _retry.Backoff(0.05, 1.0)
