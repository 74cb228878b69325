"""The fake must tell the truth: every differential scenario, fake vs a real server.

Each scenario (``tests/differential/scenarios.py``) runs on a fresh
``FakeOpenCodeServer`` and on the session's real ``opencode serve`` at once; any
divergence not in the registry (``tests/differential/divergences.py``) fails it,
with the full list in the message (``-s`` also prints it). Bodies and events are
validated against the spec the real server serves, so a run against another
release checks that release's contract.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from itertools import zip_longest

import httpx
import pytest

from adapter.testing import PINNED_VERSION, RealOpenCodeServer, ScriptedModelServer
from tests.differential.compare import compare, milestones, report
from tests.differential.driver import FakeTarget, RealTarget, record_both
from tests.differential.language import Scenario, auto_compaction_server_options
from tests.differential.scenarios import SCENARIOS
from tests.differential.schema import SPEC_PATH, OpenApi, served_spec

pytestmark = pytest.mark.real


@pytest.fixture(scope="module")
def real_spec(real_server: RealOpenCodeServer) -> OpenApi:
    return served_spec(real_server.base_url, real_server.auth)


def test_the_fixture_spec_is_what_the_pinned_release_serves(
    real_server: RealOpenCodeServer, opencode_http: httpx.Client
) -> None:
    """The unit tests validate against tests/fixtures/openapi-1.18.34.json: it must be
    the pinned release's own ``GET /doc`` (another release must serve a spec at all)."""
    version = opencode_http.get("/global/health").json()["version"]
    served = opencode_http.get("/doc").json()
    assert served["openapi"].startswith("3.1")
    if version == PINNED_VERSION:
        assert served == json.loads(SPEC_PATH.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def compacting_server(scripted_model: ScriptedModelServer) -> Iterator[RealOpenCodeServer]:
    """A second real server, with auto-compaction on, for the scenarios that need it."""
    options = auto_compaction_server_options()
    with RealOpenCodeServer(scripted_model.base_url, **options) as server:
        yield server


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
async def test_fake_matches_real_server(
    scenario: Scenario,
    scripted_model: ScriptedModelServer,
    real_server: RealOpenCodeServer,
    real_spec: OpenApi,
    request: pytest.FixtureRequest,
) -> None:
    server = real_server
    if scenario.auto_compaction:
        server = request.getfixturevalue("compacting_server")
    elif scenario.background_subagents:
        server = request.getfixturevalue("background_server")
    if scenario.commands:
        server = request.getfixturevalue("command_server")
    fake = FakeTarget(background_subagents=scenario.background_subagents)
    try:
        fake_rec, real_rec = await record_both(scenario, fake, RealTarget(server, scripted_model))
    finally:
        await fake.aclose()
    divergences = compare(scenario, fake_rec, real_rec, real_spec)
    text = report([(scenario, divergences, max(fake_rec.seconds, real_rec.seconds))])
    if any(d.kind == "run" for d in divergences):
        # A run's first difference alone does not say what the real server did around it.
        for alias in scenario.compared_runs:
            fake_run, real_run = milestones(fake_rec, alias), milestones(real_rec, alias)
            text += f"\nrun of {alias}, fake | real:\n" + "\n".join(
                f"  {i:3} {f:<55} | {r}"
                for i, (f, r) in enumerate(zip_longest(fake_run, real_run, fillvalue="-"))
            )
    print(text)
    assert not real_rec.problems, f"the real server did not play the scenario:\n{text}"
    assert not divergences, text
