"""What the thread store raises: one base, and one type per answer a host gives.

Every store failure is a :class:`StoreError` (an :class:`adapter.OpenCodeError`, so a
host's one ``except`` still catches it), and each subclass is one answer the web app
gives (``docs/web.md``, "The thread store"): a duplicate id is a 409, a store that is
down, locked or unwritable a 503 (the client may retry; nothing was half-written), a
record that does not parse is refused by itself while the others load, and a database
written by a newer version of this package is left alone. Messages name the thread
and the reason, never a DSN (it may hold a password).
"""

from __future__ import annotations

from adapter import OpenCodeError

__all__ = [
    "CorruptRecordError",
    "SchemaTooNewError",
    "StoreError",
    "StoreUnavailableError",
    "ThreadExistsError",
    "ThreadNotFoundError",
]


class StoreError(OpenCodeError):
    """Base class of every thread store failure."""


class ThreadExistsError(StoreError):
    """``create`` of a thread id the store already holds (another worker won)."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        super().__init__(f"thread {thread_id!r} already exists in the store")


class ThreadNotFoundError(StoreError):
    """``update`` of a thread id the store does not hold (deleted meanwhile)."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        super().__init__(f"thread {thread_id!r} is not in the store")


class StoreUnavailableError(StoreError):
    """The store cannot answer now: its server is down or unreachable, its file is
    locked past the busy timeout, unwritable or not a database. Nothing was written;
    the same call may succeed once the store is back."""


class CorruptRecordError(StoreError):
    """A stored record that does not parse (hand-edited, or written by a newer
    schema): ``thread_id`` and ``reason`` say which and why. ``get`` raises it;
    ``list`` skips the record and reports it."""

    def __init__(self, thread_id: str, reason: str) -> None:
        self.thread_id = thread_id
        self.reason = reason
        super().__init__(f"the stored record of thread {thread_id!r:.80} is corrupt: {reason}")


class SchemaTooNewError(StoreError):
    """The database's schema is newer than this package knows: it was written by a
    later version, and is refused rather than read wrongly or migrated backwards."""

    def __init__(self, found: int, known: int) -> None:
        self.found = found
        self.known = known
        super().__init__(
            f"the thread store has schema version {found}, newer than the {known} this "
            "version of opencode-tree-adapter knows: upgrade it, or use another store"
        )
