"""Identifier validation and minting.

Ids that arrive from a server are untrusted: they are validated before they
are ever placed in a URL, so a hostile server cannot steer a request to
another path (``../../global/dispose``, ``%2F``...).
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from collections.abc import Callable
from urllib.parse import quote

__all__ = [
    "checked_id",
    "is_session_id",
    "mint_message_id",
    "observe_message_id",
    "path_segment",
    "validate_id",
]

# The real server mints `ses_` + 26 base62 characters; tests and other hosts
# use readable ids such as `ses_child_a`. Anything outside this alphabet could
# change the meaning of a URL path, so it is refused.
_ID_BODY = r"[A-Za-z0-9_-]{1,128}"
_PATTERNS = {
    "ses": re.compile(rf"ses_{_ID_BODY}"),
    "msg": re.compile(rf"msg_{_ID_BODY}"),
    "prt": re.compile(rf"prt_{_ID_BODY}"),
    "per": re.compile(rf"per_{_ID_BODY}"),
    "que": re.compile(rf"que_{_ID_BODY}"),
}

_MASK48 = 0xFFFF_FFFF_FFFF
_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
# An id in OpenCode's ascending scheme: its 12 hex digits are the stamp.
_ASCENDING_MESSAGE_ID = re.compile(r"msg_([0-9a-f]{12})[0-9A-Za-z]{14}")
# A server's stamp further ahead of our clock than this is not followed (a hostile or
# broken server could otherwise push every later id as far as it likes).
_MAX_AHEAD_MS = 3_600_000


def validate_id(kind: str, value: object) -> str:
    """Return ``value`` if it is a well-formed id of ``kind`` (``"ses"``, ``"msg"``...).

    Raises :class:`ValueError` otherwise; callers turn it into the error type
    that fits where the id came from (caller input or server response).
    """
    pattern = _PATTERNS[kind]
    if not isinstance(value, str) or pattern.fullmatch(value) is None:
        raise ValueError(f"not a valid {kind}_ id: {value!r:.80}")
    return value


def is_session_id(value: object) -> bool:
    return isinstance(value, str) and _PATTERNS["ses"].fullmatch(value) is not None


# Ids that passed `validate_id`, with their kind. A stream names the same few
# sessions, messages and parts over and over, and a lookup costs a fifth of the
# regular expression (docs/benchmarks.md section 2). Only strings that matched
# are ever in it; bounded by starting afresh when full.
_CHECKED: dict[str, str] = {}
_CHECKED_MAX = 4096


def checked_id(kind: str, value: object) -> str:
    """:func:`validate_id`, remembering the ids it accepted (for the event stream)."""
    if type(value) is str and _CHECKED.get(value) == kind:
        return value
    valid = validate_id(kind, value)
    if len(_CHECKED) >= _CHECKED_MAX:
        _CHECKED.clear()
    _CHECKED[valid] = kind
    return valid


def path_segment(kind: str, value: object) -> str:
    """Validate an id and percent-encode it as one URL path segment."""
    return quote(validate_id(kind, value), safe="")


def _now_ms() -> int:
    return int(time.time() * 1000)


class _MonotonicIdClock:
    """Produces strictly increasing 48-bit stamps the way OpenCode's ``Identifier.create``
    does: milliseconds * 0x1000 + a counter that starts at 1 in each millisecond, kept to
    the low 48 bits (6 bytes, 12 hex digits).

    OpenCode compares message ids (up to 1.18.3 its prompt loop takes the user message
    with the highest id as the last one and stops once that id sorts before the last
    finished assistant message's), so a minted id must sort after every id we minted
    before it (even in the same millisecond: the counter, then the next millisecond's
    stamps if 4095 ids were minted in one) and after every id the server minted.
    ``now_ms``: the wall clock, in milliseconds.

    The server mints its ids with its own clock, which may run ahead of ours (a remote
    server with clock skew; or the same millisecond with a higher counter). Measured
    (tests/real/test_skewed_ids_real.py): 1.15.13, 1.17.19 and 1.18.3 never answer a
    prompt whose id sorts below the session's latest ids; 1.18.34 orders by creation
    time and answers it. So :meth:`observe` raises the floor to the stamps of the ids
    the server shows us, and the next stamp sorts after every id observed.
    """

    def __init__(self, now_ms: Callable[[], int] = _now_ms) -> None:
        self._lock = threading.Lock()
        self._last = 0
        self._now_ms = now_ms

    def next(self) -> int:
        with self._lock:
            self._last = max(self._last + 1, self._now_ms() * 0x1000 + 1)
            return self._last & _MASK48

    def observe(self, stamp: int) -> None:
        """Make every later stamp sort after ``stamp`` (48 bits, from a server's id).

        The 48 bits wrap every 2^36 ms (about 2.2 years), so how far the stamp is
        ahead of our clock is counted modulo 2^48: a stamp just past the wrap is just
        ahead, one just behind our clock is almost a whole period ahead. A stamp more
        than an hour ahead is ignored (a server can push our ids at most that far;
        one behind our clock would raise nothing anyway).
        """
        with self._lock:
            now = self._now_ms() * 0x1000
            ahead = (stamp - now) & _MASK48
            if ahead <= _MAX_AHEAD_MS * 0x1000:
                self._last = max(self._last, now + ahead)


_clock = _MonotonicIdClock()


def mint_message_id() -> str:
    """A new OpenCode-style message id: ``msg_`` + 12 hex digits + 14 base62 characters."""
    stamp = _clock.next()
    tail = "".join(secrets.choice(_BASE62) for _ in range(14))
    return f"msg_{stamp:012x}{tail}"


def observe_message_id(message_id: str) -> None:
    """Note a message id the server showed us: ids minted later sort after it.

    Ids outside OpenCode's ascending scheme (a test server's ``msg_user_1``) say
    nothing about the server's clock and are ignored.
    """
    match = _ASCENDING_MESSAGE_ID.fullmatch(message_id)
    if match is not None:
        _clock.observe(int(match[1], 16))
