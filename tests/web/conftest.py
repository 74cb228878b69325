"""The web app over the adapter on the fake server (``tests/conftest.py``: ``fake``, ``rec``);
for the real tests here, ``opencode``: a real server of the module's own ``model``.

The fixtures are factories where a test needs several of a thing (``open_events``,
``run_turn``), so no test repeats the set-up of its streams or turns.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence

import httpx
import pytest
from starlette.applications import Starlette

from adapter import OpenCodeAdapter, Timeouts
from adapter.testing import RealOpenCodeServer, ScriptedModelServer
from adapter.testing.fake import FakeOpenCodeServer, Question, Step, Text
from adapter.web import create_app
from tests.adapter_support import Recorder
from tests.web.app_driver import COLOR, SseClient, T, open_stream


@pytest.fixture(scope="module")
def opencode(model: ScriptedModelServer) -> Iterator[RealOpenCodeServer]:
    """A real OpenCode server whose model is the module's ``model`` fixture (each real
    module defines it, with its own settings such as ``default_text``): one a module."""
    with RealOpenCodeServer(model.base_url) as server:
        yield server


@pytest.fixture
def timeouts() -> Timeouts:
    return Timeouts(abort=2.0, tree=2.0)


@pytest.fixture
def app(oc: OpenCodeAdapter) -> Starlette:
    return create_app(oc, ping=0)


@pytest.fixture
async def app_client(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://app"
    ) as http:
        yield http


@pytest.fixture
async def streams(app: Starlette) -> AsyncIterator[list[SseClient]]:
    """Every SSE client a test opens, closed at its end whatever happened."""
    opened: list[SseClient] = []
    yield opened
    for sse in opened:
        await sse.aclose()


#: Opens an SSE client of the test's app (``open_stream`` with the app, adapter and streams bound).
OpenEvents = Callable[..., Awaitable[SseClient]]

#: Asks ``COLOR`` on thread ``T``, then says the given text once answered; the request's path.
AskColor = Callable[[str], Awaitable[str]]

#: Runs a scripted turn on thread ``T`` to its completion; its turn id.
RunTurn = Callable[[str, Sequence[Step]], Awaitable[str]]


@pytest.fixture
def open_events(app: Starlette, oc: OpenCodeAdapter, streams: list[SseClient]) -> OpenEvents:
    return functools.partial(open_stream, app, oc, streams)


@pytest.fixture
async def thread(app_client: httpx.AsyncClient, rec: Recorder) -> str:
    """Thread ``T``, created through the app once ``rec`` records (it sees the start)."""
    await app_client.post("/threads", json={"thread_id": T})
    return T


@pytest.fixture
def run_turn(
    app_client: httpx.AsyncClient, fake: FakeOpenCodeServer, rec: Recorder, thread: str
) -> RunTurn:
    async def run(name: str, steps: Sequence[Step]) -> str:
        fake.script(name, list(steps))
        sent = await app_client.post(
            f"/threads/{thread}/turns", json={"text": f"[[script:{name}]]"}
        )
        turn_id = str(sent.json()["turn_id"])
        await rec.wait_for("turn.completed", lambda e: e.turn_id == turn_id)
        return turn_id

    return run


@pytest.fixture
def ask_color(
    app_client: httpx.AsyncClient, fake: FakeOpenCodeServer, rec: Recorder, thread: str
) -> AskColor:
    async def ask(then: str) -> str:
        fake.script("ask", [Question([COLOR]), Text(then)])
        await app_client.post(f"/threads/{thread}/turns", json={"text": "[[script:ask]]"})
        asked = await rec.wait_for("user-input.requested")
        return f"/threads/{thread}/requests/{asked.request_id}"

    return ask
