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

A release may also leave tests out: each ``[[release.not_run]]`` entry (same
``test`` pattern, and the measured ``reason``) deselects the tests it matches for
that release, so an old release does not spend minutes waiting out timeouts it
is already known to hit. The pinned release runs every test (an entry there is a
usage error), and, as for expected failures, an entry matching no collected test
is an error in a whole-suite run.
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


@dataclass(frozen=True)
class NotRun:
    """One ``[[release.not_run]]`` entry: tests this release leaves out, and why."""

    test: str
    reason: str

    def matches(self, nodeid: str) -> bool:
        return ExpectedFailure(self.test, self.reason).matches(nodeid)


def _release(version: str, path: Path) -> dict[str, Any]:
    for release in load_releases(path)["release"]:
        if release["version"] == version:
            return dict(release)
    raise pytest.UsageError(f"{VERSION_VARIABLE}={version} is not a release of {path}")


def expected_failures(version: str, path: Path = RELEASES_FILE) -> list[ExpectedFailure]:
    """``version``'s expected failures, in the order listed.

    Raises:
        pytest.UsageError: ``version`` is not a release of the list.
    """
    return [
        ExpectedFailure(**entry) for entry in _release(version, path).get("expected_failure", [])
    ]


def not_run(version: str, path: Path = RELEASES_FILE) -> list[NotRun]:
    """The tests ``version`` leaves out, in the order listed.

    Raises:
        pytest.UsageError: ``version`` is not a release of the list, or it is the
            pinned release and leaves a test out (the pinned release runs them all).
    """
    entries = [NotRun(**entry) for entry in _release(version, path).get("not_run", [])]
    if entries and version == load_releases(path)["pinned"]:
        raise pytest.UsageError(f"{path.name}: the pinned release {version} must run every test")
    return entries


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    version = os.environ.get(VERSION_VARIABLE)
    if not version:
        return
    # A whole-suite run (as the matrix does it) leaves the `not_run` tests out and must
    # see every listed test; a run that names tests runs the left-out ones it selects
    # as strict expected failures (how to check one still fails as recorded).
    whole_suite = not config.getoption("file_or_dir") and not config.getoption("keyword")
    expected = expected_failures(version)
    left_out = not_run(version)
    if not whole_suite:
        expected += [ExpectedFailure(e.test, e.reason) for e in left_out]
        left_out = []
    used: set[str] = set()
    kept: list[pytest.Item] = []
    deselected: list[pytest.Item] = []
    for item in items:
        skip = next((e for e in left_out if e.matches(item.nodeid)), None)
        if skip is not None:
            used.add(skip.test)
            deselected.append(item)
            continue
        kept.append(item)
        entry = next((e for e in expected if e.matches(item.nodeid)), None)
        if entry is not None:
            used.add(entry.test)
            item.add_marker(
                pytest.mark.xfail(strict=entry.strict, reason=f"OpenCode {version}: {entry.reason}")
            )
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept
    missing = sorted(({e.test for e in expected} | {e.test for e in left_out}) - used)
    # A module that failed to import is reported by pytest itself, with its cause.
    if missing and whole_suite and not session.testsfailed:
        raise pytest.UsageError(
            f"{RELEASES_FILE.name} lists tests of {version} that were not"
            f" collected (renamed or removed tests?): {missing}"
        )
