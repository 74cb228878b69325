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

# Re-exported with ``as`` (no ``__all__``): ``adapter.web`` lists the public names once.
from ._errors import CorruptRecordError as CorruptRecordError
from ._errors import SchemaTooNewError as SchemaTooNewError
from ._errors import StoreError as StoreError
from ._errors import StoreUnavailableError as StoreUnavailableError
from ._errors import ThreadExistsError as ThreadExistsError
from ._errors import ThreadNotFoundError as ThreadNotFoundError
from ._open import default_store_path as default_store_path
from ._open import open_store as open_store
from ._record import ThreadRecord as ThreadRecord
from ._sqlite import SqliteThreadStore as SqliteThreadStore
from ._store import Listing as Listing
from ._store import ThreadStore as ThreadStore
