"""The in-process fake OpenCode server and its script steps (see :mod:`adapter.testing._fake`)."""

from ._fake.hooks import Hold, Hook, HookHandler, RunEndHold
from ._fake.model_input import ModelInput
from ._fake.server import FakeOpenCodeServer
from ._fake.session_data import FakeMessage, FakeSession, RecordedRequest
from ._fake.steps import (
    COMPACTION_CONTINUE,
    Compact,
    Fail,
    Hang,
    Permission,
    Question,
    Step,
    Task,
    Tasks,
    Text,
    Tool,
)
from ._fake.wire import OPENCODE_VERSION

__all__ = [
    "COMPACTION_CONTINUE",
    "OPENCODE_VERSION",
    "Compact",
    "Fail",
    "FakeMessage",
    "FakeOpenCodeServer",
    "FakeSession",
    "Hang",
    "Hold",
    "Hook",
    "HookHandler",
    "ModelInput",
    "Permission",
    "Question",
    "RecordedRequest",
    "RunEndHold",
    "Step",
    "Task",
    "Tasks",
    "Text",
    "Tool",
]
