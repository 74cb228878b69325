"""Benchmark the event pump: native events in, canonical events out.

A recorded stream (``tests/fixtures/events-nested.jsonl``: a root session, six
subagent sessions, tool calls, text deltas) is replayed at full speed by a
tiny HTTP/1.1 server on 127.0.0.1 (h11, in a child process, so it does not
compete with the measured side for the event loop). Each repetition of the
recording gets fresh session, message, part and call ids; the root keeps its
id, so every event belongs to the adapter's thread. The root's idle and error
events are left out, so the turn stays open and its output keeps counting.

Three readers consume the same bytes:

* ``httpx-sse`` -- ``aconnect_sse(...).aiter_sse()`` and nothing else: the
  ceiling;
* ``OpenCodeClient.event_stream`` -- the client's decoder (SSE, JSON, shape
  checks);
* ``OpenCodeAdapter`` -- the pump: decode, route by session, keep the partial
  result, map to canonical events, deliver them to a consumer of
  ``adapter.events()``.

Printed as Markdown tables and written to ``benchmarks/results/events.json``.
``--quick`` replays 20,000 events, the full run 100,000 (plus a pass under
tracemalloc for the memory the adapter still holds after the stream).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import functools
import gc
import json
import os
import re
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import h11
import httpx
import httpx_sse

from adapter import OpenCodeAdapter, OpenCodeClient, RawEvent, Timeouts
from adapter._client._native import SessionCreated, parse_native
from adapter._exceptions import NativeEventError
from adapter._stop._partial_collector import PartialCollector
from benchmarks._common import (
    ROOT,
    arguments,
    machine,
    profile_section,
    profiled,
    quiet_logging,
    say_written,
    table,
    write_json,
)

FIXTURE = ROOT / "tests" / "fixtures" / "events-nested.jsonl"
PLACEHOLDER = "msg_BENCHPROMPT{}xxxxxxxxxxxxxxx"  # replaced by the id the adapter minted
END_TITLE = "benchmark end"
#: CPU µs per native event through the pump before each event was parsed once (10.5 to
#: 11.1 measured), and of the httpx-sse + json.loads reader in the same runs (4.5 to 4.6),
#: on a quiet machine: the baseline the parse-once pump is held to.
BASELINE_CPU_US = 10.5
BASELINE_JSON_US = 4.5
#: The parse-once goal as a ratio to the json.loads reader of the same run, which a busy
#: machine slows about as much as the adapter: half the baseline, over that reader then.
RATIO_GOAL = BASELINE_CPU_US / 2 / BASELINE_JSON_US
_ID = re.compile(r"\b(ses|msg|prt|evt|call)_[A-Za-z0-9_-]+")

# --------------------------------------------------------------------------- the stream


def recording() -> tuple[list[dict[str, Any]], list[str], dict[str, str]]:
    """The recorded events, its root sessions, and each root prompt's message id.

    The recording holds three independent trees (three prompts); the benchmark
    gives each root its own adapter thread.
    """
    events = [json.loads(line)["event"] for line in FIXTURE.read_text().splitlines() if line]
    roots = [
        e["properties"]["sessionID"]
        for e in events
        if e["type"] == "session.created" and not e["properties"]["info"].get("parentID")
    ]
    prompts = {
        e["properties"]["info"]["sessionID"]: e["properties"]["info"]["id"]
        for e in events
        if e["type"] == "message.updated"
        and e["properties"]["info"].get("role") == "user"
        and e["properties"]["info"].get("sessionID") in roots
    }
    return events, roots, prompts


def _keep(event: dict[str, Any], roots: list[str]) -> bool:
    props = event["properties"]
    if event["type"] == "server.connected":
        return False  # the replay server sends its own
    if props.get("sessionID") not in roots:
        return True
    if event["type"] in ("session.idle", "session.error"):
        return False  # would end the turn: everything after it would be dropped
    if event["type"] == "session.status":
        status = props.get("status")
        return not (isinstance(status, dict) and status.get("type") == "idle")
    return True


def build_stream(count: int) -> tuple[bytes, list[str], int]:
    """``count`` SSE frames (plus an end marker), the root ids, and frames per repetition."""
    events, roots, prompts = recording()
    placeholders = {prompts[root]: PLACEHOLDER.format(i) for i, root in enumerate(roots)}
    templates = [json.dumps(e, separators=(",", ":")) for e in events if _keep(e, roots)]
    per_rep = len(templates)
    frames: list[bytes] = []
    rep = 0
    while len(frames) < count:
        suffix = f"x{rep:x}"

        def fresh(match: re.Match[str], suffix: str = suffix) -> str:
            text = match.group(0)
            if text in roots:
                return text
            if text in placeholders:
                return placeholders[text]
            return text + suffix

        for template in templates:
            if len(frames) == count:
                break
            frames.append(b"data: " + _ID.sub(fresh, template).encode() + b"\n\n")
        rep += 1
    end = {
        "id": "evt_benchmarkend",
        "type": "session.updated",
        "properties": {
            "sessionID": roots[0],
            "info": {"id": roots[0], "title": END_TITLE, "time": {"created": 1, "updated": 2}},
        },
    }
    frames.append(b"data: " + json.dumps(end, separators=(",", ":")).encode() + b"\n\n")
    return b"".join(frames), roots, per_rep


# --------------------------------------------------------------------------- the server


class ReplayServer:
    """``GET /event`` replays the stream; just enough of the session API around it.

    Under ``/raw/...`` the stream starts as soon as it is opened. Otherwise
    ``POST /session`` hands out the recorded roots in turn, and the stream waits
    until each root got its ``POST /session/{id}/prompt_async``, then puts each
    prompt's message id into the replay, as a real server echoes it.
    """

    def __init__(self, payload: bytes, roots: list[str]) -> None:
        self.payload = payload
        self.roots = roots
        self.created = 0
        self.prompts: dict[str, str] = {}
        self.ready: asyncio.Event | None = None

    def session(self, root: str) -> bytes:
        return json.dumps(
            {
                "id": root,
                "slug": "bench",
                "version": "1.18.34",
                "projectID": "global",
                "directory": "/home/dev/project",
                "title": "New session - 2026-01-01T00:00:00.000Z",
                "time": {"created": 1, "updated": 1},
            }
        ).encode()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                request, body = await self._read_request(conn, reader)
                if request is None:
                    return
                target = request.target.decode()
                path = target.split("?", 1)[0]
                if path.endswith("/event"):
                    await self._stream(conn, reader, writer, raw=path.startswith("/raw/"))
                    return
                status, content = self._route(request.method.decode(), path, body)
                headers = [
                    ("content-type", "application/json"),
                    ("content-length", str(len(content))),
                ]
                writer.write(conn.send(h11.Response(status_code=status, headers=headers)) or b"")
                writer.write(conn.send(h11.Data(data=content)) or b"")
                writer.write(conn.send(h11.EndOfMessage()) or b"")
                await writer.drain()
                if conn.our_state is h11.MUST_CLOSE:
                    return
                conn.start_next_cycle()
        except (ConnectionError, h11.ProtocolError):
            return
        finally:
            writer.close()

    async def _read_request(
        self, conn: h11.Connection, reader: asyncio.StreamReader
    ) -> tuple[h11.Request | None, bytes]:
        request: h11.Request | None = None
        body = b""
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await reader.read(65536)
                conn.receive_data(data)
                if not data and request is None:
                    return None, b""
                continue
            if isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                return request, body
            else:  # ConnectionClosed, PAUSED
                return None, b""

    def _route(self, method: str, path: str, body: bytes) -> tuple[int, bytes]:
        parts = [p for p in path.split("/") if p]
        if parts == ["session"] and method == "POST":
            root = self.roots[self.created % len(self.roots)]
            self.created += 1
            return 200, self.session(root)
        if parts == ["session", "status"]:
            return 200, b"{}"
        if len(parts) == 3 and parts[0] == "session":
            if parts[2] == "prompt_async" and method == "POST":
                self.prompts[parts[1]] = json.loads(body).get("messageID", "")
                if len(self.prompts) == len(self.roots) and self.ready is not None:
                    self.ready.set()
                return 204, b""
            if parts[2] == "abort":
                return 200, b"true"
            if parts[2] in ("children", "message"):
                return 200, b"[]"
        if len(parts) == 2 and parts[0] == "session":
            return 200, self.session(parts[1])
        return 404, b'{"name":"NotFoundError","data":{"message":"not found"}}'

    async def _stream(
        self,
        conn: h11.Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        raw: bool,
    ) -> None:
        headers = [
            ("content-type", "text/event-stream"),
            ("cache-control", "no-cache"),
            ("transfer-encoding", "chunked"),
        ]
        writer.write(conn.send(h11.Response(status_code=200, headers=headers)) or b"")
        hello = b'data: {"id":"evt_hello","type":"server.connected","properties":{}}\n\n'
        writer.write(conn.send(h11.Data(data=hello)) or b"")
        await writer.drain()
        payload = self.payload
        if not raw:
            # A new adapter run: its stream connects before its prompts are sent (the
            # pump starts with the first thread), so the previous run's ids are stale.
            self.prompts = {}
            self.ready = asyncio.Event()
            if len(self.prompts) < len(self.roots):
                await self.ready.wait()
            for i, root in enumerate(self.roots):
                payload = payload.replace(
                    PLACEHOLDER.format(i).encode(), self.prompts[root].encode()
                )
        for start in range(0, len(payload), 256 * 1024):
            writer.write(conn.send(h11.Data(data=payload[start : start + 256 * 1024])) or b"")
            await writer.drain()
        await reader.read()  # keep the stream open until the reader goes away


async def serve(count: int) -> None:
    payload, roots, per_rep = build_stream(count)
    server = ReplayServer(payload, roots)
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    info = {"port": port, "roots": roots, "bytes": len(payload), "per_repetition": per_rep}
    print(json.dumps(info), flush=True)
    async with listener:
        await listener.serve_forever()


# --------------------------------------------------------------------------- readers


async def _over_sse(
    base: str, count: int, reader: str, decode: Callable[[str], object] | None
) -> dict[str, Any]:
    """The stream through httpx-sse alone, or with ``decode`` applied to every payload."""
    expected = count + 2  # server.connected, the stream, the end marker
    seen = 0
    async with httpx.AsyncClient(timeout=60) as http:
        gc.collect()
        t0 = time.perf_counter()
        cpu0 = time.process_time()
        async with httpx_sse.aconnect_sse(http, "GET", f"{base}/raw/event") as source:
            async for sse in source.aiter_sse():
                if decode is not None:
                    decode(sse.data)
                seen += 1
                if seen == expected:
                    break
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    return {"reader": reader, "events": seen, "elapsed": elapsed, "cpu": cpu}


async def _over_client(
    base: str, count: int, reader: str, handle: Callable[[RawEvent], None] | None
) -> dict[str, Any]:
    """The stream through ``OpenCodeClient.event_stream``, each event given to ``handle``."""
    expected = count + 2
    seen = 0
    async with OpenCodeClient(f"{base}/raw", timeout=60) as client:
        gc.collect()
        t0 = time.perf_counter()
        cpu0 = time.process_time()
        async with client.event_stream(read_timeout=60) as events:
            async for raw in events:
                if handle is not None:
                    handle(raw)
                seen += 1
                if seen == expected:
                    break
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    return {"reader": reader, "events": seen, "elapsed": elapsed, "cpu": cpu}


async def read_raw(base: str, count: int) -> dict[str, Any]:
    """httpx-sse alone: the ceiling."""
    return await _over_sse(base, count, "httpx-sse aiter_sse (ceiling)", None)


async def read_json(base: str, count: int) -> dict[str, Any]:
    """httpx-sse plus ``json.loads`` of every payload: the decoding floor."""
    return await _over_sse(base, count, "httpx-sse + json.loads", json.loads)


async def read_client(base: str, count: int) -> dict[str, Any]:
    """OpenCodeClient.event_stream: SSE, JSON and shape checks."""
    return await _over_client(base, count, "OpenCodeClient.event_stream", None)


async def read_decoder(base: str, count: int, name: str) -> dict[str, Any] | None:
    """httpx-sse plus a faster JSON decoder (``orjson`` or ``msgspec``), if installed."""
    decode: Callable[[str], Any]
    try:
        if name == "orjson":
            import orjson

            decode = orjson.loads
        else:
            import msgspec

            decode = msgspec.json.Decoder().decode
    except ImportError:
        return None
    return await _over_sse(base, count, f"httpx-sse + {name}", decode)


async def read_native(base: str, count: int, roots: list[str], *, collect: bool) -> dict[str, Any]:
    """The client's stream, each event parsed once (``parse_native``); with ``collect``,
    one ``PartialCollector`` per root consuming the records, as a turn's collector does.

    These are the parts of the pump this module's owners control; the adapter's own
    routing and mapping come on top (``read_adapter``).
    """
    # session -> the collector of its tree (the adapter's owner map, in miniature)
    owners = {root: PartialCollector(root) for root in roots} if collect else {}

    def handle(raw: RawEvent) -> None:
        try:
            event = parse_native(raw)
        except NativeEventError:
            return
        if event is None or not collect or event.session_id is None:
            return
        collector = owners.get(event.session_id)
        if collector is None and isinstance(event, SessionCreated):
            collector = owners.get(event.parent_id or "")
            if collector is not None:
                owners[event.session_id] = collector
        if collector is not None:
            collector.observe_native(event)

    name = "+ parse_native + PartialCollector" if collect else "+ parse_native"
    return await _over_client(base, count, f"OpenCodeClient {name}", handle)


async def read_adapter(
    base: str, count: int, *, roots: int = 3, trace: bool = False
) -> dict[str, Any]:
    """The whole pump, one thread per recorded root, one consumer of ``adapter.events()``."""
    kinds: collections.Counter[str] = collections.Counter()
    held: dict[str, Any] = {}
    threads = [f"bench-{i}" for i in range(roots)]
    async with OpenCodeAdapter(base, timeouts=Timeouts(request=60)) as oc:
        events = oc.events()
        for thread in threads:
            await oc.start_session(thread)
        gc.collect()
        if trace:
            tracemalloc.start(1)
            before = tracemalloc.take_snapshot()
            before_bytes = tracemalloc.get_traced_memory()[0]
        t0 = time.perf_counter()
        cpu0 = time.process_time()
        for thread in threads:
            await oc.send_turn(thread, "replay")
        async for event in events:
            kinds[event.type] += 1
            if event.type == "thread.metadata.updated" and getattr(event, "title", "") == END_TITLE:
                break
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        if trace:
            del event
            gc.collect()
            after_bytes = tracemalloc.get_traced_memory()[0]
            after = tracemalloc.take_snapshot()
            tracemalloc.stop()
            top = after.compare_to(before, "filename")
            held = {
                "held_bytes": after_bytes - before_bytes,
                "top_files": [
                    {
                        "file": _short(s.traceback[0].filename),
                        "bytes": s.size_diff,
                        "blocks": s.count_diff,
                    }
                    for s in top[:8]
                    if s.size_diff > 0
                ],
                "threads": len(oc.list_sessions()),
                "sessions_in_trees": _sessions_in_trees(oc, threads),
                "consumer_backlog": events.backlog,
            }
        await events.aclose()
    canonical = sum(kinds.values()) - kinds.get("turn.started", 0)  # emitted by send_turn
    return {
        "reader": "OpenCodeAdapter pump + one consumer",
        "events": count + 1,
        "canonical": canonical,
        "canonical_kinds": dict(kinds),
        "elapsed": elapsed,
        "cpu": cpu,
        **held,
    }


def _sessions_in_trees(oc: OpenCodeAdapter, threads: list[str]) -> int | None:
    """A benchmark may peek: the sessions the threads track, if this adapter says so."""
    # The threads sit in the adapter's registry (or elsewhere in another checkout the
    # benchmark is run on); a peek that no longer fits reports nothing, not a failure.
    core = getattr(oc, "_registry", None)
    registry: Any = getattr(core, "threads", None) or getattr(oc, "_threads", None)
    try:
        return sum(len(registry[t].sessions) for t in threads)
    except (TypeError, KeyError, AttributeError):
        return None


def _short(path: str) -> str:
    for marker in ("/adapter/", "/site-packages/", "/lib/python"):
        if marker in path:
            return path[path.index(marker) + 1 :]
    return path


# --------------------------------------------------------------------------- main


async def profile_adapter(base: str, count: int) -> dict[str, Any] | None:
    """The adapter reader under pyinstrument: where a native event's time goes."""
    print("  profile (pyinstrument) ...", file=sys.stderr, flush=True)
    done = await profiled(lambda: read_adapter(base, count), "events_profile.txt")
    if done is None:
        return None
    run, profile = done
    # The reader's own time, as in the other rows: the adapter's start and the
    # sessions' creation before the stream are left out.
    return {**profile, "elapsed_under_profiler_s": run["elapsed"]}


def start_server(count: int) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    """The replay server, in a child process: it must not share our event loop or GIL."""
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(count)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline())


async def main_async(args: argparse.Namespace, count: int, info: dict[str, Any]) -> dict[str, Any]:
    reps = 1 if args.quick else 2
    base = f"http://127.0.0.1:{info['port']}"
    print(
        f"replaying {count:,} events ({info['bytes'] / 1e6:.1f} MB, "
        f"{info['per_repetition']} per repetition of the recording)",
        file=sys.stderr,
    )
    await read_raw(base, min(count, 5000))  # warm up both sides
    runs: list[dict[str, Any]] = []
    roots = info["roots"]
    readers: list[Callable[[str, int], Awaitable[dict[str, Any] | None]]] = [
        read_raw,
        read_json,
        functools.partial(read_decoder, name="orjson"),
        functools.partial(read_decoder, name="msgspec"),
        read_client,
        functools.partial(read_native, roots=roots, collect=False),
        functools.partial(read_native, roots=roots, collect=True),
        read_adapter,
    ]
    for rep in range(reps):
        for reader in readers:
            run = await reader(base, count)
            if run is None:
                continue  # an optional decoder that is not installed
            run["rep"] = rep
            runs.append(run)
            print(f"  {run['reader']:<48} {run['elapsed']:7.3f} s", file=sys.stderr, flush=True)
    memory = None
    if not args.quick:
        print("  memory pass (tracemalloc) ...", file=sys.stderr, flush=True)
        memory = await read_adapter(base, count, trace=True)
    profile = None
    if args.profile:
        profile = await profile_adapter(base, count)
    return {
        "benchmark": "events",
        "mode": "quick" if args.quick else "full",
        "command": " ".join([".venv/bin/python", *sys.argv]),
        "machine": machine(),
        "load_average": os.getloadavg(),
        "events": count,
        "stream_bytes": info["bytes"],
        "per_repetition": info["per_repetition"],
        "threads": len(info["roots"]),
        "runs": runs,
        "memory": memory,
        "profile": profile,
    }


def summarize(result: dict[str, Any]) -> dict[str, Any]:
    best: dict[str, dict[str, Any]] = {}
    for run in result["runs"]:
        name = run["reader"]
        if name not in best or run["elapsed"] < best[name]["elapsed"]:
            best[name] = run
    ceiling = best["httpx-sse aiter_sse (ceiling)"]
    adapter = best["OpenCodeAdapter pump + one consumer"]
    count = result["events"]
    pairs = []
    for rep in sorted({r["rep"] for r in result["runs"]}):
        raw = next(r for r in result["runs"] if r["rep"] == rep and "ceiling" in r["reader"])
        pump = next(r for r in result["runs"] if r["rep"] == rep and "Adapter" in r["reader"])
        pairs.append(raw["elapsed"] / pump["elapsed"])
    cpu_us = {name: run["cpu"] / count * 1e6 for name, run in best.items()}
    ratios = []
    for rep in sorted({r["rep"] for r in result["runs"]}):
        json_run = next(
            r for r in result["runs"] if r["rep"] == rep and r["reader"] == "httpx-sse + json.loads"
        )
        pump = next(r for r in result["runs"] if r["rep"] == rep and "Adapter" in r["reader"])
        ratios.append(pump["cpu"] / json_run["cpu"])
    adapter_us = cpu_us["OpenCodeAdapter pump + one consumer"]
    return {
        "ceiling_events_per_s": count / ceiling["elapsed"],
        "adapter_native_events_per_s": count / adapter["elapsed"],
        "adapter_canonical_events_per_s": adapter["canonical"] / adapter["elapsed"],
        "adapter_share_of_ceiling_per_rep": pairs,
        "goal": "adapter ≥ 50 % of the ceiling",
        "met": all(p >= 0.5 for p in pairs),
        # The parse-once goal: at most half the 10.5 to 11.1 µs/event measured before it.
        "cpu_us_per_event_best_run": cpu_us,
        "cpu_goal_us": BASELINE_CPU_US / 2,
        "cpu_goal_met": adapter_us <= BASELINE_CPU_US / 2,
        # The same goal as a ratio within each pass (a busy machine moves both rows).
        "adapter_vs_json_per_rep": ratios,
        "ratio_goal": RATIO_GOAL,
        "ratio_goal_met": all(r <= RATIO_GOAL for r in ratios),
    }


def render(result: dict[str, Any]) -> str:
    m = result["machine"]
    count = result["events"]
    s = result["summary"]
    lines = [
        f"# Event pump benchmark ({result['mode']} mode)",
        "",
        f"{m['nproc']} CPUs ({m['cpu_model']}), Python {m['python']}, httpx "
        f"{m['packages']['httpx']}, httpx-sse {m['packages']['httpx-sse']}; {count:,} native "
        f"events, {result['stream_bytes'] / 1e6:.1f} MB of SSE, "
        f"{result['per_repetition']} events per repetition of the recording",
        "",
    ]
    rows = []
    for run in result["runs"]:
        rate = count / run["elapsed"]
        rows.append(
            [
                run["reader"] + (f" #{run['rep'] + 1}" if run["rep"] else ""),
                f"{run['elapsed']:.3f}",
                f"{rate:,.0f}",
                f"{run['cpu'] / count * 1e6:.1f}",
                f"{run['canonical']:,}" if "canonical" in run else None,
                f"{run['canonical'] / run['elapsed']:,.0f}" if "canonical" in run else None,
            ]
        )
    lines.append(
        table(
            [
                "reader",
                "elapsed s",
                "native events/s",
                "CPU µs/event",
                "canonical events",
                "canonical events/s",
            ],
            rows,
        )
    )
    shares = " and ".join(f"{p * 100:.0f} %" for p in s["adapter_share_of_ceiling_per_rep"])
    adapter_us = s["cpu_us_per_event_best_run"]["OpenCodeAdapter pump + one consumer"]
    lines += [
        "",
        f"Adapter throughput / ceiling, same bytes, per pair of runs: {shares} "
        f"(goal ≥ 50 %: {'met' if s['met'] else '**not met**'})",
        "",
        f"Adapter CPU per native event (best run): {adapter_us:.1f} µs; the parse-once goal "
        f"≤ {s['cpu_goal_us']:.2f} µs (half of {BASELINE_CPU_US} µs): "
        f"{'met' if s['cpu_goal_met'] else '**not met**'}",
        "",
        "Adapter CPU / httpx-sse + json.loads CPU, per pass: "
        + " and ".join(f"{r:.2f}" for r in s["adapter_vs_json_per_rep"])
        + f" (the goal as a ratio: ≤ {s['ratio_goal']:.2f}, half of {BASELINE_CPU_US} over "
        f"{BASELINE_JSON_US} µs: {'met' if s['ratio_goal_met'] else '**not met**'})",
    ]
    mem = result.get("memory")
    if mem:
        kinds = ", ".join(f"{k} {v:,}" for k, v in sorted(mem["canonical_kinds"].items()))
        lines += [
            "",
            f"## Memory held after {count:,} events",
            "",
            f"{mem['held_bytes'] / 2**20:.1f} MiB still allocated after the stream, the "
            f"consumer drained (backlog {mem['consumer_backlog']}) and a full collection; "
            f"the threads' trees hold {mem['sessions_in_trees'] or 'an unknown number of'} "
            f"sessions. Canonical events: "
            f"{kinds}.",
            "",
            table(
                ["allocated in", "KiB held", "blocks"],
                [
                    [t["file"], f"{t['bytes'] / 1024:,.0f}", f"{t['blocks']:,}"]
                    for t in mem["top_files"]
                ],
            ),
        ]
    profile = result.get("profile")
    if profile:
        lines += profile_section(
            "Where the adapter's time goes",
            f"pyinstrument over the whole adapter run ({profile['elapsed_under_profiler_s']:.2f} s "
            f"under the profiler); self time per component, standard-library frames other than "
            f"json counted for their caller; call tree in {profile['profile_text']}",
            profile,
        )
    return "\n".join(lines)


def main() -> None:
    parser = arguments(
        __doc__, quick="20,000 events, one pass", output="file name under benchmarks/results/"
    )
    parser.add_argument("--events", type=int, default=None, help="native events to replay")
    parser.add_argument(
        "--profile", action="store_true", help="also run the adapter under pyinstrument"
    )
    parser.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve(args.serve))
        return
    quiet_logging()
    count = args.events or (20_000 if args.quick else 100_000)
    proc, info = start_server(count)
    try:
        result = asyncio.run(main_async(args, count, info))
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
    result["summary"] = summarize(result)
    print(render(result))
    name = args.output or ("events-quick.json" if args.quick else "events.json")
    say_written(write_json(name, result))


if __name__ == "__main__":
    main()
