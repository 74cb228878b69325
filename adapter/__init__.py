"""opencode-tree-adapter: drive OpenCode servers, and stop whole session trees.

The public surface is re-exported here; everything in ``adapter._*`` modules
is private and may change.
"""

from ._adapter import OpenCodeAdapter
from ._client import OpenCodeClient, PermissionReply, RawEvent
from ._events import (
    ChildStarted,
    ContentDelta,
    Event,
    ItemEvent,
    ItemType,
    RequestEvent,
    RuntimeEvent,
    SessionEvent,
    ThreadMetadataUpdated,
    TurnEvent,
)
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
    PendingRequest,
    Session,
    SessionStatus,
    ToolState,
)
from ._partial import PartialCollector, PartialResult, SessionPartial, ToolCallResult
from ._retry import RetryPolicy
from ._state import InterruptResult, SessionInfo, ThreadHistory, ThreadStatus, TurnStart
from ._stop_tree import SessionStop, StopReport, stop_tree
from ._stream import EventStream

__version__ = "0.1.0"

__all__ = [
    "AdapterClosedError",
    "AuthError",
    "ChildStarted",
    "ConnectTimeoutError",
    "ContentDelta",
    "Event",
    "EventStream",
    "Health",
    "InterruptResult",
    "InvalidInputError",
    "ItemEvent",
    "ItemType",
    "Message",
    "MessageError",
    "MessageInfo",
    "NotFoundError",
    "OpenCodeAdapter",
    "OpenCodeClient",
    "OpenCodeError",
    "Part",
    "PartialCollector",
    "PartialResult",
    "PendingRequest",
    "PermissionReply",
    "ProtocolError",
    "RawEvent",
    "RequestError",
    "RequestEvent",
    "RetryPolicy",
    "RuntimeEvent",
    "ServerExitedError",
    "Session",
    "SessionClosedError",
    "SessionEvent",
    "SessionInfo",
    "SessionPartial",
    "SessionStatus",
    "SessionStop",
    "StopReport",
    "ThreadHistory",
    "ThreadMetadataUpdated",
    "ThreadStatus",
    "ToolCallResult",
    "ToolState",
    "TreeStopError",
    "TurnCancelledError",
    "TurnEvent",
    "TurnStart",
    "UnknownRequestError",
    "UnknownThreadError",
    "__version__",
    "configure_logging",
    "stop_tree",
]
