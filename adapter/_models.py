"""Typed views of the OpenCode API's responses.

Each model is parsed from untrusted JSON by its ``parse`` class method, which
raises :class:`ValueError` on a shape it cannot trust; the client turns that
into :class:`~adapter.ProtocolError`. Every model keeps the ``raw`` mapping it
came from, so nothing the server said is lost to a host that needs it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from ._ids import validate_id
from ._logging import get_logger

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
_log = get_logger("adapter.models")


def _obj(value: object, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValueError(f"{what} is not an object")
    return cast(Mapping[str, Any], value)


def _str(data: Mapping[str, Any], key: str, *, optional: bool = False) -> str | None:
    value = data.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise ValueError(f"field {key!r} is not a string")
    return value


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
        return cls(healthy=healthy, version=_str(obj, "version", optional=True))


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
            directory=_str(obj, "directory", optional=True),
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
            message=_str(obj, "message", optional=True)
            if isinstance(obj.get("message"), str)
            else None,
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
        if status not in ("pending", "running", "completed", "error"):
            raise ValueError(f"unknown tool status {status!r:.40}")
        tool_input = obj.get("input")
        metadata = obj.get("metadata")
        output = obj.get("output")
        error = obj.get("error")
        title = obj.get("title")
        return cls(
            status=cast(Literal["pending", "running", "completed", "error"], status),
            input=cast(Mapping[str, Any], tool_input) if isinstance(tool_input, Mapping) else {},
            output=output if isinstance(output, str) else None,
            error=error if isinstance(error, str) else None,
            title=title if isinstance(title, str) else None,
            metadata=cast(Mapping[str, Any], metadata) if isinstance(metadata, Mapping) else {},
        )


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
        kind = _str(obj, "type")
        assert kind is not None
        text = obj.get("text")
        tool = obj.get("tool")
        call_id = obj.get("callID")
        state = ToolState.parse(obj["state"]) if kind == "tool" and "state" in obj else None
        return cls(
            id=validate_id("prt", obj.get("id")),
            message_id=validate_id("msg", obj.get("messageID")),
            session_id=validate_id("ses", obj.get("sessionID")),
            type=kind,
            text=text if isinstance(text, str) else None,
            tool=tool if isinstance(tool, str) else None,
            call_id=call_id if isinstance(call_id, str) else None,
            state=state,
            raw=obj,
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
