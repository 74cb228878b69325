"""``ThreadStore``: the interface every store has, and what ``list`` answers.

Why an interface: the web app's workers share their threads through a store, an
SQLite file on one host or PostgreSQL across hosts (``docs/web.md``, "The thread
store"), and the app calls the same six methods on either. Every method is a
coroutine; a store that cannot answer raises :class:`StoreUnavailableError`,
whatever the driver's own exception was.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass

from ..._base._closing import AsyncClosing
from ._errors import CorruptRecordError
from ._record import ThreadRecord

__all__ = ["Listing", "ThreadStore"]


@dataclass(frozen=True, slots=True)
class Listing:
    """Every record of a store: those that parse, oldest first, and those that do
    not (each a :class:`CorruptRecordError` naming the thread and the reason)."""

    records: tuple[ThreadRecord, ...]
    corrupt: tuple[CorruptRecordError, ...] = ()

    @property
    def corrupt_ids(self) -> tuple[str, ...]:
        return tuple(error.thread_id for error in self.corrupt)


class ThreadStore(AsyncClosing, abc.ABC):
    """Durable thread records shared by the app's workers.

    ``create`` is the one place a thread id is claimed: of two workers creating the
    same id, exactly one wins and the other gets :class:`ThreadExistsError`.
    ``update`` replaces a record but keeps its ``created_at``; the last writer wins.
    """

    @abc.abstractmethod
    async def create(self, record: ThreadRecord) -> None:
        """Store a new record; :class:`ThreadExistsError` if its id is taken."""

    @abc.abstractmethod
    async def get(self, thread_id: str) -> ThreadRecord | None:
        """The record of ``thread_id``, ``None`` if there is none;
        :class:`CorruptRecordError` if it does not parse."""

    @abc.abstractmethod
    async def list(self) -> Listing:
        """Every record; one that does not parse is skipped (logged
        ``store.corrupt_record``) and reported in :attr:`Listing.corrupt`."""

    @abc.abstractmethod
    async def update(self, record: ThreadRecord) -> None:
        """Replace the record of ``record.thread_id`` (its ``created_at`` is kept);
        :class:`ThreadNotFoundError` if there is none."""

    @abc.abstractmethod
    async def delete(self, thread_id: str) -> bool:
        """Remove the record of ``thread_id``; whether there was one."""

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Release the connection (idempotent). The data stays."""
