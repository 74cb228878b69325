"""A turn with background subagents (:mod:`adapter._turns._background`): it stays open,
in the turn phase ``background``, until its background children ended and the root
answered their results; each edge of that wait, played event by event.

The server's side follows what 1.18.34 was measured to do (``docs/adapter.md``,
"Background subagents"): the root's ``task`` call completes at once with
``metadata.background``, the root answers and goes idle; a child that ends on its own
gets a synthetic ``<task id=… state="completed">`` message in the root, which then runs
again; an aborted child gets none.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import httpx

from adapter import TurnStart
from adapter.testing import caught_up
from adapter.testing.fake import FakeOpenCodeServer, Hang, Step, Task, Text
from tests.adapter_support import (
    assistant_message_info,
    emit_session_error,
    user_message_info,
)
from tests.faults.harness import Harness, fast

T = "thread-1"
_ids = itertools.count(1)


class Root:
    """The root session as the test plays it: messages, parts, statuses."""

    def __init__(self, fake: FakeOpenCodeServer, session_id: str) -> None:
        self.fake = fake
        self.session_id = session_id

    def status(self, kind: str) -> None:
        sid = self.session_id
        self.fake.emit("session.status", {"sessionID": sid, "status": {"type": kind}})
        if kind == "idle":
            self.fake.emit("session.idle", {"sessionID": sid})

    def user(self, message_id: str, *, text: str | None = None) -> None:
        info = user_message_info(self.session_id, message_id)
        self.fake.emit("message.updated", {"sessionID": self.session_id, "info": info})
        if text is not None:  # the server's own message: its one text part is synthetic
            self.part(message_id, {"type": "text", "text": text, "synthetic": True})

    def assistant(self, parent_id: str, *, text: str = "", task_child: str | None = None) -> str:
        message_id = f"msg_zz{next(_ids):08d}"
        self._message(message_id, parent_id, completed=False)
        if task_child is not None:
            self.part(message_id, background_task_part(task_child, self.session_id))
        if text:
            self.part(message_id, {"type": "text", "text": text, "time": {"start": 1, "end": 2}})
        self._message(message_id, parent_id, completed=True)
        return message_id

    def part(self, message_id: str, fields: dict[str, Any]) -> None:
        part = {
            "id": f"prt_zz{next(_ids):08d}",
            "messageID": message_id,
            "sessionID": self.session_id,
            **fields,
        }
        self.fake.emit("message.part.updated", {"sessionID": self.session_id, "part": part})

    def runs_on_result(self, child: str, text: str) -> None:
        """The root's run on ``child``'s result, as the server plays it: the synthetic
        result message, then busy, the answer ``text``, idle."""
        self.user("msg_zzresult", text=result_text(child))
        self.status("busy")
        self.assistant("msg_zzresult", text=text)
        self.status("idle")

    def _message(self, message_id: str, parent_id: str, *, completed: bool) -> None:
        info = assistant_message_info(
            self.session_id, message_id, parent_id, completed=3 if completed else None
        )
        self.fake.emit("message.updated", {"sessionID": self.session_id, "info": info})


def background_task_part(child: str, parent: str) -> dict[str, Any]:
    """The root's ``task`` call that started ``child`` in the background, as measured."""
    return {
        "type": "tool",
        "tool": "task",
        "callID": f"call_{child[-6:]}",
        "state": {
            "status": "completed",
            "input": {"description": "bg", "prompt": "work", "background": True},
            "output": f'<task id="{child}" state="running">\n<summary>Background task started',
            "title": "bg",
            "metadata": {"parentSessionId": parent, "sessionId": child, "background": True},
            "time": {"start": 1, "end": 2},
        },
    }


def result_text(child: str, state: str = "completed") -> str:
    return f'<task id="{child}" state="{state}">\n<summary>Background task {state}</summary>'


class Prompts:
    """Accepts prompts (204) without running them: the test plays the server."""

    def __init__(self, fake: FakeOpenCodeServer) -> None:
        self.ids: list[str] = []
        fake.on("POST", "/session/{id}/prompt_async", self._accept)

    async def _accept(self, request: httpx.Request) -> httpx.Response:
        self.ids.append(json.loads(request.content)["messageID"])
        return httpx.Response(204)


async def a_root_that_started_a_background_child(h: Harness) -> tuple[Root, str, str]:
    """A turn whose root started a background child, answered and went idle, once the
    adapter has handled it all (``quiet``): the root, the turn's id and the child's id
    (busy)."""
    root_id = (await h.oc.start_session(T)).session_id
    prompts = Prompts(h.fake)
    turn = await h.oc.send_turn(T, "go")
    root = Root(h.fake, root_id)
    prompt = prompts.ids[-1]
    root.status("busy")
    root.user(prompt)
    child = h.fake.add_session(parent_id=root_id, busy=True)
    root.assistant(prompt, task_child=child)
    root.assistant(prompt, text="answered at once")
    root.status("idle")
    await quiet(h)
    return root, turn.turn_id, child


async def quiet(h: Harness) -> None:
    """Until a settle the idle started has asked the status and decided (the adapter has
    handled every event the test played, and what that set going has run)."""
    await caught_up(h.fake, h.oc)


def child_ends(fake: FakeOpenCodeServer, child: str) -> None:
    fake.set_status(child, {"type": "idle"})
    fake.emit("session.idle", {"sessionID": child})


async def test_the_turn_waits_for_its_background_child_and_the_roots_run_on_its_result(
    fake: FakeOpenCodeServer,
) -> None:
    async with Harness(fake) as h:
        root, turn_id, child = await a_root_that_started_a_background_child(h)
        assert h.rec.of("turn.completed") == [], "the child still works"
        assert h.oc.session_info(T).status == "running"
        child_ends(fake, child)
        await quiet(h)
        assert h.rec.of("turn.completed") == [], "the root is owed the child's result"
        root.runs_on_result(child, " and ran on the result")
        done = await h.rec.wait_for("turn.completed", timeout=5.0)
        assert done.turn_id == turn_id
        text = "".join(e.delta for e in h.rec.of("content.delta") if e.turn_id == turn_id)
        assert text == "answered at once and ran on the result"
        assert len(h.rec.of("turn.started")) == 1


async def test_an_aborted_background_child_owes_nothing_and_the_turn_ends_at_its_idle(
    fake: FakeOpenCodeServer,
) -> None:
    async with Harness(fake) as h:
        _, turn_id, child = await a_root_that_started_a_background_child(h)
        emit_session_error(fake, child, "MessageAbortedError", "Aborted")
        child_ends(fake, child)
        done = await h.rec.wait_for("turn.completed", timeout=5.0)
        assert done.turn_id == turn_id
        assert h.rec.of("runtime.warning") == []


async def test_a_result_the_server_never_delivers_is_given_up_with_a_warning(
    fake: FakeOpenCodeServer,
) -> None:
    async with Harness(fake, timeouts=fast(echo=0.3, watchdog=0.05)) as h:
        _, turn_id, child = await a_root_that_started_a_background_child(h)
        child_ends(fake, child)
        done = await h.rec.wait_for("turn.completed", timeout=5.0)
        assert done.turn_id == turn_id
        (warning,) = h.rec.of("runtime.warning")
        assert child in warning.message and "did not reach" in warning.message


async def test_a_child_whose_idle_event_was_lost_is_seen_ended_in_the_status(
    fake: FakeOpenCodeServer,
) -> None:
    """The child's idle never reaches the adapter; its result does, and the root's run on
    it: the root's idle asks the status, which shows the child idle, and the turn ends."""
    async with Harness(fake) as h:
        root, turn_id, child = await a_root_that_started_a_background_child(h)
        fake.set_status(child, {"type": "idle"})  # emits session.status only ...
        root.runs_on_result(child, " then more")
        done = await h.rec.wait_for("turn.completed", timeout=5.0)
        assert done.turn_id == turn_id


async def test_a_steer_while_background_children_work_belongs_to_the_open_turn(
    fake: FakeOpenCodeServer,
) -> None:
    async with Harness(fake) as h:
        _, turn_id, child = await a_root_that_started_a_background_child(h)
        steer = await h.oc.send_turn(T, "meanwhile")
        assert steer.turn_id == turn_id
        assert len(h.rec.of("turn.started")) == 1
        await h.oc.interrupt_turn(T)
        aborted = await h.rec.wait_for("turn.aborted", timeout=5.0)
        assert aborted.turn_id == turn_id
        assert fake.sessions[child].abort_count >= 1, "the stop reached the child"


def background_fake(*child_steps: Step) -> FakeOpenCodeServer:
    """A fake with background subagents on (learned from 1.18.34) whose script ``root``
    starts ``child`` (``child_steps``) in the background and answers "answered at once";
    the child's result makes it run ``after``."""
    fake = FakeOpenCodeServer(background_subagents=True)
    fake.script("child", list(child_steps))
    fake.script("after", [Text(" and ran on the result")])
    fake.script(
        "root",
        [Task("bg", "child", background=True, result_script="after"), Text("answered at once")],
    )
    return fake


async def start_root(h: Harness) -> TurnStart:
    await h.oc.start_session(T)
    return await h.oc.send_turn(T, "go [[script:root]]")


def turn_text(h: Harness, turn_id: str) -> str:
    return "".join(e.delta for e in h.rec.of("content.delta") if e.turn_id == turn_id)


async def test_on_the_fake_the_run_on_a_result_and_the_childs_task_are_the_turns() -> None:
    """The root's run on the result is the same turn's. The child's task goes on past its
    call (which completes at once, ``metadata.background``) until the child's own end, and
    its ``task.completed`` comes before the turn's."""
    async with Harness(background_fake(Text("child done"))) as h:
        turn = await start_root(h)
        done = await h.rec.wait_for("turn.completed", timeout=5.0)
        assert done.turn_id == turn.turn_id
        assert turn_text(h, turn.turn_id) == "answered at once and ran on the result"
        (started,) = h.rec.of("task.started", T)
        (completed,) = h.rec.of("task.completed", T)
        assert started.item_id is not None and started.turn_id == turn.turn_id
        assert completed.session_id == started.session_id
        assert (completed.status, completed.result) == ("completed", "child done")
        types = h.rec.types(T)
        assert types.index("task.completed") < types.index("turn.completed")


async def test_on_the_fake_interrupting_while_a_background_child_works_stops_it() -> None:
    fake = background_fake(Hang())
    async with Harness(fake) as h:
        turn = await start_root(h)
        child = await h.rec.wait_for("child.started", timeout=5.0)
        await h.rec.wait_for("content.delta", timeout=5.0)
        await quiet(h)
        assert h.oc.session_info(T).status == "running"
        result = await h.oc.interrupt_turn(T)
        assert result.turn_id == turn.turn_id
        assert result.stop is not None and child.session_id in result.stop.session_ids
        assert fake.sessions[child.session_id].abort_count >= 1
        await quiet(h)
        assert h.rec.types(T).count("turn.aborted") == 1
        assert h.rec.of("turn.completed") == []


async def test_stopping_a_background_child_alone_ends_its_task_and_the_turn_without_a_rerun() -> (
    None
):
    async with Harness(background_fake(Hang())) as h:
        turn = await start_root(h)
        started = await h.rec.wait_for("task.started", timeout=5.0)
        await h.rec.wait_for("content.delta", timeout=5.0)
        await quiet(h)
        report = await h.oc.stop_subagent(T, started.session_id)
        assert report.ok and started.session_id in report.session_ids
        done = await h.rec.wait_for("turn.completed", timeout=5.0)
        assert done.turn_id == turn.turn_id
        (completed,) = h.rec.of("task.completed", T)
        assert completed.status == "stopped"
        assert turn_text(h, turn.turn_id) == "answered at once"
