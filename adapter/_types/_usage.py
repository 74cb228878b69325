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

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .._base._jsonable import field_values
from .._client._native import Usage

__all__ = ["SessionUsage", "TurnUsage"]


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
