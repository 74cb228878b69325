"""Typed views of the OpenCode API's responses.

Each model is parsed from untrusted JSON by its ``parse`` class method, which
raises :class:`ValueError` on a shape it cannot trust; the client turns that
into :class:`~adapter.ProtocolError`. Every model keeps the ``raw`` mapping it
came from, so nothing the server said is lost to a host that needs it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal, TypeVar, cast

from .._base._ids import checked_id, validate_id
from .._base._json_fields import optional_string
from .._logging import get_logger

__all__ = [
    "Health",
    "Message",
    "MessageError",
    "MessageInfo",
    "Part",
    "PendingRequest",
    "Session",
    "SessionStatus",
    "ToolState",
]

JSON = Any
_T = TypeVar("_T")
_log = get_logger("adapter.models")


def _obj(value: object, what: str) -> Mapping[str, Any]:
    # `type(...) is dict` first: parts arrive by the thousand on the event stream, and
    # the ABC check (or a `cast`, a function call) costs more than the rest.
    if type(value) is dict or isinstance(value, Mapping):
        return value
    raise ValueError(f"{what} is not an object")


def _slot_builder(cls: type[_T], *names: str) -> Callable[..., _T]:
    """A positional constructor of a frozen, slotted dataclass that sets its slots directly.

    For the models parsed once per event of the stream: a frozen dataclass's
    ``__init__`` goes through ``object.__setattr__`` for every field (9 fields:
    1.4-1.8 µs), the slots' own descriptors take half of that. The function is
    generated unrolled, as :mod:`dataclasses` generates ``__init__`` (a loop
    over the setters costs most of the gain). It builds the same object (these
    classes have no ``__post_init__``); ``names`` must be every field, in order
    (checked once, here).
    """
    if names != tuple(f.name for f in fields(cls)):  # type: ignore[arg-type]
        raise TypeError(f"{cls.__name__}: fields are {names}")
    namespace: dict[str, Any] = {"new": object.__new__, "cls": cls}
    namespace.update({f"set_{name}": cls.__dict__[name].__set__ for name in names})
    source = (
        f"def build({', '.join(names)}):\n"
        "    instance = new(cls)\n"
        + "".join(f"    set_{name}(instance, {name})\n" for name in names)
        + "    return instance\n"
    )
    exec(source, namespace)  # the names are the class's own field names
    build: Callable[..., _T] = namespace["build"]
    return build


def _opt_str(data: Mapping[str, Any], key: str) -> str | None:
    return optional_string(data, key, lambda _: ValueError(f"field {key!r} is not a string"))


def _num(data: Mapping[str, Any], key: str) -> float | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"field {key!r} is not a number")
    return float(value)


@dataclass(frozen=True, slots=True)
class Health:
    healthy: bool
    version: str | None

    @classmethod
    def parse(cls, data: object) -> Health:
        obj = _obj(data, "health")
        healthy = obj.get("healthy")
        if not isinstance(healthy, bool):
            raise ValueError("field 'healthy' is not a boolean")
        return cls(healthy=healthy, version=_opt_str(obj, "version"))


@dataclass(frozen=True, slots=True)
class Session:
    """One OpenCode session (``parent_id`` is set for a child session)."""

    id: str
    parent_id: str | None
    title: str
    directory: str | None
    created: float
    updated: float | None
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def parse(cls, data: object) -> Session:
        obj = _obj(data, "session")
        session_id = validate_id("ses", obj.get("id"))
        parent = obj.get("parentID")
        parent_id = None if parent is None else validate_id("ses", parent)
        time = _obj(obj.get("time", {}), "session.time")
        created = _num(time, "created")
        title = obj.get("title")
        return cls(
            id=session_id,
            parent_id=parent_id,
            title=title if isinstance(title, str) else "",
            directory=_opt_str(obj, "directory"),
            created=created if created is not None else 0.0,
            updated=_num(time, "updated"),
            raw=obj,
        )


StatusType = Literal["idle", "busy", "retry"]


@dataclass(frozen=True, slots=True)
class SessionStatus:
    """A session's run state. ``GET /session/status`` lists only non-idle sessions."""

    type: StatusType
    attempt: int | None = None
    message: str | None = None
    next: float | None = None

    @property
    def is_busy(self) -> bool:
        return self.type != "idle"

    @classmethod
    def parse(cls, data: object) -> SessionStatus:
        obj = _obj(data, "status")
        kind = obj.get("type")
        if kind not in ("idle", "busy", "retry"):
            raise ValueError(f"unknown status type {kind!r:.40}")
        attempt = obj.get("attempt")
        return cls(
            type=cast(StatusType, kind),
            attempt=attempt if isinstance(attempt, int) and not isinstance(attempt, bool) else None,
            message=_opt_str(obj, "message") if isinstance(obj.get("message"), str) else None,
            next=_num(obj, "next") if not isinstance(obj.get("next"), bool) else None,
        )

    @staticmethod
    def parse_map(data: object) -> dict[str, SessionStatus]:
        """Parse the status map; entries that cannot be trusted are skipped, not fatal.

        One malformed stranger in the map must not stop a stop or a turn of ours
        (only tree members are ever acted on).
        """
        obj = _obj(data, "status map")
        statuses: dict[str, SessionStatus] = {}
        for key, value in obj.items():
            try:
                statuses[validate_id("ses", key)] = SessionStatus.parse(value)
            except ValueError:
                _log.warning("opencode.status_entry_skipped", key=str(key)[:80])
        return statuses


@dataclass(frozen=True, slots=True)
class MessageError:
    name: str
    message: str | None

    @classmethod
    def parse(cls, data: object) -> MessageError | None:
        if data is None:
            return None
        obj = _obj(data, "error")
        name = obj.get("name")
        inner = obj.get("data")
        message = None
        if isinstance(inner, Mapping):
            text = inner.get("message")
            message = text if isinstance(text, str) else None
        return cls(name=name if isinstance(name, str) else "UnknownError", message=message)


@dataclass(frozen=True, slots=True)
class MessageInfo:
    id: str
    session_id: str
    role: Literal["user", "assistant"]
    parent_id: str | None
    created: float | None
    completed: float | None
    finish: str | None
    error: MessageError | None
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def parse(cls, data: object) -> MessageInfo:
        obj = _obj(data, "message info")
        role = obj.get("role")
        if role not in ("user", "assistant"):
            raise ValueError(f"unknown message role {role!r:.40}")
        time = _obj(obj.get("time", {}), "message.time")
        parent = obj.get("parentID")
        finish = obj.get("finish")
        return cls(
            id=validate_id("msg", obj.get("id")),
            session_id=validate_id("ses", obj.get("sessionID")),
            role=cast(Literal["user", "assistant"], role),
            parent_id=parent if isinstance(parent, str) else None,
            created=_num(time, "created"),
            completed=_num(time, "completed"),
            finish=finish if isinstance(finish, str) else None,
            error=MessageError.parse(obj.get("error")),
            raw=obj,
        )


@dataclass(frozen=True, slots=True)
class ToolState:
    status: Literal["pending", "running", "completed", "error"]
    input: Mapping[str, Any]
    output: str | None
    error: str | None
    title: str | None
    metadata: Mapping[str, Any]

    @classmethod
    def parse(cls, data: object) -> ToolState:
        obj = _obj(data, "tool state")
        status = obj.get("status")
        if status not in _TOOL_STATUSES:
            raise ValueError(f"unknown tool status {status!r:.40}")
        tool_input = obj.get("input")
        metadata = obj.get("metadata")
        output = obj.get("output")
        error = obj.get("error")
        title = obj.get("title")
        return _build_tool_state(
            status,
            tool_input if type(tool_input) is dict or isinstance(tool_input, Mapping) else {},
            output if type(output) is str or isinstance(output, str) else None,
            error if type(error) is str or isinstance(error, str) else None,
            title if type(title) is str or isinstance(title, str) else None,
            metadata if type(metadata) is dict or isinstance(metadata, Mapping) else {},
        )


_TOOL_STATUSES = frozenset({"pending", "running", "completed", "error"})


@dataclass(frozen=True, slots=True)
class Part:
    """One part of a message: text, reasoning, a tool call, a step marker..."""

    id: str
    message_id: str
    session_id: str
    type: str
    text: str | None
    tool: str | None
    call_id: str | None
    state: ToolState | None
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def parse(cls, data: object) -> Part:
        obj = _obj(data, "part")
        kind = obj.get("type")
        if type(kind) is not str and not isinstance(kind, str):
            raise ValueError("field 'type' is not a string")
        text = obj.get("text")
        tool = obj.get("tool")
        call_id = obj.get("callID")
        state = ToolState.parse(obj["state"]) if kind == "tool" and "state" in obj else None
        return _build_part(
            checked_id("prt", obj.get("id")),
            checked_id("msg", obj.get("messageID")),
            checked_id("ses", obj.get("sessionID")),
            kind,
            text if type(text) is str or isinstance(text, str) else None,
            tool if type(tool) is str or isinstance(tool, str) else None,
            call_id if type(call_id) is str or isinstance(call_id, str) else None,
            state,
            obj,
        )


_build_tool_state = _slot_builder(
    ToolState, "status", "input", "output", "error", "title", "metadata"
)
_build_part = _slot_builder(
    Part, "id", "message_id", "session_id", "type", "text", "tool", "call_id", "state", "raw"
)


@dataclass(frozen=True, slots=True)
class Message:
    info: MessageInfo
    parts: tuple[Part, ...]

    @classmethod
    def parse(cls, data: object) -> Message:
        obj = _obj(data, "message")
        parts = obj.get("parts", [])
        if not isinstance(parts, list):
            raise ValueError("field 'parts' is not a list")
        return cls(
            info=MessageInfo.parse(obj.get("info")), parts=tuple(Part.parse(p) for p in parts)
        )


@dataclass(frozen=True, slots=True)
class PendingRequest:
    """A permission (``per_…``) or question (``que_…``) request the server is waiting on."""

    id: str
    session_id: str
    kind: Literal["permission", "question"]
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def parse(cls, data: object, kind: Literal["permission", "question"]) -> PendingRequest:
        obj = _obj(data, f"{kind} request")
        return cls(
            id=validate_id("per" if kind == "permission" else "que", obj.get("id")),
            session_id=validate_id("ses", obj.get("sessionID")),
            kind=kind,
            raw=obj,
        )
