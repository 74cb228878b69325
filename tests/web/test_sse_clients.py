"""Stalled and vanished SSE clients cost nothing to the others.

The figures (20 and 50 stalled clients over uvicorn closing together) are in
``benchmarks/web_stalled_clients.py``; these tests pin the two mechanisms without
timings: a checkpoint between frames, so a response whose client went away stops
within a frame or two instead of encoding its whole backlog into the void in one
go; and a send timeout, so a client that never reads is dropped and its
subscription closed while the others go on.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import adapter.web._sse as web_sse
from adapter import OpenCodeAdapter
from adapter.testing.fake import Text
from tests.web.app_driver import T, serves_the_stream, subscribers
from tests.web.conftest import OpenEvents, RunTurn

#: Deltas of the burst: each one a frame for every client.
BURST = 300


async def burst(run_turn: RunTurn, name: str) -> str:
    """A turn of ``BURST`` text deltas, completed; its turn id."""
    return await run_turn(name, [Text("word " * BURST, chunks=BURST)])


async def test_a_client_gone_with_a_backlog_stops_its_response_within_a_few_frames(
    open_events: OpenEvents, oc: OpenCodeAdapter, run_turn: RunTurn
) -> None:
    """uvicorn's send returns at once after a disconnect, and a queue with events in it
    hands them out without suspending: without a checkpoint per frame, the response
    encoded and "sent" its whole backlog before the disconnect was even seen (50
    such clients blocked the loop for seconds)."""
    baseline = subscribers(oc)
    stalled = await open_events(slow=True)
    await burst(run_turn, "backlog")
    assert subscribers(oc) == baseline + 1
    await stalled.disconnect()
    assert stalled.sent_after_gone <= 3, f"{stalled.sent_after_gone} frames sent into the void"
    assert subscribers(oc) == baseline


async def test_a_client_that_never_reads_is_dropped_after_the_send_timeout(
    open_events: OpenEvents,
    oc: OpenCodeAdapter,
    run_turn: RunTurn,
    monkeypatch: pytest.MonkeyPatch,
    captured_logs: list[dict[str, Any]],
) -> None:
    """Its send blocks (the socket buffer is full and it never drains): after
    ``SEND_TIMEOUT`` the response ends and the subscription is closed, while another
    client of the same thread keeps receiving every event."""
    monkeypatch.setattr(web_sse, "SEND_TIMEOUT", 0.2)
    baseline = subscribers(oc)
    stalled = await open_events(slow=True)
    reader = await open_events()
    first = await burst(run_turn, "one")
    frames = await reader.until("turn.completed")
    assert frames[-1].json()["turn_id"] == first
    await stalled.finished(timeout=10)  # the app's call returned: dropped
    assert subscribers(oc) == baseline + 1, "the stalled client's subscription is closed"
    [dropped] = [e for e in captured_logs if e["event"] == "web.events_client_stalled"]
    assert dropped["thread_id"] == T and dropped["send_timeout"] == 0.2
    # the reader is unaffected and follows the next turn too
    second = await burst(run_turn, "two")
    more = await reader.until("turn.completed")
    assert more[-1].json()["turn_id"] == second
    assert len([f for f in frames + more if f.event == "content.delta"]) >= 2 * BURST
    await reader.disconnect()
    assert subscribers(oc) == baseline
    await asyncio.sleep(0)
    assert [t for t in asyncio.all_tasks() if serves_the_stream(t)] == []
