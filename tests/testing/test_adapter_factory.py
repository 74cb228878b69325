"""The plugin's ``opencode_adapter_factory``: more adapters on the same fake.

A host that restarts (its process ends with ``on_close="detach"`` and a new one resumes
the tree) is tested with two adapters on one fake. In-process here, on the plugin's own
fixtures; the last test runs a user's test file as a host author does (``pytester``), to
see that every adapter made is closed after the test.
"""

from __future__ import annotations

import pytest

from adapter import OpenCodeAdapter, Timeouts
from adapter.testing import EventRecorder, FakeOpenCodeServer, caught_up
from adapter.testing.fake import Hang, Text
from adapter.testing.pytest_plugin import AdapterFactory
from tests.testing.user_runs import as_a_user, run_user_tests


async def test_a_restarted_host_resumes_the_run_its_first_adapter_left(
    opencode_fake: FakeOpenCodeServer, opencode_adapter_factory: AdapterFactory
) -> None:
    opencode_fake.script("long", [Text("before the restart"), Hang()])
    first = await opencode_adapter_factory(on_close="detach")
    info = await first.start_session("t")
    turn = await first.send_turn("t", "go [[script:long]]")
    await opencode_fake.wait_hanging(info.session_id)
    await first.aclose()
    second = await opencode_adapter_factory()
    assert second is not first
    async with EventRecorder(second) as events:
        resumed = await second.start_session("t", resume=info.resume)
        assert (resumed.status, resumed.active_turn_id) == ("running", turn.turn_id)
        await caught_up(opencode_fake, second)
        [started] = events.of("turn.started")
        assert (started.turn_id, started.origin) == (turn.turn_id, "adopted")


async def test_its_adapters_share_the_fake_and_have_opencode_adapters_options(
    opencode_fake: FakeOpenCodeServer,
    opencode_adapter: OpenCodeAdapter,
    opencode_adapter_factory: AdapterFactory,
) -> None:
    a = await opencode_adapter_factory()
    b = await opencode_adapter_factory(timeouts=Timeouts(echo=3.0))
    assert a.timeouts == opencode_adapter.timeouts == Timeouts()
    assert b.timeouts == Timeouts(echo=3.0)
    for n, adapter in enumerate((opencode_adapter, a, b)):
        await adapter.start_session(f"t{n}")
    assert opencode_fake.stream_count == 3  # one event stream each
    assert len(opencode_fake.sessions) == 3


@pytest.mark.opencode_adapter(timeouts=Timeouts(connect=1.5))
async def test_the_opencode_adapter_marker_applies_to_its_adapters_too(
    opencode_adapter_factory: AdapterFactory,
) -> None:
    made = await opencode_adapter_factory()
    assert made.timeouts == Timeouts(connect=1.5)


def test_every_adapter_it_made_is_closed_after_the_test(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    as_a_user(monkeypatch)
    pytester.makeini("[pytest]\nasyncio_mode = auto\n")
    pytester.makepyfile(
        test_host="""
        import pytest

        made = []

        async def test_two_adapters(opencode_adapter_factory):
            made.append(await opencode_adapter_factory())
            made.append(await opencode_adapter_factory())
            await made[0].aclose()  # closed by the test: closed again after it, a no-op
            await made[1].start_session("t")

        async def test_they_were_closed_after_it():
            assert len(made) == 2
            for adapter in made:
                with pytest.raises(Exception, match="closed"):
                    await adapter.start_session("again")
        """
    )
    run_user_tests(pytester, "-p", "no:randomly").assert_outcomes(passed=2)
