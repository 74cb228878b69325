"""``adapter._base._unicode``: text leaves the process well formed."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from adapter._base._unicode import has_surrogates, surrogate_path, well_formed, well_formed_data


def test_a_lone_half_becomes_the_replacement_character() -> None:
    assert well_formed("a\ud800b") == "a\ufffdb"
    assert well_formed("\ude00") == "\ufffd"


def test_two_halves_side_by_side_are_the_character_they_encode() -> None:
    # A pair cut between two deltas, joined again.
    assert well_formed("\ud83d" + "\ude00") == "\U0001f600"


def test_halves_in_the_wrong_order_are_two_replacements() -> None:
    assert well_formed("\ude00\ud83d") == "\ufffd\ufffd"


def test_text_without_surrogates_is_the_same_object() -> None:
    text = "plain text, é, 😀"
    assert well_formed(text) is text
    assert not has_surrogates(text)


def test_data_keys_and_values_are_made_well_formed() -> None:
    data = {"k\udfff": ["\ud800", 1, None, {"x": "\ud83d\ude00"}], 2: True}
    assert well_formed_data(data) == {"k\ufffd": ["\ufffd", 1, None, {"x": "😀"}], 2: True}


def test_a_tuple_stays_a_tuple() -> None:
    # A log line's value keeps its shape.
    assert well_formed_data(("a\ud800", 1)) == ("a\ufffd", 1)


#: Any text with lone and paired surrogate halves mixed in (``st.text`` never makes them).
TEXT_WITH_HALVES = st.lists(st.one_of(st.characters(), st.integers(0xD800, 0xDFFF).map(chr))).map(
    "".join
)


@given(TEXT_WITH_HALVES)
def test_any_string_comes_out_encodable(text: str) -> None:
    out = well_formed(text)
    out.encode("utf-8")
    json.dumps(out, ensure_ascii=False).encode("utf-8")
    assert not has_surrogates(out)


def test_the_path_of_the_first_string_with_a_surrogate() -> None:
    body = {"parts": [{"type": "text", "text": "ok"}, {"type": "text", "text": "a\ud800"}]}
    assert surrogate_path(body) == "parts[1].text"
    assert surrogate_path({"x\udfff": 1}) == "a key"
    assert surrogate_path("\ud83d\ude00") == "the value"  # a pair is not encodable either
    assert surrogate_path({"parts": [{"text": "fine"}], "n": 1}) is None


def test_the_path_is_found_without_recursion() -> None:
    deep: object = "\ud800"
    for _ in range(100_000):
        deep = [deep]
    assert surrogate_path(deep) is not None
