"""The public surface: everything a host imports comes from ``adapter`` and says so."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pickle
import traceback
import typing

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


#: The modules whose ``__all__`` is public and typed (``tests/test_docs_cover_the_code.py``
#: adds the pytest plugin's, which it documents).
PUBLIC_MODULES = (
    "adapter",
    "adapter.web",
    "adapter.acp",
    "adapter.testing",
    "adapter.testing.fake",
    "adapter.testing.model",
)


def _public_classes() -> list[tuple[str, type]]:
    classes: dict[int, tuple[str, type]] = {}
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            value = getattr(module, name)
            if isinstance(value, type):
                classes.setdefault(id(value), (f"{module_name}.{name}", value))
    return sorted(classes.values(), key=lambda item: item[0])


@pytest.mark.parametrize(
    ("name", "cls"), _public_classes(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_every_public_class_s_annotations_resolve(name: str, cls: type) -> None:
    """``typing.get_type_hints`` (what pydantic, msgspec and documentation tools call)
    resolves the annotations of every public class, of its constructor and of its public
    methods: no name an annotation uses is missing at run time."""
    unresolved: list[str] = []
    targets: list[tuple[str, object]] = [(name, cls)]
    for attr, member in vars(cls).items():
        if attr == "__init__" or not attr.startswith("_"):
            function = getattr(member, "__func__", member)
            if isinstance(member, property):
                function = member.fget
            if inspect.isfunction(function):
                targets.append((f"{name}.{attr}", function))
    for label, target in targets:
        try:
            typing.get_type_hints(target)
        except Exception as exc:  # a NameError names what is missing; report them all
            unresolved.append(f"{label}: {type(exc).__name__}: {exc}")
    assert unresolved == []


def test_machinery_is_not_public() -> None:
    """The public surface is what a host uses: the collector a turn feeds is machinery."""
    assert "PartialCollector" not in adapter.__all__
    assert not hasattr(adapter, "PartialCollector")
