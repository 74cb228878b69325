"""What the tests of the fake's HTTP behaviour share: an event log and request helpers.

Every test talks to the fake the way a client would: a plain ``httpx.AsyncClient``
on ``fake.transport`` and ``httpx_sse.aconnect_sse`` for ``GET /event``.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import httpx
from httpx_sse import aconnect_sse

from adapter.testing.fake import FakeOpenCodeServer, Hang

BASE = "http://fake-opencode"
ID_RE = re.compile(r"^ses_[0-9A-Za-z]{26}$")
JSON = dict[str, Any]


class EventLog:
    """Reads ``GET /event`` in a background task and keeps every event."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client
        self.events: list[JSON] = []
        self.error: BaseException | None = None
        self.ended = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self, fake: FakeOpenCodeServer) -> EventLog:
        before = fake.stream_count
        self._task = asyncio.create_task(self._read())
        await fake.wait_until(lambda: fake.stream_count > before or self.ended.is_set())
        await self.wait_for(lambda e: e["type"] == "server.connected")
        return self

    async def _read(self) -> None:
        try:
            async with aconnect_sse(self.client, "GET", "/event") as source:
                async for sse in source.aiter_sse():
                    self.events.append(json.loads(sse.data))
        except httpx.HTTPError as exc:
            self.error = exc
        finally:
            self.ended.set()

    async def wait_for(self, check: Any, timeout: float = 2.0) -> JSON:
        async with asyncio.timeout(timeout):
            while True:
                for event in self.events:
                    if check(event):
                        return event
                await asyncio.sleep(0.001)

    async def wait_count(self, type: str, session_id: str, count: int) -> None:
        async with asyncio.timeout(2.0):
            while sum(1 for e in self.of(session_id) if e["type"] == type) < count:
                await asyncio.sleep(0.001)

    async def wait_for_latest(self, fake: FakeOpenCodeServer) -> None:
        """Wait until the log holds the last event ``fake`` published: it then holds all the
        fake has said so far (a stream gets its directory's events in order), so a check of
        the log's tail sees any event that came after the one awaited. The last event must
        be one this log's stream gets (its directory's, published after it started)."""
        last = fake.events[-1]["id"]
        await self.wait_for(lambda e: e.get("id") == last)

    def of(self, session_id: str) -> list[JSON]:
        return [e for e in self.events if e["properties"].get("sessionID") == session_id]

    def types(self, session_id: str) -> list[str]:
        return [e["type"] for e in self.of(session_id)]

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


async def new_session(client: httpx.AsyncClient, **body: Any) -> JSON:
    response = await client.post("/session", json=body)
    assert response.status_code == 200
    data: JSON = response.json()
    return data


async def prompt(
    client: httpx.AsyncClient, session_id: str, text: str, **extra: Any
) -> httpx.Response:
    body = {"parts": [{"type": "text", "text": text}], **extra}
    return await client.post(f"/session/{session_id}/prompt_async", json=body)


async def rejecting_session(client: httpx.AsyncClient, log: EventLog, script: str) -> str:
    """A new session prompted with script ``script``, whose permission request (its first
    step) was rejected; its id."""
    sid = str((await new_session(client))["id"])
    await prompt(client, sid, f"[[script:{script}]]")
    asked = await log.wait_for(
        lambda e: e["type"] == "permission.asked" and e["properties"]["sessionID"] == sid
    )
    await client.post(f"/permission/{asked['properties']['id']}/reply", json={"reply": "reject"})
    return sid


async def hanging_session(client: httpx.AsyncClient, fake: FakeOpenCodeServer) -> str:
    """A new session whose turn hangs in its model call (script ``hang``); its id."""
    fake.script("hang", [Hang()])
    sid = (await new_session(client))["id"]
    await prompt(client, sid, "[[script:hang]]")
    return str(sid)


async def idle(fake: FakeOpenCodeServer, session_id: str) -> None:
    await fake.wait_until(lambda: not fake.sessions[session_id].busy)


def label(event: JSON) -> str:
    """An event reduced to what a parser branches on: ``part:text``, ``part:tool:running``
    (a tool part with its status), ``status:busy``, ``message:user``; else its type."""
    kind, props = event["type"], event["properties"]
    if kind == "message.part.updated":
        part = props["part"]
        status = f":{part['state']['status']}" if part["type"] == "tool" else ""
        return f"part:{part['type']}{status}"
    if kind == "session.status":
        return f"status:{props['status']['type']}"
    if kind == "message.updated":
        return f"message:{props['info']['role']}"
    return str(kind)


def tool_parts(fake: FakeOpenCodeServer, session_id: str, tool: str) -> list[JSON]:
    return [
        part
        for message in fake.sessions[session_id].messages
        for part in message.parts
        if part["type"] == "tool" and part["tool"] == tool
    ]
