"""The release matrix's closing lines name each failed test and its message, so the last
lines a CI run prints say what failed on which release (scripts/test-matrix.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
  <testcase classname="tests.real.test_differential" name="test_fake_matches_real_server[a]"/>
  <testcase classname="tests.real.test_differential" name="test_fake_matches_real_server[b]">
    <failure message="AssertionError: run of root differs&#10;second line">trace</failure>
  </testcase>
  <testcase classname="tests.real.test_x" name="test_broken_fixture">
    <error message="">fixture exploded</error>
  </testcase>
  <testcase classname="tests.real.test_x" name="test_expected">
    <skipped type="pytest.xfail" message="known"/>
  </testcase>
</testsuite></testsuites>
"""


def matrix_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("test_matrix", ROOT / "scripts/test-matrix.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["test_matrix"] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_each_failed_test_is_named_with_the_first_line_of_its_message(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    junit.write_text(JUNIT)
    _, failures = matrix_script().read_results(junit)
    assert failures == [
        "tests.real.test_differential::test_fake_matches_real_server[b]: "
        "AssertionError: run of root differs",
        "tests.real.test_x::test_broken_fixture: fixture exploded",
    ]


def test_only_the_wanted_tests_are_named(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    junit.write_text(JUNIT)
    wanted = {("tests.real.test_x", "test_broken_fixture")}
    _, failures = matrix_script().read_results(junit, only=wanted)
    assert failures == ["tests.real.test_x::test_broken_fixture: fixture exploded"]
