"""Every time bound of :class:`~adapter.OpenCodeAdapter`, in one documented value.

Why this exists: the adapter grew seven ``*_timeout`` keyword arguments, and the
turn lifecycle needs more (an unechoed prompt, an idle that status cannot
confirm). Scattered keywords give a host no single place to read what is
bounded, by how much, and why; :class:`Timeouts` is that place (the keywords
were removed after 0.1).

Every field is in seconds and must be a positive finite number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from ._exceptions import InvalidInputError

__all__ = ["Timeouts"]


@dataclass(frozen=True, slots=True)
class Timeouts:
    """The adapter's time bounds, in seconds (positive and finite).

    ``request`` (default 10)
        One HTTP request to the server (the client's ``httpx`` timeout), and the
        adapter's own reads around a turn (session lookup, message listing).
    ``connect`` (default 10)
        ``start_session``: the thread's event stream must connect (its
        ``server.connected`` arrive) within this time.
    ``submit`` (default 10)
        ``send_turn``: the server must accept the prompt (``prompt_async``
        answers 204) within this time.
    ``abort`` (default 10)
        ``interrupt_turn``: the root session's abort (and its
        ``MessageAbortedError`` acknowledgement) within this time.
    ``tree`` (default 10)
        ``interrupt_turn``: the walk that stops the root's descendants, and the
        read of the partial result after it.
    ``teardown`` (default 1)
        ``stop_session`` and ``aclose``: the best-effort root abort and the
        descendant walk each get this much (a closing host must not hang).
    ``server_ready`` (default 30)
        An adapter without ``base_url`` starts ``opencode serve``: it must
        answer ``/global/health`` within this time (cold start measured at
        about 1.9 s on 1.18.34).
    ``echo`` (default 30)
        A submitted prompt must be echoed (its minted message id seen in a
        ``message.updated``) within this time, or the turn fails with a reason.
        Measured on the real server 1.18.34 (8 prompts to one session, sent
        alternately while it was idle and while a tool step ran): the echo came
        118-375 ms after the request was sent in 6 cases, and 2.8 s and 3.3 s in
        the 2 where the server took 2 s to accept the prompt itself (a fresh
        server's first steps). 30 s is about nine times the slowest, so only a
        server that lost the prompt trips it, and short enough that a host's
        spinner does not run for minutes.
    ``idle_confirm`` (default 60)
        After the server reports a turn's session idle, the adapter confirms it
        with ``GET /session/status``, retrying with backoff while status fails.
        If status has not answered within this time, the turn ends with a
        warning that names the failure instead of staying ``running`` forever.
        60 s is five times the 12 s status outage measured in issue 12.
    ``idle_confirm_backoff_max`` (default 5)
        The longest wait between two of those status retries (the backoff
        doubles from 0.1 s up to this cap), so a recovered server is noticed
        within 5 s.
    ``summarize`` (default 600)
        ``summarize_thread``: OpenCode answers ``POST /session/{id}/summarize``
        only once the summary is written, after the step under way finishes, so
        the call may last as long as a tool step plus one model call.
    """

    request: float = 10.0
    connect: float = 10.0
    submit: float = 10.0
    abort: float = 10.0
    tree: float = 10.0
    teardown: float = 1.0
    server_ready: float = 30.0
    echo: float = 30.0
    idle_confirm: float = 60.0
    idle_confirm_backoff_max: float = 5.0
    summarize: float = 600.0

    def __post_init__(self) -> None:
        for item in fields(self):
            seconds = _seconds(f"Timeouts.{item.name}", getattr(self, item.name))
            object.__setattr__(self, item.name, seconds)


def _seconds(name: str, value: object) -> float:
    """``value`` as seconds, or an :class:`InvalidInputError` that names ``name``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInputError(f"{name} must be a number of seconds, got {type(value).__name__}")
    if not math.isfinite(value) or value <= 0:
        raise InvalidInputError(
            f"{name} must be a positive finite number of seconds, got {value!r}"
        )
    return float(value)
