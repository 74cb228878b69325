"""An ACP client (the SDK's client side) connected in-process to the agent.

The agent and the client talk JSON-RPC over a socket pair, exactly as over stdio,
so the tests exercise the SDK's framing and routing on both sides. The client
records every update, every message in arrival order (to check that no update of
a turn follows its answer), the raw bytes the agent wrote, and holds each
permission request until the test answers it.

``python -m tests.acp.client_side acp ...`` runs the real ``opencode-tree`` command line
on an in-process fake OpenCode server (``amain``'s ``transport`` seam), so a test can
start the ACP agent as the subprocess an editor starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, cast

import acp
from acp.connection import StreamEvent
from acp.core import ClientSideConnection
from acp.schema import (
    AllowedOutcome,
    DeniedOutcome,
    PermissionOption,
    RequestPermissionResponse,
    ToolCallUpdate,
)

from adapter import OpenCodeAdapter
from adapter.acp import run_acp
from adapter.testing import FakeOpenCodeServer, caught_up


@dataclass
class Ask:
    """A ``session/request_permission`` the client has not answered yet."""

    session_id: str
    tool_call: ToolCallUpdate
    options: list[PermissionOption]
    answer: asyncio.Future[RequestPermissionResponse]

    def choose(self, option_id: str) -> None:
        self.answer.set_result(
            RequestPermissionResponse(
                outcome=AllowedOutcome(outcome="selected", option_id=option_id)
            )
        )

    def cancelled(self) -> None:
        self.answer.set_result(
            RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        )


@dataclass
class RecordingClient:
    updates: list[tuple[str, Any]] = field(default_factory=list)
    asks: asyncio.Queue[Ask] = field(default_factory=asyncio.Queue)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        self.arrived.set()

    async def _until(self, found: Callable[[], Any]) -> Any:
        """``found()``'s first answer that is not ``None``, asked again as updates arrive."""
        while (answer := found()) is None:
            self.arrived.clear()
            await self.arrived.wait()
        return answer

    async def wait_for_update(self, session_id: str, kind: str) -> Any:
        """The first update of ``kind`` for ``session_id``, once it arrived."""
        return await self._until(
            lambda: next(
                (u for s, u in self.updates if s == session_id and u.session_update == kind),
                None,
            )
        )

    async def wait_for_call(self, title: str) -> str:
        """The id of the first tool call titled ``title``, once the client was told of it.

        The model seeing a subagent's request does not mean the client saw its call:
        the call reaches the client through OpenCode's event stream, later under load."""
        return str(
            await self._until(
                lambda: next((i for i, c in self.calls().items() if c.get("title") == title), None)
            )
        )

    async def request_permission(
        self,
        session_id: str,
        tool_call: ToolCallUpdate,
        options: list[PermissionOption],
        **kwargs: Any,
    ) -> RequestPermissionResponse:
        ask = Ask(session_id, tool_call, options, asyncio.get_running_loop().create_future())
        self.asks.put_nowait(ask)
        return await ask.answer

    def kinds(self) -> list[str]:
        return [u.session_update for _, u in self.updates]

    def text(self) -> str:
        return "".join(
            u.content.text for _, u in self.updates if u.session_update == "agent_message_chunk"
        )

    def tool_updates(self, call_id: str) -> list[Any]:
        return [
            u
            for _, u in self.updates
            if u.session_update in ("tool_call", "tool_call_update") and u.tool_call_id == call_id
        ]

    def calls(self) -> dict[str, Any]:
        """Every tool call the client was told of, by id: the start, then each update."""
        calls: dict[str, Any] = {}
        for _, u in self.updates:
            if u.session_update == "tool_call":
                calls[u.tool_call_id] = {"title": u.title, "kind": u.kind, "status": u.status}
            elif u.session_update == "tool_call_update":
                call = calls.setdefault(u.tool_call_id, {})
                for key in ("title", "status", "content", "raw_output"):
                    value = getattr(u, key)
                    if value is not None:
                        call[key] = value
        return calls


@dataclass
class Harness:
    conn: ClientSideConnection
    client: RecordingClient
    wire: list[StreamEvent]  # every message the client received, in order
    raw: bytearray = field(default_factory=bytearray)  # every byte the agent wrote

    def raw_lines(self) -> list[bytes]:
        return bytes(self.raw).splitlines()

    async def new_session(self, cwd: str = "/tmp/project") -> str:
        await self.conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        return (await self.conn.new_session(cwd=cwd, mcp_servers=[])).session_id

    async def raw_request(self, method: str, params: dict[str, Any]) -> Any:
        """A JSON-RPC request as given, ill-typed params included, which the SDK's typed
        methods cannot send (and ``ext_method`` prefixes ``_`` to the method): through the
        SDK's ``Connection`` that ``ClientSideConnection`` keeps in ``_conn``, the acp
        SDK's private attribute, not the adapter's."""
        return await self.conn._conn.send_request(method, params)

    def updates_after_answer(self, session_id: str) -> list[dict[str, Any]]:
        """``session/update`` messages that arrived after the last prompt answer."""
        answered = max(
            i
            for i, e in enumerate(self.wire)
            if "id" in e.message
            and isinstance(e.message.get("result"), dict)
            and "stopReason" in e.message["result"]
        )
        return [
            e.message
            for e in self.wire[answered + 1 :]
            if e.message.get("method") == "session/update"
            and e.message["params"]["sessionId"] == session_id
        ]


async def all_said(harness: Harness, fake: FakeOpenCodeServer, adapter: OpenCodeAdapter) -> None:
    """Until everything the agent says without a timer has reached the client.

    The agent talks to the client over a socket pair, which ``caught_up`` cannot see
    into. So: the adapter and the agent catch up with the fake (``caught_up``), a
    round trip on the same ordered connection (``initialize``, which changes nothing)
    brings every message the agent wrote before it and lets the agent read everything
    the client wrote before it, and a second ``caught_up`` runs what that reading set
    going (a late answer's request to the fake)."""
    await caught_up(fake, adapter)
    await harness.conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
    await caught_up(fake, adapter)


@contextlib.asynccontextmanager
async def connected(adapter: OpenCodeAdapter) -> AsyncIterator[Harness]:
    agent_sock, client_sock = socket.socketpair()
    agent_reader, agent_writer = await asyncio.open_connection(sock=agent_sock)
    socket_reader, client_writer = await asyncio.open_connection(sock=client_sock)
    serving = asyncio.create_task(run_acp(adapter, agent_writer, agent_reader))
    client = RecordingClient()
    wire: list[StreamEvent] = []
    harness_raw = bytearray()
    client_reader = asyncio.StreamReader(limit=64 * 1024 * 1024)
    tapping = asyncio.create_task(_tap(socket_reader, client_reader, harness_raw))
    conn = acp.connect_to_agent(
        cast(acp.Client, client),
        client_writer,
        client_reader,
        observers=[wire.append],
        use_unstable_protocol=True,  # session/resume
    )
    try:
        yield Harness(conn, client, wire, harness_raw)
    finally:
        await conn.close()
        client_writer.close()  # the agent reads EOF: the client went away
        async with asyncio.timeout(5):
            await serving
        agent_writer.close()
        async with asyncio.timeout(5):
            await tapping


async def _tap(source: asyncio.StreamReader, sink: asyncio.StreamReader, raw: bytearray) -> None:
    """Pass what the agent writes on to the client's reader, keeping a copy."""
    while chunk := await source.read(64 * 1024):
        raw += chunk
        sink.feed_data(chunk)
    sink.feed_eof()


def main() -> int:
    """``opencode-tree`` (its ``amain``) with every request served by a fake OpenCode."""
    from adapter.cli import amain
    from adapter.testing.fake import FakeOpenCodeServer

    async def run() -> int:
        fake = FakeOpenCodeServer(seed=7)
        try:
            return await amain(sys.argv[1:], transport=fake.transport)
        finally:
            await fake.aclose()

    return asyncio.run(run())


if __name__ == "__main__":
    sys.exit(main())
