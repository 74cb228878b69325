"""``Timeouts``: validation naming the field, and the deprecated keyword aliases."""

from __future__ import annotations

import dataclasses
import math
import sys
import warnings

import pytest

from adapter._exceptions import InvalidInputError
from adapter._timeouts import LEGACY_TIMEOUT_FIELDS, Timeouts, resolve_timeouts


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


def test_every_legacy_keyword_names_a_field() -> None:
    names = {f.name for f in dataclasses.fields(Timeouts)}
    assert set(LEGACY_TIMEOUT_FIELDS.values()) <= names
    assert len(LEGACY_TIMEOUT_FIELDS) == 7


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


def test_no_arguments_gives_the_defaults_without_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resolve_timeouts(None) == Timeouts()
        assert resolve_timeouts(None, request_timeout=None, tree_timeout=None) == Timeouts()
        given = Timeouts(echo=3.0)
        assert resolve_timeouts(given) is given


def _host_code(**legacy: float | None) -> Timeouts:
    """Stands for ``OpenCodeAdapter.__init__``: the warning must point past it."""
    return resolve_timeouts(None, **legacy)


def test_legacy_keyword_overrides_default_and_warns_at_the_callers_line() -> None:
    with pytest.warns(
        DeprecationWarning, match=r"tree_timeout= is deprecated.*Timeouts\(tree="
    ) as rec:
        call_line = sys._getframe().f_lineno + 1
        timeouts = _host_code(tree_timeout=2.5)
    assert timeouts == Timeouts(tree=2.5)
    assert len(rec) == 1
    # attributed to this line (the host's call), not to _host_code or resolve_timeouts
    assert (rec[0].filename, rec[0].lineno) == (__file__, call_line)


def test_each_legacy_keyword_warns_once() -> None:
    legacy: dict[str, float | None] = {k: 2.0 for k in LEGACY_TIMEOUT_FIELDS}
    with pytest.warns(DeprecationWarning) as rec:
        timeouts = resolve_timeouts(None, **legacy)
    assert len(rec) == 7
    for keyword, field_name in LEGACY_TIMEOUT_FIELDS.items():
        assert getattr(timeouts, field_name) == 2.0
        assert any(keyword in str(w.message) for w in rec)
    assert timeouts.echo == 30.0  # not a legacy keyword: untouched


def test_legacy_keyword_equal_to_the_timeouts_field_is_accepted() -> None:
    given = Timeouts(request=4.0)
    with pytest.warns(DeprecationWarning):
        assert resolve_timeouts(given, request_timeout=4.0) is given


def test_legacy_keyword_conflicting_with_timeouts_is_refused() -> None:
    with (
        pytest.warns(DeprecationWarning),
        pytest.raises(
            InvalidInputError, match=r"abort_timeout=3\.0 conflicts with timeouts\.abort"
        ),
    ):
        resolve_timeouts(Timeouts(abort=5.0), abort_timeout=3.0)
    # a legacy keyword that only restates the default still conflicts with a changed field
    with pytest.warns(DeprecationWarning), pytest.raises(InvalidInputError):
        resolve_timeouts(Timeouts(abort=5.0), abort_timeout=10.0)


def test_invalid_legacy_value_names_the_keyword() -> None:
    with pytest.raises(InvalidInputError, match="connect_timeout must be a positive finite"):
        resolve_timeouts(None, connect_timeout=0.0)


def test_unknown_keyword_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="echo_timeout"):
        resolve_timeouts(None, echo_timeout=1.0)
