"""Helpers of the adapter tests on the in-process fake server: what the fake refuses,
holds or emits on a test's word, scripted turns, the bodies it was sent, a replay, what a
stream holds now.

The fixtures themselves (``fake``, ``oc``, ``rec``) are the pytest plugin's
(``tests/conftest.py`` names them); ``Recorder`` is the suite's name for the recorder
the plugin ships."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from typing import Any, TypeVar, overload

import httpx

from adapter import Event, EventStream, OpenCodeAdapter, SessionInfo, TurnStart
from adapter.testing import EventRecorder
from adapter.testing.fake import FakeOpenCodeServer, Hold, Hook, Step, Text

R = TypeVar("R")


#: The shipped recorder (the plugin's ``opencode_events``, ``rec``), by the suite's name.
Recorder = EventRecorder


class SentBodies(Sequence[Any]):
    """The JSON bodies of the ``POST``s to ``route`` the fake receives from now on, a live
    view of what a pass-through hook recorded (``hook.calls``)."""

    def __init__(self, fake: FakeOpenCodeServer, route: str) -> None:
        async def let_through(request: httpx.Request) -> None:
            return None

        self._hook = fake.on("POST", route, let_through)

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...
    def __getitem__(self, index: int | slice) -> Any:
        return [call.body for call in self._hook.calls][index]

    def __len__(self) -> int:
        return self._hook.call_count

    def __eq__(self, other: object) -> bool:
        return list(self) == other

    __hash__ = None  # type: ignore[assignment]  # a live view: equal to its list


def refuse(
    fake: FakeOpenCodeServer, method: str, path: str, message: str, *, times: int | None = 1
) -> Hook:
    """The fake answers ``method path`` with OpenCode's 400 ``BadRequest`` saying ``message``
    (``times`` requests; ``None``: all); the hook, which counts its calls."""
    body = {"name": "BadRequest", "data": {"message": message}}
    return fake.fail(method, path, status=400, times=times, body=body)


def emit_session_error(fake: FakeOpenCodeServer, session_id: str, name: str, message: str) -> None:
    """The fake emits OpenCode's ``session.error`` of ``session_id``: error ``name`` saying
    ``message`` (``MessageAbortedError`` is how OpenCode tells that an abort landed)."""
    error = {"name": name, "data": {"message": message}}
    fake.emit("session.error", {"sessionID": session_id, "error": error})


def busy_branch(fake: FakeOpenCodeServer, parent_id: str) -> tuple[str, str]:
    """A busy child of ``parent_id`` and a busy child of that child (their ids)."""
    child = fake.add_session(parent_id=parent_id, busy=True)
    return child, fake.add_session(parent_id=child, busy=True)


def user_message_info(session_id: str, message_id: str) -> dict[str, Any]:
    """OpenCode's ``info`` of a user message (a prompt) of ``session_id``, for a test that
    plays the server event by event."""
    return {
        "id": message_id,
        "sessionID": session_id,
        "role": "user",
        "time": {"created": 1},
        "agent": "build",
        "model": {"providerID": "fake", "modelID": "fake"},
    }


def assistant_message_info(
    session_id: str, message_id: str, parent_id: str, *, completed: int | None
) -> dict[str, Any]:
    """OpenCode's ``info`` of an assistant message answering ``parent_id``: running, or
    ``completed`` at that time (with its ``finish``); no tokens, no cost."""
    time: dict[str, Any] = {"created": 2}
    if completed is not None:
        time["completed"] = completed
    info: dict[str, Any] = {
        "id": message_id,
        "sessionID": session_id,
        "role": "assistant",
        "parentID": parent_id,
        "time": time,
        "modelID": "fake",
        "providerID": "fake",
        "mode": "build",
        "agent": "build",
        "path": {"cwd": "/", "root": "/"},
        "cost": 0,
        "tokens": {"input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}},
    }
    if completed is not None:
        info["finish"] = "stop"
    return info


async def a_step_finished(fake: FakeOpenCodeServer, session_id: str) -> None:
    """Until the fake has emitted an assistant message of ``session_id`` with its
    ``finish`` (one of its model steps ended), since the fake started."""
    await fake.wait_for_event(
        "message.updated",
        lambda e: (
            e["properties"]["info"]["sessionID"] == session_id
            and e["properties"]["info"].get("finish") is not None
        ),
        since=0,
    )


async def held_abort(
    fake: FakeOpenCodeServer, session_id: str, stop: Coroutine[Any, Any, R]
) -> tuple[Hold, asyncio.Task[R]]:
    """Starts ``stop`` and returns once its abort of ``session_id`` reached the fake and is
    held there: the hold (``release()`` it) and the stop's task."""
    hold = fake.hold("POST", f"/session/{session_id}/abort")
    task = asyncio.create_task(stop)
    await hold.wait_started()
    return hold, task


async def start_scripted_turn(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, thread_id: str, name: str, steps: Sequence[Step]
) -> tuple[SessionInfo, TurnStart]:
    """Thread ``thread_id`` started and sent a turn that runs the fake's script ``name``
    (``steps``): its session and its turn."""
    fake.script(name, list(steps))
    info = await oc.start_session(thread_id)
    turn = await oc.send_turn(thread_id, f"go [[script:{name}]]")
    return info, turn


async def another_turn_completed(
    oc: OpenCodeAdapter,
    fake: FakeOpenCodeServer,
    rec: Recorder,
    thread_id: str,
    prompt: str,
    text: str,
) -> Any:
    """Thread ``thread_id`` runs one more turn (``prompt``, answered ``text`` by the fake's
    script ``ok``), then ``rec`` holds a ``turn.completed``: the first it holds (so this
    is the new turn's where no turn completed before)."""
    fake.script("ok", [Text(text)])
    await oc.send_turn(thread_id, f"{prompt} [[script:ok]]")
    return await rec.wait_for("turn.completed")


async def drain(stream: EventStream) -> list[Event]:
    """What ``stream`` holds now (its ``backlog``), read without waiting for more; a stream
    whose end is queued ends."""
    out: list[Event] = []
    for _ in range(stream.backlog):
        try:
            out.append(await anext(stream))
        except StopAsyncIteration:
            break
    return out


async def replayed_turn(oc: OpenCodeAdapter, thread_id: str) -> AsyncIterator[Event]:
    """The thread's retained events (``events(replay=True)``), up to its first
    ``turn.completed``."""
    stream = oc.events(thread_id, replay=True)
    try:
        while True:
            event = await anext(stream)
            yield event
            if event.type == "turn.completed":
                return
    finally:
        await stream.aclose()


#: The ``record`` fixture: a recorder of any adapter, closed at the end of the test.
Record = Callable[[OpenCodeAdapter], EventRecorder]
