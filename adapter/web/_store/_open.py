"""``open_store``: a store from the one string a host configures.

Why one string: the command line's ``--store`` and the ``OPENCODE_TREE_STORE``
environment variable carry either store, so a path, an ``sqlite:///`` URL and a
``postgresql://`` DSN are told apart here, once, and anything else is refused
naming only its scheme (a URL may hold a password: it is never repeated).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from adapter import InvalidInputError

from ._sqlite import SqliteThreadStore
from ._store import ThreadStore

__all__ = ["default_store_path", "open_store"]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
_FORMS = "a file path, sqlite:///PATH or postgresql://..."


def default_store_path() -> Path:
    """Where the SQLite store lives when none is named:
    ``$XDG_STATE_HOME/opencode-tree/threads.sqlite3``, by default
    ``~/.local/state/opencode-tree/threads.sqlite3``."""
    state = os.environ.get("XDG_STATE_HOME", "")
    base = Path(state) if os.path.isabs(state) else Path.home() / ".local" / "state"
    return base / "opencode-tree" / "threads.sqlite3"


async def open_store(target: str | os.PathLike[str] | None = None) -> ThreadStore:
    """The store ``target`` names, opened and migrated:

    * ``None``: the SQLite file at :func:`default_store_path`;
    * a path (``str`` or ``os.PathLike``), or ``sqlite:///PATH`` (``sqlite:///rel.db``,
      ``sqlite:////abs/threads.sqlite3``): an SQLite file;
    * ``postgresql://...`` or ``postgres://...``: a PostgreSQL database (the
      ``postgres`` extra). Put a DSN holding a password in the environment, not on a
      command line.

    Anything else is :class:`adapter.InvalidInputError`.
    """
    if target is None:
        return await SqliteThreadStore.open(default_store_path())
    if isinstance(target, os.PathLike):
        return await SqliteThreadStore.open(target)
    if not isinstance(target, str) or not target.strip():
        raise InvalidInputError(f"the thread store must be {_FORMS}")
    match = _SCHEME.match(target)
    if match is None or len(match.group(1)) == 1:  # no scheme (a drive letter is a path)
        return await SqliteThreadStore.open(target)
    scheme = match.group(1).lower()
    if scheme == "sqlite":
        return await SqliteThreadStore.open(_sqlite_path(target))
    if scheme in ("postgresql", "postgres"):
        try:
            from ._postgres import PostgresThreadStore
        except ImportError:
            raise InvalidInputError(
                "a PostgreSQL thread store needs the postgres extra: "
                "pip install 'opencode-tree-adapter[postgres]'"
            ) from None
        return await PostgresThreadStore.open(target)
    raise InvalidInputError(f"unsupported thread store scheme {scheme[:20]!r}: use {_FORMS}")


def _sqlite_path(url: str) -> str:
    rest = url[len("sqlite:") :]
    if not rest.startswith("///") or len(rest) == 3 or "?" in rest or "#" in rest:
        raise InvalidInputError(
            "an SQLite store URL is sqlite:///relative/path or sqlite:////absolute/path "
            "(no host, no query)"
        )
    path = rest[3:]
    if path == ":memory:":
        raise InvalidInputError("an in-memory SQLite store would not be shared: name a file")
    return path
