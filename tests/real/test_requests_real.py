"""Pending permission requests against a real ``opencode serve``: live ones and ghosts.

OpenCode 1.18.34 keeps listing a permission request after its session's run was
aborted (a *ghost*): ``GET /permission`` still has it, and a reply answers ``true``
and emits ``permission.replied`` but runs nothing. A thread resumed later must not
announce such a request as open; a request that still blocks a run must be. Nor
may a grandchild's request answered elsewhere while its ancestry was being looked up.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from adapter import OpenCodeAdapter, UnknownRequestError
from adapter.testing import RealOpenCodeServer, ScriptedModelServer
from adapter.testing.model import Text, ToolCall, ToolCalls, script_marker
from tests.adapter_support import Recorder
from tests.real.conftest import adapter_on, directory_http
from tests.real.waits import holds_for

pytestmark = pytest.mark.real

ASK_BASH = [{"permission": "bash", "pattern": "*", "action": "ask"}]


@pytest.fixture
async def http(real_server: RealOpenCodeServer) -> AsyncIterator[httpx.AsyncClient]:
    """Another client of the same server (the work a thread resumes was started by it)."""
    async with directory_http(real_server) as client:
        yield client


async def asking_session(
    http: httpx.AsyncClient, model: ScriptedModelServer, name: str, command: str
) -> tuple[str, str]:
    """A session whose turn waits on a ``bash`` permission; its id and the request's."""
    model.script(name, [ToolCalls([ToolCall("bash", {"command": command})]), Text("ran")])
    created = await http.post("/session", json={"title": name, "permission": ASK_BASH})
    session_id = str(created.json()["id"])
    body = {"parts": [{"type": "text", "text": "go " + script_marker(name)}]}
    assert (await http.post(f"/session/{session_id}/prompt_async", json=body)).status_code == 204
    async with asyncio.timeout(30):
        while True:
            listed = (await http.get("/permission")).json()
            mine = [r["id"] for r in listed if r["sessionID"] == session_id]
            if mine:
                return session_id, str(mine[0])
            await asyncio.sleep(0.05)


async def listed_permissions(http: httpx.AsyncClient) -> set[str]:
    return {str(r["id"]) for r in (await http.get("/permission")).json()}


async def reject_if_listed(http: httpx.AsyncClient, request_id: str) -> None:
    """Clean-up: no request of this test left pending on the shared server."""
    if request_id in await listed_permissions(http):
        await http.post(f"/permission/{request_id}/reply", json={"reply": "reject"})


async def test_a_resumed_thread_announces_live_requests_but_not_ghosts(
    real_server: RealOpenCodeServer,
    scripted_model: ScriptedModelServer,
    http: httpx.AsyncClient,
    unique_name: str,
) -> None:
    stopped, ghost = await asking_session(http, scripted_model, f"{unique_name}-g", "echo g")
    waiting, live = await asking_session(http, scripted_model, f"{unique_name}-l", "echo l")
    await http.post(f"/session/{stopped}/abort")
    assert ghost in await listed_permissions(http)  # the server's fact this test is about
    assert stopped not in (await http.get("/session/status")).json()
    try:
        async with adapter_on(real_server) as oc:
            rec = Recorder(oc)
            await oc.start_session("stopped", resume={"schema": 1, "session_id": stopped})
            await oc.start_session("waiting", resume={"schema": 1, "session_id": waiting})
            opened = await rec.wait_for("request.opened", timeout=10)
            assert (opened.thread_id, opened.request_id) == ("waiting", live)
            await holds_for(  # both recoveries finish meanwhile
                0.5,
                lambda: [e.request_id for e in rec.of("request.opened")] == [live],
                "only the live request announced",
            )
            assert oc.pending_requests("waiting") == [opened]
            assert oc.pending_requests("stopped") == []  # a ghost is not open
            with pytest.raises(UnknownRequestError):
                await oc.respond_to_request("stopped", ghost, "accept")
            await oc.respond_to_request("waiting", live, "accept")
            resolved = await rec.wait_for("request.resolved", timeout=10)
            assert (resolved.request_id, resolved.decision) == (live, "accept")
            await rec.close()
    finally:
        await http.post(f"/session/{waiting}/abort")
        await reject_if_listed(http, ghost)


async def test_a_request_the_adapter_stopped_is_not_announced_again_on_resume(
    real_server: RealOpenCodeServer,
    scripted_model: ScriptedModelServer,
    http: httpx.AsyncClient,
    unique_name: str,
) -> None:
    """An abort alone leaves the request listed on the server (a ghost); the adapter's own
    stop also rejects it there, so nothing lingers and a later resume offers nothing."""
    session_id, request_id = await asking_session(http, scripted_model, unique_name, "echo x")
    try:
        async with adapter_on(real_server) as oc:
            rec = Recorder(oc)
            await oc.start_session("t", resume={"schema": 1, "session_id": session_id})
            opened = await rec.wait_for("request.opened", timeout=10)
            assert opened.request_id == request_id  # live: announced
            await oc.stop_session("t")  # aborts the session's tree, withdraws the request
            resolved = await rec.wait_for("request.resolved", timeout=10)
            assert (resolved.request_id, resolved.decision) == (request_id, "cancelled")
            await rec.wait_for("session.exited", timeout=10)
            await rec.close()
        assert request_id not in await listed_permissions(http)  # rejected on the server
        requests_before = len(scripted_model.requests)
        async with adapter_on(real_server) as later:
            rec = Recorder(later)
            await later.start_session("t", resume={"schema": 1, "session_id": session_id})
            await holds_for(1.0, lambda: rec.of("request.opened") == [], "no request announced")
            await rec.close()
        assert len(scripted_model.requests) == requests_before  # the reject ran nothing
        assert session_id not in (await http.get("/session/status")).json()
    finally:
        await reject_if_listed(http, request_id)


async def test_a_request_stopped_by_interrupt_turn_is_never_announced_again(
    real_server: RealOpenCodeServer,
    scripted_model: ScriptedModelServer,
    http: httpx.AsyncClient,
    unique_name: str,
) -> None:
    """Interrupting the turn that waits on a permission would leave a ghost on the server
    (a pending request of an aborted session): the adapter rejects it there too, and
    neither the thread's next turn nor a later adapter resuming the thread offers it
    again."""
    scripted_model.script(
        unique_name,
        [ToolCalls([ToolCall("bash", {"command": "echo x"})]), Text("ran"), Text("second")],
    )
    created = await http.post("/session", json={"title": unique_name, "permission": ASK_BASH})
    session_id = str(created.json()["id"])
    resume = {"schema": 1, "session_id": session_id}
    request_id: str | None = None
    try:
        async with adapter_on(real_server) as oc:
            rec = Recorder(oc)
            await oc.start_session("t", resume=resume)
            turn = await oc.send_turn("t", "go " + script_marker(unique_name))
            opened = await rec.wait_for("request.opened", timeout=30)
            request_id = opened.request_id
            assert oc.pending_requests("t") == [opened]
            result = await oc.interrupt_turn("t", turn_id=turn.turn_id)
            assert oc.pending_requests("t") == []  # withdrawn by the stop
            assert result.stop is not None and result.stop.ok
            aborted = await rec.wait_for("turn.aborted", timeout=10)
            assert aborted.turn_id == turn.turn_id
            resolved = await rec.wait_for("request.resolved", timeout=10)
            assert resolved.request_id == request_id
            # rejected on the server too: no ghost lingers for a later reader of /permission
            assert request_id not in await listed_permissions(http)
            with pytest.raises(UnknownRequestError):
                await oc.respond_to_request("t", request_id, "accept")
            # the thread goes on: its next turn runs, the stopped request stays stopped
            await oc.send_turn("t", "next")
            await rec.wait_for("turn.completed", timeout=30)
            assert [e.request_id for e in rec.of("request.opened")] == [request_id]
            await rec.close()
        async with adapter_on(real_server) as later:
            rec = Recorder(later)
            await later.start_session("t", resume=resume)
            await holds_for(  # the resume's request recovery finishes meanwhile
                1.0, lambda: rec.of("request.opened") == [], "no request announced"
            )
            await rec.close()
    finally:
        if request_id is not None:
            await reject_if_listed(http, request_id)


async def caught_up(http: httpx.AsyncClient, rec: Recorder, root: str, title: str) -> None:
    """The adapter has read every event so far: a root title change comes after them."""
    await http.patch(f"/session/{root}", json={"title": title})
    await rec.wait_for("thread.metadata.updated", lambda e: e.title == title, timeout=10)


class FlakyAncestry(httpx.AsyncBaseTransport):
    """The adapter's transport to the real server, where ``GET /session/{failing}``
    answers 503 while ``failing`` is set (a lookup that has to retry)."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self.failing: str | None = None
        self.failed = asyncio.Event()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.method == "GET" and self.failing and path == f"/session/{self.failing}":
            self.failed.set()
            return httpx.Response(503, json={"name": "UnknownError", "data": {"message": "x"}})
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


async def test_a_grandchilds_request_answered_during_its_ancestry_lookup_is_not_announced(
    real_server: RealOpenCodeServer,
    scripted_model: ScriptedModelServer,
    http: httpx.AsyncClient,
    unique_name: str,
) -> None:
    """Relies on the real ``permission.replied`` naming the asking (grandchild) session:
    the adapter, still looking up whose session that is, learns of the answer from it."""
    scripted_model.script(
        unique_name, [ToolCalls([ToolCall("bash", {"command": "echo gc"})]), Text("ran")]
    )
    root = str((await http.post("/session", json={"title": unique_name})).json()["id"])
    middle = str((await http.post("/session", json={"parentID": root})).json()["id"])
    body = {"parentID": middle, "permission": ASK_BASH}
    grandchild = str((await http.post("/session", json=body)).json()["id"])
    transport = FlakyAncestry()
    async with OpenCodeAdapter(
        real_server.base_url, directory=str(real_server.directory), transport=transport
    ) as oc:
        rec = Recorder(oc)
        try:
            await oc.start_session("t", resume={"schema": 1, "session_id": root})
            transport.failing = middle  # the thread never saw the middle session born
            prompt = {"parts": [{"type": "text", "text": "go " + script_marker(unique_name)}]}
            await http.post(f"/session/{grandchild}/prompt_async", json=prompt)
            async with asyncio.timeout(30):
                await transport.failed.wait()  # the lookup is retrying
            listed = (await http.get("/permission")).json()
            [request_id] = [r["id"] for r in listed if r["sessionID"] == grandchild]
            reply = await http.post(f"/permission/{request_id}/reply", json={"reply": "once"})
            assert reply.status_code == 200
            await caught_up(http, rec, root, f"{unique_name} answered")
            transport.failing = None  # a lookup still going would now find the thread
            async with asyncio.timeout(10):
                while any(
                    t.get_name().endswith(":route-request") and not t.done()
                    for t in asyncio.all_tasks()
                ):
                    await asyncio.sleep(0.05)
            await caught_up(http, rec, root, f"{unique_name} settled")
            assert rec.of("request.opened") == []
            assert rec.of("runtime.warning") == []
        finally:
            await rec.close()
