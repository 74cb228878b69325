"""Where a stop_tree benchmark walk sends its requests: a simulated server or the fake.

Both count, at the server side, the requests, the peak in flight and the
sessions aborted, so every strategy is measured the same way on either.
"""

from __future__ import annotations

import asyncio
import json
import random

import httpx

from adapter import OpenCodeClient
from adapter.testing import FakeOpenCodeServer
from benchmarks._stop_tree.trees import Tree

_JSON_HEADERS = {"content-type": "application/json"}


class SimServer(httpx.AsyncBaseTransport):
    """The minimal simulated session API: abort, children, status; latency L (+ jitter).

    Children bodies are encoded once, up front, with the fields a real server
    sends; every request sleeps ``latency + uniform(0, jitter)`` before its answer.
    In-flight and request counts are taken here, at the server side.
    """

    def __init__(self, tree: Tree) -> None:
        self.tree = tree
        self.bodies: dict[str, bytes] = {}
        created = {sid: 1_795_965_973_000 + i for i, sid in enumerate(tree.order)}
        for sid, kids in tree.children.items():
            self.bodies[sid] = json.dumps(
                [
                    {
                        "id": kid,
                        "slug": "lucky-knight",
                        "version": "1.18.34",
                        "projectID": "global",
                        "directory": "/home/dev/project",
                        "parentID": sid,
                        "title": f"Child session {kid[-6:]}",
                        "time": {"created": created.get(kid, 0), "updated": created.get(kid, 0)},
                    }
                    for kid in kids
                ],
                separators=(",", ":"),
            ).encode()
        self.latency = 0.0
        self.jitter = 0.0
        self.rng = random.Random(0)
        self.requests = 0
        self.in_flight = 0
        self.peak = 0
        self.aborted: set[str] = set()

    def configure(self, latency: float, jitter: float, seed: int) -> None:
        self.latency, self.jitter = latency, jitter
        self.rng = random.Random(seed)  # same latency sequence for every strategy

    def reset_stats(self) -> None:
        self.requests = self.peak = 0
        self.aborted = set()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        self.in_flight += 1
        if self.in_flight > self.peak:
            self.peak = self.in_flight
        try:
            delay = self.latency
            if self.jitter:
                delay += self.rng.random() * self.jitter
            await asyncio.sleep(delay)
            parts = request.url.path.split("/")
            if len(parts) == 4 and parts[1] == "session":
                sid = parts[2]
                if parts[3] == "abort" and request.method == "POST":
                    self.aborted.add(sid)
                    return httpx.Response(200, content=b"true", headers=_JSON_HEADERS)
                if parts[3] == "children" and sid in self.bodies:
                    return httpx.Response(200, content=self.bodies[sid], headers=_JSON_HEADERS)
            elif request.url.path == "/session/status":
                return httpx.Response(200, content=b"{}", headers=_JSON_HEADERS)
            body = b'{"name":"NotFoundError","data":{"message":"Session not found"}}'
            return httpx.Response(404, content=body, headers=_JSON_HEADERS)
        finally:
            self.in_flight -= 1


class Backend:
    """A simulated server with one real ``OpenCodeClient`` on it."""

    name = "sim"

    def __init__(self, tree: Tree) -> None:
        self.tree = tree
        self.server = SimServer(tree)
        self.client = OpenCodeClient("http://sim-opencode", transport=self.server)
        self.root = tree.root
        self.jobs = tree.jobs()

    def configure(self, latency: float, jitter: float, seed: int) -> None:
        self.server.configure(latency, jitter, seed)

    def reset_stats(self) -> None:
        self.server.reset_stats()

    def stats(self) -> tuple[int, int, int]:
        """(requests, peak in flight, distinct sessions aborted) since the reset."""
        return self.server.requests, self.server.peak, len(self.server.aborted)

    async def aclose(self) -> None:
        await self.client.aclose()


class FakeBackend(Backend):
    """The same tree in ``adapter.testing.FakeOpenCodeServer`` (trees only: no diamonds)."""

    name = "fake"

    def __init__(self, tree: Tree) -> None:
        if tree.family == "graph":
            raise ValueError("the fake cannot express diamonds or cycles")
        self.tree = tree
        self.fake = FakeOpenCodeServer(seed=3)
        parent_of = {kid: sid for sid in tree.order for kid in tree.children[sid]}
        mapping: dict[str, str] = {}
        for sid in tree.order:
            parent = parent_of.get(sid)
            mapping[sid] = self.fake.add_session(
                parent_id=mapping[parent] if parent else None, title=sid
            )
        self.root = mapping[tree.root]
        self.jobs = [(kind, mapping[sid]) for kind, sid in tree.jobs()]
        self.client = OpenCodeClient(self.fake.base_url, transport=self.fake.transport)
        self._before: dict[str, int] = {}

    def configure(self, latency: float, jitter: float, seed: int) -> None:
        self.fake.latency, self.fake.jitter = latency, jitter

    def reset_stats(self) -> None:
        self.fake.reset_stats()
        self._before = {sid: s.abort_count for sid, s in self.fake.sessions.items()}

    def stats(self) -> tuple[int, int, int]:
        aborted = sum(
            1 for sid, s in self.fake.sessions.items() if s.abort_count > self._before.get(sid, 0)
        )
        return len(self.fake.requests), self.fake.max_in_flight, aborted

    async def aclose(self) -> None:
        await self.client.aclose()
        await self.fake.aclose()
