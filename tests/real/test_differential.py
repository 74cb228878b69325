"""The fake must tell the truth: every differential scenario, fake vs a real server.

Each scenario (``tests/differential/scenarios.py``) runs on a fresh
``FakeOpenCodeServer`` and on the session's real ``opencode serve`` at once; any
divergence not in the registry (``tests/differential/divergences.py``) fails it,
with the full list in the message (``-s`` also prints it).
"""

from __future__ import annotations

import pytest

from adapter.testing import RealOpenCodeServer, ScriptedModelServer
from tests.differential.compare import compare, report
from tests.differential.driver import FakeTarget, RealTarget, record_both
from tests.differential.language import Scenario
from tests.differential.scenarios import SCENARIOS

pytestmark = pytest.mark.real


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
async def test_fake_matches_real_server(
    scenario: Scenario, scripted_model: ScriptedModelServer, real_server: RealOpenCodeServer
) -> None:
    fake = FakeTarget()
    try:
        fake_rec, real_rec = await record_both(
            scenario, fake, RealTarget(real_server, scripted_model)
        )
    finally:
        await fake.aclose()
    divergences = compare(scenario, fake_rec, real_rec)
    text = report([(scenario, divergences, max(fake_rec.seconds, real_rec.seconds))])
    print(text)
    assert not real_rec.problems, f"the real server did not play the scenario:\n{text}"
    assert not divergences, text
