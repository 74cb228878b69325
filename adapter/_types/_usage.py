"""Usage and cost of a turn, summed over every session of its tree.

Why it exists: OpenCode reports tokens and cost per assistant message (one model
step each: ``info.tokens``/``info.cost`` on ``message.updated``, the same figures
on the ``step-finish`` part), in the session that spent them. A turn's spend is
spread over the root and every subagent it started, and a host that bills,
budgets or shows cost would otherwise have to re-read every message of every
session of the tree. For a stopped turn the subagents' spend is the part a user
cannot see at all.

:class:`UsageMeter` keeps each assistant message's *latest* figures (an update
repeats the message's totals, so nothing is counted twice), fed by the events
and by stored messages read back from the server, which replace what the events
said. :meth:`UsageMeter.total` sums the messages that are the turn's into a
:class:`TurnUsage`, attributed per session. :class:`UsageFeed` throttles the
live ``turn.usage`` reports. The figures are OpenCode's own: the cost is what it
computed from the model's configured prices, never estimated here.

Measured on OpenCode 1.18.34: an assistant message is created with zero tokens
and cost; when its step finishes, the ``step-finish`` part and two
``message.updated`` carry ``finish`` and the step's tokens and cost. A step that
a stop (or a failure) cuts short ends with an error and zero figures, even if its
model call had streamed a tool call: OpenCode records nothing for it, and neither
can the adapter (``TurnUsage.complete`` is then ``False``).

The context meter (``TurnUsage.context_tokens``/``context_limit``) is counted as
OpenCode's own UI counts it (read in its TUI's session header and sidebar): the
session's last assistant message whose ``tokens.output`` is above zero, its input +
output + reasoning + cache read + cache write tokens, against the ``limit.context``
that ``GET /config/providers`` gives for that message's ``providerID``/``modelID``.
Here the session is the root and the messages are the turn's: a subagent's context
is its own and never fills the root's.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .._base._jsonable import field_values
from .._client._models import Message
from .._client._native import MessageUpdated, Usage, message_usage

__all__ = ["SessionUsage", "TurnUsage", "UsageFeed", "UsageMeter"]

#: At most one live ``turn.usage`` per turn in this many seconds (the final figures
#: are always reported before the turn ends, whatever the throttle).
USAGE_INTERVAL = 0.25


@dataclass(frozen=True, slots=True)
class SessionUsage:
    """Tokens and cost one session of the tree spent in the turn."""

    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    #: What OpenCode computed from the model's configured prices (0 without prices).
    cost: float = 0.0

    def __add__(self, other: SessionUsage) -> SessionUsage:
        return SessionUsage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.cost + other.cost,
        )

    @classmethod
    def of(cls, usage: Usage) -> SessionUsage:
        return cls(
            usage.input,
            usage.output,
            usage.reasoning,
            usage.cache_read,
            usage.cache_write,
            usage.cost,
        )

    @property
    def total_tokens(self) -> int:
        """Input, output, reasoning and cache tokens together."""
        return (
            self.input_tokens
            + self.output_tokens
            + self.reasoning_tokens
            + self.cache_read_tokens
            + self.cache_write_tokens
        )

    def to_dict(self) -> dict[str, Any]:
        return field_values(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SessionUsage:
        def count(key: str) -> int:
            value = data.get(key, 0)
            return value if isinstance(value, int) and not isinstance(value, bool) else 0

        cost = data.get("cost", 0.0)
        return cls(
            count("input_tokens"),
            count("output_tokens"),
            count("reasoning_tokens"),
            count("cache_read_tokens"),
            count("cache_write_tokens"),
            float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) else 0.0,
        )


_NOTHING = SessionUsage()


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnUsage:
    """Tokens and cost of a turn: the root's assistant messages of the turn plus every
    assistant message of the subagent sessions it started, summed; and how full the
    root's context is.

    ``by_session`` maps each session of the tree that has an assistant message in
    the turn (the root first) to its own figures. ``complete`` is ``False`` when
    some step of the turn never finished (a stop or a failure cut it short, or it
    still runs): OpenCode records no tokens for such a step. ``subagents`` is how
    many sessions other than the root are in ``by_session``.

    ``context_tokens`` is how much of the model's context the root's latest finished
    step of the turn used, counted as OpenCode's UI counts it: input + output +
    reasoning + cache read + cache write tokens of the root's last assistant message
    of the turn whose output is above zero (``None`` before one finished). Only the
    root's: a subagent has its own context. ``context_limit`` is the ``limit.context``
    of the model that step used, from ``GET /config/providers`` (read once per client);
    ``None`` when that is unknown (the model is not listed, its limit is 0, or the
    read failed) or no root step finished.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost: float = 0.0
    by_session: Mapping[str, SessionUsage] = field(default_factory=lambda: MappingProxyType({}))
    complete: bool = True
    subagents: int = 0
    context_tokens: int | None = None
    context_limit: int | None = None

    @property
    def total_tokens(self) -> int:
        """Input, output, reasoning and cache tokens together."""
        return self._totals().total_tokens

    def _totals(self) -> SessionUsage:
        return SessionUsage(
            self.input_tokens,
            self.output_tokens,
            self.reasoning_tokens,
            self.cache_read_tokens,
            self.cache_write_tokens,
            self.cost,
        )

    @classmethod
    def of_sessions(
        cls,
        root_session_id: str,
        sessions: Mapping[str, SessionUsage],
        *,
        complete: bool,
        context: tuple[int | None, int | None] = (None, None),
    ) -> TurnUsage:
        """The sum of ``sessions``; ``context`` is ``(context_tokens, context_limit)``."""
        ordered = dict(sorted(sessions.items(), key=lambda kv: kv[0] != root_session_id))
        subagents = sum(1 for sid in ordered if sid != root_session_id)
        return cls._of_total(
            sum(ordered.values(), _NOTHING),
            ordered,
            complete=complete,
            subagents=subagents,
            context=context,
        )

    @classmethod
    def _of_total(
        cls,
        total: SessionUsage,
        by_session: dict[str, SessionUsage],
        *,
        complete: bool,
        subagents: int,
        context: tuple[int | None, int | None],
    ) -> TurnUsage:
        return cls(
            input_tokens=total.input_tokens,
            output_tokens=total.output_tokens,
            reasoning_tokens=total.reasoning_tokens,
            cache_read_tokens=total.cache_read_tokens,
            cache_write_tokens=total.cache_write_tokens,
            cost=total.cost,
            by_session=MappingProxyType(by_session),
            complete=complete,
            subagents=subagents,
            context_tokens=context[0],
            context_limit=context[1],
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            **self._totals().to_dict(),
            "by_session": {sid: usage.to_dict() for sid, usage in self.by_session.items()},
            "complete": self.complete,
            "subagents": self.subagents,
            "context_tokens": self.context_tokens,
            "context_limit": self.context_limit,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TurnUsage:
        total = SessionUsage.from_dict(data)
        raw = data.get("by_session")
        sessions = {
            str(sid): SessionUsage.from_dict(value)
            for sid, value in (raw.items() if isinstance(raw, Mapping) else ())
            if isinstance(value, Mapping)
        }
        subagents = data.get("subagents", 0)
        return cls._of_total(
            total,
            sessions,
            complete=data.get("complete", True) is not False,
            subagents=subagents if isinstance(subagents, int) else 0,
            context=(_count_or_none(data, "context_tokens"), _count_or_none(data, "context_limit")),
        )


def _count_or_none(data: Mapping[str, Any], key: str) -> int | None:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _model_of(info: Mapping[str, Any]) -> tuple[str, str] | None:
    """The ``(providerID, modelID)`` an assistant message's ``info`` names, if both."""
    provider, model = info.get("providerID"), info.get("modelID")
    return (provider, model) if isinstance(provider, str) and isinstance(model, str) else None


@dataclass(slots=True)
class _Spent:
    usage: SessionUsage
    parent_id: str | None
    finished: bool
    model: tuple[str, str] | None


#: A model's context limit: (provider id, model id) -> ``limit.context`` or ``None``.
ContextLimit = Callable[[str, str], int | None]


#: Decides whether an assistant message's spend is the turn's:
#: (session id, message id, parent message id) -> bool.
Counts = Callable[[str, str, str | None], bool]


class UsageMeter:
    """The latest tokens and cost of every assistant message seen in a tree.

    Bounded like the collector that owns it: at most ``max_messages`` messages
    are tracked (a hostile stream cannot grow it without end); what does not fit
    is left out and makes the total incomplete. ``context_limit`` gives the limit of
    the model of the root's latest step (none: the meter's limit is unknown).
    """

    def __init__(
        self,
        root_session_id: str,
        *,
        max_messages: int = 10_000,
        context_limit: ContextLimit | None = None,
    ) -> None:
        self._root = root_session_id
        self._max = max_messages
        self._context_limit = context_limit
        self._messages: dict[tuple[str, str], _Spent] = {}
        self._overflow = False

    def observe(self, event: MessageUpdated) -> None:
        """An assistant ``message.updated``: its figures replace the earlier ones."""
        if event.role == "assistant":
            info = event.raw.get("properties", {}).get("info", {})
            self._put(
                event.session_id,
                event.message_id,
                event.parent_id,
                event.usage,
                event.finish is not None,
                _model_of(info) if isinstance(info, Mapping) else None,
            )

    def stored(self, messages: Iterable[Message]) -> None:
        """Stored messages read back from the server: the truth, as of the read."""
        for message in messages:
            info = message.info
            if info.role == "assistant":
                self._put(
                    info.session_id,
                    info.id,
                    info.parent_id,
                    message_usage(info.raw),
                    info.finish is not None,
                    _model_of(info.raw),
                )

    def _put(
        self,
        session_id: str,
        message_id: str,
        parent_id: str | None,
        usage: Usage,
        finished: bool,
        model: tuple[str, str] | None,
    ) -> None:
        key = (session_id, message_id)
        spent = self._messages.get(key)
        if spent is None:
            if len(self._messages) >= self._max:
                self._overflow = True
                return
            self._messages[key] = _Spent(SessionUsage.of(usage), parent_id, finished, model)
            return
        spent.usage = SessionUsage.of(usage)
        spent.parent_id = parent_id or spent.parent_id
        spent.finished = finished
        spent.model = model or spent.model

    def total(self, counts: Counts | None = None) -> TurnUsage:
        """The turn's usage: the messages ``counts`` admits (every message without it)."""
        sessions: dict[str, SessionUsage] = {}
        complete = not self._overflow
        latest: tuple[str, _Spent] | None = None  # the root's newest message with output
        for (session_id, message_id), spent in self._messages.items():
            if counts is not None and not counts(session_id, message_id, spent.parent_id):
                continue
            sessions[session_id] = sessions.get(session_id, _NOTHING) + spent.usage
            complete = complete and spent.finished
            newer = latest is None or message_id > latest[0]
            if session_id == self._root and spent.usage.output_tokens > 0 and newer:
                latest = (message_id, spent)
        context = self._context(latest[1]) if latest is not None else (None, None)
        return TurnUsage.of_sessions(self._root, sessions, complete=complete, context=context)

    def _context(self, step: _Spent) -> tuple[int | None, int | None]:
        """``(context_tokens, context_limit)`` of the root's latest step, as OpenCode's UI."""
        used = step.usage.total_tokens
        if step.model is None or self._context_limit is None:
            return used, None
        return used, self._context_limit(*step.model)


def _figures(usage: TurnUsage) -> tuple[float | None, ...]:
    return (
        usage.input_tokens,
        usage.output_tokens,
        usage.reasoning_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
        usage.cost,
        usage.context_tokens,
        usage.context_limit,
    )


class UsageFeed:
    """Throttles a turn's live ``turn.usage`` reports.

    The rule: a report goes out at once when the last one is at least
    ``interval`` seconds old; otherwise one is scheduled for the end of that
    interval and reads the figures as they are then. A report whose tokens and
    cost equal the last one's is not sent (a step that merely started, or a
    finished message announced again, changes nothing worth a report).
    :meth:`close`, called as the turn ends, cancels a
    scheduled report and sends the final figures if the host has not seen them,
    so the last ``turn.usage`` always equals the usage on ``turn.completed`` /
    ``turn.aborted``.
    """

    def __init__(
        self,
        read: Callable[[], TurnUsage],
        send: Callable[[TurnUsage], None],
        *,
        interval: float = USAGE_INTERVAL,
    ) -> None:
        self._read = read
        self._send = send
        self.interval = interval
        self._sent: TurnUsage | None = None
        self._sent_at = -float("inf")
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False

    def changed(self) -> None:
        """The figures may have changed (a step finished)."""
        if self._closed or self._timer is not None:
            return  # a report is due already; it reads the newest figures
        wait = self._sent_at + self.interval - time.monotonic()
        if wait <= 0:
            self._report()
        else:
            self._timer = asyncio.get_running_loop().call_later(wait, self._report)

    def _report(self) -> None:
        self._timer = None
        if self._closed:
            return
        usage = self._read()
        if self._sent is None or _figures(usage) != _figures(self._sent):
            self._sent = usage
            self._sent_at = time.monotonic()
            self._send(usage)

    def stop(self) -> None:
        """The turn is gone without an ending to report (its thread was torn down)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._closed = True

    def close(self, final: TurnUsage) -> None:
        """The turn ends with ``final``: report it unless it was the last report."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        reported = self._sent is not None or final.by_session
        if not self._closed and reported and final != self._sent:
            self._sent = final
            self._send(final)
        self._closed = True
