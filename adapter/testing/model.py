"""The scripted OpenAI-compatible model server and its script steps."""

from ._model_server import (
    SCRIPT_MARKER_RE,
    Hang,
    HttpError,
    ModelRequest,
    RequestKind,
    ScriptedModelServer,
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
