"""Pytest plugin of the release matrix: a release's documented failures are expected.

Loaded by ``scripts/test-matrix.py`` (``-p tests.real.release_expectations``).
When ``OPENCODE_VERSION_UNDER_TEST`` is set, every test listed under that
release's ``[[release.expected_failure]]`` in ``tests/real/releases.toml`` is
marked ``xfail(strict=True)`` with the recorded reason: it must fail (a pass
turns the run red, so a fixed incompatibility gets its entry removed), and any
other failure is a regression. A release missing from the list, or an entry
matching no collected test, is a usage error rather than a silent no-op.

``test`` is a pytest node id in which ``*`` matches anything (nothing else is
special: parametrised ids keep their brackets). An entry
with ``strict = false`` is for a whole suite that measures a release's
*distance* from the 1.18 line rather than a promise (the differential suite on
older minor lines): its tests may fail or pass, and both are counted.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

RELEASES_FILE = Path(__file__).with_name("releases.toml")
VERSION_VARIABLE = "OPENCODE_VERSION_UNDER_TEST"


def load_releases(path: Path = RELEASES_FILE) -> dict[str, Any]:
    """The parsed ``releases.toml``."""
    return tomllib.loads(path.read_text(encoding="utf-8"))


@dataclass(frozen=True)
class ExpectedFailure:
    """One ``[[release.expected_failure]]`` entry."""

    test: str
    reason: str
    strict: bool = True

    def matches(self, nodeid: str) -> bool:
        pattern = ".*".join(re.escape(part) for part in self.test.split("*"))
        return re.fullmatch(pattern, nodeid) is not None


def expected_failures(version: str, path: Path = RELEASES_FILE) -> list[ExpectedFailure]:
    """``version``'s expected failures, in the order listed.

    Raises:
        pytest.UsageError: ``version`` is not a release of the list.
    """
    for release in load_releases(path)["release"]:
        if release["version"] == version:
            return [ExpectedFailure(**entry) for entry in release.get("expected_failure", [])]
    raise pytest.UsageError(f"{VERSION_VARIABLE}={version} is not a release of {path}")


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    version = os.environ.get(VERSION_VARIABLE)
    if not version:
        return
    expected = expected_failures(version)
    used: set[str] = set()
    for item in items:
        entry = next((e for e in expected if e.matches(item.nodeid)), None)
        if entry is not None:
            used.add(entry.test)
            item.add_marker(
                pytest.mark.xfail(strict=entry.strict, reason=f"OpenCode {version}: {entry.reason}")
            )
    missing = sorted({e.test for e in expected} - used)
    # Only a whole-suite run (as the matrix does it) must see every listed test.
    whole_suite = not config.getoption("file_or_dir") and not config.getoption("keyword")
    # A module that failed to import is reported by pytest itself, with its cause.
    if missing and whole_suite and not session.testsfailed:
        raise pytest.UsageError(
            f"{RELEASES_FILE.name} lists expected failures of {version} that were not"
            f" collected (renamed or removed tests?): {missing}"
        )
