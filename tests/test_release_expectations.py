"""The release matrix's plugin: which tests a release is expected to fail."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from tests.real.release_expectations import (
    RELEASES_FILE,
    VERSION_VARIABLE,
    ExpectedFailure,
    NotRun,
    expected_failures,
    load_releases,
    not_run,
    pytest_collection_modifyitems,
)

ROOT = Path(__file__).resolve().parent.parent
PARAMETRISED = (
    "tests/real/test_differential.py::test_fake_matches_real_server[children_order_three]"
)


def test_an_id_matches_itself_brackets_included() -> None:
    entry = ExpectedFailure(test=PARAMETRISED, reason="r")
    assert entry.matches(PARAMETRISED)
    assert not entry.matches(PARAMETRISED.replace("three", "two"))
    assert not entry.matches("tests/real/test_differential.py::test_fake_matches_real_server[c]")


def test_a_star_matches_anything() -> None:
    entry = ExpectedFailure(test="tests/real/test_differential.py::*", reason="r", strict=False)
    assert entry.matches(PARAMETRISED)
    assert not entry.matches("tests/real/test_contract.py::test_no_model_request_after_stop")


def test_entries_are_read_per_release(tmp_path: Path) -> None:
    listing = tmp_path / "releases.toml"
    listing.write_text(
        'pinned = "1.2.3"\n'
        '[[release]]\nversion = "1.2.3"\n'
        '[[release]]\nversion = "1.0.0"\n'
        "[[release.expected_failure]]\n"
        'test = "a.py::t"\nreason = "measured"\n',
        encoding="utf-8",
    )
    assert expected_failures("1.2.3", listing) == []
    assert expected_failures("1.0.0", listing) == [ExpectedFailure("a.py::t", "measured")]
    with pytest.raises(pytest.UsageError, match="not a release"):
        expected_failures("9.9.9", listing)


def test_the_project_list_parses_and_every_entry_has_a_reason() -> None:
    for release in load_releases(RELEASES_FILE)["release"]:
        for entry in expected_failures(release["version"]):
            # A real-server test (tests/real/, or the browser test of tests/web/) that exists.
            path = ROOT / entry.test.split("::")[0]
            assert entry.test.startswith("tests/") and path.is_file(), entry.test
            assert entry.reason.strip()


def test_a_release_may_leave_out_named_tests_with_a_reason(tmp_path: Path) -> None:
    listing = tmp_path / "releases.toml"
    listing.write_text(
        'pinned = "1.2.3"\n'
        '[[release]]\nversion = "1.2.3"\n'
        '[[release]]\nversion = "1.0.0"\n'
        "[[release.not_run]]\n"
        'test = "a.py::*"\nreason = "waits out a timeout"\n',
        encoding="utf-8",
    )
    assert not_run("1.2.3", listing) == []
    assert not_run("1.0.0", listing) == [NotRun("a.py::*", "waits out a timeout")]
    assert NotRun("a.py::*", "r").matches("a.py::t[x]")


def test_the_pinned_release_runs_every_test(tmp_path: Path) -> None:
    listing = tmp_path / "releases.toml"
    listing.write_text(
        'pinned = "1.2.3"\n'
        '[[release]]\nversion = "1.2.3"\n'
        "[[release.not_run]]\n"
        'test = "a.py::t"\nreason = "slow"\n',
        encoding="utf-8",
    )
    with pytest.raises(pytest.UsageError, match="pinned"):
        not_run("1.2.3", listing)


def test_every_test_a_release_leaves_out_exists_and_has_a_reason() -> None:
    for release in load_releases(RELEASES_FILE)["release"]:
        for entry in not_run(release["version"]):
            path = ROOT / entry.test.split("::")[0]
            assert entry.test.startswith("tests/") and path.is_file(), entry.test
            assert entry.reason.strip()
            clashing = [
                e.test for e in expected_failures(release["version"]) if e.test == entry.test
            ]
            assert not clashing, f"{entry.test} is both expected to fail and not run"


class _Item:
    """What the plugin reads of a collected test: its id and the markers it is given."""

    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid
        self.markers: list[pytest.MarkDecorator] = []

    def add_marker(self, marker: pytest.MarkDecorator) -> None:
        self.markers.append(marker)


def _select(version: str, nodeids: list[str], *named: str) -> tuple[list[_Item], list[_Item]]:
    """(kept, deselected) test items of a matrix run of ``version`` (``named``: the
    files or ``-k`` given on the command line)."""
    deselected: list[_Item] = []
    config = SimpleNamespace(
        getoption=lambda name: list(named) if name == "file_or_dir" else "",
        hook=SimpleNamespace(pytest_deselected=lambda items: deselected.extend(items)),
    )
    items = [_Item(nodeid) for nodeid in nodeids]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(VERSION_VARIABLE, version)
        pytest_collection_modifyitems(
            cast(pytest.Session, SimpleNamespace(testsfailed=0)),
            cast(pytest.Config, config),
            cast(list[pytest.Item], items),
        )
    return items, deselected


SPEC_TEST = (
    "tests/real/test_differential.py::test_the_fixture_spec_is_what_the_pinned_release_serves"
)
REQUEST_TEST = (
    "tests/real/test_requests_real.py::test_a_resumed_thread_announces_live_requests_but_not_ghosts"
)


def _every_listed_test() -> list[str]:
    """A stand-in for the collected suite: one test id per entry of the list."""
    ids = {SPEC_TEST, REQUEST_TEST, PARAMETRISED}
    for release in load_releases()["release"]:
        version = release["version"]
        tests = [e.test for e in expected_failures(version)] + [e.test for e in not_run(version)]
        for test in tests:
            ids.add(test.replace("*", "x"))
    return sorted(ids)


def test_a_whole_suite_run_leaves_out_what_its_release_lists_and_no_more() -> None:
    suite = _every_listed_test()
    kept, deselected = _select("1.14.48", suite)
    left_out = [t for t in suite if any(e.matches(t) for e in not_run("1.14.48"))]
    assert [i.nodeid for i in deselected] == left_out and REQUEST_TEST in left_out
    assert sorted(i.nodeid for i in kept) == sorted(set(suite) - set(left_out))
    assert SPEC_TEST in [i.nodeid for i in kept]
    kept, deselected = _select(load_releases()["pinned"], suite)
    assert deselected == [] and len(kept) == len(suite)


def test_a_run_that_names_left_out_tests_runs_them_as_expected_failures() -> None:
    kept, deselected = _select("1.15.13", [REQUEST_TEST], "tests/real/test_requests_real.py")
    assert deselected == [] and [i.nodeid for i in kept] == [REQUEST_TEST]
    [marker] = kept[0].markers
    assert marker.name == "xfail" and marker.kwargs["strict"] is True
