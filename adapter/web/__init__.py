"""``adapter.web``: the stop-button backend, an ASGI app a host mounts in its own.

``create_app(adapter, token=..., allowed_hosts=..., allowed_origins=...)`` serves a
page with a Stop button at ``/`` and a JSON + Server-Sent-Events API over an
:class:`adapter.OpenCodeAdapter` the host passes in (``docs/web.md``). With or
without a token it refuses cross-site and DNS-rebinding requests before any route
runs, and every answer carries a Content Security Policy and the framing, sniffing
and referrer headers. Needs the ``web`` extra (Starlette, sse-starlette; uvicorn to
serve it).

``create_app(..., store=await open_store(...))`` shares the threads between workers and
restarts: a :class:`ThreadStore` of :class:`ThreadRecord` values, SQLite by default,
PostgreSQL (the ``postgres`` extra) for several hosts (``docs/web.md``, "The thread store").

The modules, as ``docs/architecture.md`` names them: the app and its routes (``_app``), the
error shape (``_errors``), request bodies (``_body``), the thread id grammar
(``_thread_ids``), the cross-site and rebinding guard (``_guard``), the token (``_auth``),
the security headers (``_headers``), JSON answers (``_json``), the event stream (``_sse``),
the checked model and agent choices (``_choices``), the threads a worker serves
(``_threads``), the follower that keeps their stored status current (``_follow``), and the
thread store (``_store``).
"""

from ._app import create_app
from ._store import (
    CorruptRecordError,
    Listing,
    SchemaTooNewError,
    StoreError,
    StoreUnavailableError,
    ThreadExistsError,
    ThreadNotFoundError,
    ThreadRecord,
    ThreadStore,
    default_store_path,
    open_store,
)

__all__ = [
    "CorruptRecordError",
    "Listing",
    "SchemaTooNewError",
    "StoreError",
    "StoreUnavailableError",
    "ThreadExistsError",
    "ThreadNotFoundError",
    "ThreadRecord",
    "ThreadStore",
    "create_app",
    "default_store_path",
    "open_store",
]

for _name in __all__:
    # Not ThreadRecord: msgspec resolves a Struct's annotations in its __module__.
    if _name != "ThreadRecord":
        globals()[_name].__module__ = __name__
del _name
