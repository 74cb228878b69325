"""The release matrix's plugin: which tests a release is expected to fail."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.real.release_expectations import (
    RELEASES_FILE,
    ExpectedFailure,
    expected_failures,
    load_releases,
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
