"""Running pytest as a host author does: in a directory of their own, in a subprocess,
the plugin found by its installed entry point.

Why a module: the plugin's tests and the docs' contract example both run a user's
test files this way, on this checkout's ``adapter``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import adapter

#: The checkout this test process imports ``adapter`` from.
CHECKOUT = Path(adapter.__file__).resolve().parent.parent


def as_a_user(monkeypatch: pytest.MonkeyPatch) -> None:
    """The subprocess imports this checkout's ``adapter`` and none of our own options."""
    monkeypatch.setenv("PYTHONPATH", str(CHECKOUT))
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)


def run_user_tests(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """pytest in a subprocess, in ``pytester``'s directory (no ``-p`` for the plugin)."""
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=120)
