"""The tested OpenCode range, and the adapter's warning about servers outside it."""

from __future__ import annotations

import asyncio
import tomllib
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapter import OpenCodeAdapter, RequestError
from adapter._server._binary import PINNED_VERSION
from adapter._server._releases import (
    TESTED_NEWEST,
    TESTED_OLDEST,
    Version,
    is_tested_version,
    parse_version,
    untested_version_warning,
)
from adapter.testing import caught_up
from adapter.testing.fake import OPENCODE_VERSION, FakeOpenCodeServer
from tests.adapter_support import Recorder

RELEASES = Path(__file__).parent / "real" / "releases.toml"


# ------------------------------------------------------------------ the range


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1.18.34", Version(1, 18, 34)),
        ("v1.2.3", Version(1, 2, 3)),
        (" 1.14.48\n", Version(1, 14, 48)),
        ("1.19.0-beta.1", Version(1, 19, 0)),
        ("1.18", None),
        ("1.18.x", None),
        ("local", None),
        ("", None),
        (None, None),
        (11834, None),
    ],
)
def test_parse_version(text: object, expected: Version | None) -> None:
    assert parse_version(text) == expected


def version(text: str) -> Version:
    """``text`` parsed, which must parse."""
    parsed = parse_version(text)
    assert parsed is not None, text
    return parsed


def test_versions_compare_numerically_not_as_text() -> None:
    assert version("1.18.10") > version("1.18.9")
    assert is_tested_version("1.18.10")
    assert not is_tested_version("1.2.10")  # "1.2.10" > "1.18.34" as text


def test_the_bounds_are_tested_and_their_neighbours_are_not() -> None:
    assert is_tested_version(str(TESTED_OLDEST))
    assert is_tested_version(str(TESTED_NEWEST))
    below = TESTED_OLDEST._replace(patch=TESTED_OLDEST.patch - 1)
    above = TESTED_NEWEST._replace(patch=TESTED_NEWEST.patch + 1)
    assert not is_tested_version(str(below))
    assert not is_tested_version(str(above))
    assert "older" in (untested_version_warning(str(below)) or "")
    assert "newer" in (untested_version_warning(str(above)) or "")


def test_missing_or_unparsable_versions_are_warned_about() -> None:
    assert "did not report" in (untested_version_warning(None) or "")
    assert "'nightly'" in (untested_version_warning("nightly") or "")
    assert untested_version_warning(str(TESTED_NEWEST)) is None


def test_the_range_matches_the_release_matrix_and_the_pins() -> None:
    """One list decides what is tested: tests/real/releases.toml (make test-matrix)."""
    data = tomllib.loads(RELEASES.read_text(encoding="utf-8"))
    tested = [version(r["version"]) for r in data["release"] if r.get("supported", True)]
    assert min(tested) == TESTED_OLDEST
    assert max(tested) == TESTED_NEWEST
    assert str(TESTED_NEWEST) == PINNED_VERSION == OPENCODE_VERSION == data["pinned"]
    root = Path(__file__).parent.parent
    makefile = (root / "Makefile").read_text(encoding="utf-8")
    installer = (root / "scripts" / "install-opencode.sh").read_text(encoding="utf-8")
    assert f"OPENCODE_VERSION := {PINNED_VERSION}\n" in makefile
    assert f'PINNED_VERSION="{PINNED_VERSION}"\n' in installer


# ------------------------------------------------------------------ the adapter's check

T = "thread-1"


def health_reports(fake: FakeOpenCodeServer, body: Any) -> list[httpx.Request]:
    """Make ``GET /global/health`` answer ``body``; return the list of health requests."""
    seen: list[httpx.Request] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=body)

    fake.on("GET", "/global/health", handler)
    return seen


async def test_a_tested_server_gets_no_warning_and_its_version_is_known(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    assert oc.server_version is None
    await oc.start_session(T)
    await oc.start_session("thread-2")
    await caught_up(fake, oc)
    assert oc.server_version == OPENCODE_VERSION
    assert rec.of("runtime.warning") == []
    assert sum(1 for r in fake.requests if r.path == "/global/health") == 1


@pytest.mark.parametrize("version", ["1.19.0", "1.0.185", str(TESTED_OLDEST._replace(patch=0))])
async def test_an_untested_server_is_warned_about_once(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder, version: str
) -> None:
    if is_tested_version(version):
        pytest.fail(f"{version} is inside the tested range; pick another")
    health = health_reports(fake, {"healthy": True, "version": version})
    await oc.start_session(T)
    await oc.start_session("thread-2")
    await caught_up(fake, oc)
    warnings = rec.of("runtime.warning")
    assert len(warnings) == 1
    assert warnings[0].thread_id == T
    assert version in warnings[0].message
    assert str(TESTED_NEWEST) in warnings[0].message
    assert oc.server_version == version
    assert len(health) == 1
    # The warning follows the thread's start events, so a host has the thread first.
    assert rec.types(T)[:3] == ["session.started", "thread.started", "runtime.warning"]


@pytest.mark.parametrize(
    ("body", "needle", "known"),
    [
        ({"healthy": True}, "did not report", None),
        ({"healthy": True, "version": "dev"}, "'dev'", "dev"),
        ({"healthy": True, "version": 1.18}, "did not report", None),  # malformed answer
    ],
)
async def test_a_missing_or_unparsable_version_is_warned_about(
    oc: OpenCodeAdapter,
    fake: FakeOpenCodeServer,
    rec: Recorder,
    body: Any,
    needle: str,
    known: str | None,
) -> None:
    health_reports(fake, body)
    await oc.start_session(T)
    await oc.start_session("thread-2")
    await caught_up(fake, oc)
    warnings = rec.of("runtime.warning")
    assert len(warnings) == 1 and needle in warnings[0].message
    assert oc.server_version == known


async def test_a_failing_health_check_does_not_change_connect(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.fail("GET", "/global/health", 503, times=2)
    info = await oc.start_session(T)
    assert info.status == "ready"
    await caught_up(fake, oc)
    warnings = rec.of("runtime.warning")
    assert len(warnings) == 1 and "could not read the OpenCode server's version" in (
        warnings[0].message
    )
    assert "503" in warnings[0].message and warnings[0].thread_id == T
    assert oc.server_version is None
    # The next connects ask again (a failure is warned about once), until it answers.
    await oc.start_session("thread-2")
    await oc.start_session("thread-3")
    assert oc.server_version == OPENCODE_VERSION
    assert sum(1 for r in fake.requests if r.path == "/global/health") == 3
    await caught_up(fake, oc)
    assert len(rec.of("runtime.warning")) == 1


async def test_a_health_transport_error_does_not_change_connect(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    async def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    fake.on("GET", "/global/health", refuse)
    info = await oc.start_session(T)
    assert info.status == "ready"
    await oc.send_turn(T, "hello")
    done = await rec.wait_for("turn.completed")
    assert done.state == "completed"
    assert [w.thread_id for w in rec.of("runtime.warning")] == [T]
    assert oc.server_version is None


async def test_a_start_cancelled_during_the_check_leaves_nothing_and_the_next_checks(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    calls: list[httpx.Request] = []
    never = asyncio.Event()

    async def hold_the_first(request: httpx.Request) -> None:
        calls.append(request)
        if len(calls) == 1:
            await never.wait()

    fake.on("GET", "/global/health", hold_the_first)
    start = asyncio.create_task(oc.start_session(T))
    await fake.wait_until(lambda: bool(calls), description="the first health check arrived")
    start.cancel()
    with pytest.raises(asyncio.CancelledError):
        await start
    assert not oc.has_session(T) and fake.sessions == {}
    await oc.start_session("thread-2")
    assert len(calls) == 2 and oc.server_version == OPENCODE_VERSION


async def test_the_warning_goes_out_with_the_first_thread_that_starts(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    health_reports(fake, {"healthy": True, "version": "1.19.0"})
    fake.fail("POST", "/session", 500, times=1)
    with pytest.raises(RequestError):
        await oc.start_session(T)
    await oc.start_session("thread-2")
    await caught_up(fake, oc)
    warnings = rec.of("runtime.warning")
    assert [(w.thread_id, "1.19.0" in w.message) for w in warnings] == [("thread-2", True)]
