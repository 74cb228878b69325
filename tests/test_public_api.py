"""The public surface: everything a host imports comes from ``adapter`` and says so."""

from __future__ import annotations

import dataclasses
import inspect
import pickle
import traceback

import pytest

import adapter


def test_every_public_name_exists() -> None:
    missing = [name for name in adapter.__all__ if not hasattr(adapter, name)]
    assert missing == []


def test_exceptions_classes_and_functions_carry_the_public_module() -> None:
    stamped = [
        name
        for name in adapter.__all__
        if (isinstance(getattr(adapter, name), type) or inspect.isfunction(getattr(adapter, name)))
        and not dataclasses.is_dataclass(getattr(adapter, name))
    ]
    assert {"OpenCodeAdapter", "OpenCodeClient", "InvalidInputError", "stop_tree"} <= set(stamped)
    wrong = {name: getattr(adapter, name).__module__ for name in stamped}
    assert {name: module for name, module in wrong.items() if module != "adapter"} == {}


def test_a_traceback_names_the_public_exception() -> None:
    with pytest.raises(adapter.InvalidInputError) as caught:
        raise adapter.InvalidInputError("bad input")
    shown = "".join(traceback.format_exception(caught.value))
    assert "adapter.InvalidInputError: bad input" in shown
    assert "_exceptions" not in shown.splitlines()[-1]


def test_public_exceptions_still_pickle() -> None:
    error = pickle.loads(pickle.dumps(adapter.InvalidInputError("bad input")))
    assert isinstance(error, adapter.InvalidInputError) and str(error) == "bad input"


def test_dataclasses_keep_their_module_so_their_annotations_resolve() -> None:
    assert adapter.Timeouts.__module__ == "adapter._timeouts"
    assert dataclasses.fields(adapter.Timeouts)
