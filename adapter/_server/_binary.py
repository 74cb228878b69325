"""Where an OpenCode binary is, and a port to start it on.

One place for what the adapter's own ``opencode serve`` (:mod:`adapter._server._process`),
the command line (``opencode-tree acp``, ``demo``, ``web --try``) and the test helpers
(:class:`adapter.testing.RealOpenCodeServer`) all need: the binary the project pinned
(``OPENCODE_BIN``, the checkout's ``.opencode/`` install, else ``opencode`` on ``PATH``)
and a free loopback port that is never OpenCode's default 4096.
"""

from __future__ import annotations

import os
import shutil
import socket
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Final

__all__ = [
    "OPENCODE_DEFAULT_PORT",
    "PINNED_VERSION",
    "find_opencode_binary",
    "find_project_root",
    "free_port",
]

#: The OpenCode version the project is tested against (see scripts/install-opencode.sh).
PINNED_VERSION: Final = "1.18.34"

_PROJECT_NAME: Final = "opencode-tree-adapter"
_BINARY_IN_PROJECT: Final = Path(".opencode/node_modules/opencode-linux-x64/bin/opencode")
#: OpenCode's default port: a server there may be the user's own, so never ours.
OPENCODE_DEFAULT_PORT: Final = 4096


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that was free a moment ago (never 4096)."""
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
            port = int(sock.getsockname()[1])
        if port != OPENCODE_DEFAULT_PORT:
            return port
    raise RuntimeError("could not find a free port")


def _is_project_root(directory: Path) -> bool:
    pyproject = directory / "pyproject.toml"
    if not pyproject.is_file():
        return False
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return False
    project = data.get("project")
    return isinstance(project, dict) and project.get("name") == _PROJECT_NAME


def _walk_up(start: Path) -> Iterator[Path]:
    start = start.resolve()
    yield start
    yield from start.parents


def _project_roots() -> list[Path]:
    roots: list[Path] = []
    for start in (Path.cwd(), Path(__file__).parent):
        for directory in _walk_up(start):
            if _is_project_root(directory):
                if directory not in roots:
                    roots.append(directory)
                break
    return roots


def find_project_root() -> Path | None:
    """Find the ``opencode-tree-adapter`` checkout from the cwd, else from this file."""
    roots = _project_roots()
    return roots[0] if roots else None


def find_opencode_binary(explicit: str | os.PathLike[str] | None = None) -> Path:
    """Locate the ``opencode`` executable.

    Order: ``explicit``; the ``OPENCODE_BIN`` environment variable; the project-local
    install ``<project root>/.opencode/node_modules/opencode-linux-x64/bin/opencode``;
    ``opencode`` on ``PATH``. An explicit path or ``OPENCODE_BIN`` that does not exist
    is an error (no silent fallback).

    Raises:
        FileNotFoundError: nothing found; the message says to run ``make opencode``.
    """
    hint = (
        "run `make opencode` (or scripts/install-opencode.sh) to install opencode "
        f"{PINNED_VERSION} into .opencode/, or set OPENCODE_BIN to the binary"
    )
    for label, value in (
        ("explicit path", explicit),
        ("OPENCODE_BIN", os.environ.get("OPENCODE_BIN")),
    ):
        if value:
            path = Path(value).expanduser()
            if path.is_file() and os.access(path, os.X_OK):
                return path.resolve()
            raise FileNotFoundError(
                f"opencode binary from {label} not found or not executable: {path}; {hint}"
            )
    candidates = [root / _BINARY_IN_PROJECT for root in _project_roots()]
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    on_path = shutil.which("opencode")
    if on_path:
        return Path(on_path).resolve()
    looked = ", ".join(str(c) for c in [*candidates, "PATH"])
    raise FileNotFoundError(f"opencode binary not found (looked in {looked}); {hint}")
