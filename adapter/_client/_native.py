"""OpenCode's native events, parsed once into typed, validated records.

Why this exists: every native event used to be interpreted twice -- the
adapter walked the raw dict for routing and mapping, and the partial-result
collector parsed the same dict again -- with a chance for the two readings to
disagree. :func:`parse_native` reads an event of ``GET /event`` exactly once;
both consumers then work on the same immutable record.

Each record is a frozen ``msgspec.Struct`` whose ``type`` is the native type
as a ``Literal``, so :data:`NativeEvent` is a discriminated union a consumer
can ``match`` (or narrow with ``event.type == ...``). Ids are validated with
:func:`~adapter._base._ids.validate_id` before anyone can put them into a URL.
Every record keeps the event it came from as ``raw`` (not compared, not in
``repr``); nothing is copied out of it except references, so a huge text or
tool output costs no more memory here than in the decoded JSON.

What is malformed: a known type whose ids, or whose fields the adapter acts
on (a status's type, a message's role, a part), are missing or of the wrong
shape. Descriptive fields a host only shows (a permission's patterns, a
question's answers, a title, token counts) are taken as far as they are
valid instead: a request must never be dropped because of a cosmetic field,
or its session would wait for a reply nobody is asked for.

Types this module does not model become :class:`UnknownEvent`, keeping the
session they name (if any) for routing. :func:`parse_native` raises only
:class:`~adapter.NativeEventError`, whatever it is given.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeAlias

import msgspec

from .._base._ids import checked_id
from .._exceptions import NativeEventError
from ._responses import MessageError, Part, SessionStatus

__all__ = [
    "MAX_TODOS",
    "MAX_TODO_CONTENT",
    "MessageRemoved",
    "MessageUpdated",
    "NativeEvent",
    "PartDelta",
    "PartUpdated",
    "PermissionAsked",
    "PermissionReplied",
    "QuestionAsked",
    "QuestionRejected",
    "QuestionReplied",
    "ServerConnected",
    "ServerHeartbeat",
    "SessionCompacted",
    "SessionCreated",
    "SessionDeleted",
    "SessionErrored",
    "SessionIdle",
    "SessionStatusChanged",
    "SessionUpdated",
    "Todo",
    "TodoUpdated",
    "UnknownEvent",
    "Usage",
    "message_usage",
    "parse_native",
    "session_of",
]

# --------------------------------------------------------------------------- records


# Fields that hold the native JSON the record was read from: left out of
# ``repr``, equality and hashing, as everything in them is in the typed fields
# or is only passed on.
_RAW_FIELDS = frozenset({"raw", "info"})


class _Record(msgspec.Struct, frozen=True):
    """The base of every record: immutable, and cheap to build.

    A ``msgspec.Struct`` rather than a frozen dataclass: a stream is mostly
    small events, and a frozen dataclass sets each field through
    ``object.__setattr__`` (8 fields: 1.6 µs, against 0.2 µs for a struct,
    measured; docs/benchmarks.md section 2). ``raw`` and ``info`` stay out of
    ``repr``, ``==`` and ``hash``, as they did in the dataclasses.
    """

    def _typed(self) -> tuple[Any, ...]:
        return tuple(
            getattr(self, name) for name in self.__struct_fields__ if name not in _RAW_FIELDS
        )

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{name}={getattr(self, name)!r}"
            for name in self.__struct_fields__
            if name not in _RAW_FIELDS
        )
        return f"{type(self).__name__}({shown})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._typed() == other._typed()

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self) -> int:
        return hash((type(self), self._typed()))


class _ServerRecord(_Record, frozen=True):
    """An event of the server itself: it concerns no session."""

    raw: Mapping[str, Any]

    @property
    def session_id(self) -> None:
        return None


class ServerConnected(_ServerRecord, frozen=True):
    """The first event of every stream (``server.connected``)."""

    type: ClassVar[Literal["server.connected"]] = "server.connected"


class ServerHeartbeat(_ServerRecord, frozen=True):
    """Sent about every 10 s on an otherwise quiet stream (``server.heartbeat``)."""

    type: ClassVar[Literal["server.heartbeat"]] = "server.heartbeat"


class SessionStatusChanged(_Record, frozen=True):
    """``session.status``: idle, busy, or retrying a failed model call."""

    type: ClassVar[Literal["session.status"]] = "session.status"
    session_id: str
    status: SessionStatus
    raw: Mapping[str, Any]


class _OneSessionRecord(_Record, frozen=True):
    """An event that names one session and carries nothing else."""

    session_id: str
    raw: Mapping[str, Any]


class SessionIdle(_OneSessionRecord, frozen=True):
    """``session.idle``: the session's run ended (it can come more than once)."""

    type: ClassVar[Literal["session.idle"]] = "session.idle"


class SessionErrored(_Record, frozen=True):
    """``session.error``; ``session_id`` is absent for errors of no session."""

    type: ClassVar[Literal["session.error"]] = "session.error"
    session_id: str | None
    error: MessageError | None
    raw: Mapping[str, Any]


class _SessionRecord(_Record, frozen=True):
    """An event that carries a session's whole ``info``: its lifecycle events."""

    session_id: str
    parent_id: str | None
    title: str | None
    info: Mapping[str, Any]
    raw: Mapping[str, Any]


class SessionCreated(_SessionRecord, frozen=True):
    """``session.created``; ``parent_id`` is set for a child session."""

    type: ClassVar[Literal["session.created"]] = "session.created"


class SessionUpdated(_SessionRecord, frozen=True):
    """``session.updated``: a changed title, a revert, cost and tokens..."""

    type: ClassVar[Literal["session.updated"]] = "session.updated"


class SessionDeleted(_SessionRecord, frozen=True):
    """``session.deleted`` (a delete cascades: children come first)."""

    type: ClassVar[Literal["session.deleted"]] = "session.deleted"


class SessionCompacted(_OneSessionRecord, frozen=True):
    """``session.compacted``: a summary message now stands for the history before it."""

    type: ClassVar[Literal["session.compacted"]] = "session.compacted"


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens and cost of an assistant message (zeros until its step finished)."""

    input: int = 0
    output: int = 0
    reasoning: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost: float = 0.0


_NO_USAGE = Usage()


class MessageUpdated(_Record, frozen=True):
    """``message.updated``: a message's info, sent at creation and as it changes.

    ``summary`` is true for the summary message of a compaction (measured on
    1.18.34: ``info.summary == true``, ``agent == "compaction"``): the model's
    digest of the history, never the answer of a turn. ``completed`` is the
    completion time (ms), ``finish`` the model's finish reason.
    """

    type: ClassVar[Literal["message.updated"]] = "message.updated"
    session_id: str
    message_id: str
    role: Literal["user", "assistant"]
    parent_id: str | None
    completed: float | None
    error: MessageError | None
    summary: bool
    finish: str | None
    raw: Mapping[str, Any]

    @property
    def usage(self) -> Usage:
        """Tokens and cost (``info.tokens``/``info.cost``; zeros when absent or invalid).

        Read from ``raw`` when asked: few consumers want it, and a message sends
        several updates, so parsing it up front would cost every one of them.
        """
        info = self.raw.get("properties", {}).get("info", {})
        return _usage(info) if self.role == "assistant" else _NO_USAGE


class MessageRemoved(_Record, frozen=True):
    """``message.removed``: a reverted message was dropped (at the next prompt)."""

    type: ClassVar[Literal["message.removed"]] = "message.removed"
    session_id: str
    message_id: str
    raw: Mapping[str, Any]


class PartUpdated(_Record, frozen=True):
    """``message.part.updated``: a full snapshot of one part (text, tool call, step...)."""

    type: ClassVar[Literal["message.part.updated"]] = "message.part.updated"
    session_id: str
    message_id: str
    part: Part
    raw: Mapping[str, Any]


class PartDelta(_Record, frozen=True):
    """``message.part.delta``: text appended to ``field`` of a part already announced."""

    type: ClassVar[Literal["message.part.delta"]] = "message.part.delta"
    session_id: str
    message_id: str
    part_id: str
    field: str
    delta: str
    raw: Mapping[str, Any]


class PermissionAsked(_Record, frozen=True):
    """``permission.asked``: a tool waits for the user's permission.

    ``tool_message_id`` / ``tool_call_id`` name the tool call that asked, when
    the server says (a request can also come from outside a tool call).
    """

    type: ClassVar[Literal["permission.asked"]] = "permission.asked"
    request_id: str
    session_id: str
    permission: str | None
    patterns: tuple[str, ...]
    tool_message_id: str | None
    tool_call_id: str | None
    raw: Mapping[str, Any]


class PermissionReplied(_Record, frozen=True):
    """``permission.replied``: ``reply`` is ``once``, ``always`` or ``reject``."""

    type: ClassVar[Literal["permission.replied"]] = "permission.replied"
    request_id: str
    session_id: str
    reply: str | None
    raw: Mapping[str, Any]


class QuestionAsked(_Record, frozen=True):
    """``question.asked``: each question is ``{question, header, options: [...]}``."""

    type: ClassVar[Literal["question.asked"]] = "question.asked"
    request_id: str
    session_id: str
    questions: tuple[Mapping[str, Any], ...]
    raw: Mapping[str, Any]


class QuestionReplied(_Record, frozen=True):
    """``question.replied``: one tuple of chosen labels per question."""

    type: ClassVar[Literal["question.replied"]] = "question.replied"
    request_id: str
    session_id: str
    answers: tuple[tuple[str, ...], ...]
    raw: Mapping[str, Any]


class QuestionRejected(_Record, frozen=True):
    """``question.rejected``: the user dismissed the questions."""

    type: ClassVar[Literal["question.rejected"]] = "question.rejected"
    request_id: str
    session_id: str
    raw: Mapping[str, Any]


class Todo(_Record, frozen=True):
    """One entry of a session's todo list: ``status`` and ``priority`` as the server
    says them (``pending``/``in_progress``/``completed``/``cancelled``,
    ``high``/``medium``/``low`` in 1.18.34), kept as given so a new value still shows."""

    content: str
    status: str
    priority: str


#: Bounds of a ``todo.updated`` the adapter accepts: far above a model's plan, low
#: enough that a hostile or broken server cannot make every host hold megabytes.
MAX_TODOS = 256
MAX_TODO_CONTENT = 16_384
_MAX_TODO_LABEL = 64


class TodoUpdated(_Record, frozen=True):
    """``todo.updated``: a session's whole todo list, sent by ``todowrite`` before the
    call runs (measured on 1.18.34); an empty list when the model clears it."""

    type: ClassVar[Literal["todo.updated"]] = "todo.updated"
    session_id: str
    todos: tuple[Todo, ...]
    raw: Mapping[str, Any]


class UnknownEvent(_Record, frozen=True):
    """Any type not modelled above (``session.diff``, new ones...).

    ``session_id`` is the session it names, if it names a valid one, so that
    it can still be routed.
    """

    type: str
    session_id: str | None
    raw: Mapping[str, Any]


NativeEvent: TypeAlias = (
    ServerConnected
    | ServerHeartbeat
    | SessionStatusChanged
    | SessionIdle
    | SessionErrored
    | SessionCreated
    | SessionUpdated
    | SessionDeleted
    | SessionCompacted
    | MessageUpdated
    | MessageRemoved
    | PartUpdated
    | PartDelta
    | PermissionAsked
    | PermissionReplied
    | QuestionAsked
    | QuestionReplied
    | QuestionRejected
    | TodoUpdated
    | UnknownEvent
)
"""Every record :func:`parse_native` returns; ``type`` tells them apart."""


def session_of(event: NativeEvent) -> str | None:
    """The session an event concerns, or ``None`` (server events, session-less errors)."""
    return event.session_id


# --------------------------------------------------------------------------- parsing


def parse_native(raw: object) -> NativeEvent:
    """One decoded ``GET /event`` object as its typed record.

    Raises :class:`~adapter.NativeEventError` (and nothing else) when ``raw``
    is not an event object, or is a known type whose fields cannot be trusted.
    """
    # `type(...) is dict` first everywhere here: decoded JSON is made of dicts, the
    # ABC check is slow, and this runs for every event of the stream (no `cast`
    # either: it is a function call).
    event = raw if type(raw) is dict else _event_object(raw)
    kind = event.get("type")
    if type(kind) is not str and not isinstance(kind, str):
        raise NativeEventError(None, "an event has no type")
    props = event.get("properties")
    parser = _PARSERS.get(kind)
    if parser is None:
        return UnknownEvent(kind, _any_session(props), event)
    if type(props) is not dict and not isinstance(props, Mapping):
        raise NativeEventError(kind, "no properties object")
    try:
        return parser(props, event)
    except NativeEventError:
        raise
    except _MALFORMED as exc:
        raise NativeEventError(kind, str(exc)[:200]) from None


def _event_object(raw: object) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise NativeEventError(None, "an event is not an object")
    return raw


# What untrusted JSON of the wrong shape can raise on its way through a parser.
_MALFORMED = (ValueError, TypeError, KeyError, AttributeError, OverflowError, RecursionError)

_Props = Mapping[str, Any]


def _any_session(props: object) -> str | None:
    """The session an event of an unknown type names: top level, then ``info``/``part``."""
    if type(props) is not dict and not isinstance(props, Mapping):
        return None
    sid = props.get("sessionID")
    if sid is None:
        for key in ("info", "part"):
            inner = props.get(key)
            if type(inner) is dict or isinstance(inner, Mapping):
                sid = inner.get("sessionID")
                if sid is None and key == "info":
                    sid = inner.get("id")
                break
    if sid is None:
        return None
    try:
        return checked_id("ses", sid)
    except ValueError:
        return None


def _obj(value: object, what: str) -> _Props:
    if type(value) is dict or isinstance(value, Mapping):
        return value
    raise ValueError(f"{what} is not an object")


def _opt_str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _opt_id(kind: str, value: object) -> str | None:
    return None if value is None else checked_id(kind, value)


def _count(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    if isinstance(value, float) and not math.isfinite(value):
        return 0
    return int(value)


def _amount(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    number = float(value)
    return number if math.isfinite(number) else 0.0


def _time(info: _Props, key: str) -> float | None:
    time = info.get("time")
    if type(time) is not dict and not isinstance(time, Mapping):
        return None
    value = time.get(key)
    if value is None:
        return None
    if type(value) is int or type(value) is float:
        return float(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"field 'time.{key}' is not a number")
    return float(value)


def message_usage(info: Mapping[str, Any]) -> Usage:
    """Tokens and cost of a stored assistant message's ``info`` (as ``MessageUpdated.usage``)."""
    return _usage(info)


def _usage(info: _Props) -> Usage:
    tokens = info.get("tokens")
    cost = info.get("cost")
    if not isinstance(tokens, Mapping):
        return _NO_USAGE if cost is None else Usage(cost=_amount(cost))
    cache = tokens.get("cache")
    cache = cache if isinstance(cache, Mapping) else {}
    return Usage(
        input=_count(tokens.get("input")),
        output=_count(tokens.get("output")),
        reasoning=_count(tokens.get("reasoning")),
        cache_read=_count(cache.get("read")),
        cache_write=_count(cache.get("write")),
        cost=_amount(cost),
    )


def _server_event(
    record: type[ServerConnected | ServerHeartbeat],
) -> Callable[[_Props, _Props], NativeEvent]:
    def parse(props: _Props, raw: _Props) -> NativeEvent:
        return record(raw)

    return parse


# `{"type": "busy"}` and `{"type": "idle"}` are most of a stream's statuses; the
# records are immutable, so one of each serves them all.
_PLAIN_STATUS: dict[object, SessionStatus] = {
    "busy": SessionStatus("busy"),
    "idle": SessionStatus("idle"),
}


def _status(props: _Props, raw: _Props) -> NativeEvent:
    session_id = checked_id("ses", props.get("sessionID"))
    status = props.get("status")
    plain = (
        _PLAIN_STATUS.get(status.get("type")) if type(status) is dict and len(status) == 1 else None
    )
    return SessionStatusChanged(session_id, plain or SessionStatus.parse(status), raw)


def _error(props: _Props, raw: _Props) -> NativeEvent:
    session_id = _opt_id("ses", props.get("sessionID"))
    return SessionErrored(session_id, MessageError.parse(props.get("error")), raw)


def _session_event(
    record: type[SessionCreated | SessionUpdated | SessionDeleted],
) -> Callable[[_Props, _Props], NativeEvent]:
    """The parser of a session lifecycle event, which differ only by their record."""

    def parse(props: _Props, raw: _Props) -> NativeEvent:
        info = _obj(props.get("info"), "session info")
        session_id = checked_id("ses", info.get("id"))
        parent_id = _opt_id("ses", info.get("parentID"))
        return record(session_id, parent_id, _opt_str(info.get("title")), info, raw)

    return parse


def _one_session_event(
    record: type[SessionIdle | SessionCompacted],
) -> Callable[[_Props, _Props], NativeEvent]:
    """The parser of an event that names one session, which differ only by their record."""

    def parse(props: _Props, raw: _Props) -> NativeEvent:
        return record(checked_id("ses", props.get("sessionID")), raw)

    return parse


def _message(props: _Props, raw: _Props) -> NativeEvent:
    info = _obj(props.get("info"), "message info")
    role = info.get("role")
    if role != "user" and role != "assistant":
        raise ValueError(f"unknown message role {role!r:.40}")
    return MessageUpdated(
        session_id=checked_id("ses", info.get("sessionID")),
        message_id=checked_id("msg", info.get("id")),
        role=role,
        parent_id=_opt_id("msg", info.get("parentID")),
        completed=_time(info, "completed"),
        error=None if (error := info.get("error")) is None else MessageError.parse(error),
        # A user message's `summary` is an object (its diffs); only `true` marks one.
        summary=info.get("summary") is True,
        finish=finish if type(finish := info.get("finish")) is str else _opt_str(finish),
        raw=raw,
    )


def _removed(props: _Props, raw: _Props) -> NativeEvent:
    return MessageRemoved(
        checked_id("ses", props.get("sessionID")), checked_id("msg", props.get("messageID")), raw
    )


def _part(props: _Props, raw: _Props) -> NativeEvent:
    part = Part.parse(props.get("part"))
    return PartUpdated(part.session_id, part.message_id, part, raw)


def _delta(props: _Props, raw: _Props) -> NativeEvent:
    name = props.get("field")
    delta = props.get("delta")
    if not isinstance(name, str) or not isinstance(delta, str):
        raise ValueError("fields 'field'/'delta' are not strings")
    return PartDelta(
        checked_id("ses", props.get("sessionID")),
        checked_id("msg", props.get("messageID")),
        checked_id("prt", props.get("partID")),
        name,
        delta,
        raw,
    )


def _array(value: object) -> list[Any]:
    """A descriptive array field's entries (none when it is no array): the caller keeps
    those of the shape it shows and drops the others, never the event."""
    return value if isinstance(value, list) else []


def _permission_asked(props: _Props, raw: _Props) -> NativeEvent:
    tool = props.get("tool")
    tool = tool if isinstance(tool, Mapping) else {}
    return PermissionAsked(
        request_id=checked_id("per", props.get("id")),
        session_id=checked_id("ses", props.get("sessionID")),
        permission=_opt_str(props.get("permission")),
        patterns=tuple(p for p in _array(props.get("patterns")) if isinstance(p, str)),
        tool_message_id=_opt_str(tool.get("messageID")),
        tool_call_id=_opt_str(tool.get("callID")),
        raw=raw,
    )


def _permission_replied(props: _Props, raw: _Props) -> NativeEvent:
    return PermissionReplied(
        checked_id("per", props.get("requestID")),
        checked_id("ses", props.get("sessionID")),
        _opt_str(props.get("reply")),
        raw,
    )


def _question_asked(props: _Props, raw: _Props) -> NativeEvent:
    return QuestionAsked(
        checked_id("que", props.get("id")),
        checked_id("ses", props.get("sessionID")),
        tuple(q for q in _array(props.get("questions")) if isinstance(q, Mapping)),
        raw,
    )


def _question_replied(props: _Props, raw: _Props) -> NativeEvent:
    return QuestionReplied(
        checked_id("que", props.get("requestID")),
        checked_id("ses", props.get("sessionID")),
        tuple(
            tuple(str(x) for x in a) for a in _array(props.get("answers")) if isinstance(a, list)
        ),
        raw,
    )


def _question_rejected(props: _Props, raw: _Props) -> NativeEvent:
    return QuestionRejected(
        checked_id("que", props.get("requestID")), checked_id("ses", props.get("sessionID")), raw
    )


def _todo_updated(props: _Props, raw: _Props) -> NativeEvent:
    todos = props.get("todos")
    if not isinstance(todos, list):
        raise ValueError("field 'todos' is not a list")
    if len(todos) > MAX_TODOS:
        raise ValueError(f"more than {MAX_TODOS} todos")
    return TodoUpdated(
        checked_id("ses", props.get("sessionID")), tuple(_todo(t) for t in todos), raw
    )


def _todo(value: object) -> Todo:
    todo = _obj(value, "a todo")
    content = todo.get("content")
    status = todo.get("status")
    priority = todo.get("priority")
    if not isinstance(content, str) or not isinstance(status, str):
        raise ValueError("a todo's content/status is not a string")
    if not isinstance(priority, str):
        raise ValueError("a todo's priority is not a string")
    if len(content) > MAX_TODO_CONTENT:
        raise ValueError(f"a todo's content is over {MAX_TODO_CONTENT} characters")
    if len(status) > _MAX_TODO_LABEL or len(priority) > _MAX_TODO_LABEL:
        raise ValueError("a todo's status/priority is too long")
    return Todo(content, status, priority)


_PARSERS: dict[str, Callable[[_Props, _Props], NativeEvent]] = {
    "server.connected": _server_event(ServerConnected),
    "server.heartbeat": _server_event(ServerHeartbeat),
    "session.status": _status,
    "session.idle": _one_session_event(SessionIdle),
    "session.error": _error,
    "session.created": _session_event(SessionCreated),
    "session.updated": _session_event(SessionUpdated),
    "session.deleted": _session_event(SessionDeleted),
    "session.compacted": _one_session_event(SessionCompacted),
    "message.updated": _message,
    "message.removed": _removed,
    "message.part.updated": _part,
    "message.part.delta": _delta,
    "permission.asked": _permission_asked,
    "permission.replied": _permission_replied,
    "question.asked": _question_asked,
    "question.replied": _question_replied,
    "question.rejected": _question_rejected,
    "todo.updated": _todo_updated,
}
