"""Shared fixtures. Logs are captured, not printed, so tests can assert on them."""

from __future__ import annotations

import logging
import os
import re
import uuid
from collections.abc import AsyncIterator, Generator, Iterator
from typing import Any

import pytest
import respx

from adapter import OpenCodeAdapter, Timeouts
from adapter.testing import EventRecorder, RealOpenCodeServer, ScriptedModelServer
from adapter.testing.fake import FakeOpenCodeServer
from tests.adapter_support import Record
from tests.mocked_tree_api import BASE

#: tests/testing/test_pytest_plugin.py runs a host's tests of the shipped plugin in a subprocess.
pytest_plugins = ["pytester"]


class _CapturedEvents(logging.Handler):
    """Each of the library's records as its structlog event dict, with ``log_level``
    (what ``structlog.testing.capture_logs`` gave)."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        super().__init__(logging.DEBUG)
        self.events = events

    def emit(self, record: logging.LogRecord) -> None:
        if isinstance(record.msg, dict):
            self.events.append({**record.msg, "log_level": record.levelname.lower()})


@pytest.fixture(autouse=True, scope="session")
def private_state_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """``opencode-tree web`` keeps its threads under ``$XDG_STATE_HOME`` by default: the
    suite (and every command it runs) gets a state folder of its own, never the home's,
    where another run's thread ids would answer 409."""
    saved = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = str(tmp_path_factory.mktemp("state"))
    yield
    if saved is None:
        os.environ.pop("XDG_STATE_HOME", None)
    else:
        os.environ["XDG_STATE_HOME"] = saved


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport() -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Captured output that is not valid UTF-8 (tests log lone surrogates on purpose)
    is escaped: pytest-xdist sends each report to the controller as UTF-8."""
    report = yield
    report.sections = [
        (title, text.encode("utf-8", "backslashreplace").decode("utf-8"))
        for title, text in report.sections
    ]
    return report


@pytest.fixture(autouse=True)
def captured_logs() -> Iterator[list[dict[str, Any]]]:
    """Every event the library logs during the test, as dicts (at every level).

    The library logs through the standard library's ``adapter`` logger, whose level,
    handlers and propagation are restored after the test: a CLI test calls
    ``configure_logging``, which must not leak into the next test.
    """
    library = logging.getLogger("adapter")
    saved = (library.level, list(library.handlers), library.propagate)
    logs: list[dict[str, Any]] = []
    library.addHandler(_CapturedEvents(logs))
    library.setLevel(logging.DEBUG)
    library.propagate = False  # kept here, not printed by pytest's own handlers
    yield logs
    library.setLevel(saved[0])
    library.handlers[:] = saved[1]
    library.propagate = saved[2]


@pytest.fixture
def router() -> Iterator[respx.MockRouter]:
    """A respx mock of the OpenCode API at ``BASE``, for the client's contract tests."""
    with respx.mock(base_url=BASE, assert_all_called=False) as mock:
        yield mock


# -- the adapter on the in-process fake: the plugin's fixtures, by their short names -----
# ``adapter.testing.pytest_plugin`` makes, enters and closes the fake, the adapter and the
# recorder; the suite only names them (``fake``, ``oc``, ``rec``) and sets their options
# (``fake_options``, ``timeouts``), which a module or class overrides as before. A module
# that needs other adapter options overrides ``opencode_adapter_options``, not ``oc``
# (``rec`` records the plugin's adapter).


@pytest.fixture
def fake_options() -> dict[str, Any]:
    """The arguments of ``fake`` (a module overrides this fixture, not ``fake``, to change them)."""
    return {"seed": 7}


@pytest.fixture
def opencode_fake_options(fake_options: dict[str, Any]) -> dict[str, Any]:
    """The plugin's ``opencode_fake`` takes the suite's ``fake_options``."""
    return fake_options


@pytest.fixture
def fake(opencode_fake: FakeOpenCodeServer) -> FakeOpenCodeServer:
    """A fresh fake OpenCode server: the plugin's ``opencode_fake``."""
    return opencode_fake


@pytest.fixture
def timeouts() -> Timeouts:
    """The timeouts of ``oc`` (a module overrides this fixture, not ``oc``, to change them)."""
    return Timeouts(connect=2.0)


@pytest.fixture
def opencode_adapter_options(timeouts: Timeouts) -> dict[str, Any]:
    """The plugin's ``opencode_adapter`` (and ``opencode_adapter_factory``) take the suite's
    ``timeouts``."""
    return {"timeouts": timeouts}


@pytest.fixture
def oc(opencode_adapter: OpenCodeAdapter) -> OpenCodeAdapter:
    """An adapter on ``fake``: the plugin's ``opencode_adapter``."""
    return opencode_adapter


@pytest.fixture
def rec(opencode_events: EventRecorder) -> EventRecorder:
    """Every canonical event ``oc`` emits during the test: the plugin's ``opencode_events``."""
    return opencode_events


@pytest.fixture
async def record() -> AsyncIterator[Record]:
    """Records the events of another adapter than ``oc`` (one a test opens itself);
    every recorder is closed at the end of the test."""
    made: list[EventRecorder] = []

    def recorder_of(adapter: OpenCodeAdapter) -> EventRecorder:
        made.append(EventRecorder(adapter))
        return made[-1]

    yield recorder_of
    for recorder in made:
        await recorder.close()


# -- the real server: tests/real/ and the real tests of other folders (``-m real``) -------
# Session-scoped: a start costs a few seconds. Tests that share them script names of their
# own (``unique_name``).


@pytest.fixture(scope="session")
def scripted_model(real_opencode_model: ScriptedModelServer) -> ScriptedModelServer:
    """The scripted OpenAI-compatible model of the session: the plugin's
    ``real_opencode_model``."""
    return real_opencode_model


@pytest.fixture(scope="session")
def real_server(scripted_model: ScriptedModelServer) -> Iterator[RealOpenCodeServer]:
    """A real OpenCode server (no password) whose only model is ``scripted_model``. Not the
    plugin's ``real_opencode``, which skips without a binary: here a missing binary fails."""
    with RealOpenCodeServer(scripted_model.base_url) as server:
        yield server


@pytest.fixture(scope="session")
def command_server(scripted_model: ScriptedModelServer) -> Iterator[RealOpenCodeServer]:
    """A real OpenCode server like ``real_server`` whose configuration has the slash
    commands ``hello`` (run in the session) and ``sub`` (a ``subtask``, run as a ``task``
    child): ``tests.differential.language.COMMANDS``."""
    from tests.differential.language import command_server_options

    with RealOpenCodeServer(scripted_model.base_url, **command_server_options()) as server:
        yield server


@pytest.fixture
def unique_name(request: pytest.FixtureRequest) -> str:
    """A script-name prefix unique to this test (scripts are shared per model server)."""
    return f"{re.sub(r'[^A-Za-z0-9_.-]', '-', request.node.name)}-{uuid.uuid4().hex[:6]}"
