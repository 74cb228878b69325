"""One spelling per project directory, the one the OpenCode server itself uses.

Why this exists: the adapter keeps one client and one event stream per
directory, keyed by the string the host passed. ``/p`` and ``/p/`` were two
keys, so one project got two clients and two event streams, while the server
treats them as one directory (and scopes sessions, events, status and pending
requests by it). :func:`normalise_directory` maps every spelling the server
treats as one directory to one string, which the adapter uses both as its key
and as the directory it sends.

What the real server 1.18.34 does with the ``directory`` query parameter and
the ``x-opencode-directory`` header (both alike; measured, see
``tests/test_directories.py``): it resolves the path lexically (``/p/``,
``/p/./``, ``/p//`` and ``/q/../p`` are ``/p``; ``~`` is not expanded), a
relative path against **the server process's** working directory, then follows
symlinks when the path exists (a session created with ``/link`` is stored
under ``/real`` and its events reach the ``/real`` stream); a path that does
not exist is kept as resolved lexically, symlinks and all. An empty string
means the server's own directory, and a NUL byte is a 500.

This module does the same, with one deliberate difference: a relative path is
resolved against **this** process's working directory. The adapter cannot know
an external server's working directory, so it sends an absolute path and the
result no longer depends on where the server was started; when the adapter
starts the server itself, both directories are the same. Symlinks are followed
on this machine's file system, which is the server's when the adapter started
it or talks to it on this machine; for a server elsewhere, a path that does not
exist here is left as it is (lexically normalised), as the server does.
"""

from __future__ import annotations

import os
import posixpath

from .._exceptions import InvalidInputError

__all__ = ["normalise_directory"]


def normalise_directory(directory: str | None) -> str | None:
    """The server's spelling of ``directory`` (``None``, the server's default, stays ``None``).

    Raises :class:`InvalidInputError` for a non-string, an empty string (pass
    ``None`` for the server's default directory) or a NUL byte (no file system
    path has one; the server answers 500).
    """
    if directory is None:
        return None
    given: object = directory  # a host's untyped code can pass anything
    if not isinstance(given, str):
        raise InvalidInputError(f"directory must be a string path, got {type(given).__name__}")
    if not directory:
        raise InvalidInputError("directory must not be empty (pass None for the server's own)")
    if "\x00" in directory:
        raise InvalidInputError("directory must not contain a NUL byte")
    path = posixpath.normpath(posixpath.join(os.getcwd(), directory))
    if path.startswith("//"):
        path = "/" + path.lstrip("/")  # POSIX keeps a leading "//"; the server does not
    try:
        return os.path.realpath(path, strict=True)
    except OSError:
        return path  # not (fully) there, or not readable: the server keeps it lexical too
