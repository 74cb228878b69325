"""Answers to a question request, checked against the questions before they are sent.

OpenCode's ``question`` tool asks one or more questions at once; the reply is a
list with one answer per question, in the questions' order, each answer a list
of selected labels (``POST /question/{id}/reply {"answers": [[...], ...]}``).
The server takes whatever it is given: an answer list that is too short, or a
label that is none of the options, reaches the model as the user's answer. So
a host's typo (a mapping keyed by a misspelt question) used to be sent as an
empty answer, silently. This module turns what a host passes into the wire
list, and refuses anything that does not fit the questions, naming the bad key
or value, before anything is sent.

Rules (a question is ``{question, header, options: [{label, description}],
multiple?, custom?}``):

* answers are a mapping keyed by a question's text or its header, or a
  sequence with one answer per question, in order;
* every key must name a question, and every question must be answered (an
  empty list is a deliberate "no selection");
* an answer is a string or a sequence of strings; more than one only when the
  question allows ``multiple``;
* a value must be one of the question's option labels unless the question
  allows a custom answer (``custom``, which OpenCode defaults to true) or has
  no options.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

from .._exceptions import InvalidInputError

__all__ = ["Answers", "wire_answers"]

Answer: TypeAlias = str | Sequence[str]
Answers: TypeAlias = Mapping[str, Answer] | Sequence[Answer]
"""What a host may pass: keyed by question text or header, or one per question."""


def wire_answers(questions: Sequence[Mapping[str, Any]], answers: Answers) -> list[list[str]]:
    """The reply body's ``answers`` for ``questions``; :class:`InvalidInputError`
    names the first key, position or value that does not fit."""
    if isinstance(answers, str | bytes):
        raise InvalidInputError("answers must be a mapping or a sequence, not a string")
    if isinstance(answers, Mapping):
        given = _by_question(questions, answers)
    elif isinstance(answers, Sequence):
        if len(answers) != len(questions):
            raise InvalidInputError(
                f"answers has {len(answers)} entries for {len(questions)} question(s)"
            )
        given = list(answers)
    else:
        raise InvalidInputError(
            f"answers must be a mapping or a sequence, not {type(answers).__name__}"
        )
    return [
        _checked(q, a, _label(q, i)) for i, (q, a) in enumerate(zip(questions, given, strict=True))
    ]


def _by_question(questions: Sequence[Mapping[str, Any]], answers: Mapping[str, Any]) -> list[Any]:
    keys: dict[str, int] = {}
    for i, q in enumerate(questions):
        for key in (q.get("question"), q.get("header")):
            if isinstance(key, str) and key:
                keys.setdefault(key, i)
    given: list[Any] = [None] * len(questions)
    for key, value in answers.items():
        index = keys.get(key) if isinstance(key, str) else None
        if index is None:
            known = ", ".join(repr(k) for k in keys) or "none"
            raise InvalidInputError(
                f"answers key {key!r:.80} names no question of this request (known: {known})"
            )
        if given[index] is not None:
            raise InvalidInputError(f"{_label(questions[index], index)} is answered twice")
        given[index] = value
    for i, value in enumerate(given):
        if value is None:
            raise InvalidInputError(f"{_label(questions[i], i)} has no answer")
    return given


def _checked(question: Mapping[str, Any], answer: Any, label: str) -> list[str]:
    if isinstance(answer, str):
        values = [answer]
    elif isinstance(answer, Sequence) and not isinstance(answer, bytes):
        values = list(answer)
    else:
        raise InvalidInputError(f"the answer to {label} must be a string or a list of strings")
    for value in values:
        if not isinstance(value, str):
            raise InvalidInputError(f"the answer to {label} must be a string or a list of strings")
    if len(values) > 1 and question.get("multiple") is not True:
        raise InvalidInputError(f"{label} takes one answer, got {len(values)}")
    options = [o.get("label") for o in question.get("options") or () if isinstance(o, Mapping)]
    if options and question.get("custom") is False:
        for value in values:
            if value not in options:
                choices = ", ".join(repr(o) for o in options)
                raise InvalidInputError(
                    f"{value!r:.80} is not an option of {label} (options: {choices})"
                )
    return values


def _label(question: Mapping[str, Any], index: int) -> str:
    header = question.get("header") or question.get("question")
    return f"question {index + 1} ({header!r:.60})" if header else f"question {index + 1}"
