"""Question requests: answers are checked against the questions, and a host can decline.

A question request asks one or more questions; OpenCode takes any list as the
reply, so what does not fit the questions must be refused here, naming the bad
key or value, before anything is sent (the rules themselves, on their own:
``tests/test_questions_internals.py``). ``reject_user_input`` declines: the
asking tool call fails and the run stops (the differential suite holds the fake
to the real server on this).
"""

from __future__ import annotations

import pytest

from adapter import InvalidInputError, OpenCodeAdapter, UnknownRequestError
from adapter.testing import caught_up
from adapter.testing.fake import FakeOpenCodeServer, Question, Text
from tests.adapter_support import Recorder, start_scripted_turn

T = "t"

COLOR = {
    "question": "Which color?",
    "header": "Color",
    "options": [{"label": "red", "description": ""}, {"label": "blue", "description": ""}],
}
SIZES = {
    "question": "Which sizes?",
    "header": "Sizes",
    "options": [{"label": "S", "description": ""}, {"label": "M", "description": ""}],
    "multiple": True,
    "custom": False,
}


# --------------------------------------------------------------------------- through the adapter


def replies(fake: FakeOpenCodeServer) -> list[str]:
    return [r.path for r in fake.requests if r.path.startswith("/question/")]


async def test_a_typo_in_an_answer_key_sends_nothing_and_the_question_stays_open(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    await start_scripted_turn(oc, fake, T, "ask", [Question([COLOR, SIZES]), Text("thanks")])
    asked = await rec.wait_for("user-input.requested")
    with pytest.raises(InvalidInputError, match="'Colr'"):
        await oc.respond_to_user_input(T, asked.request_id, {"Colr": "red", "Sizes": ["S"]})
    assert replies(fake) == []
    assert rec.of("user-input.resolved", T) == []
    # corrected, it goes through and the turn finishes
    await oc.respond_to_user_input(T, asked.request_id, {"Color": "red", "Sizes": ["S", "M"]})
    resolved = await rec.wait_for("user-input.resolved")
    assert resolved.decision == "answered" and resolved.answers == (("red",), ("S", "M"))
    done = await rec.wait_for("turn.completed")
    assert done.state == "completed"


async def test_rejecting_a_question_resolves_it_and_ends_the_run(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    _, turn = await start_scripted_turn(oc, fake, T, "ask", [Question([COLOR]), Text("never said")])
    asked = await rec.wait_for("user-input.requested")
    await oc.reject_user_input(T, asked.request_id)
    resolved = await rec.wait_for("user-input.resolved")
    assert resolved.request_id == asked.request_id and resolved.decision == "rejected"
    done = await rec.wait_for("turn.completed")
    assert done.turn_id == turn.turn_id
    await caught_up(fake, oc)
    item = [e for e in rec.of("item.completed", T) if e.tool == "question"]
    assert [e.status for e in item] == ["error"]
    assert "never said" not in "".join(e.delta for e in rec.of("content.delta", T))
    assert replies(fake) == [f"/question/{asked.request_id}/reject"]
    # once resolved, it is gone: a second reject or an answer is refused
    with pytest.raises(UnknownRequestError):
        await oc.reject_user_input(T, asked.request_id)
    with pytest.raises(UnknownRequestError):
        await oc.respond_to_user_input(T, asked.request_id, ["red"])


async def test_reject_refuses_unknown_requests_and_permission_requests(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    await oc.start_session(T)
    with pytest.raises(UnknownRequestError):
        await oc.reject_user_input(T, "que_unknown")
    assert replies(fake) == []
