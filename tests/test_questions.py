"""Question requests: answers are checked against the questions, and a host can decline.

A question request asks one or more questions; OpenCode takes any list as the
reply, so what does not fit the questions must be refused here, naming the bad
key or value, before anything is sent. ``reject_user_input`` declines: the
asking tool call fails and the run stops (the differential suite holds the fake
to the real server on this).
"""

from __future__ import annotations

from typing import Any

import pytest

from adapter import InvalidInputError, OpenCodeAdapter, UnknownRequestError
from adapter._requests._answers import wire_answers
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
FREE = {"question": "Anything else?", "header": "Notes", "options": []}


# --------------------------------------------------------------------------- the rules


def test_answers_keyed_by_question_or_header_come_out_in_question_order() -> None:
    assert wire_answers([COLOR, SIZES], {"Sizes": ["S", "M"], "Which color?": "red"}) == [
        ["red"],
        ["S", "M"],
    ]
    assert wire_answers([COLOR, SIZES], ["blue", []]) == [["blue"], []]


def test_a_custom_answer_is_accepted_unless_the_question_forbids_it() -> None:
    assert wire_answers([COLOR], {"Color": "green"}) == [["green"]]  # custom defaults to true
    assert wire_answers([FREE], ["whatever I like"]) == [["whatever I like"]]
    with pytest.raises(InvalidInputError, match=r"'XL' is not an option of question 1 \('Sizes'\)"):
        wire_answers([SIZES], [["XL"]])


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        ({"Colour": "red", "Sizes": "S"}, r"answers key 'Colour' names no question"),
        ({"Color": "red"}, r"question 2 \('Sizes'\) has no answer"),
        ({"Color": "red", "Which color?": "blue", "Sizes": []}, r"question 1 .* answered twice"),
        (["red"], r"answers has 1 entries for 2 question"),
        ([["red", "blue"], []], r"question 1 \('Color'\) takes one answer, got 2"),
        (["red", [3]], r"answer to question 2 .* must be a string or a list of strings"),
        ("red", r"not a string"),
        (42, r"not int"),
    ],
)
def test_answers_that_do_not_fit_name_what_is_wrong(answers: Any, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        wire_answers([COLOR, SIZES], answers)


def test_the_known_keys_are_listed_when_a_key_is_unknown() -> None:
    with pytest.raises(InvalidInputError) as caught:
        wire_answers([COLOR], {"colour": "red"})
    assert "'Which color?'" in str(caught.value) and "'Color'" in str(caught.value)


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
