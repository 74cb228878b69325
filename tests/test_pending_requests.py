"""``OpenCodeAdapter.pending_requests``: the open requests of a thread's whole tree.

A host that draws "waiting for you" (or a test that answers what is open) asks the
adapter instead of replaying ``request.opened`` / ``request.resolved`` itself: each
open request is listed as the event that announced it, in the order announced, until
it is answered, withdrawn or stopped.
"""

from __future__ import annotations

from typing import Any

import pytest

from adapter import (
    OpenCodeAdapter,
    RequestOpened,
    UnknownThreadError,
    UserInputRequested,
)
from adapter.testing.fake import FakeOpenCodeServer, Hang, Permission, Question, Task, Text
from tests.adapter_support import Recorder

T = "thread-1"
OTHER = "thread-2"
PROCEED = {
    "question": "Proceed?",
    "header": "Proceed",
    "options": [{"label": "yes", "description": ""}, {"label": "no", "description": ""}],
}


@pytest.fixture
def fake_options() -> dict[str, Any]:
    # A background subagent lets the root ask while its child waits on a permission.
    return {"seed": 7, "background_subagents": True}


async def child_asks_then_root_asks(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder, thread_id: str = T
) -> tuple[RequestOpened, UserInputRequested]:
    """The thread's child asks a permission, then its root asks a question: both open."""
    fake.script("child-asks", [Permission("bash", ["make *"]), Text("made")])
    fake.script(
        "root",
        [Task("build", "child-asks", background=True), Question([PROCEED]), Text("done"), Hang()],
    )
    await oc.start_session(thread_id)
    await oc.send_turn(thread_id, "go [[script:root]]")
    permission = await rec.wait_for("request.opened", lambda e: e.thread_id == thread_id)
    question = await rec.wait_for("user-input.requested", lambda e: e.thread_id == thread_id)
    return permission, question


async def test_a_childs_permission_and_the_roots_question_are_listed_as_announced(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    permission, question = await child_asks_then_root_asks(oc, fake, rec)
    root = oc.session_info(T).session_id
    assert permission.session_id != root and question.session_id == root
    announced = [e for e in rec.events if isinstance(e, RequestOpened | UserInputRequested)]
    listed = oc.pending_requests(T)
    assert listed == announced  # the events themselves, in the order announced
    assert {type(r) for r in listed} == {RequestOpened, UserInputRequested}
    assert permission in listed and question in listed
    assert permission.permission == "bash" and permission.patterns == ("make *",)
    assert question.questions[0]["question"] == "Proceed?"


async def test_an_answered_request_is_no_longer_listed(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    permission, question = await child_asks_then_root_asks(oc, fake, rec)
    await oc.respond_to_user_input(T, question.request_id, {"Proceed?": "yes"})
    await rec.wait_for("user-input.resolved")
    assert oc.pending_requests(T) == [permission]
    await oc.respond_to_request(T, permission.request_id, "accept")
    await rec.wait_for("request.resolved")
    assert oc.pending_requests(T) == []


async def test_after_interrupt_turn_no_request_remains(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    await child_asks_then_root_asks(oc, fake, rec)
    await oc.interrupt_turn(T)
    assert oc.pending_requests(T) == []


async def test_another_threads_requests_are_not_listed(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("other", [Question([PROCEED]), Text("ok")])
    await oc.start_session(OTHER)
    await oc.send_turn(OTHER, "go [[script:other]]")
    other = await rec.wait_for("user-input.requested", lambda e: e.thread_id == OTHER)
    mine = await child_asks_then_root_asks(oc, fake, rec)
    listed = oc.pending_requests(T)
    assert sorted(r.request_id for r in listed) == sorted(r.request_id for r in mine)
    assert oc.pending_requests(OTHER) == [other]


async def test_an_unknown_thread_is_refused_as_by_the_other_thread_methods(
    oc: OpenCodeAdapter,
) -> None:
    with pytest.raises(UnknownThreadError):
        oc.pending_requests("nobody")
