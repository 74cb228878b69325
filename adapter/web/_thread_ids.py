"""The thread id grammar of the web API: one rule for a body's ``thread_id``, every
path's ``{thread_id}`` and every id the thread store hands back.

Why its own module: the request bodies (``_body``) and the store's records
(``_store``) both apply it, and neither should import the other to do so.
"""

from __future__ import annotations

import re

from adapter._base._unicode import has_surrogates

__all__ = ["MAX_THREAD_ID_CHARS", "thread_id_problem"]

#: The longest thread id (it is a path segment and goes into log lines).
MAX_THREAD_ID_CHARS = 200

#: What a thread id may not hold: ``/`` and ``\\`` (path separators, also once
#: decoded from ``%2F``/``%5C``), control characters (C0, DEL, C1), the line and
#: paragraph separators and the bidirectional formatting characters (they reorder
#: or break what a page or a log line shows).
_THREAD_ID_FORBIDDEN = re.compile("[/\\\\\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_THREAD_ID_RULE = (
    f"thread_id must be 1 to {MAX_THREAD_ID_CHARS} characters, not '.' or '..', not only "
    "spaces, without '/', '\\', control characters, line separators, bidirectional "
    "controls or lone surrogates"
)


def thread_id_problem(value: str) -> str | None:
    """Why ``value`` is not a thread id of the web API (``None``: it is one).

    An id is a path segment of every thread route, built by the page with
    ``encodeURIComponent``: ``.`` and ``..`` are the segments a URL resolves away
    (``threads/../stop`` is ``/stop``), and a ``/`` or ``\\`` becomes a separator.
    """
    if (
        not value
        or len(value) > MAX_THREAD_ID_CHARS
        or value in (".", "..")
        or not value.strip()
        or _THREAD_ID_FORBIDDEN.search(value) is not None
        or has_surrogates(value)
    ):
        return _THREAD_ID_RULE
    return None
