"""``Timeouts``: validation naming the field; the removed keyword aliases are refused."""

from __future__ import annotations

import dataclasses
import math

import pytest

from adapter import InvalidInputError, Timeouts


def test_defaults_keep_todays_keyword_defaults() -> None:
    timeouts = Timeouts()
    assert (timeouts.request, timeouts.connect, timeouts.submit) == (10.0, 10.0, 10.0)
    assert (timeouts.abort, timeouts.tree) == (10.0, 10.0)
    assert timeouts.teardown == 1.0
    assert timeouts.server_ready == 30.0
    assert (timeouts.echo, timeouts.idle_confirm, timeouts.idle_confirm_backoff_max) == (
        30.0,
        60.0,
        5.0,
    )


def test_the_intervals_a_test_shortens_default_to_what_the_adapter_used_before() -> None:
    timeouts = Timeouts()
    assert (timeouts.watchdog, timeouts.quiet_check) == (1.0, 30.0)
    assert (timeouts.owner_lookup_retry, timeouts.skip_report) == (0.2, 10.0)


def test_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Timeouts().echo = 1.0  # type: ignore[misc]


def test_ints_become_floats() -> None:
    assert Timeouts(echo=5).echo == 5.0
    assert isinstance(Timeouts(echo=5).echo, float)


@pytest.mark.parametrize("bad", [0, -1, 0.0, math.inf, -math.inf, math.nan])
@pytest.mark.parametrize("name", [f.name for f in dataclasses.fields(Timeouts)])
def test_non_positive_or_infinite_is_refused_naming_the_field(name: str, bad: float) -> None:
    with pytest.raises(InvalidInputError, match=rf"Timeouts\.{name} must be a positive finite"):
        Timeouts(**{name: bad})


@pytest.mark.parametrize("bad", ["10", None, True, [1.0]])
def test_non_number_is_refused_naming_the_field(bad: object) -> None:
    with pytest.raises(InvalidInputError, match=r"Timeouts\.submit must be a number"):
        Timeouts(submit=bad)  # type: ignore[arg-type]


def test_replace_validates_too() -> None:
    with pytest.raises(InvalidInputError, match=r"Timeouts\.teardown"):
        dataclasses.replace(Timeouts(), teardown=-1.0)


REMOVED_KEYWORDS = [
    "request_timeout",
    "connect_timeout",
    "submit_timeout",
    "abort_timeout",
    "tree_timeout",
    "teardown_timeout",
    "server_ready_timeout",
]


@pytest.mark.parametrize("keyword", REMOVED_KEYWORDS)
def test_the_removed_timeout_keywords_are_refused(keyword: str) -> None:
    """The aliases of 0.1 are gone: ``timeouts=Timeouts(...)`` is the one way."""
    from adapter import OpenCodeAdapter

    with pytest.raises(TypeError, match=keyword):
        OpenCodeAdapter("http://127.0.0.1:9", **{keyword: 2.0})  # type: ignore[arg-type]
