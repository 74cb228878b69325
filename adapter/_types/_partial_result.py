"""Partial results of an interrupted turn: the immutable records and their prompt.

Why this exists: when a user stops a turn, the work the turn already did is
real. Tool calls that finished have results, the model streamed some text,
subagents ran their own tools. If the stop simply discards all of that, the
next turn redoes the finished work (or, worse, redoes side effects). The
:class:`~adapter.PartialCollector` (``_partial_collector.py``) gathers that
work from the event stream and the stored messages; this module holds what it
hands out:

* :class:`PartialResult`: every tool call with how it ended, the text
  produced so far, grouped per session (:class:`SessionPartial`), with links
  from ``task`` calls to their subagent's own results (:class:`ToolCallResult`);
  ``to_dict``/``from_dict`` for storing it;
* :meth:`PartialResult.to_prompt`: a short plain-text summary a host can hand
  to the model in the next turn.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from .._base._json_fields import WrongValue, optional_string, required_string
from .._base._unicode import well_formed, well_formed_data
from .._exceptions import InvalidInputError
from ._usage import TurnUsage

__all__ = [
    "CallStatus",
    "PartialResult",
    "SessionPartial",
    "ToolCallResult",
]

CallStatus = Literal["completed", "failed", "interrupted"]
_CALL_STATUSES: tuple[CallStatus, ...] = ("completed", "failed", "interrupted")

#: Default cap of every stored string (and of the joined text of a session).
DEFAULT_MAX_OUTPUT = 64 * 1024

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
        # Well formed (adapter._base._unicode): a result built by hand or read back by
        # from_dict() may hold lone surrogate halves, and JSON must encode to UTF-8.
        return {
            "session_id": well_formed(self.session_id),
            "call_id": well_formed(self.call_id),
            "tool": well_formed(self.tool),
            "status": self.status,
            "input": well_formed_data(dict(self.input)),
            "output": _well_formed_opt(self.output),
            "error": _well_formed_opt(self.error),
            "title": _well_formed_opt(self.title),
            "child_session_id": _well_formed_opt(self.child_session_id),
            "truncated": self.truncated,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolCallResult:
        """Inverse of :meth:`to_dict`.

        Raises :class:`~adapter.InvalidInputError` (a ``ValueError``) on a foreign shape.
        """
        status = data.get("status")
        if status not in _CALL_STATUSES:
            raise InvalidInputError(f"unknown call status {status!r:.40}")
        tool_input = data.get("input")
        if not isinstance(tool_input, Mapping):
            raise InvalidInputError("field 'input' is not an object")
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
    ``usage``: the tokens and cost the turn spent in the tree (``docs/adapter.md``,
    "Usage and cost").
    """

    turn_id: str | None
    root_session_id: str
    text: str
    tool_calls: tuple[ToolCallResult, ...]
    sessions: Mapping[str, SessionPartial]
    truncated: bool
    max_output_bytes: int
    usage: TurnUsage = field(default_factory=TurnUsage)

    @classmethod
    def empty(
        cls,
        root_session_id: str,
        turn_id: str | None = None,
        *,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT,
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
        result; otherwise :class:`~adapter.InvalidInputError` is raised.)
        Every string is well formed (a lone UTF-16 surrogate half becomes U+FFFD,
        ``adapter._base._unicode``), so the document always encodes to UTF-8.
        """
        index = {id(call): i for i, call in enumerate(self.tool_calls)}

        def position(call: ToolCallResult) -> int:
            found = index.get(id(call))
            return self.tool_calls.index(call) if found is None else found

        sessions: dict[str, Any] = {}
        for session_id, partial in self.sessions.items():
            sessions[well_formed(session_id)] = {
                "session_id": well_formed(partial.session_id),
                "parent_id": _well_formed_opt(partial.parent_id),
                "text": well_formed(partial.text),
                "reasoning": well_formed(partial.reasoning),
                "tool_call_indexes": [position(c) for c in partial.tool_calls],
                "truncated": partial.truncated,
            }
        return {
            "turn_id": _well_formed_opt(self.turn_id),
            "root_session_id": well_formed(self.root_session_id),
            "text": well_formed(self.text),
            "tool_calls": [c.to_dict() for c in self.tool_calls],
            "sessions": sessions,
            "truncated": self.truncated,
            "max_output_bytes": self.max_output_bytes,
            "usage": self.usage.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PartialResult:
        """Inverse of :meth:`to_dict`.

        Raises :class:`~adapter.InvalidInputError` (a ``ValueError``) on a foreign shape.
        """
        raw_calls = data.get("tool_calls")
        raw_sessions = data.get("sessions")
        if not isinstance(raw_calls, list) or not isinstance(raw_sessions, Mapping):
            raise InvalidInputError("fields 'tool_calls'/'sessions' have the wrong type")
        calls = tuple(ToolCallResult.from_dict(_as_obj(c)) for c in raw_calls)
        sessions: dict[str, SessionPartial] = {}
        for key, raw in cast(Mapping[str, Any], raw_sessions).items():
            obj = _as_obj(raw)
            indexes = obj.get("tool_call_indexes", [])
            if not isinstance(indexes, list) or not all(
                isinstance(i, int) and 0 <= i < len(calls) for i in indexes
            ):
                raise InvalidInputError("field 'tool_call_indexes' is not a list of call indexes")
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
            raise InvalidInputError("field 'max_output_bytes' is not an integer")
        return cls(
            turn_id=_opt_str(data, "turn_id"),
            root_session_id=_req_str(data, "root_session_id"),
            text=_req_str(data, "text"),
            tool_calls=calls,
            sessions=sessions,
            truncated=bool(data.get("truncated", False)),
            max_output_bytes=limit,
            usage=TurnUsage.from_dict(_as_obj(data.get("usage", {}))),
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


def _well_formed_opt(value: str | None) -> str | None:
    return None if value is None else well_formed(value)


def _as_obj(value: object) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidInputError("expected an object")
    return cast(Mapping[str, Any], value)


def _req_str(data: Mapping[str, Any], key: str) -> str:
    return required_string(data, key, _not_a_string(key))


def _opt_str(data: Mapping[str, Any], key: str) -> str | None:
    return optional_string(data, key, _not_a_string(key))


def _not_a_string(key: str) -> WrongValue:
    return lambda _: InvalidInputError(f"field {key!r} is not a string")


# --------------------------------------------------------------------------
# to_prompt: the value as text for the next turn's prompt
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
