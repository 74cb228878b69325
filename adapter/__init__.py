"""opencode-tree-adapter: drive OpenCode servers, and stop whole session trees.

The public surface is re-exported here; everything in ``adapter._*`` modules
is private and may change.

The layers, drawn in ``docs/architecture.md`` (a test checks the imports): the
foundation (``_base``, ``_exceptions``, ``_logging``, ``_timeouts``); the wire (``_client``,
``_server``); the host's vocabulary of frozen values (``_types``); the concepts
(``_threads``, ``_turns``, ``_stream``, ``_requests``, ``_stop``); the facade
``OpenCodeAdapter`` (``_adapter``); and the faces: the command line (``cli``, also
``__main__``), the Stop-button backend (``web``), the ACP agent (``acp``) and the test kit
(``testing``).
"""

import dataclasses
import inspect

from ._adapter import OpenCodeAdapter
from ._client import OpenCodeClient, PermissionReply, RawEvent
from ._client._inventory import (
    AgentInfo,
    CommandInfo,
    ModelCost,
    ModelInfo,
    ServerInventory,
    SkillInfo,
)
from ._client._mcp import McpServerStatus
from ._client._responses import (
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
from ._client._retry import RetryPolicy
from ._exceptions import (
    AdapterClosedError,
    AuthError,
    CannotDetachError,
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
from ._stop._stop_tree import stop_tree
from ._stream._hub import EventStream
from ._stream._native_recorder import (
    NativeFileRecorder,
    NativeRecord,
    NativeRecorder,
    NativeRecordGap,
    read_native_recording,
)
from ._threads._session_tree import SessionTree, TreeNode
from ._timeouts import Timeouts
from ._turns._prompt_input import (
    MAX_FILE_BYTES,
    MAX_PROMPT_BYTES,
    FilePart,
    PromptPart,
    TextPart,
    file_part,
    image_part,
    text_part,
)
from ._types._events import (
    AnyEvent,
    ChildStarted,
    ContentDelta,
    Event,
    FileDiff,
    ItemCompleted,
    ItemEvent,
    ItemStarted,
    ItemType,
    ItemUpdated,
    PlanItem,
    RequestEvent,
    RequestOpened,
    RequestResolved,
    RetryStatus,
    RuntimeErrorEvent,
    RuntimeEvent,
    RuntimeWarningEvent,
    SessionEvent,
    SessionExited,
    SessionStarted,
    StreamGap,
    TaskCompleted,
    TaskStarted,
    TaskStatus,
    TaskUpdated,
    ThreadCompacted,
    ThreadMetadataUpdated,
    ThreadStarted,
    TurnAborted,
    TurnCompleted,
    TurnDiffUpdated,
    TurnEvent,
    TurnPlanUpdated,
    TurnRetrying,
    TurnStarted,
    TurnStopFailed,
    TurnStopped,
    TurnStopping,
    TurnUsageUpdated,
    UserInputRequested,
    UserInputResolved,
)
from ._types._partial_result import PartialResult, SessionPartial, ToolCallResult
from ._types._permissions import PRESETS as PERMISSION_PRESETS
from ._types._permissions import PermissionPreset, PermissionRule, Permissions
from ._types._records import InterruptResult, SessionInfo, ThreadHistory, ThreadStatus, TurnStart
from ._types._stop_report import SessionStop, StopReport
from ._types._usage import SessionUsage, TurnUsage

__version__ = "0.1.0"

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_PROMPT_BYTES",
    "PERMISSION_PRESETS",
    "AdapterClosedError",
    "AgentInfo",
    "AnyEvent",
    "AuthError",
    "CannotDetachError",
    "ChildStarted",
    "CommandInfo",
    "ConnectTimeoutError",
    "ContentDelta",
    "Event",
    "EventStream",
    "FileDiff",
    "FilePart",
    "Health",
    "InterruptResult",
    "InvalidInputError",
    "ItemCompleted",
    "ItemEvent",
    "ItemStarted",
    "ItemType",
    "ItemUpdated",
    "McpServerStatus",
    "Message",
    "MessageError",
    "MessageInfo",
    "ModelCost",
    "ModelInfo",
    "NativeFileRecorder",
    "NativeRecord",
    "NativeRecordGap",
    "NativeRecorder",
    "NotFoundError",
    "OpenCodeAdapter",
    "OpenCodeClient",
    "OpenCodeError",
    "Part",
    "PartialResult",
    "PendingRequest",
    "PermissionPreset",
    "PermissionReply",
    "PermissionRule",
    "Permissions",
    "PlanItem",
    "PromptPart",
    "ProtocolError",
    "RawEvent",
    "RequestError",
    "RequestEvent",
    "RequestOpened",
    "RequestResolved",
    "RetryPolicy",
    "RetryStatus",
    "RuntimeErrorEvent",
    "RuntimeEvent",
    "RuntimeWarningEvent",
    "ServerExitedError",
    "ServerInventory",
    "Session",
    "SessionClosedError",
    "SessionEvent",
    "SessionExited",
    "SessionInfo",
    "SessionPartial",
    "SessionStarted",
    "SessionStatus",
    "SessionStop",
    "SessionTree",
    "SessionUsage",
    "SkillInfo",
    "StopReport",
    "StreamGap",
    "TaskCompleted",
    "TaskStarted",
    "TaskStatus",
    "TaskUpdated",
    "TextPart",
    "ThreadCompacted",
    "ThreadHistory",
    "ThreadMetadataUpdated",
    "ThreadStarted",
    "ThreadStatus",
    "Timeouts",
    "ToolCallResult",
    "ToolState",
    "TreeNode",
    "TreeStopError",
    "TurnAborted",
    "TurnCancelledError",
    "TurnCompleted",
    "TurnDiffUpdated",
    "TurnEvent",
    "TurnPlanUpdated",
    "TurnRetrying",
    "TurnStart",
    "TurnStarted",
    "TurnStopFailed",
    "TurnStopped",
    "TurnStopping",
    "TurnUsage",
    "TurnUsageUpdated",
    "UnknownRequestError",
    "UnknownThreadError",
    "UserInputRequested",
    "UserInputResolved",
    "__version__",
    "configure_logging",
    "file_part",
    "image_part",
    "read_native_recording",
    "stop_tree",
    "text_part",
]


def _stamp_public_module() -> None:
    """Public exceptions, classes and functions say they are ``adapter.X`` (as httpx
    does), so tracebacks and reprs show the name a host imports, not a private
    module's. Dataclasses keep their module: ``typing.get_type_hints`` (used by
    serialisers such as pydantic) resolves their annotations in it."""
    for name in __all__:
        value = globals()[name]
        if not (isinstance(value, type) or inspect.isfunction(value)):
            continue
        if dataclasses.is_dataclass(value) or not value.__module__.startswith("adapter._"):
            continue
        value.__module__ = __name__


_stamp_public_module()


def _complete_exception_annotations() -> None:
    """``TreeStopError`` is raised from the foundation, which may not import the report
    and the partial result it carries (docs/architecture.md); its annotations name them
    for type checkers only. Lending the names to its module here lets
    ``typing.get_type_hints`` resolve them at run time too."""
    from . import _exceptions
    from ._types._stop_report import SessionStop

    _exceptions.__dict__.setdefault("StopReport", StopReport)
    _exceptions.__dict__.setdefault("SessionStop", SessionStop)
    _exceptions.__dict__.setdefault("PartialResult", PartialResult)


_complete_exception_annotations()
