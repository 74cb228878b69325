"""When a turn is over: idles that come before the echo, during a held acceptance,
or while an older status poll is still out.

A turn settles when every prompt it sent was echoed, the newest user message has
its answer, and ``/session/status`` confirms the root is idle (``adapter._turns._running``).
The trigger to ask is an idle; these tests pin what happens when that idle comes
at an awkward moment, so that the turn neither ends early nor waits for the
watchdog's 30 s quiet check. Each scripts the server's events by hand: the fake
swallows the prompt and the test says what the server would have said.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from adapter import TurnStart
from adapter.testing import caught_up
from adapter.testing.fake import FakeOpenCodeServer
from tests.adapter_support import assistant_message_info, user_message_info
from tests.faults.harness import Harness, fast

T = "thread-1"


class ScriptedRun:
    """What the server says about one prompt, emitted by the test event by event."""

    def __init__(self, fake: FakeOpenCodeServer, session_id: str, prompt_id: str) -> None:
        self.fake = fake
        self.session_id = session_id
        self.prompt_id = prompt_id
        self.answer_id = f"msg_{prompt_id[4:]}z"

    def busy(self) -> None:
        self.fake.emit("session.status", {"sessionID": self.session_id, "status": {"type": "busy"}})

    def idle(self) -> None:
        self.fake.emit("session.status", {"sessionID": self.session_id, "status": {"type": "idle"}})
        self.fake.emit("session.idle", {"sessionID": self.session_id})

    def echo(self) -> None:
        self.fake.emit("message.updated", {"sessionID": self.session_id, "info": self.user_info()})

    def answer(self, text: str) -> None:
        """The assistant message, its text, and its completion."""
        part = {
            "id": f"prt_{self.answer_id[4:]}",
            "messageID": self.answer_id,
            "sessionID": self.session_id,
            "type": "text",
            "text": "",
            "time": {"start": 1},
        }
        self.fake.emit(
            "message.updated", {"sessionID": self.session_id, "info": self.assistant_info(None)}
        )
        self.fake.emit("message.part.updated", {"sessionID": self.session_id, "part": part})
        self.fake.emit(
            "message.part.delta",
            {
                "sessionID": self.session_id,
                "messageID": self.answer_id,
                "partID": part["id"],
                "field": "text",
                "delta": text,
            },
        )
        done = {**part, "text": text, "time": {"start": 1, "end": 2}}
        self.fake.emit("message.part.updated", {"sessionID": self.session_id, "part": done})
        self.fake.emit(
            "message.updated", {"sessionID": self.session_id, "info": self.assistant_info(3)}
        )

    def user_info(self) -> dict[str, Any]:
        return user_message_info(self.session_id, self.prompt_id)

    def assistant_info(self, completed: int | None) -> dict[str, Any]:
        return assistant_message_info(
            self.session_id, self.answer_id, self.prompt_id, completed=completed
        )


class SwallowedPrompts:
    """Accepts prompts (204) without running them: the test plays the server."""

    def __init__(self, fake: FakeOpenCodeServer, *, answer_held: bool = False) -> None:
        self.ids: list[str] = []
        self.arrived = asyncio.Event()
        #: Set to let held answers through (``answer_held``: the server has the
        #: prompt, the client does not know yet).
        self.answer = asyncio.Event()
        if not answer_held:
            self.answer.set()
        fake.on("POST", "/session/{id}/prompt_async", self._accept)

    async def _accept(self, request: httpx.Request) -> httpx.Response:
        self.ids.append(json.loads(request.content)["messageID"])
        self.arrived.set()
        await self.answer.wait()
        return httpx.Response(204)

    async def next_id(self) -> str:
        async with asyncio.timeout(5):
            await self.arrived.wait()
        self.arrived.clear()
        return self.ids[-1]


async def send_and_play(h: Harness) -> tuple[TurnStart, ScriptedRun]:
    """Start the thread and send one prompt, which the test then plays as the server."""
    root = (await h.oc.start_session(T)).session_id
    prompts = SwallowedPrompts(h.fake)
    turn = await h.oc.send_turn(T, "go")
    return turn, ScriptedRun(h.fake, root, await prompts.next_id())


async def test_an_idle_that_overtakes_its_own_echo_ends_the_turn_once_the_answer_is_in(
    fake: FakeOpenCodeServer,
) -> None:
    """B36: the run's idle comes before the echo of its prompt, and no later idle
    comes. The echo and the finished answer are all the turn still needs: it
    completes then (status confirms idle), not at the watchdog's 30 s quiet check."""
    async with Harness(fake) as h:
        turn, run = await send_and_play(h)
        run.busy()
        run.idle()  # overtakes the echo
        run.echo()
        await caught_up(fake, h.oc)
        assert h.rec.of("turn.completed") == []  # no answer yet: not over
        run.answer("done")
        done = await h.rec.wait_for("turn.completed", timeout=5.0)
        assert done.turn_id == turn.turn_id
        assert "".join(e.delta for e in h.rec.of("content.delta")) == "done"


async def test_a_newer_idle_during_a_status_poll_that_answers_busy_is_asked_again(
    fake: FakeOpenCodeServer,
) -> None:
    """B38: the poll started by the run's idle answers busy (the server had not yet
    marked the session idle when it read the status), and the run's second idle
    arrived while that poll was out. The answer predates that idle, so the adapter
    asks again instead of waiting for an idle that will never come."""
    async with Harness(fake) as h:
        turn, run = await send_and_play(h)
        polled = asyncio.Event()
        answer = asyncio.Event()

        async def stale_busy(request: httpx.Request) -> httpx.Response:
            polled.set()
            await answer.wait()
            return httpx.Response(200, json={run.session_id: {"type": "busy"}})

        stale = fake.on("GET", "/session/status", stale_busy)
        run.busy()
        run.echo()
        run.answer("done")
        run.idle()
        async with asyncio.timeout(5):
            await polled.wait()
        stale.remove()  # later polls see the truth: idle
        fake.emit("session.idle", {"sessionID": run.session_id})  # the newer idle, during the poll
        await caught_up(fake, h.oc)
        answer.set()
        done = await h.rec.wait_for("turn.completed", timeout=5.0)
        assert done.turn_id == turn.turn_id


async def test_an_idle_while_the_acceptance_is_held_is_reconciled_once_the_echo_arrives(
    fake: FakeOpenCodeServer,
) -> None:
    """B37: the server ran the prompt while its ``prompt_async`` answer was held, and
    the run's idle overtook the echo. Before the echo the idle completes nothing;
    with the echo and the answer in, the turn completes, and the send, once
    answered, returns that same turn."""
    async with Harness(fake) as h:
        root = (await h.oc.start_session(T)).session_id
        prompts = SwallowedPrompts(fake, answer_held=True)
        send = asyncio.create_task(h.oc.send_turn(T, "go"))
        run = ScriptedRun(fake, root, await prompts.next_id())
        run.busy()
        run.idle()
        await caught_up(fake, h.oc)
        assert h.rec.of("turn.completed") == [], "an idle before the echo ends nothing"
        run.echo()
        run.answer("done")
        done = await h.rec.wait_for("turn.completed", timeout=5.0)
        assert not send.done(), "the acceptance is still held"
        prompts.answer.set()
        turn = await send
        assert done.turn_id == turn.turn_id and done.state == "completed"
        assert len(h.rec.of("turn.started")) == 1


async def test_an_answer_to_a_prompt_whose_echo_was_lost_admits_the_turn(
    fake: FakeOpenCodeServer,
) -> None:
    """B34: the echo event is lost, but the answer names our minted id as its
    parent: the server has the prompt. The turn runs, and its idle completes it
    (before: it waited for the echo until ``Timeouts.echo`` and failed)."""
    async with Harness(fake) as h:
        turn, run = await send_and_play(h)
        run.busy()
        run.answer("done")  # no echo
        run.idle()
        done = await h.rec.wait_for("turn.completed", timeout=5.0)
        assert done.turn_id == turn.turn_id and done.state == "completed"
        assert "".join(e.delta for e in h.rec.of("content.delta")) == "done"


def stored(run: ScriptedRun, text: str) -> list[dict[str, Any]]:
    """``GET /session/{id}/message`` once the run is over: the prompt and its answer."""
    user = {"info": run.user_info(), "parts": []}
    part = {
        "id": f"prt_{run.answer_id[4:]}",
        "messageID": run.answer_id,
        "sessionID": run.session_id,
        "type": "text",
        "text": text,
        "time": {"start": 1, "end": 2},
    }
    return [user, {"info": run.assistant_info(3), "parts": [part]}]


async def test_a_prompt_whose_events_were_all_lost_is_found_stored_and_completes(
    fake: FakeOpenCodeServer,
) -> None:
    """B34: no echo and no event at all, but the server stored the prompt and its
    answer: after ``Timeouts.echo`` of silence the adapter reads the messages, and
    the stored answer completes the turn with its text (not ``PromptNotStarted``)."""
    async with Harness(fake, timeouts=fast(echo=0.3, watchdog=0.05)) as h:  # a short tick
        turn, run = await send_and_play(h)

        async def messages(request: httpx.Request) -> httpx.Response:
            return httpx.Response(200, json=stored(run, "done"))

        fake.on("GET", "/session/{id}/message", messages)
        done = await h.rec.wait_for("turn.completed", timeout=5.0)
        assert done.turn_id == turn.turn_id and done.state == "completed"
        assert "".join(e.delta for e in h.rec.of("content.delta")) == "done"


async def test_a_busy_root_admits_a_turn_whose_echo_is_overdue(
    fake: FakeOpenCodeServer,
) -> None:
    """B34: the echo is overdue and the prompt is not readable yet, but the root is
    busy: the turn keeps running (each ``Timeouts.echo`` it looks again), and its
    echo and answer, when they come, complete it."""
    async with Harness(fake, timeouts=fast(echo=0.2, watchdog=0.05)) as h:
        turn, run = await send_and_play(h)
        busy = fake.on(
            "GET",
            "/session/status",
            lambda request: _answer({run.session_id: {"type": "busy"}}),
        )
        await fake.wait_until(lambda: status_polls(fake) >= 3)  # three echo periods
        assert h.rec.of("turn.completed") == [], "busy admits the turn"
        busy.remove()
        run.busy()
        run.echo()
        run.answer("done")
        run.idle()
        done = await h.rec.wait_for("turn.completed", timeout=5.0)
        assert done.turn_id == turn.turn_id and done.state == "completed"


async def _answer(body: Any) -> httpx.Response:
    return httpx.Response(200, json=body)


def status_polls(fake: FakeOpenCodeServer) -> int:
    return sum(1 for r in fake.requests if r.method == "GET" and r.path == "/session/status")
