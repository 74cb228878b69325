"""docs/testing.md's "Write your own contract tests", run as a host author runs it.

The page's files (marked ``<!-- contract-example: NAME -->`` before their code block)
are written into ``pytester``'s temporary directory and pytest runs there in a
subprocess, the plugin found by its entry point: the example passes as printed. Broken
variants of the host then fail the tests meant to catch them, so the example's tests
test something; one of them shows what the host author then reads when a wait of the fake
times out (what it waited for, and the fake's sessions and requests).
"""

from __future__ import annotations

import re

import pytest

from tests.testing.user_runs import CHECKOUT, as_a_user, run_user_tests

PAGE = CHECKOUT / "docs" / "testing.md"
BLOCK = re.compile(r"<!-- contract-example: (\S+) -->\n```\w*\n(.*?)```", re.S)
TESTS = 7

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


def example_files() -> dict[str, str]:
    """The example's files, by name, as the page prints them."""
    return dict(BLOCK.findall(PAGE.read_text()))


def broken(source: str, working: str, broken: str) -> str:
    """``source`` with ``working`` replaced by ``broken`` (which must be there)."""
    assert working in source, f"the page's host no longer contains {working!r}"
    return source.replace(working, broken)


@pytest.fixture(autouse=True)
def this_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    as_a_user(monkeypatch)


def run_example(pytester: pytest.Pytester, files: dict[str, str], *args: str) -> pytest.RunResult:
    for name, text in files.items():
        (pytester.path / name).write_text(text)
    return run_user_tests(pytester, "-rf", *args)


def test_the_page_prints_the_configuration_the_host_and_its_tests() -> None:
    assert set(example_files()) == {"pyproject.toml", "chat_host.py", "test_chat_host.py"}


def test_the_example_passes_as_printed(pytester: pytest.Pytester) -> None:
    result = run_example(pytester, example_files())
    result.assert_outcomes(passed=TESTS)


@pytest.mark.parametrize(
    ("working", "broken_by", "caught_by"),
    [
        pytest.param(
            '"accept_for_session" if always else "accept"',
            '"accept_for_session"',
            ["test_a_subagents_permission_waits_for_the_user"],
            id="allows-always",
        ),
        pytest.param(
            'kept = error.partial.text if error.partial is not None else ""',
            'kept = ""',
            ["test_a_subagent_that_cannot_be_stopped_is_named"],
            id="forgets-what-a-failed-stop-kept",
        ),
        pytest.param(
            "failed = [s.session_id for s in error.report.failures]",
            "failed = []",
            ["test_a_subagent_that_cannot_be_stopped_is_named"],
            id="hides-the-session-not-stopped",
        ),
        pytest.param(
            'case ContentDelta(stream="assistant_text", delta=delta):',
            "case ContentDelta(delta=delta) if not answer:",
            ["test_nothing_is_lost_when_the_event_stream_drops"],
            id="keeps-only-the-first-delta",
        ),
    ],
)
def test_a_broken_host_fails_the_test_meant_to_catch_it(
    pytester: pytest.Pytester, working: str, broken_by: str, caught_by: list[str]
) -> None:
    files = example_files()
    files["chat_host.py"] = broken(files["chat_host.py"], working, broken_by)
    result = run_example(pytester, files)
    failed = sorted(
        line.split("::")[1].split(" ")[0]
        for line in result.outlines
        if line.startswith("FAILED test_chat_host.py::")
    )
    assert failed == sorted(caught_by), result.stdout.str()[-3000:]


def test_a_wait_that_times_out_says_what_it_waited_for_and_what_the_fake_saw(
    pytester: pytest.Pytester,
) -> None:
    """A host that strips what looks like markup from the user's text never starts the
    scripted tree: the Stop test's ``wait_for_tree`` fails after its 5 s, and pytest's
    report names the tree it waited for and shows the fake's sessions and requests."""
    files = example_files()
    files["chat_host.py"] = broken(
        files["chat_host.py"],
        "turn = await self.adapter.send_turn(chat_id, text)",
        'turn = await self.adapter.send_turn(chat_id, text.split(" [[")[0])',
    )
    result = run_example(pytester, files, "-k", "test_stop_stops_every_subagent")
    result.assert_outcomes(failed=1)
    report = result.stdout.str()
    assert re.search(
        r"E +TimeoutError: no tree of 3 sessions under ses_\w+ whose deepest session hangs"
        r" within 5\.0s\nE +the fake's state:\nE +sessions \(1\):\nE +ses_\w+ idle\n"
        r"E +pending requests: none\nE +last requests \(\d+, oldest first\):\n",
        report,
    ), report[-3000:]
    assert re.search(r"E +POST /session/ses_\w+/prompt_async -> 204\n", report), report[-3000:]
