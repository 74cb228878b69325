"""The scripted OpenAI-compatible model server and its steps (see :mod:`adapter.testing._model`)."""

from ._model.recording import ModelRequest
from ._model.server import ScriptedModelServer
from ._model.steps import (
    SCRIPT_MARKER_RE,
    Hang,
    HttpError,
    RequestKind,
    Step,
    Text,
    ToolCall,
    ToolCalls,
    script_marker,
    task_call,
)

__all__ = [
    "SCRIPT_MARKER_RE",
    "Hang",
    "HttpError",
    "ModelRequest",
    "RequestKind",
    "ScriptedModelServer",
    "Step",
    "Text",
    "ToolCall",
    "ToolCalls",
    "script_marker",
    "task_call",
]
