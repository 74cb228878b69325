"""Every time bound of :class:`~adapter.OpenCodeAdapter`, in one documented value.

Why this exists: the adapter grew seven ``*_timeout`` keyword arguments, and the
turn lifecycle needs more (an unechoed prompt, an idle that status cannot
confirm). Scattered keywords give a host no single place to read what is
bounded, by how much, and why; :class:`Timeouts` is that place (the keywords
were removed after 0.1).

Every field is in seconds and must be a positive finite number. Four of them
(``watchdog``, ``quiet_check``, ``owner_lookup_retry``, ``skip_report``) are
intervals rather than bounds: how often the adapter looks again, or retries, or reports.
They are here because a host's test waits on them (a held turn is noticed at the
watchdog's next look, a lost idle after ``quiet_check``) and must be able to shorten
them through the public API, as the adapter's own tests do.
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
        60 s is five times a 12 s status outage (503s) measured as a turn ended.
    ``idle_confirm_backoff_max`` (default 5)
        The longest wait between two of those status retries (the backoff
        doubles from 0.1 s up to this cap), so a recovered server is noticed
        within 5 s.
    ``unreachable`` (default 5)
        An external server whose event stream is lost and whose every connection
        attempt since is refused (nothing listens: its process is gone) for this
        long is unreachable: every running turn of its threads ends ``failed``
        (``error_name="ServerUnreachable"``); the threads stay and go on once it
        listens again. A killed ``opencode serve`` refuses at once (measured on
        1.18.34 with this set to 3: the turn ended 3.05-3.13 s after ``SIGKILL``);
        5 s tells a dead server from a blip (a proxy's restart, a port briefly
        closed) without leaving a host's spinner running for a minute.
    ``summarize`` (default 600)
        ``summarize_thread``: OpenCode answers ``POST /session/{id}/summarize``
        only once the summary is written, after the step under way finishes, so
        the call may last as long as a tool step plus one model call.
    ``watchdog`` (default 1)
        How often each running turn's watchdog looks: what ends a turn when the
        server's word never comes (an overdue ``echo``, a quiet turn, a turn held by
        a failed stop that ends once its tree is idle) is noticed at its next look,
        so up to this much after its bound. One status read per look at most.
    ``quiet_check`` (default 30)
        A turn whose events have been silent this long is checked against the
        server's status and stored messages (an idle lost without an outage would
        otherwise leave it running); checked again after each further such silence.
    ``owner_lookup_retry`` (default 0.2)
        The first wait between two tries of reading an unknown session's ancestry
        (a request of a child the adapter did not see born); it doubles at each try.
        Shortened, a test sees an ancestry that stays unreadable surfaced sooner as
        a ``runtime.warning``.
    ``skip_report`` (default 10)
        Native events the adapter could not read are reported (``runtime.warning``)
        at most once per type in this much time: the first at once, the others with
        their count when it has passed. Short enough for a person reading logs,
        long enough that a flood of bad events costs few warnings.

    Not here, because no test needs to wait on them: the throttles of live
    ``turn.usage`` (0.25 s) and ``task.updated`` (0.5 s) reports (the last figures
    and the newest activity are always reported, at most that late), and the
    0.25 s read-back of a slash command a stop waits for (it ends on the echo).
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
    watchdog: float = 1.0
    quiet_check: float = 30.0
    owner_lookup_retry: float = 0.2
    skip_report: float = 10.0
    #: Last, so that positional construction of the fields above is unchanged.
    unreachable: float = 5.0

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
