"""The rules an answer to a question request is checked by, before anything is sent:
keyed by question or header, in question order, a custom answer unless the question
forbids it, and a refusal that names what is wrong (``tests/test_questions.py`` checks
them through the adapter).

A test of internals: ``wire_answers`` (``adapter._requests._answers``) on its own, the
one place the rules are written.
"""

from __future__ import annotations

from typing import Any

import pytest

from adapter import InvalidInputError
from adapter._requests._answers import wire_answers
from tests.test_questions import COLOR, SIZES

FREE = {"question": "Anything else?", "header": "Notes", "options": []}


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
