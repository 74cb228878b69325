"""The thread store: durable thread records the web app's workers share.

``await open_store(target)`` opens an SQLite file (the embedded default, for the
workers of one host) or a PostgreSQL database (several hosts); both are a
:class:`ThreadStore` of :class:`ThreadRecord` values (``docs/web.md``, "The thread
store"). The PostgreSQL store needs the ``postgres`` extra and is imported only
when a ``postgresql://`` URL asks for it.

The modules: the interface and what ``list`` answers (``_store``), the record and its
checks (``_record``), records as rows and back (``_rows``), the versioned schema and its
migrations (``_schema``), the SQLite store (``_sqlite``), the PostgreSQL store
(``_postgres``), ``open_store`` (``_open``) and the store's exceptions (``_errors``).
"""

from ._errors import (
    CorruptRecordError,
    SchemaTooNewError,
    StoreError,
    StoreUnavailableError,
    ThreadExistsError,
    ThreadNotFoundError,
)
from ._open import default_store_path, open_store
from ._record import ThreadRecord
from ._sqlite import SqliteThreadStore
from ._store import Listing, ThreadStore

__all__ = [
    "CorruptRecordError",
    "Listing",
    "SchemaTooNewError",
    "SqliteThreadStore",
    "StoreError",
    "StoreUnavailableError",
    "ThreadExistsError",
    "ThreadNotFoundError",
    "ThreadRecord",
    "ThreadStore",
    "default_store_path",
    "open_store",
]
