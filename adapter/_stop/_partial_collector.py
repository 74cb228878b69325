"""Collecting what an interrupted turn produced, across a whole session tree.

OpenCode keeps most of a stopped turn's work (finished tool parts stay
``completed``, streamed text is stored, a killed ``bash`` ends ``completed``
with a ``User aborted the command`` note), but a host only sees it if
something collects it. :class:`PartialCollector` is that something: fed the
native events while a turn runs and, after a stop, the server's stored
messages, it keeps a bounded picture of every session of the turn's tree and
turns it into a :class:`~adapter.PartialResult` (``_partial_result.py``).

Events arrive parsed once (:mod:`adapter._client._native`): the adapter hands the
same record to its own translation and to :meth:`PartialCollector.observe_native`,
and can hand over its rule of which root messages belong to the turn
(``belongs``), so both agree on what the turn produced.

Memory is bounded at all times, not just in the result: every stored string
is cut at ``max_output_bytes``, all stored strings together never exceed
``max_total_bytes`` (later content is then kept as a size marker only), and
at most ``max_calls`` tool calls (and as many text parts, messages and
sessions) are tracked. Whatever was cut is flagged ``truncated``. A delta is
appended to its part's bytes in place: a long answer costs linear time.

OpenCode cuts strings by UTF-16 units, so the two halves of a surrogate pair can
come in two deltas: they are kept as sent and joined again when the second
arrives; whatever leaves in the result is well formed (:mod:`adapter._base._unicode`:
a half with no partner becomes U+FFFD).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec

from .._base._ids import is_session_id, validate_id
from .._base._unicode import well_formed, well_formed_data
from .._client._native import (
    MessageUpdated,
    NativeEvent,
    PartDelta,
    PartUpdated,
    SessionCreated,
    parse_native,
)
from .._client._responses import Message, Part, ToolState
from .._exceptions import InvalidInputError, NativeEventError
from .._logging import get_logger
from .._turns._usage_meter import ContextLimit, UsageMeter
from .._types._partial_result import (
    DEFAULT_MAX_OUTPUT,
    CallStatus,
    PartialResult,
    SessionPartial,
    ToolCallResult,
)
from .._types._usage import TurnUsage
from ._truncation import Slot, bound_input, cut_utf8, join_bounded, pop_high_half, utf8

__all__ = ["BASH_ABORT_MARKER", "PartialCollector"]

_log = get_logger("adapter.partial")


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

_OBSERVED = frozenset(t.type for t in (PartUpdated, PartDelta, MessageUpdated, SessionCreated))
_FAST_LOADS = msgspec.json.Decoder().decode

_TITLE_CAP = 1024
_NAME_CAP = 256
_INPUT_MAX_KEYS = 64


# --------------------------------------------------------------------------
# Collector internals
# --------------------------------------------------------------------------


@dataclass(slots=True)
class _TextPart:
    kind: Literal["text", "reasoning"]
    body: Slot
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
    output: Slot | None = None
    error: Slot | None = None
    title: Slot | None = None
    interrupted_flag: bool = False
    bash_aborted: bool = False
    child_session_id: str | None = None


@dataclass(slots=True)
class _MessageState:
    role: str | None = None
    parent_id: str | None = None
    assistant_hint: bool = False
    # The summary message of a compaction: the model's digest of the history,
    # never the turn's answer, so nothing of it goes into the result.
    summary: bool = False
    parts: dict[str, _TextPart | _ToolPart] = field(default_factory=dict)


@dataclass(slots=True)
class _SessionState:
    parent_id: str | None
    messages: dict[str, _MessageState] = field(default_factory=dict)
    # A message of this session ended with MessageAbortedError: its run was cut off.
    aborted: bool = False


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

    Feed it every event of the connection (:meth:`observe_native`, or
    :meth:`observe` for raw ones); it keeps
    only what concerns the tree rooted at ``root_session_id``. After a stop,
    give it the server's stored messages of each session (:meth:`reconcile`),
    which are the truth for parts the stream missed. :meth:`result` can be
    called at any time and returns an immutable snapshot.

    Which messages belong to the turn: in the root session, assistant
    messages answering one of the turn's user messages (``parentID``), or
    whose id sorts at or after the first of them (OpenCode ids sort by time).
    With no turn message ids given, every root message observed counts.
    ``belongs`` (a root message id -> is it this turn's?) replaces that rule
    when given: the adapter owns the one rule of turn membership and passes
    it in, so its events and this result agree. In any other session of the
    tree (subagents started during the turn) every message counts. Whatever
    the rule, user messages and the summary message of a compaction are never
    part of the result. ``context_limit`` gives a model's context limit for the
    usage's context meter (see :class:`~adapter.TurnUsage`).

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
        max_output_bytes: int = DEFAULT_MAX_OUTPUT,
        max_total_bytes: int | None = None,
        max_calls: int = 10_000,
        belongs: Callable[[str], bool] | None = None,
        counts: Callable[[str], bool] | None = None,
        context_limit: ContextLimit | None = None,
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
        self._belongs = belongs
        #: Whose spend is the turn's (a root message id -> bool); default ``belongs``.
        self._counts = counts or belongs
        self._usage = UsageMeter(
            root_session_id, max_messages=max_calls, context_limit=context_limit
        )
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

        For hosts that feed the collector themselves: the event is parsed
        (:func:`~adapter._client._native.parse_native`) and handed to
        :meth:`observe_native`. Events of other sessions and of other types
        are ignored. Malformed events are logged at debug level and skipped:
        a bad event must not cost the results of a turn.
        """
        try:
            native = parse_native(event)
        except NativeEventError as exc:
            _log.debug(
                "partial.event_skipped", type=str(exc.event_type)[:80], reason=str(exc)[:200]
            )
            return
        self.observe_native(native)

    def observe_native(self, event: NativeEvent) -> None:
        """Take one event already parsed by :func:`~adapter._client._native.parse_native`.

        The adapter parses each event once and hands the same record to its
        own translation and to this method.
        """
        # Most events (statuses, session updates, diffs) are none of these: one lookup.
        if event.type not in _OBSERVED:
            return
        try:
            if type(event) is PartUpdated:
                if event.session_id in self._sessions:
                    self._apply_part(event.part, from_server=False)
            elif type(event) is PartDelta:
                if event.session_id in self._sessions:
                    self._on_delta(event)
            elif type(event) is MessageUpdated:
                if event.session_id in self._sessions:
                    self._on_message(event)
            elif type(event) is SessionCreated:
                parent = event.parent_id
                if parent is not None and parent in self._sessions:
                    self._add_session(event.session_id, parent)
        except _MALFORMED as exc:
            # Every update is validated before it changes anything, or leaves
            # the byte accounting consistent when it fails half-way.
            _log.debug("partial.event_skipped", type=event.type, reason=str(exc)[:200])

    def _on_message(self, event: MessageUpdated) -> None:
        session_id = event.session_id
        self._usage.observe(event)
        if event.error is not None and event.error.name == _MESSAGE_ABORTED:
            self._sessions[session_id].aborted = True
        message = self._message(session_id, event.message_id)
        if message is None:
            return
        message.role = event.role
        message.summary = message.summary or event.summary
        if event.parent_id is not None:
            message.parent_id = event.parent_id

    def _on_delta(self, event: PartDelta) -> None:
        if event.field != "text":
            return
        message = self._sessions[event.session_id].messages.get(event.message_id)
        part = None if message is None else message.parts.get(event.part_id)
        if not isinstance(part, _TextPart):
            # Without the part's first snapshot we do not know whether it is
            # text or reasoning; reconcile() fills it in from the server.
            raise _Skip("delta for an unknown text part")
        part.assistant_hint = True
        self._append(part.body, event.delta)

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
        self._usage.stored(m for m in messages if m.info.session_id == session_id)
        for message in messages:
            info = message.info
            if info.session_id != session_id:
                _log.debug("partial.reconcile_foreign_message", message_id=info.id)
                continue
            parent = info.parent_id if info.parent_id and len(info.parent_id) <= _NAME_CAP else None
            if info.error is not None and info.error.name == _MESSAGE_ABORTED:
                self._sessions[session_id].aborted = True
            summary = info.raw.get("summary") is True  # as in _native's MessageUpdated
            if not self._wanted(session_id, info.id, info.role, parent, summary=summary):
                # Earlier turns of the root, user prompts and compaction
                # summaries: never part of the result, so they must not use up
                # the byte budget.
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
        self,
        session_id: str,
        message_id: str,
        role: str | None,
        parent: str | None,
        *,
        summary: bool = False,
    ) -> bool:
        """Whether a message's parts can be part of the result, as far as known yet.

        Unknown roles and parents are given the benefit of the doubt; the
        final decision is :meth:`_in_turn`'s, when the result is taken.
        """
        if role == "user" or summary or message_id in self._turn_ids:
            return False
        if session_id != self._root:
            return True
        if self._belongs is not None:
            return self._belongs(message_id)
        if role is None or self._turn_start is None:
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
        if not self._wanted(
            part.session_id,
            part.message_id,
            message.role,
            message.parent_id,
            summary=message.summary,
        ):
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
            existing = message.parts[part.id] = _TextPart(kind, Slot(), False)
        if not isinstance(existing, _TextPart):
            raise _Skip("part changed its type")
        if isinstance(part.raw.get("time"), Mapping):
            existing.assistant_hint = True
        # A snapshot replaces what we have unless it holds less: the server
        # may store a shorter text than the deltas we already streamed.
        if len(utf8(part.text)) >= existing.body.full_size:
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
            existing.output = existing.output or Slot()
            self._store(existing.output, output, self._max_output)
        if state.status == "error":
            existing.error = existing.error or Slot()
            self._store(existing.error, state.error or "error", self._max_output)
        elif existing.error is not None:
            self._release(existing.error)
            existing.error = None
        if state.title is not None:
            existing.title = existing.title or Slot()
            self._store(existing.title, state.title, min(_TITLE_CAP, self._max_output))
        child = metadata.get("sessionId")
        tree_child = part.tool == "task" and isinstance(child, str) and is_session_id(child)
        if tree_child and isinstance(child, str) and child != part.session_id:
            existing.child_session_id = child
            self._add_session(child, part.session_id)

    # -- bounded storage ---------------------------------------------------------

    def _room(self, cap: int, already: int = 0) -> int:
        return max(0, min(cap - already, self._max_total - self._used))

    def _release(self, slot: Slot) -> None:
        self._used -= len(slot.data)
        slot.data = bytearray()
        slot.dropped = 0

    def _store(self, slot: Slot, value: str, cap: int) -> None:
        """Replace a slot's content; the old content's bytes are given back first."""
        self._release(slot)
        data = utf8(value)
        kept = cut_utf8(data, self._room(cap))
        slot.data = bytearray(kept)
        slot.dropped = len(data) - len(kept)
        self._used += len(kept)

    def _append(self, slot: Slot, value: str) -> None:
        """Add a delta: a bytearray grows in place (amortised linear, no string rebuilt)."""
        if slot.dropped:
            # Once cut, the stored text is a prefix; later text cannot follow it.
            slot.dropped += len(utf8(value))
            return
        if value and "\udc00" <= value[0] <= "\udfff":
            # OpenCode cut a surrogate pair between two deltas: join the halves again,
            # so the stored text is what the server's own snapshot will hold.
            half = pop_high_half(slot.data)
            if half:
                self._used -= len(utf8(half))
                value = well_formed(half + value[0]) + value[1:]
        data = utf8(value)
        kept = cut_utf8(data, self._room(self._max_output, len(slot.data)))
        slot.data += kept
        slot.dropped += len(data) - len(kept)
        self._used += len(kept)

    def _store_input(self, part: _ToolPart, value: Mapping[str, Any]) -> None:
        if not part.input_truncated and part.input_bytes and value == part.input:
            # Running and completed snapshots repeat the input: a whole copy kept
            # already equals it (a cut one does not, and more room may have freed).
            return
        room = max(0, min(self._max_output, self._max_total - self._used + part.input_bytes))
        bounded, size, truncated = bound_input(value, room)  # may raise: nothing changed yet
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
        if role == "user" or message.summary:
            return False
        return self._of_turn(session_id, message_id, message.parent_id, self._belongs)

    def usage(self) -> TurnUsage:
        """Tokens and cost of the turn so far: every assistant message of the tree's
        subagents, and the root's that ``counts`` (else ``belongs``, else the turn's
        message ids) admits; each message's latest figures."""
        return self._usage.total(self._spent)

    def _spent(self, session_id: str, message_id: str, parent_id: str | None) -> bool:
        return self._of_turn(session_id, message_id, parent_id, self._counts)

    def _of_turn(
        self,
        session_id: str,
        message_id: str,
        parent_id: str | None,
        admits: Callable[[str], bool] | None,
    ) -> bool:
        """Whether a message of the tree is the turn's: every subagent's is; the root's
        when ``admits`` says so, or without it when the turn's messages lead to it."""
        if session_id != self._root:
            return True
        if admits is not None:
            return admits(message_id)
        if self._turn_start is None:
            return True
        return (parent_id is not None and parent_id in self._turn_ids) or (
            message_id >= self._turn_start
        )

    def _session_result(
        self, session_id: str, state: _SessionState
    ) -> tuple[str, str, list[ToolCallResult], bool]:
        texts: list[Slot] = []
        reasoning: list[Slot] = []
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
        text, cut_text = join_bounded(texts, self._max_output)
        thought, cut_thought = join_bounded(reasoning, self._max_output)
        return text, thought, calls, truncated or cut_text or cut_thought

    def _child_aborted(self, part: _ToolPart) -> bool:
        child = self._sessions.get(part.child_session_id or "")
        return part.tool == "task" and child is not None and child.aborted

    def _call_result(self, session_id: str, part: _ToolPart) -> ToolCallResult:
        slots = [s for s in (part.output, part.error, part.title) if s is not None]
        # Strings leave well formed (lone surrogate halves as U+FFFD): the result is
        # written out as JSON, in logs, to the model (adapter._base._unicode).
        return ToolCallResult(
            session_id=session_id,
            call_id=well_formed(part.call_id),
            tool=well_formed(part.tool),
            status=_classify(part, child_aborted=self._child_aborted(part)),
            input=well_formed_data(part.input),
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
            usage=self.usage(),
        )
