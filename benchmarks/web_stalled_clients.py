"""Benchmark: stalled SSE clients of ``adapter.web`` closing together.

uvicorn serves ``create_app`` on 127.0.0.1 over an adapter of the in-process fake
server. N clients open ``GET /threads/t/events`` on raw sockets with a 4 KiB receive
buffer, read the headers and stop reading. A turn then streams ``--deltas`` text
deltas (each a frame for every client), so every stalled response blocks in its
send with the rest of the turn queued for it. Then all N sockets are closed at once.

Measured in the server's process, on its event loop:

* **longest loop block**: a task that sleeps 5 ms and records how late it wakes;
  the worst lateness during the flood and in the 3 s after the close;
* **GET latency**: another thread sends ``GET /threads`` every 20 ms over
  keep-alive during the whole case; the slowest answer started after the close;
* **drained**: seconds from the close until the adapter has no subscription left.

Two implementations of the events route, one after the other in the same run:
``before`` (the route as it was: sse-starlette without a send timeout, frames
taken from the queue without a checkpoint) and ``now`` (``adapter.web._sse``).

Printed as a Markdown table and written to ``benchmarks/results/web_stalled_clients.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import http.client
import json
import pstats
import socket
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import uvicorn
from sse_starlette import EventSourceResponse, ServerSentEvent

import adapter
import adapter.web._app as web_app
from adapter import OpenCodeAdapter, Timeouts
from adapter.testing.fake import FakeOpenCodeServer, Text
from adapter.web import create_app
from benchmarks._common import machine, quiet_logging, table, write_json

THREAD = "t"


def before_event_response(
    subscribe: Callable[[], adapter.EventStream],
    thread_id: str,
    *,
    ping: float,
    ids: object = None,
    lead: object = None,
) -> EventSourceResponse:
    """The events route as it was before the send timeout (adapter/web/_sse.py at aeacf0a).

    ``ids`` and ``lead`` are taken and ignored: the app passes them since the route
    gained per-connection frame ids and a leading gap, which the old route had not.
    """

    async def frames() -> AsyncIterator[ServerSentEvent]:
        async with subscribe() as stream:
            async for event in stream:
                data = json.dumps(event.to_dict(), separators=(",", ":"))
                if isinstance(event, adapter.StreamGap):
                    yield ServerSentEvent(data=data, event=event.type, id=event.last_event_id)
                else:
                    yield ServerSentEvent(data=data, event=event.type, id=event.event_id)
                if isinstance(event, adapter.SessionExited):
                    return
                if isinstance(event, adapter.StreamGap) and event.reason == "overflow":
                    return

    return EventSourceResponse(frames(), ping=ping)


class LoopMonitor:
    """How late a 5 ms sleep wakes up: the loop's longest block, per window."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, float]] = []  # (woke at, lateness)
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            start = time.perf_counter()
            await asyncio.sleep(0.005)
            now = time.perf_counter()
            self.samples.append((now, now - start - 0.005))

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    def worst(self, start: float, end: float) -> float:
        return max((late for at, late in self.samples if start <= at <= end), default=0.0)


class Prober(threading.Thread):
    """``GET /threads`` every 20 ms over one keep-alive connection, timed."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.samples: list[tuple[float, float]] = []  # (sent at, seconds to answer)
        self.errors = 0
        self.halt = threading.Event()

    def run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        while not self.halt.is_set():
            start = time.perf_counter()
            try:
                conn.request("GET", "/threads", headers={"Host": f"127.0.0.1:{self.port}"})
                response = conn.getresponse()
                response.read()
                if response.status != 200:
                    self.errors += 1
            except OSError:
                self.errors += 1
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            self.samples.append((start, time.perf_counter() - start))
            time.sleep(0.02)
        conn.close()

    def worst_after(self, start: float) -> float:
        return max((took for at, took in self.samples if at + took >= start), default=0.0)


def open_stalled(port: int, count: int) -> list[socket.socket]:
    """``count`` event streams whose readers read the headers and then nothing."""
    sockets = []
    request = (
        f"GET /threads/{THREAD}/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        "Accept: text/event-stream\r\n\r\n"
    ).encode()
    for _ in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", port))
        sock.sendall(request)
        head = b""
        while b"\r\n\r\n" not in head:
            head += sock.recv(1024)
        assert head.startswith(b"HTTP/1.1 200"), head[:100]
        sockets.append(sock)
    return sockets


def close_all(sockets: list[socket.socket]) -> None:
    for sock in sockets:
        # unread data in the receive buffer: the kernel answers the close with a reset
        sock.close()


async def run_case(
    mode: str, clients: int, deltas: int, profile: cProfile.Profile | None = None
) -> dict[str, Any]:
    fake = FakeOpenCodeServer(seed=7)
    # "before" serves the SSE responses the way the app did before the fix: the
    # app's module-level name is swapped for the old response for this case only.
    before = mock.patch.object(web_app, "event_response", before_event_response)
    if mode == "before":
        before.start()
    try:
        async with OpenCodeAdapter(
            fake.base_url, transport=fake.transport, timeouts=Timeouts(abort=2.0, tree=2.0)
        ) as oc:
            app = create_app(oc, ping=0)
            config = uvicorn.Config(
                app, host="127.0.0.1", port=0, log_level="critical", lifespan="off"
            )
            server = uvicorn.Server(config)
            serving = asyncio.create_task(server.serve())
            while not server.started:
                await asyncio.sleep(0.01)
            port = server.servers[0].sockets[0].getsockname()[1]
            await oc.start_session(THREAD)
            hub = oc._registry.hub
            baseline = hub.subscribers
            sockets = await asyncio.to_thread(open_stalled, port, clients)
            while hub.subscribers < baseline + clients:
                await asyncio.sleep(0.01)
            monitor = LoopMonitor()
            monitor.start()
            prober = Prober(port)
            prober.start()

            # a short sleep before each delta: the fake's own emitting must not be what blocks
            fake.script("flood", [Text("word " * deltas * 150, chunks=deltas, delay=0.0001)])
            flood_start = time.perf_counter()
            turn = await oc.send_turn(THREAD, "[[script:flood]]")
            async with oc.events(THREAD, replay=True) as stream:
                async for event in stream:
                    if event.type == "turn.completed" and event.turn_id == turn.turn_id:
                        break
            flood_end = time.perf_counter()
            await asyncio.sleep(0.3)

            if profile is not None:
                profile.enable()
            closed_at = time.perf_counter()
            await asyncio.to_thread(close_all, sockets)
            drained = None
            while time.perf_counter() - closed_at < 30:
                if hub.subscribers == baseline:
                    drained = time.perf_counter() - closed_at
                    break
                await asyncio.sleep(0.005)
            if profile is not None:
                await asyncio.sleep(0.5)
                profile.disable()
            await asyncio.sleep(max(0.0, closed_at + 3.0 - time.perf_counter()))
            prober.halt.set()
            await asyncio.to_thread(prober.join)
            await monitor.stop()
            result = {
                "mode": mode,
                "clients": clients,
                "deltas": deltas,
                "flood_s": flood_end - flood_start,
                "block_during_flood_s": monitor.worst(flood_start, flood_end),
                "block_after_close_s": monitor.worst(closed_at, closed_at + 3.0),
                "get_worst_after_close_s": prober.worst_after(closed_at),
                "get_errors": prober.errors,
                "drained_s": drained,
                "subscribers_left": hub.subscribers - baseline,
            }
            server.should_exit = True
            await serving
            return result
    finally:
        if mode == "before":
            before.stop()
        await fake.aclose()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--clients", type=int, nargs="+", default=[20, 50])
    parser.add_argument("--deltas", type=int, default=5000)
    parser.add_argument("--modes", nargs="+", default=["before", "now"])
    parser.add_argument(
        "--profile", action="store_true", help="cProfile the close of each case (top 25)"
    )
    args = parser.parse_args()
    quiet_logging()
    rows = []
    for clients in args.clients:
        for mode in args.modes:
            profile = cProfile.Profile() if args.profile else None
            result = await run_case(mode, clients, args.deltas, profile)
            rows.append(result)
            print(json.dumps(result), flush=True)
            if profile is not None:
                pstats.Stats(profile).sort_stats("tottime").print_stats(25)
    print()
    print(
        table(
            [
                "route",
                "stalled clients",
                "deltas",
                "worst block, flood (s)",
                "worst block, after close (s)",
                "worst GET /threads after close (s)",
                "all subscriptions closed after (s)",
            ],
            [
                [
                    r["mode"],
                    r["clients"],
                    r["deltas"],
                    r["block_during_flood_s"],
                    r["block_after_close_s"],
                    r["get_worst_after_close_s"],
                    r["drained_s"],
                ]
                for r in rows
            ],
        )
    )
    path = write_json("web_stalled_clients", {"machine": machine(), "runs": rows})
    print(f"\nwritten to {path}")


if __name__ == "__main__":
    asyncio.run(main())
