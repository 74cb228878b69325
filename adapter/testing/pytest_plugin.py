"""The pytest plugin of ``adapter.testing``: the fixtures a host's contract tests reach for.

Why it exists: every host author who tested their code against the fake rebuilt the same
fixtures (a fake, an adapter on it, a recorder of its events, the real server for the
same tests). Installed with the package, pytest loads this module through its
``pytest11`` entry point ``opencode_tree``; ``-p no:opencode_tree`` turns it off
(``docs/testing.md``, "The pytest plugin").

Fixtures: ``opencode_fake``, ``opencode_adapter``, ``opencode_adapter_factory`` (more
adapters on the same fake: a host restarting), ``opencode_events`` (async, through
pytest-asyncio, strict or auto mode) and ``real_opencode`` with ``real_opencode_model``
(sync, session-scoped). Each is customised by overriding its ``*_options`` fixture or,
per test, by a marker of its name whose keyword arguments win.

The package does not depend on pytest-asyncio: without it this module still loads (so a
test run without it is not broken by an installed package), and only a test that uses
an async fixture fails, saying what to install. Nothing is imported or started before a
fixture is used: a test run that uses none pays only for loading this module.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar, cast

import pytest

if TYPE_CHECKING:
    from adapter import OpenCodeAdapter

    from ._real_server import RealOpenCodeServer
    from ._recorder import EventRecorder
    from .fake import FakeOpenCodeServer
    from .model import ScriptedModelServer

try:
    import pytest_asyncio
except ImportError:  # pragma: no cover - exercised in a subprocess
    pytest_asyncio = None  # type: ignore[assignment]

__all__ = [
    "AdapterFactory",
    "opencode_adapter",
    "opencode_adapter_factory",
    "opencode_adapter_options",
    "opencode_events",
    "opencode_fake",
    "opencode_fake_options",
    "real_opencode",
    "real_opencode_model",
    "real_opencode_options",
]

F = TypeVar("F", bound=Callable[..., Any])

#: The type of ``opencode_adapter_factory``: ``await factory(**kwargs)`` gives an entered
#: ``OpenCodeAdapter`` on ``opencode_fake``.
AdapterFactory = Callable[..., Awaitable["OpenCodeAdapter"]]

_MISSING_PYTEST_ASYNCIO = (
    "{name} needs pytest-asyncio, which is not installed: "
    "pip install 'opencode-tree-adapter[testing]' (or pytest-asyncio>=0.24)"
)
_MARKERS = {
    "opencode_fake": "opencode_fake(**kwargs): FakeOpenCodeServer arguments of this test's "
    "opencode_fake (they win over the opencode_fake_options fixture)",
    "opencode_adapter": "opencode_adapter(**kwargs): OpenCodeAdapter arguments of this "
    "test's opencode_adapter, e.g. timeouts=Timeouts(...) (they win over "
    "opencode_adapter_options)",
}


def pytest_configure(config: pytest.Config) -> None:
    for text in _MARKERS.values():
        config.addinivalue_line("markers", text)


def _async_fixture(function: F) -> F:
    """``function`` as a pytest-asyncio fixture (its default loop scope: the user's
    ``asyncio_default_fixture_loop_scope``), or, without pytest-asyncio, a fixture of the
    same name that fails saying what to install."""
    if pytest_asyncio is not None:
        return cast(F, pytest_asyncio.fixture(function))
    name = function.__name__

    def needs_pytest_asyncio() -> None:
        pytest.fail(_MISSING_PYTEST_ASYNCIO.format(name=name), pytrace=False)

    needs_pytest_asyncio.__doc__ = function.__doc__
    return cast(F, pytest.fixture(name=name)(needs_pytest_asyncio))


def _options(
    request: pytest.FixtureRequest, defaults: dict[str, Any], marker: str
) -> dict[str, Any]:
    """``defaults`` updated by the test's ``marker`` keyword arguments (the closest marker
    wins: a test's over its class's over its module's)."""
    options = dict(defaults)
    for mark in reversed(list(request.node.iter_markers(marker))):
        if mark.args:
            raise pytest.UsageError(f"@pytest.mark.{marker} takes keyword arguments only")
        options.update(mark.kwargs)
    return options


# -- the in-process fake ----------------------------------------------------------------


@pytest.fixture
def opencode_fake_options() -> dict[str, Any]:
    """The ``FakeOpenCodeServer`` keyword arguments of ``opencode_fake`` (default: none).
    Override this fixture (in a ``conftest.py``, a module, a class) to change them;
    ``@pytest.mark.opencode_fake(**kwargs)`` changes them for one test."""
    return {}


@_async_fixture
async def opencode_fake(
    request: pytest.FixtureRequest, opencode_fake_options: dict[str, Any]
) -> AsyncIterator[FakeOpenCodeServer]:
    """A fresh ``FakeOpenCodeServer`` for the test, closed after it."""
    from .fake import FakeOpenCodeServer

    options = _options(request, opencode_fake_options, "opencode_fake")
    async with FakeOpenCodeServer(**options) as fake:
        yield fake


@pytest.fixture
def opencode_adapter_options() -> dict[str, Any]:
    """The ``OpenCodeAdapter`` keyword arguments of ``opencode_adapter`` (default: none,
    so the library's ``Timeouts()``). Override this fixture to change them, e.g.
    ``{"timeouts": Timeouts(echo=1.0)}``; ``@pytest.mark.opencode_adapter(**kwargs)``
    changes them for one test."""
    return {}


@_async_fixture
async def opencode_adapter(opencode_adapter_factory: AdapterFactory) -> OpenCodeAdapter:
    """An ``OpenCodeAdapter`` on ``opencode_fake`` (its ``base_url`` and ``transport``),
    entered for the test and closed after it: the first that
    ``opencode_adapter_factory`` makes, so the last it closes."""
    return await opencode_adapter_factory()


@_async_fixture
async def opencode_adapter_factory(
    request: pytest.FixtureRequest,
    opencode_fake: FakeOpenCodeServer,
    opencode_adapter_options: dict[str, Any],
) -> AsyncIterator[AdapterFactory]:
    """Makes more adapters on ``opencode_fake``: ``await opencode_adapter_factory(**kwargs)``
    returns a new, entered ``OpenCodeAdapter`` with ``opencode_adapter``'s options, the
    keyword arguments winning (a host process restarting: ``start_session(..., resume=...)``
    on a tree another adapter left). Each is closed after the test, the last made first,
    unless the test closed it (closing twice is a no-op)."""
    from adapter import OpenCodeAdapter

    defaults = {
        "transport": opencode_fake.transport,
        **_options(request, opencode_adapter_options, "opencode_adapter"),
    }
    async with contextlib.AsyncExitStack() as made:

        async def make(**kwargs: Any) -> OpenCodeAdapter:
            adapter = OpenCodeAdapter(opencode_fake.base_url, **{**defaults, **kwargs})
            return await made.enter_async_context(adapter)

        yield make


@_async_fixture
async def opencode_events(opencode_adapter: OpenCodeAdapter) -> AsyncIterator[EventRecorder]:
    """An ``EventRecorder`` of every event ``opencode_adapter`` emits from before the test
    acts; closed after the test."""
    from ._recorder import EventRecorder

    async with EventRecorder(opencode_adapter) as recorder:
        yield recorder


# -- the real server --------------------------------------------------------------------


@pytest.fixture(scope="session")
def real_opencode_options() -> dict[str, Any]:
    """The ``RealOpenCodeServer`` keyword arguments of ``real_opencode`` (default: none;
    e.g. ``{"password": "…"}`` or ``{"extra_env": {…}}``). A session-scoped override."""
    return {}


@pytest.fixture(scope="session")
def real_opencode_model() -> Iterator[ScriptedModelServer]:
    """The scripted OpenAI-compatible model of ``real_opencode`` (one per test session):
    ``real_opencode_model.script(name, steps)``, chosen by ``script_marker(name)`` in a
    prompt. Give each test its own script names."""
    from .model import ScriptedModelServer

    with ScriptedModelServer() as model:
        yield model


@pytest.fixture(scope="session")
def real_opencode(
    request: pytest.FixtureRequest, real_opencode_options: dict[str, Any]
) -> Iterator[RealOpenCodeServer]:
    """A started, offline ``opencode serve`` whose only model is ``real_opencode_model``,
    shared by the test session (a start costs about 2 s) and stopped at its end. Skipped
    with the reason when no OpenCode binary is installed."""
    from ._real_server import RealOpenCodeServer, find_opencode_binary

    try:
        find_opencode_binary(real_opencode_options.get("binary"))
    except FileNotFoundError as missing:
        pytest.skip(
            "real_opencode: no OpenCode binary (install opencode on PATH or set "
            f"OPENCODE_BIN): {missing}"
        )
    model: ScriptedModelServer = request.getfixturevalue("real_opencode_model")
    with RealOpenCodeServer(model.base_url, **real_opencode_options) as server:
        yield server
