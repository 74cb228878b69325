"""Partial results of an interrupted turn, across a whole session tree.

Why this exists: when a user stops a turn, the work the turn already did is
real. Tool calls that finished have results, the model streamed some text,
subagents ran their own tools. If the stop simply discards all of that, the
next turn redoes the finished work (or, worse, redoes side effects). OpenCode
keeps most of it (finished tool parts stay ``completed``, streamed text is
stored, a killed ``bash`` ends ``completed`` with a ``User aborted the
command`` note), but a host only sees it if something collects it. This
module is that something:

* :class:`PartialCollector` is fed the raw event stream (``GET /event``)
  while a turn runs and, after a stop, the server's stored messages. It keeps
  a bounded picture of every session of the turn's tree.
* :meth:`PartialCollector.result` turns that picture into an immutable
  :class:`PartialResult`: every tool call with how it ended, the text
  produced so far, grouped per session, with links from ``task`` calls to
  their subagent's own results.
* :meth:`PartialResult.to_prompt` renders a short plain-text summary a host
  can hand to the model in the next turn.

Memory is bounded at all times, not just in the result: every stored string
is cut at ``max_output_bytes``, all stored strings together never exceed
``max_total_bytes`` (later content is then kept as a size marker only), and
at most ``max_calls`` tool calls (and as many text parts, messages and
sessions) are tracked. Whatever was cut is flagged ``truncated``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from ._exceptions import InvalidInputError
from ._ids import is_session_id, validate_id
from ._logging import get_logger
from ._models import Message, Part, ToolState

__all__ = [
    "PartialCollector",
    "PartialResult",
    "SessionPartial",
    "ToolCallResult",
]

_log = get_logger("adapter.partial")

CallStatus = Literal["completed", "failed", "interrupted"]
_CALL_STATUSES: tuple[CallStatus, ...] = ("completed", "failed", "interrupted")

#: The note OpenCode's ``bash`` tool appends when the abort killed its process;
#: the part still ends ``completed``, so this text is the only sign.
BASH_ABORT_MARKER = "User aborted the command"

# Error texts OpenCode (and the AI SDK below it) gives a tool that was stopped
# rather than one that failed on its own. Phrases match anywhere in the error;
# the bare words only when they are the whole error text.
_ABORT_PHRASES = (
    "tool execution aborted",
    "tool execution interrupted",
    "task cancelled",
    "task canceled",
    "operation was aborted",
    "aborterror",
    "messageabortederror",
)
_ABORT_WORDS = frozenset({"aborted", "interrupted", "cancelled", "canceled"})
_MESSAGE_ABORTED = "MessageAbortedError"

_DEFAULT_MAX_OUTPUT = 64 * 1024
_TITLE_CAP = 1024
_NAME_CAP = 256
_INPUT_MAX_KEYS = 64


def _marker(dropped: int) -> str:
    return f"\n…[truncated {dropped} bytes]"


def _utf8(value: str) -> bytes:
    # "replace" because JSON may carry lone surrogates, which strict UTF-8
    # refuses; a replaced character is better than a dropped event.
    return value.encode("utf-8", "replace")


def _cut_utf8(data: bytes, limit: int) -> bytes:
    """The longest prefix of ``data`` of at most ``limit`` bytes that ends on a character."""
    if len(data) <= limit:
        return data
    cut = max(limit, 0)
    # data[cut] is the first byte dropped; if it continues a character, that
    # character straddles the cut and goes too.
    while cut > 0 and (data[cut] & 0xC0) == 0x80:
        cut -= 1
    return data[:cut]


# --------------------------------------------------------------------------
# Public result types
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolCallResult:
    """One tool call of the turn and how it ended.

    ``status`` is what a host needs to decide what to redo: ``completed``
    calls have a usable ``output``; ``interrupted`` calls were stopped by the
    abort (their ``output`` is whatever they printed before, if anything);
    ``failed`` calls ended with an error of their own. ``child_session_id``
    links a ``task`` call to the subagent session it ran (see
    :meth:`PartialResult.child`).
    """

    session_id: str
    call_id: str
    tool: str
    status: CallStatus
    input: Mapping[str, Any]
    output: str | None
    error: str | None
    title: str | None
    child_session_id: str | None
    truncated: bool

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable copy (``input`` is already JSON-safe)."""
        return {
            "session_id": self.session_id,
            "call_id": self.call_id,
            "tool": self.tool,
            "status": self.status,
            "input": dict(self.input),
            "output": self.output,
            "error": self.error,
            "title": self.title,
            "child_session_id": self.child_session_id,
            "truncated": self.truncated,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolCallResult:
        """Inverse of :meth:`to_dict`; raises :class:`ValueError` on a foreign shape."""
        status = data.get("status")
        if status not in _CALL_STATUSES:
            raise ValueError(f"unknown call status {status!r:.40}")
        tool_input = data.get("input")
        if not isinstance(tool_input, Mapping):
            raise ValueError("field 'input' is not an object")
        return cls(
            session_id=_req_str(data, "session_id"),
            call_id=_req_str(data, "call_id"),
            tool=_req_str(data, "tool"),
            status=cast(CallStatus, status),
            input=dict(cast(Mapping[str, Any], tool_input)),
            output=_opt_str(data, "output"),
            error=_opt_str(data, "error"),
            title=_opt_str(data, "title"),
            child_session_id=_opt_str(data, "child_session_id"),
            truncated=bool(data.get("truncated", False)),
        )


@dataclass(frozen=True, slots=True)
class SessionPartial:
    """What one session of the tree produced in the turn.

    ``text`` is the session's assistant text (its text parts in order, joined
    by newlines); ``reasoning`` is kept apart because it is not an answer and
    is left out of :meth:`PartialResult.to_prompt`.
    """

    session_id: str
    parent_id: str | None
    text: str
    tool_calls: tuple[ToolCallResult, ...]
    truncated: bool
    reasoning: str = ""


@dataclass(frozen=True, slots=True)
class PartialResult:
    """Everything an interrupted turn produced, in every session of its tree.

    ``tool_calls`` is depth-first: the root's calls in the order the model
    made them (message order, then part order, which is also id order), each
    ``task`` call immediately followed by its subagent's calls (recursively).
    Sessions that joined the tree without a ``task`` call pointing at them
    (children created through the API) follow their parent's calls, in the
    order they were discovered. ``sessions`` uses the same order, root first.
    """

    turn_id: str | None
    root_session_id: str
    text: str
    tool_calls: tuple[ToolCallResult, ...]
    sessions: Mapping[str, SessionPartial]
    truncated: bool
    max_output_bytes: int

    @classmethod
    def empty(
        cls,
        root_session_id: str,
        turn_id: str | None = None,
        *,
        max_output_bytes: int = _DEFAULT_MAX_OUTPUT,
    ) -> PartialResult:
        """The result of a turn that produced nothing (or could not be observed)."""
        root = SessionPartial(root_session_id, None, "", (), False)
        return cls(
            turn_id=turn_id,
            root_session_id=root_session_id,
            text="",
            tool_calls=(),
            sessions={root_session_id: root},
            truncated=False,
            max_output_bytes=max_output_bytes,
        )

    def child(self, call: ToolCallResult) -> SessionPartial | None:
        """The subagent session a ``task`` call ran, if it is part of this result."""
        if call.child_session_id is None:
            return None
        return self.sessions.get(call.child_session_id)

    @property
    def completed_calls(self) -> tuple[ToolCallResult, ...]:
        """Calls whose results can be reused as they are."""
        return tuple(c for c in self.tool_calls if c.status == "completed")

    @property
    def interrupted_calls(self) -> tuple[ToolCallResult, ...]:
        """Calls the stop cut short; they may need to be run again."""
        return tuple(c for c in self.tool_calls if c.status == "interrupted")

    @property
    def failed_calls(self) -> tuple[ToolCallResult, ...]:
        """Calls that ended with an error of their own, before or regardless of the stop."""
        return tuple(c for c in self.tool_calls if c.status == "failed")

    @property
    def is_empty(self) -> bool:
        """True when the turn produced neither text nor tool calls anywhere in the tree."""
        return not self.tool_calls and not any(s.text for s in self.sessions.values())

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable form; :meth:`from_dict` reads it back.

        Each call appears once, in ``tool_calls``; a session lists its calls
        as ``tool_call_indexes`` into that list, which keeps the document
        half the size it would be with the calls repeated. (So every call of
        a session must also be in ``tool_calls``, as it is in a collected
        result; otherwise :class:`ValueError` is raised.)
        """
        index = {id(call): i for i, call in enumerate(self.tool_calls)}

        def position(call: ToolCallResult) -> int:
            found = index.get(id(call))
            return self.tool_calls.index(call) if found is None else found

        sessions: dict[str, Any] = {}
        for session_id, partial in self.sessions.items():
            sessions[session_id] = {
                "session_id": partial.session_id,
                "parent_id": partial.parent_id,
                "text": partial.text,
                "reasoning": partial.reasoning,
                "tool_call_indexes": [position(c) for c in partial.tool_calls],
                "truncated": partial.truncated,
            }
        return {
            "turn_id": self.turn_id,
            "root_session_id": self.root_session_id,
            "text": self.text,
            "tool_calls": [c.to_dict() for c in self.tool_calls],
            "sessions": sessions,
            "truncated": self.truncated,
            "max_output_bytes": self.max_output_bytes,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PartialResult:
        """Inverse of :meth:`to_dict`; raises :class:`ValueError` on a foreign shape."""
        raw_calls = data.get("tool_calls")
        raw_sessions = data.get("sessions")
        if not isinstance(raw_calls, list) or not isinstance(raw_sessions, Mapping):
            raise ValueError("fields 'tool_calls'/'sessions' have the wrong type")
        calls = tuple(ToolCallResult.from_dict(_as_obj(c)) for c in raw_calls)
        sessions: dict[str, SessionPartial] = {}
        for key, raw in cast(Mapping[str, Any], raw_sessions).items():
            obj = _as_obj(raw)
            indexes = obj.get("tool_call_indexes", [])
            if not isinstance(indexes, list) or not all(
                isinstance(i, int) and 0 <= i < len(calls) for i in indexes
            ):
                raise ValueError("field 'tool_call_indexes' is not a list of call indexes")
            sessions[str(key)] = SessionPartial(
                session_id=_req_str(obj, "session_id"),
                parent_id=_opt_str(obj, "parent_id"),
                text=_req_str(obj, "text"),
                tool_calls=tuple(calls[i] for i in indexes),
                truncated=bool(obj.get("truncated", False)),
                reasoning=_opt_str(obj, "reasoning") or "",
            )
        limit = data.get("max_output_bytes")
        if not isinstance(limit, int) or isinstance(limit, bool):
            raise ValueError("field 'max_output_bytes' is not an integer")
        return cls(
            turn_id=_opt_str(data, "turn_id"),
            root_session_id=_req_str(data, "root_session_id"),
            text=_req_str(data, "text"),
            tool_calls=calls,
            sessions=sessions,
            truncated=bool(data.get("truncated", False)),
            max_output_bytes=limit,
        )

    def to_prompt(self, max_chars: int = 8000) -> str:
        """A plain-text summary of the turn, at most ``max_chars`` characters.

        Meant to be put into the next turn so the model reuses finished work
        instead of repeating it: per session (root first, then each subagent
        under the ``task`` call that started it) the calls that finished with
        their shortened results, the calls that were interrupted (with what
        they printed so far), failed calls, and the text written so far.
        Every call is listed even when outputs must be shortened to fit; the
        space left is shared fairly between outputs and texts.
        """
        if max_chars < 0:
            raise InvalidInputError("max_chars must not be negative")
        return _render_prompt(self, max_chars)


def _as_obj(value: object) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValueError("expected an object")
    return cast(Mapping[str, Any], value)


def _req_str(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise ValueError(f"field {key!r} is not a string")
    return value


def _opt_str(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"field {key!r} is not a string")
    return value


# --------------------------------------------------------------------------
# to_prompt
# --------------------------------------------------------------------------

_PROMPT_HEAD = (
    "The previous turn was stopped before it finished. Below is what it had "
    "already done. Reuse finished results instead of running those calls again; "
    "re-run interrupted calls only if their result is still needed."
)
_PROMPT_CUT = "\n…[summary truncated]"
_INPUT_PREVIEW = 160


def _one_line(value: str, limit: int) -> str:
    flat = " ".join(value.split())
    return flat if len(flat) <= limit else flat[: max(limit - 1, 0)] + "…"


def _input_preview(call: ToolCallResult) -> str:
    try:
        text = json.dumps(dict(call.input), ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = "{…}"
    return _one_line(text, _INPUT_PREVIEW)


def _shorten(value: str, limit: int) -> str:
    """Head and tail of ``value`` within ``limit`` characters: tails of tool output matter."""
    if len(value) <= limit:
        return value
    if limit <= 0:
        return ""
    note = f" …[{len(value) - limit} chars omitted]… "
    room = limit - len(note)
    if room < 8:
        return value[:limit]
    head = (room * 2) // 3
    tail = room - head
    return value[:head] + note + value[len(value) - tail :]


def _fair_shares(sizes: Sequence[int], budget: int) -> list[int]:
    """Water-filling: small items get all they need, the rest share what is left evenly."""
    shares = [0] * len(sizes)
    order = sorted(range(len(sizes)), key=lambda i: sizes[i])
    left = max(budget, 0)
    for position, i in enumerate(order):
        fair = left // (len(order) - position)
        shares[i] = min(sizes[i], fair)
        left -= shares[i]
    return shares


def _render_prompt(result: PartialResult, max_chars: int) -> str:
    # Skeleton lines are fixed; an int stands for a body (an output, an error
    # or a text) whose length is decided once the skeleton's size is known.
    lines: list[str | int] = []
    bodies: list[tuple[str, str]] = []  # (label, full text)

    def body(label: str, text: str) -> None:
        lines.append(len(bodies))
        bodies.append((label, text.strip()))

    task_of: dict[str, ToolCallResult] = {
        c.child_session_id: c for c in result.tool_calls if c.child_session_id is not None
    }
    lines.append(_PROMPT_HEAD)
    if result.is_empty:
        lines.append("Nothing had been produced yet.")
        return _hard_cut("\n".join(cast(list[str], lines)), max_chars)
    for session in result.sessions.values():
        if session.session_id == result.root_session_id:
            header = f"Main session {session.session_id}:"
        else:
            parent = task_of.get(session.session_id)
            what = ""
            if parent is not None:
                description = parent.input.get("description")
                if isinstance(description, str) and description:
                    what = f' "{_one_line(description, 80)}"'
            header = f"Subagent session {session.session_id}{what} (parent {session.parent_id}):"
        if not session.tool_calls and not session.text:
            lines.append("")
            lines.append(header + " nothing yet.")
            continue
        lines.append("")
        lines.append(header)
        groups: list[tuple[str, CallStatus]] = [
            ("Finished tool calls (results can be reused):", "completed"),
            ("Interrupted tool calls (did not finish):", "interrupted"),
            ("Failed tool calls:", "failed"),
        ]
        for title, status in groups:
            calls = [c for c in session.tool_calls if c.status == status]
            if not calls:
                continue
            lines.append(title)
            for call in calls:
                link = f" -> subagent {call.child_session_id}" if call.child_session_id else ""
                lines.append(f"- {call.tool} {_input_preview(call)}{link}")
                if status == "failed" and call.error:
                    body("  error: ", call.error)
                elif call.output and call.output.strip():
                    label = "result" if status == "completed" else "output so far"
                    body(f"  {label}: ", call.output)
        if session.text:
            body("Text written so far: ", session.text)

    skeleton = sum(len(line) + 1 for line in lines if isinstance(line, str))
    skeleton += sum(len(label) + 1 for label, _ in bodies)
    shares = _fair_shares([len(text) for _, text in bodies], max_chars - skeleton)
    rendered: list[str] = []
    for line in lines:
        if isinstance(line, str):
            rendered.append(line)
        else:
            label, text = bodies[line]
            rendered.append(label + _shorten(text, shares[line]))
    return _hard_cut("\n".join(rendered), max_chars)


def _hard_cut(text: str, max_chars: int) -> str:
    """Last resort when even the list of calls does not fit: cut, and say so."""
    if len(text) <= max_chars:
        return text
    if max_chars <= len(_PROMPT_CUT):
        return text[:max_chars]
    return text[: max_chars - len(_PROMPT_CUT)] + _PROMPT_CUT


# --------------------------------------------------------------------------
# Collector internals
# --------------------------------------------------------------------------


@dataclass(slots=True)
class _Slot:
    """One stored string: the kept UTF-8 prefix and how many bytes were dropped."""

    data: bytearray = field(default_factory=bytearray)
    dropped: int = 0

    @property
    def full_size(self) -> int:
        return len(self.data) + self.dropped

    def render(self) -> str:
        text = self.data.decode("utf-8", "replace")
        return text + _marker(self.dropped) if self.dropped else text


@dataclass(slots=True)
class _TextPart:
    kind: Literal["text", "reasoning"]
    body: _Slot
    # Assistant text parts carry `time`; user prompt parts do not. Used only
    # when the message's role is unknown (its `message.updated` was missed).
    assistant_hint: bool


@dataclass(slots=True)
class _ToolPart:
    tool: str
    call_id: str
    status: str = "pending"
    input: Mapping[str, Any] = field(default_factory=dict)
    input_bytes: int = 0
    input_truncated: bool = False
    output: _Slot | None = None
    error: _Slot | None = None
    title: _Slot | None = None
    interrupted_flag: bool = False
    bash_aborted: bool = False
    child_session_id: str | None = None


@dataclass(slots=True)
class _MessageState:
    role: str | None = None
    parent_id: str | None = None
    assistant_hint: bool = False
    parts: dict[str, _TextPart | _ToolPart] = field(default_factory=dict)


@dataclass(slots=True)
class _SessionState:
    parent_id: str | None
    messages: dict[str, _MessageState] = field(default_factory=dict)
    # A message of this session ended with MessageAbortedError: its run was cut off.
    aborted: bool = False


def _join_bounded(slots: Sequence[_Slot], limit: int) -> tuple[str, bool]:
    """The slots' texts joined by newlines, at most ``limit`` bytes of content.

    Markers are not content: a part cut on its own keeps its marker inline,
    and where the joined text runs out of room, one marker counts every byte
    left out from there on.
    """
    pieces: list[str] = []
    room = limit
    cut = False
    for index, slot in enumerate(slots):
        data = (b"\n" if index else b"") + bytes(slot.data)
        if len(data) <= room:
            room -= len(data)
            pieces.append(data.decode("utf-8", "replace"))
            if slot.dropped:
                pieces.append(_marker(slot.dropped))
                cut = True
            continue
        kept = _cut_utf8(data, room)
        rest = sum(s.full_size + 1 for s in slots[index + 1 :])
        pieces.append(kept.decode("utf-8", "replace"))
        pieces.append(_marker(len(data) - len(kept) + slot.dropped + rest))
        return "".join(pieces), True
    return "".join(pieces), cut


class _Skip(ValueError):
    """An event (or part) that cannot be trusted; logged at debug and ignored."""


# What untrusted JSON of the wrong shape can raise on its way through here.
_MALFORMED = (ValueError, TypeError, KeyError, AttributeError, OverflowError, RecursionError)


def _is_abort_error(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered.rstrip(".!") in _ABORT_WORDS:
        return True
    return any(phrase in lowered for phrase in _ABORT_PHRASES)


def _classify(part: _ToolPart, *, child_aborted: bool = False) -> CallStatus:
    """How a tool call ended, from the server's state and OpenCode's abort signs.

    ``child_aborted``: the subagent session of a ``task`` call was aborted. OpenCode
    1.18 then ends the call ``error`` ("Task cancelled"); 1.15.13 ends it
    ``completed`` with the subagent's text so far as its result (measured), which is
    no finished result either.
    """
    if part.status in ("pending", "running"):
        # Still going when the result was taken: the stop cut it off.
        return "interrupted"
    if part.interrupted_flag:
        return "interrupted"
    if part.status == "error":
        if part.error is not None and _is_abort_error(part.error.data.decode("utf-8", "replace")):
            return "interrupted"
        return "failed"
    return "interrupted" if part.bash_aborted or child_aborted else "completed"


class PartialCollector:
    """Collects what a turn produced in a session tree, from events and stored messages.

    Feed it every raw event of the connection (:meth:`observe`); it keeps
    only what concerns the tree rooted at ``root_session_id``. After a stop,
    give it the server's stored messages of each session (:meth:`reconcile`),
    which are the truth for parts the stream missed. :meth:`result` can be
    called at any time and returns an immutable snapshot.

    Which messages belong to the turn: in the root session, assistant
    messages answering one of the turn's user messages (``parentID``), or
    whose id sorts at or after the first of them (OpenCode ids sort by time).
    With no turn message ids given, every root message observed counts. In
    any other session of the tree (subagents started during the turn) every
    message counts.

    Bounds, so a runaway tool or a hostile stream cannot exhaust memory:
    each stored output, error, text part and tool input is cut at
    ``max_output_bytes`` (UTF-8 safe, with a ``…[truncated N bytes]``
    marker); all of them together never exceed ``max_total_bytes`` (default
    16 times ``max_output_bytes``), after which new content is kept as a marker
    only; a replaced snapshot (a running ``bash`` call's growing output)
    gives its bytes back. At most ``max_calls`` tool calls are tracked, and
    as many text parts, messages and sessions; what does not fit makes the
    result ``truncated``.

    Not thread-safe; meant to be driven from one asyncio task (the event
    loop's consumer). Nothing it does blocks or awaits.
    """

    def __init__(
        self,
        root_session_id: str,
        *,
        turn_message_ids: Iterable[str] = (),
        max_output_bytes: int = _DEFAULT_MAX_OUTPUT,
        max_total_bytes: int | None = None,
        max_calls: int = 10_000,
    ) -> None:
        try:
            validate_id("ses", root_session_id)
        except ValueError as exc:
            raise InvalidInputError(str(exc)) from None
        if max_output_bytes < 1:
            raise InvalidInputError("max_output_bytes must be at least 1")
        if max_total_bytes is None:
            max_total_bytes = 16 * max_output_bytes
        if max_total_bytes < 0:
            raise InvalidInputError("max_total_bytes must not be negative")
        if max_calls < 1:
            raise InvalidInputError("max_calls must be at least 1")
        self._root = root_session_id
        self._max_output = max_output_bytes
        self._max_total = max_total_bytes
        self._max_calls = max_calls
        self._used = 0
        self._overflow = False
        self._tool_count = 0
        self._text_count = 0
        self._message_count = 0
        self._sessions: dict[str, _SessionState] = {root_session_id: _SessionState(None)}
        self._turn_ids: set[str] = set()
        self._turn_start: str | None = None
        for message_id in turn_message_ids:
            self.add_turn_message(message_id)

    # -- configuration -----------------------------------------------------

    @property
    def root_session_id(self) -> str:
        return self._root

    @property
    def held_bytes(self) -> int:
        """Bytes of output, text and input currently stored (never above ``max_total_bytes``)."""
        return self._used

    @property
    def session_ids(self) -> tuple[str, ...]:
        """The sessions of the tree known so far, in discovery order (root first)."""
        return tuple(self._sessions)

    def add_session(self, session_id: str, parent_id: str | None) -> None:
        """Make ``session_id`` a member of the tree (its events are then collected).

        Called automatically for children announced by ``session.created``
        with a parent in the tree, and for the child of a running ``task``
        call; a host calls it for children found otherwise (the stop walk).
        Adding a known session again only fills in a missing parent.
        """
        try:
            validate_id("ses", session_id)
            if parent_id is not None:
                validate_id("ses", parent_id)
        except ValueError as exc:
            raise InvalidInputError(str(exc)) from None
        self._add_session(session_id, parent_id)

    def add_turn_message(self, message_id: str) -> None:
        """Record a user message id of this turn (the prompt, or a steer sent during it)."""
        try:
            validate_id("msg", message_id)
        except ValueError as exc:
            raise InvalidInputError(str(exc)) from None
        if message_id in self._turn_ids:
            return
        if len(self._turn_ids) >= self._max_calls:
            self._overflow = True
            _log.debug("partial.turn_ids_full", message_id=message_id)
            return
        self._turn_ids.add(message_id)
        if self._turn_start is None or message_id < self._turn_start:
            self._turn_start = message_id

    def _add_session(self, session_id: str, parent_id: str | None) -> bool:
        known = self._sessions.get(session_id)
        if known is not None:
            if known.parent_id is None and session_id != self._root and parent_id != session_id:
                known.parent_id = parent_id
            return True
        if len(self._sessions) > self._max_calls:
            self._overflow = True
            _log.debug("partial.sessions_full", session_id=session_id)
            return False
        self._sessions[session_id] = _SessionState(parent_id)
        return True

    # -- events ------------------------------------------------------------

    def observe(self, event: Mapping[str, Any]) -> None:
        """Take one raw event (``{"id", "type", "properties"}``) of the stream.

        Events of other sessions and of other types are ignored. Malformed
        events are logged at debug level and skipped: a bad event must not
        cost the results of a turn.
        """
        try:
            if not isinstance(event, Mapping):
                raise _Skip("event is not an object")
            kind = event.get("type")
            props = event.get("properties")
            if not isinstance(kind, str):
                raise _Skip("event has no type")
            if kind not in _HANDLED:
                return
            if not isinstance(props, Mapping):
                raise _Skip("event has no properties")
            props = cast(Mapping[str, Any], props)
            if kind == "message.part.updated":
                self._on_part(props)
            elif kind == "message.part.delta":
                self._on_delta(props)
            elif kind == "message.updated":
                self._on_message(props)
            else:
                self._on_session_created(props)
        except _MALFORMED as exc:
            # Every update is validated before it changes anything, or leaves
            # the byte accounting consistent when it fails half-way.
            event_type = event.get("type") if isinstance(event, Mapping) else None
            _log.debug("partial.event_skipped", type=str(event_type)[:80], reason=str(exc)[:200])

    def _on_session_created(self, props: Mapping[str, Any]) -> None:
        info = props.get("info")
        if not isinstance(info, Mapping):
            raise _Skip("session has no info")
        parent = info.get("parentID")
        if parent is None or parent not in self._sessions:
            return
        self._add_session(validate_id("ses", info.get("id")), validate_id("ses", parent))

    def _on_message(self, props: Mapping[str, Any]) -> None:
        info = props.get("info")
        if not isinstance(info, Mapping):
            raise _Skip("message has no info")
        session_id = info.get("sessionID")
        if session_id not in self._sessions:
            return
        error = info.get("error")
        if isinstance(error, Mapping) and error.get("name") == _MESSAGE_ABORTED:
            self._sessions[cast(str, session_id)].aborted = True
        message_id = validate_id("msg", info.get("id"))
        role = info.get("role")
        parent = info.get("parentID")
        message = self._message(cast(str, session_id), message_id)
        if message is None:
            return
        if role in ("user", "assistant"):
            message.role = role
        if isinstance(parent, str) and len(parent) <= _NAME_CAP:
            message.parent_id = parent

    def _on_part(self, props: Mapping[str, Any]) -> None:
        raw = props.get("part")
        if not isinstance(raw, Mapping) or raw.get("sessionID") not in self._sessions:
            return
        self._apply_part(Part.parse(raw), from_server=False)

    def _on_delta(self, props: Mapping[str, Any]) -> None:
        session_id = props.get("sessionID")
        if session_id not in self._sessions:
            return
        if props.get("field") != "text":
            return
        delta = props.get("delta")
        if not isinstance(delta, str):
            raise _Skip("delta is not a string")
        session = self._sessions[cast(str, session_id)]
        message = session.messages.get(cast(str, props.get("messageID")))
        part = None if message is None else message.parts.get(cast(str, props.get("partID")))
        if not isinstance(part, _TextPart):
            # Without the part's first snapshot we do not know whether it is
            # text or reasoning; reconcile() fills it in from the server.
            raise _Skip("delta for an unknown text part")
        part.assistant_hint = True
        self._append(part.body, delta)

    # -- stored messages -----------------------------------------------------

    def reconcile(self, session_id: str, messages: Sequence[Message]) -> None:
        """Merge the server's stored messages of one session of the tree.

        After a stop, ``GET /session/{id}/message`` is the truth for parts
        that finished: the server's snapshot of a part replaces ours, except
        that streamed text we hold is kept when the server has less of it.
        Parts the stream never showed are added; ``task`` parts found here
        add their child sessions to the tree (reconcile those next). A
        session that is not in the tree is ignored (add it first).
        """
        if session_id not in self._sessions:
            _log.debug("partial.reconcile_unknown_session", session_id=str(session_id)[:80])
            return
        for message in messages:
            info = message.info
            if info.session_id != session_id:
                _log.debug("partial.reconcile_foreign_message", message_id=info.id)
                continue
            parent = info.parent_id if info.parent_id and len(info.parent_id) <= _NAME_CAP else None
            if info.error is not None and info.error.name == _MESSAGE_ABORTED:
                self._sessions[session_id].aborted = True
            if not self._wanted(session_id, info.id, info.role, parent):
                # Earlier turns of the root, and user prompts: never part of
                # the result, so they must not use up the byte budget.
                continue
            state = self._message(session_id, info.id)
            if state is None:
                continue
            state.role = info.role
            state.parent_id = parent or state.parent_id
            for part in message.parts:
                if part.session_id != session_id or part.message_id != info.id:
                    continue
                try:
                    self._apply_part(part, from_server=True)
                except _MALFORMED as exc:
                    _log.debug("partial.part_skipped", part_id=part.id, reason=str(exc)[:200])

    # -- shared part handling --------------------------------------------------

    def _message(self, session_id: str, message_id: str) -> _MessageState | None:
        session = self._sessions[session_id]
        message = session.messages.get(message_id)
        if message is not None:
            return message
        if self._message_count >= self._max_calls:
            self._overflow = True
            return None
        self._message_count += 1
        message = session.messages[message_id] = _MessageState()
        return message

    def _wanted(
        self, session_id: str, message_id: str, role: str | None, parent: str | None
    ) -> bool:
        """Whether a message's parts can be part of the result, as far as known yet.

        Unknown roles and parents are given the benefit of the doubt; the
        final decision is :meth:`_in_turn`'s, when the result is taken.
        """
        if role == "user" or message_id in self._turn_ids:
            return False
        if role is None or session_id != self._root or self._turn_start is None:
            return True
        return (parent is not None and parent in self._turn_ids) or message_id >= self._turn_start

    def _apply_part(self, part: Part, *, from_server: bool) -> None:
        if part.type in ("text", "reasoning") and (
            part.raw.get("ignored") is True or part.text is None
        ):
            return
        if part.type == "tool" and part.state is None:
            raise _Skip("tool part without state")
        message = self._message(part.session_id, part.message_id)
        if message is None:
            return
        if part.type not in ("text", "reasoning"):
            # tool, step-start, step-finish, patch...: only assistant messages have them.
            message.assistant_hint = True
        if not self._wanted(part.session_id, part.message_id, message.role, message.parent_id):
            return
        if part.type in ("text", "reasoning"):
            self._apply_text(message, part)
        elif part.type == "tool" and part.state is not None:
            self._apply_tool(message, part, part.state, from_server=from_server)

    def _apply_text(self, message: _MessageState, part: Part) -> None:
        assert part.text is not None
        existing = message.parts.get(part.id)
        if existing is None:
            if self._text_count >= self._max_calls:
                self._overflow = True
                return
            self._text_count += 1
            kind: Literal["text", "reasoning"] = "text" if part.type == "text" else "reasoning"
            existing = message.parts[part.id] = _TextPart(kind, _Slot(), False)
        if not isinstance(existing, _TextPart):
            raise _Skip("part changed its type")
        if isinstance(part.raw.get("time"), Mapping):
            existing.assistant_hint = True
        # A snapshot replaces what we have unless it holds less: the server
        # may store a shorter text than the deltas we already streamed.
        if len(_utf8(part.text)) >= existing.body.full_size:
            self._store(existing.body, part.text, self._max_output)

    def _apply_tool(
        self, message: _MessageState, part: Part, state: ToolState, *, from_server: bool
    ) -> None:
        existing = message.parts.get(part.id)
        if existing is None:
            if self._tool_count >= self._max_calls:
                self._overflow = True
                _log.debug("partial.calls_full", part_id=part.id)
                return
            self._tool_count += 1
            existing = message.parts[part.id] = _ToolPart(
                tool=(part.tool or "unknown")[:_NAME_CAP],
                call_id=(part.call_id or part.id)[:_NAME_CAP],
            )
        if not isinstance(existing, _ToolPart):
            raise _Skip("part changed its type")
        terminal = existing.status in ("completed", "error")
        if terminal and state.status in ("pending", "running") and not from_server:
            # A late snapshot of an earlier state must not undo the end.
            return
        existing.status = state.status
        if state.input:
            self._store_input(existing, state.input)
        metadata = state.metadata
        if metadata.get("interrupted") is True:
            existing.interrupted_flag = True
        elif state.status in ("completed", "error"):
            existing.interrupted_flag = False
        output = state.output if state.status == "completed" else None
        if output is None:
            streamed = metadata.get("output")
            output = streamed if isinstance(streamed, str) else None
        if output is not None:
            existing.bash_aborted = BASH_ABORT_MARKER in output
            existing.output = existing.output or _Slot()
            self._store(existing.output, output, self._max_output)
        if state.status == "error":
            existing.error = existing.error or _Slot()
            self._store(existing.error, state.error or "error", self._max_output)
        elif existing.error is not None:
            self._release(existing.error)
            existing.error = None
        if state.title is not None:
            existing.title = existing.title or _Slot()
            self._store(existing.title, state.title, min(_TITLE_CAP, self._max_output))
        child = metadata.get("sessionId")
        if part.tool == "task" and is_session_id(child) and child != part.session_id:
            existing.child_session_id = cast(str, child)
            self._add_session(cast(str, child), part.session_id)

    # -- bounded storage ---------------------------------------------------------

    def _room(self, cap: int, already: int = 0) -> int:
        return max(0, min(cap - already, self._max_total - self._used))

    def _release(self, slot: _Slot) -> None:
        self._used -= len(slot.data)
        slot.data = bytearray()
        slot.dropped = 0

    def _store(self, slot: _Slot, value: str, cap: int) -> None:
        """Replace a slot's content; the old content's bytes are given back first."""
        self._release(slot)
        data = _utf8(value)
        kept = _cut_utf8(data, self._room(cap))
        slot.data = bytearray(kept)
        slot.dropped = len(data) - len(kept)
        self._used += len(kept)

    def _append(self, slot: _Slot, value: str) -> None:
        data = _utf8(value)
        if slot.dropped:
            # Once cut, the stored text is a prefix; later text cannot follow it.
            slot.dropped += len(data)
            return
        kept = _cut_utf8(data, self._room(self._max_output, len(slot.data)))
        slot.data += kept
        slot.dropped += len(data) - len(kept)
        self._used += len(kept)

    def _store_input(self, part: _ToolPart, value: Mapping[str, Any]) -> None:
        room = max(0, min(self._max_output, self._max_total - self._used + part.input_bytes))
        bounded, size, truncated = _bound_input(value, room)  # may raise: nothing changed yet
        self._used += size - part.input_bytes
        part.input, part.input_bytes, part.input_truncated = bounded, size, truncated

    def _audit(self) -> int:
        """Recount the stored bytes from scratch (tests compare it with ``held_bytes``)."""
        total = 0
        for part in self._iter_parts():
            if isinstance(part, _TextPart):
                total += len(part.body.data)
            else:
                total += part.input_bytes
                for slot in (part.output, part.error, part.title):
                    if slot is not None:
                        total += len(slot.data)
        return total

    def _iter_parts(self) -> Iterator[_TextPart | _ToolPart]:
        for session in self._sessions.values():
            for message in session.messages.values():
                yield from message.parts.values()

    # -- result ------------------------------------------------------------------

    def _in_turn(self, session_id: str, message_id: str, message: _MessageState) -> bool:
        if message_id in self._turn_ids:
            return False  # the turn's own user message
        role = message.role
        if role is None:
            role = "assistant" if message.assistant_hint else None
        if role == "user":
            return False
        if session_id != self._root or self._turn_start is None:
            return True
        if message.parent_id is not None and message.parent_id in self._turn_ids:
            return True
        return message_id >= self._turn_start

    def _session_result(
        self, session_id: str, state: _SessionState
    ) -> tuple[str, str, list[ToolCallResult], bool]:
        texts: list[_Slot] = []
        reasoning: list[_Slot] = []
        calls: list[ToolCallResult] = []
        truncated = False
        for message_id in sorted(state.messages):
            message = state.messages[message_id]
            if not self._in_turn(session_id, message_id, message):
                continue
            known_assistant = message.role == "assistant" or message.assistant_hint
            for part_id in sorted(message.parts):
                part = message.parts[part_id]
                if isinstance(part, _TextPart):
                    if not (known_assistant or part.assistant_hint) or not part.body.full_size:
                        continue
                    truncated = truncated or part.body.dropped > 0
                    (texts if part.kind == "text" else reasoning).append(part.body)
                else:
                    call = self._call_result(session_id, part)
                    truncated = truncated or call.truncated
                    calls.append(call)
        text, cut_text = _join_bounded(texts, self._max_output)
        thought, cut_thought = _join_bounded(reasoning, self._max_output)
        return text, thought, calls, truncated or cut_text or cut_thought

    def _child_aborted(self, part: _ToolPart) -> bool:
        child = self._sessions.get(part.child_session_id or "")
        return part.tool == "task" and child is not None and child.aborted

    def _call_result(self, session_id: str, part: _ToolPart) -> ToolCallResult:
        slots = [s for s in (part.output, part.error, part.title) if s is not None]
        return ToolCallResult(
            session_id=session_id,
            call_id=part.call_id,
            tool=part.tool,
            status=_classify(part, child_aborted=self._child_aborted(part)),
            input=part.input,
            output=None if part.output is None else part.output.render(),
            error=None if part.error is None else part.error.render(),
            title=None if part.title is None else part.title.render(),
            child_session_id=part.child_session_id,
            truncated=part.input_truncated or any(s.dropped for s in slots),
        )

    def result(self, turn_id: str | None = None) -> PartialResult:
        """An immutable snapshot of what the turn has produced so far.

        A call still ``pending`` or ``running`` now is reported
        ``interrupted``: whatever happens to it later is not part of the
        result the caller is about to act on.
        """
        per_session: dict[str, tuple[str, str, list[ToolCallResult], bool]] = {
            sid: self._session_result(sid, state) for sid, state in self._sessions.items()
        }
        children: dict[str, list[str]] = {}
        for sid, state in self._sessions.items():
            if state.parent_id is not None and sid != self._root:
                children.setdefault(state.parent_id, []).append(sid)

        def steps(sid: str) -> Iterator[ToolCallResult | str]:
            """A session's calls, each task call followed by its child; then other children."""
            for call in per_session[sid][2]:
                yield call
                child = call.child_session_id
                if child in per_session and self._sessions[child].parent_id == sid:
                    yield child
            yield from children.get(sid, ())

        # Depth-first with an explicit stack: a hostile stream could build a
        # chain deeper than Python's recursion limit; `visited` stops cycles.
        order: list[str] = []
        flat: list[ToolCallResult] = []
        visited: set[str] = set()
        for start in (self._root, *self._sessions):
            if start in visited:
                continue
            visited.add(start)
            order.append(start)
            stack = [steps(start)]
            while stack:
                item = next(stack[-1], None)
                if item is None:
                    stack.pop()
                elif isinstance(item, ToolCallResult):
                    flat.append(item)
                elif item not in visited:
                    visited.add(item)
                    order.append(item)
                    stack.append(steps(item))

        sessions: dict[str, SessionPartial] = {}
        truncated = self._overflow
        for sid in order:
            text, thought, calls, cut = per_session[sid]
            sessions[sid] = SessionPartial(
                session_id=sid,
                parent_id=None if sid == self._root else self._sessions[sid].parent_id,
                text=text,
                tool_calls=tuple(calls),
                truncated=cut,
                reasoning=thought,
            )
            truncated = truncated or cut
        return PartialResult(
            turn_id=turn_id,
            root_session_id=self._root,
            text=sessions[self._root].text,
            tool_calls=tuple(flat),
            sessions=sessions,
            truncated=truncated,
            max_output_bytes=self._max_output,
        )


_HANDLED = frozenset(
    {"message.part.updated", "message.part.delta", "message.updated", "session.created"}
)


def _bound_input(value: Mapping[str, Any], limit: int) -> tuple[dict[str, Any], int, bool]:
    """A detached, JSON-safe copy of a tool's input of at most ``limit`` bytes as JSON.

    Small inputs are kept as they are. A big one (a ``write`` of a large
    file) keeps its keys, with each value shortened to a fair share: the
    model needs to know what was called, not every byte of the arguments.
    """
    text = json.dumps(value, ensure_ascii=False, default=str)
    size = len(_utf8(text))
    if size <= limit:
        copy = json.loads(text)
        return (copy if isinstance(copy, dict) else {}), size, False
    keys = list(value)[:_INPUT_MAX_KEYS]
    share = limit // max(len(keys), 1) - 8
    bounded: dict[str, Any] = {}
    for key in keys:
        name = str(key)[:_NAME_CAP]
        item = value[key]
        if isinstance(item, str):
            shortened = item
        else:
            shortened = json.dumps(item, ensure_ascii=False, default=str)
            if len(_utf8(shortened)) <= share:
                bounded[name] = json.loads(shortened)
                continue
        raw = _utf8(shortened)
        if len(raw) <= share:
            bounded[name] = shortened
        else:
            marker = f"…[truncated {len(raw)} bytes]"
            room = share - len(_utf8(marker))
            kept = _cut_utf8(raw, room).decode("utf-8") if room > 0 else ""
            bounded[name] = kept + marker
    text = json.dumps(bounded, ensure_ascii=False)
    size = len(_utf8(text))
    if size > limit:
        return {}, 0, True
    return bounded, size, True
