"""Test helpers for hosts that embed the adapter (and for this project's own tests).

- :class:`FakeOpenCodeServer` — an in-process emulation of the OpenCode HTTP API
  behind an ``httpx`` transport, with scripted agents and fault injection
  (steps in :mod:`adapter.testing.fake`).
- :class:`ScriptedModelServer` — an OpenAI-compatible model on 127.0.0.1 that a
  real ``opencode serve`` can use offline (steps in :mod:`adapter.testing.model`).
- :class:`RealOpenCodeServer` — a real, isolated, offline ``opencode serve``;
  :data:`PINNED_VERSION` is the release ``make opencode`` installs and the fake emulates.
- :class:`EventRecorder` — every canonical event of an adapter, recorded for a test to
  wait on (``wait_for``) and read (``of``, ``types``, ``of_turn``).
- :func:`caught_up` — wait until an adapter has handled every event the fake published
  and what that set going has run (instead of spinning ``asyncio.sleep(0)``).

The pytest plugin (:mod:`adapter.testing.pytest_plugin`, entry point ``opencode_tree``)
gives them as fixtures.

Modules: ``fake`` and ``model`` export the fake server's and the scripted model's names,
built in the packages ``_fake`` and ``_model``; ``_real_server`` (the real server and
its binary), ``_started`` (what a test server has only once started), ``_recorder``
(:class:`EventRecorder`), ``_caught_up`` (:func:`caught_up`), ``pytest_plugin``.

See ``docs/testing.md``.
"""

from ._caught_up import caught_up
from ._real_server import PINNED_VERSION, RealOpenCodeServer, find_opencode_binary, free_port
from ._recorder import EventRecorder
from .fake import FakeOpenCodeServer, RecordedRequest
from .model import ModelRequest, ScriptedModelServer, script_marker

__all__ = [
    "PINNED_VERSION",
    "EventRecorder",
    "FakeOpenCodeServer",
    "ModelRequest",
    "RealOpenCodeServer",
    "RecordedRequest",
    "ScriptedModelServer",
    "caught_up",
    "find_opencode_binary",
    "free_port",
    "script_marker",
]
