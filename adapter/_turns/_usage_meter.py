"""Metering a turn's usage as it runs: each message's latest figures, and the live reports.

Why it exists (and why not in :mod:`adapter._types._usage`, which holds the frozen values
a host receives): OpenCode reports tokens and cost per assistant message, in the session
that spent them, and repeats a message's totals on every update. :class:`UsageMeter`
keeps each assistant message's *latest* figures (so nothing is counted twice), fed by the
events and by stored messages read back from the server, which replace what the events
said; :meth:`UsageMeter.total` sums the messages that are the turn's into a
:class:`~adapter.TurnUsage`, attributed per session. :class:`UsageFeed` throttles the
live ``turn.usage`` reports. The context meter's rule is in :mod:`adapter._types._usage`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .._client._native import MessageUpdated, Usage, message_usage
from .._client._responses import Message
from .._types._usage import SessionUsage, TurnUsage

__all__ = ["USAGE_INTERVAL", "ContextLimit", "UsageFeed", "UsageMeter"]

#: At most one live ``turn.usage`` per turn in this many seconds (the final figures
#: are always reported before the turn ends, whatever the throttle).
USAGE_INTERVAL = 0.25

_NOTHING = SessionUsage()


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
