#!/usr/bin/env python3
"""Run the real suite against every OpenCode release of tests/real/releases.toml.

Usage (from the project root, with the venv's python; `make test-matrix` does this):

    .venv/bin/python scripts/test-matrix.py                    # every release
    .venv/bin/python scripts/test-matrix.py --release 1.17.19  # one (repeatable)
    .venv/bin/python scripts/test-matrix.py --pinned-results .test-results/make-test.xml

For each release: install it project-locally (scripts/install-opencode.sh), time
one offline cold start of `opencode serve` with the test harness, then run
`pytest -m real` with OPENCODE_BIN pointing at it and
OPENCODE_VERSION_UNDER_TEST set, so the release's documented expected failures
are strict xfails and its `not_run` tests are left out
(tests/real/release_expectations.py). Prints a summary table;
exits non-zero if any release failed to install, start, or pass as documented.

`--pinned-results` (what .ci/run passes) takes the pinned release's row from the
JUnit XML of a run of the whole suite against it (`make test` writes one)
instead of running its real suite a second time: every real test pytest
collects for the pinned release must be in that file, and all must have passed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from adapter.testing import RealOpenCodeServer, ScriptedModelServer  # noqa: E402
from tests.real.release_expectations import (  # noqa: E402
    RELEASES_FILE,
    VERSION_VARIABLE,
    load_releases,
    not_run,
)

#: Test files whose results get a column of their own; the rest count as "other".
SUITES = {"test_contract.py": "contract", "test_differential.py": "differential"}


@dataclass
class Outcome:
    version: str
    #: False for a release the matrix runs but the adapter warns about (releases.toml).
    supported: bool = True
    install_seconds: float = 0.0
    start_seconds: float | None = None
    pytest_seconds: float = 0.0
    exit_code: int | None = None
    problem: str = ""
    #: The JUnit XML this release's results were read from, when not run here.
    reused_from: Path | None = None
    #: suite -> Counter of passed / failed / xfailed / skipped
    counts: dict[str, Counter[str]] = field(default_factory=dict)
    #: "classname::name: first line of the message" of each failed test
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problem and self.exit_code == 0


def install(version: str) -> Path:
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "install-opencode.sh")],
        env={**os.environ, "OPENCODE_VERSION": version},
        stdout=subprocess.PIPE,
        text=True,
        check=False,
    )
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines:
        raise RuntimeError(f"install-opencode.sh failed with exit code {result.returncode}")
    return Path(lines[-1])


def cold_start(binary: Path) -> float:
    with (
        ScriptedModelServer() as model,
        RealOpenCodeServer(model.base_url, binary=binary, startup_timeout=60) as server,
    ):
        assert server.startup_seconds is not None
        return server.startup_seconds


def junit_address(nodeid: str) -> tuple[str, str]:
    """The (classname, name) pytest's JUnit XML gives the test ``nodeid``."""
    path, bracket, params = nodeid.partition("[")
    names = path.split("::")
    names[0] = names[0].removesuffix(".py").replace("/", ".")
    names[-1] += bracket + params
    return ".".join(names[:-1]), names[-1]


def read_results(
    junit: Path, only: set[tuple[str, str]] | None = None
) -> tuple[dict[str, Counter[str]], list[str]]:
    """From one read of ``junit``: the outcomes per suite, and each failed test case as
    ``classname::name: message`` (the message's first line, cut to 300 characters), so
    CI's last lines say what failed. ``only``: just these (classname, name) test cases."""
    counts: dict[str, Counter[str]] = {}
    failures: list[str] = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        address = (case.get("classname", ""), case.get("name", ""))
        if only is not None and address not in only:
            continue
        module = address[0].rsplit(".", 1)[-1] + ".py"
        tally = counts.setdefault(SUITES.get(module, "other"), Counter())
        kinds = {child.tag: child for child in case}
        failure = kinds.get("failure", kinds.get("error"))
        if failure is not None:
            tally["failed"] += 1
            message = (failure.get("message") or failure.text or "").strip()
            first = message.splitlines()[0][:300] if message else failure.tag
            failures.append(f"{'::'.join(address)}: {first}")
        elif "skipped" in kinds:
            kind = kinds["skipped"].get("type", "")
            tally["xfailed" if kind == "pytest.xfail" else "skipped"] += 1
        else:
            tally["passed"] += 1
    return counts, failures


def pytest_command(workers: int, *args: str) -> list[str]:
    """``pytest -m real`` with the release-expectations plugin, on ``workers``
    pytest-xdist workers (0: none; a file's tests stay on one worker, with the
    servers its module fixtures start), and ``args``."""
    parallel = ["-n", str(workers), "--dist", "loadfile"] if workers else []
    return [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-m",
        "real",
        "-p",
        "no:cacheprovider",
        "-p",
        "tests.real.release_expectations",
        *parallel,
        *args,
    ]


def reuse(outcome: Outcome, env: dict[str, str], junit: Path, extra_args: list[str]) -> None:
    """Take ``outcome``'s results from ``junit`` (a run of the whole suite against
    this release): every real test collected for it must be there, and have passed."""
    listing = subprocess.run(
        pytest_command(0, "--collect-only", *extra_args),
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        check=False,
    )
    wanted = {junit_address(line) for line in listing.stdout.splitlines() if "::" in line}
    if listing.returncode != 0 or not wanted:
        outcome.problem = f"could not list its real tests (pytest exit code {listing.returncode})"
        return
    if not junit.is_file():
        outcome.problem = f"no results at {junit}"
        return
    present = {
        (c.get("classname", ""), c.get("name", "")) for c in ET.parse(junit).iter("testcase")
    }
    missing = wanted - present
    outcome.reused_from = junit
    outcome.counts, outcome.failures = read_results(junit, only=wanted)
    failed = sum(tally["failed"] for tally in outcome.counts.values())
    outcome.exit_code = 1 if missing or failed else 0
    if missing:
        names = ", ".join(sorted("::".join(m) for m in missing)[:5])
        outcome.problem = f"{len(missing)} real tests missing from {junit} ({names}, …)"
    elif failed:
        outcome.problem = f"{failed} failed in {junit}"


def run_release(
    version: str,
    supported: bool,
    extra_args: list[str],
    workers: int = 0,
    results: Path | None = None,
) -> Outcome:
    """Install, cold-start and test one release (``results``: reuse, see ``reuse``)."""
    outcome = Outcome(version, supported)
    print(f"\n===== OpenCode {version} =====", flush=True)
    began = time.monotonic()
    try:
        binary = install(version)
    except RuntimeError as exc:
        outcome.problem = str(exc)
        return outcome
    outcome.install_seconds = time.monotonic() - began
    try:
        outcome.start_seconds = cold_start(binary)
    except RuntimeError as exc:
        outcome.problem = "does not start offline"
        print(str(exc)[-3000:], flush=True)
        return outcome
    env = {**os.environ, "OPENCODE_BIN": str(binary), VERSION_VARIABLE: version}
    if results is not None:
        print(f"results of the whole suite's run: {results}", flush=True)
        reuse(outcome, env, results, extra_args)
        return outcome
    with tempfile.TemporaryDirectory(prefix="test-matrix-") as tmp:
        junit = Path(tmp) / "junit.xml"
        command = pytest_command(workers, "-rfEX", f"--junitxml={junit}", *extra_args)
        began = time.monotonic()
        outcome.exit_code = subprocess.run(command, cwd=ROOT, env=env, check=False).returncode
        outcome.pytest_seconds = time.monotonic() - began
        if junit.exists():
            outcome.counts, outcome.failures = read_results(junit)
    if outcome.exit_code != 0:
        outcome.problem = f"pytest exit code {outcome.exit_code}"
    return outcome


def cell(counts: Counter[str] | None) -> str:
    if not counts:
        return "not run"
    text = f"{counts['passed']} passed / {counts['failed']} failed"
    if counts["xfailed"]:
        text += f" ({counts['xfailed']} expected)"
    if counts["skipped"]:
        text += f", {counts['skipped']} skipped"
    return text


def table(outcomes: list[Outcome]) -> str:
    header = ["release", "result", "starts offline", "contract", "differential", "other", "time"]
    rows = [header]
    for o in outcomes:
        start = "-" if o.start_seconds is None else f"yes, {o.start_seconds:.1f} s"
        if o.problem == "does not start offline":
            start = "NO"
        rows.append(
            [
                o.version if o.supported else f"{o.version} (unsupported)",
                "ok" if o.ok else f"FAILED ({o.problem})",
                start,
                cell(o.counts.get("contract")),
                cell(o.counts.get("differential")),
                cell(o.counts.get("other")),
                "make test's run"
                if o.reused_from
                else f"{o.install_seconds + o.pytest_seconds:.0f} s",
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [" | ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--release",
        action="append",
        default=[],
        help="run only this release (repeatable; must be listed in releases.toml)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=2,
        help="pytest-xdist workers per release (default 2, one per core here; 0: none)",
    )
    parser.add_argument(
        "--pinned-results",
        type=Path,
        metavar="JUNIT_XML",
        help="the pinned release's results: JUnit XML of a whole-suite run against it"
        " (make test writes .test-results/make-test.xml); its real suite is not run again",
    )
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args()
    releases = load_releases()["release"]
    listed = [r["version"] for r in releases]
    supported = {r["version"]: r.get("supported", True) for r in releases}
    wanted = [v for item in args.release for v in item.replace(",", " ").split()]
    unknown = sorted(set(wanted) - set(listed))
    if unknown:
        parser.error(f"not in {RELEASES_FILE.relative_to(ROOT)}: {', '.join(unknown)}")
    versions = [v for v in listed if v in wanted] if wanted else listed
    began = time.monotonic()
    pinned = load_releases()["pinned"]
    if args.pinned_results is not None and not_run(pinned):
        parser.error("the pinned release leaves tests out: it cannot reuse a whole-suite run")
    outcomes = [
        run_release(
            v,
            supported[v],
            args.pytest_args,
            args.workers,
            args.pinned_results if v == pinned else None,
        )
        for v in versions
    ]
    total = Counter[str]()
    for outcome in outcomes:
        for tally in outcome.counts.values():
            total.update(tally)
    failed_releases = [o.version for o in outcomes if not o.ok]
    print(f"\n===== OpenCode release matrix ({time.monotonic() - began:.0f} s) =====")
    print(table(outcomes))
    if failed_releases:
        print(f"\nreleases that did not behave as documented: {', '.join(failed_releases)}")
    for outcome in outcomes:
        for failure in outcome.failures:
            print(f"failed on {outcome.version}: {failure}")
    # One plain closing line that CI can read (expected failures are not counted as passed).
    failures = total["failed"] + sum(1 for o in outcomes if o.problem and not o.counts)
    print(f"matrix: {total['passed']} passed, {failures} failed")
    return 1 if failed_releases else 0


if __name__ == "__main__":
    sys.exit(main())
