"""opencode-tree-adapter: drive OpenCode servers, and stop whole session trees.

The public surface is re-exported here; everything in ``adapter._*`` modules
is private and may change.
"""

from ._client import OpenCodeClient, PermissionReply, RawEvent
from ._exceptions import (
    AdapterClosedError,
    AuthError,
    ConnectTimeoutError,
    InvalidInputError,
    NotFoundError,
    OpenCodeError,
    ProtocolError,
    RequestError,
    ServerExitedError,
    SessionClosedError,
    TreeStopError,
    TurnCancelledError,
    UnknownRequestError,
    UnknownThreadError,
)
from ._logging import configure_logging
from ._models import (
    Health,
    Message,
    MessageError,
    MessageInfo,
    Part,
    Session,
    SessionStatus,
    ToolState,
)
from ._retry import RetryPolicy
from ._stop_tree import SessionStop, StopReport, stop_tree

__version__ = "0.1.0"

__all__ = [
    "AdapterClosedError",
    "AuthError",
    "ConnectTimeoutError",
    "Health",
    "InvalidInputError",
    "Message",
    "MessageError",
    "MessageInfo",
    "NotFoundError",
    "OpenCodeClient",
    "OpenCodeError",
    "Part",
    "PermissionReply",
    "ProtocolError",
    "RawEvent",
    "RequestError",
    "RetryPolicy",
    "ServerExitedError",
    "Session",
    "SessionClosedError",
    "SessionStatus",
    "SessionStop",
    "StopReport",
    "ToolState",
    "TreeStopError",
    "TurnCancelledError",
    "UnknownRequestError",
    "UnknownThreadError",
    "__version__",
    "configure_logging",
    "stop_tree",
]
