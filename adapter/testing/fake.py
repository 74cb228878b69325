"""The in-process fake OpenCode server and its script steps."""

from ._fake_server import (
    OPENCODE_VERSION,
    Fail,
    FakeMessage,
    FakeOpenCodeServer,
    FakeSession,
    Hang,
    Hold,
    Hook,
    HookHandler,
    Permission,
    Question,
    RecordedRequest,
    Step,
    Task,
    Text,
    Tool,
)

__all__ = [
    "OPENCODE_VERSION",
    "Fail",
    "FakeMessage",
    "FakeOpenCodeServer",
    "FakeSession",
    "Hang",
    "Hold",
    "Hook",
    "HookHandler",
    "Permission",
    "Question",
    "RecordedRequest",
    "Step",
    "Task",
    "Text",
    "Tool",
]
