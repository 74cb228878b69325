"""The pytest plugin as a host author gets it: installed, found by its ``pytest11`` entry
point, and used from a test file in a directory of their own.

Each test writes a user's test file into ``pytester``'s temporary directory and runs
pytest on it in a subprocess without ``-p``: only the installed entry point can bring the
fixtures in. The subprocess imports this checkout's ``adapter`` (``PYTHONPATH``), the one
this test process imports.
"""

from __future__ import annotations

import importlib.metadata

import pytest

from adapter.testing import find_opencode_binary, pytest_plugin
from tests.testing.user_runs import as_a_user, run_user_tests

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")

ENTRY_POINT = "opencode_tree"


@pytest.fixture(autouse=True)
def this_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    as_a_user(monkeypatch)


def user_project(
    pytester: pytest.Pytester, mode: str = "strict", loop_scope: str = "function", **files: str
) -> None:
    """A host's project: its pytest configuration (``asyncio_mode``, the default loop
    scope of async fixtures) and ``files``."""
    pytester.makeini(
        f"""
        [pytest]
        asyncio_mode = {mode}
        asyncio_default_fixture_loop_scope = {loop_scope}
        """
    )
    for name, source in files.items():
        pytester.makepyfile(**{name: source})


run = run_user_tests


def test_the_installed_package_declares_the_entry_point() -> None:
    found = [
        ep for ep in importlib.metadata.entry_points(group="pytest11") if ep.name == ENTRY_POINT
    ]
    assert [ep.value for ep in found] == [pytest_plugin.__name__], (
        "the installed opencode-tree-adapter has no pytest11 entry point "
        f"{ENTRY_POINT!r}: its metadata predates pyproject.toml's; reinstall it "
        "(pip install -e '.[dev]')"
    )


#: A user's tests of every fixture and every recorder method (strict mode: marked).
FIXTURES_IN_USE = """
    import asyncio
    import pytest
    from adapter import OpenCodeAdapter, TurnCompleted
    from adapter.testing import EventRecorder, FakeOpenCodeServer
    from adapter.testing.fake import Text

    used = []

    @pytest.mark.asyncio
    async def test_a_turn(opencode_fake, opencode_adapter, opencode_events, pytestconfig):
        assert pytestconfig.pluginmanager.get_plugin("opencode_tree") is not None
        assert isinstance(opencode_fake, FakeOpenCodeServer)
        assert isinstance(opencode_adapter, OpenCodeAdapter)
        assert isinstance(opencode_events, EventRecorder)
        assert opencode_events.task.get_loop() is asyncio.get_running_loop()
        used.append((opencode_fake, opencode_adapter))
        opencode_fake.script("hi", [Text("hello")])
        await opencode_adapter.start_session("t")
        turn = await opencode_adapter.send_turn("t", "go [[script:hi]]")
        done = await opencode_events.wait_for("turn.completed")
        assert done.turn_id == turn.turn_id and done.state == "completed"
        assert await opencode_events.wait_for(TurnCompleted) is done
        assert await opencode_events.wait_for(lambda e: e.type == "turn.completed") is done
        assert opencode_events.of("turn.completed") == [done] == opencode_events.of(TurnCompleted)
        assert opencode_events.types()[:3] == ["session.started", "thread.started", "turn.started"]
        assert opencode_events.of_turn(turn.turn_id)[-1] is done
        assert done in opencode_events.events

    @pytest.mark.asyncio
    async def test_each_test_gets_fresh_ones_and_the_last_are_closed(opencode_fake):
        (fake, oc), = used
        assert fake.closed and opencode_fake is not fake and not opencode_fake.closed
        with pytest.raises(Exception, match="closed"):
            await oc.start_session("again")
"""


def test_the_fixtures_in_strict_mode(pytester: pytest.Pytester) -> None:
    user_project(pytester, "strict", test_host=FIXTURES_IN_USE)
    run(pytester).assert_outcomes(passed=2)


def test_the_fixtures_in_auto_mode(pytester: pytest.Pytester) -> None:
    unmarked = FIXTURES_IN_USE.replace("    @pytest.mark.asyncio\n", "")
    assert "mark.asyncio" not in unmarked
    user_project(pytester, "auto", test_host=unmarked)
    run(pytester).assert_outcomes(passed=2)


def test_options_fixtures_and_markers_customise_the_fake_and_the_adapter(
    pytester: pytest.Pytester,
) -> None:
    user_project(
        pytester,
        "auto",
        conftest="""
            import pytest
            from adapter import Timeouts

            @pytest.fixture
            def opencode_fake_options():
                return {"directory": "/srv/project", "seed": 3}

            @pytest.fixture
            def opencode_adapter_options():
                return {"timeouts": Timeouts(echo=7.0), "event_history": 50}
        """,
        test_host="""
            import pytest
            from adapter import Timeouts

            async def test_from_the_options_fixtures(opencode_fake, opencode_adapter):
                assert opencode_fake.directory == "/srv/project"
                assert opencode_adapter.timeouts == Timeouts(echo=7.0)

            @pytest.mark.opencode_fake(background_subagents=True)
            @pytest.mark.opencode_adapter(timeouts=Timeouts(connect=1.0))
            async def test_a_marker_wins(opencode_fake, opencode_adapter):
                assert opencode_fake.background_subagents
                assert opencode_fake.directory == "/srv/project"
                assert opencode_adapter.timeouts == Timeouts(connect=1.0)
        """,
    )
    run(pytester, "--strict-markers").assert_outcomes(passed=2)


def test_the_opt_out(pytester: pytest.Pytester) -> None:
    user_project(
        pytester,
        test_host="""
            def test_uses_the_fake(opencode_fake):
                pass
        """,
    )
    result = run(pytester, "-p", f"no:{ENTRY_POINT}")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*fixture 'opencode_fake' not found*"])


def test_without_pytest_asyncio_the_fixtures_say_what_to_install(
    pytester: pytest.Pytester,
) -> None:
    user_project(
        pytester,
        # pytest-asyncio is not installed: its import fails (its own plugin blocked below).
        pytest_asyncio="raise ImportError('pytest-asyncio is not installed')",
        test_host="""
            def test_uses_the_adapter(opencode_adapter):
                pass

            def test_other_tests_run():
                pass
        """,
    )
    result = run(pytester, "-p", "no:asyncio")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        ["*opencode_adapter needs pytest-asyncio*pip install 'opencode-tree-adapter[[]testing]'*"]
    )


def test_without_a_binary_real_opencode_skips_saying_why_and_costs_nothing_unused(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENCODE_BIN", str(pytester.path / "no-such-opencode"))
    user_project(
        pytester,
        test_host="""
            def test_on_the_real_server(real_opencode):
                raise AssertionError("not reached")

            def test_without_it():
                pass
        """,
    )
    result = run(pytester, "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(
        ["SKIPPED*real_opencode: no OpenCode binary*OPENCODE_BIN not found*no-such-opencode*"]
    )


def test_a_timed_out_wait_says_what_happened_instead(pytester: pytest.Pytester) -> None:
    user_project(
        pytester,
        "auto",
        test_host="""
            from adapter.testing.fake import Hang

            async def test_waits_for_an_end_that_never_comes(opencode_fake, opencode_adapter,
                                                             opencode_events):
                opencode_fake.script("hang", [Hang()])
                await opencode_adapter.start_session("t")
                await opencode_adapter.send_turn("t", "go [[script:hang]]")
                await opencode_events.wait_for("turn.completed", timeout=0.2)
        """,
    )
    result = run(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*TimeoutError: no event 'turn.completed' within 0.2 s; recorded (3):"
            " session.started, thread.started, turn.started*"
        ]
    )


def test_the_library_logs_reach_caplog(pytester: pytest.Pytester) -> None:
    user_project(
        pytester,
        "auto",
        test_host="""
            import logging

            async def test_logs(opencode_adapter, caplog):
                caplog.set_level(logging.DEBUG, logger="adapter")
                await opencode_adapter.start_session("t")
                records = [r for r in caplog.records if r.name.startswith("adapter")]
                assert any(r.msg["event"] == "lifecycle.thread" for r in records)
                assert "lifecycle.thread" in caplog.text and "thread_id='t'" in caplog.text
        """,
    )
    run(pytester).assert_outcomes(passed=1)


@pytest.mark.real
def test_the_same_tests_on_real_opencode_one_server_for_the_session(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The recipe of docs/testing.md: a conftest's ``opencode_adapter`` on ``real_opencode``,
    and ``opencode_events`` follows it."""
    # The binary the real suite uses (OPENCODE_BIN, or this checkout's .opencode/).
    monkeypatch.setenv("OPENCODE_BIN", str(find_opencode_binary()))
    user_project(
        pytester,
        "auto",
        conftest="""
            import pytest
            from adapter import OpenCodeAdapter

            @pytest.fixture
            async def opencode_adapter(real_opencode):
                async with OpenCodeAdapter(
                    real_opencode.base_url, directory=str(real_opencode.directory)
                ) as adapter:
                    yield adapter
        """,
        test_host="""
            from adapter.testing import RealOpenCodeServer, ScriptedModelServer
            from adapter.testing.model import Text, script_marker

            pids = set()

            async def test_a_turn(real_opencode, real_opencode_model, opencode_adapter,
                                  opencode_events):
                assert isinstance(real_opencode, RealOpenCodeServer)
                assert isinstance(real_opencode_model, ScriptedModelServer)
                assert real_opencode.model_base_url == real_opencode_model.base_url
                pids.add(real_opencode.pid)
                real_opencode_model.script("plugin-hi", [Text("hello from the model")])
                await opencode_adapter.start_session("t", title="plugin")
                turn = await opencode_adapter.send_turn("t", "go " + script_marker("plugin-hi"))
                done = await opencode_events.wait_for("turn.completed", timeout=30)
                assert (done.turn_id, done.state) == (turn.turn_id, "completed")

            def test_the_same_server_for_the_next_test(real_opencode):
                assert pids == {real_opencode.pid}
        """,
    )
    run(pytester).assert_outcomes(passed=2)


def test_the_fixtures_follow_the_users_default_fixture_loop_scope(
    pytester: pytest.Pytester,
) -> None:
    user_project(
        pytester,
        "strict",
        "module",
        test_host="""
            import asyncio
            import pytest

            @pytest.mark.asyncio(loop_scope="module")
            async def test_in_the_module_loop(opencode_events):
                assert opencode_events.task.get_loop() is asyncio.get_running_loop()
        """,
    )
    run(pytester).assert_outcomes(passed=1)
