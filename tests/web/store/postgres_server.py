"""A throwaway PostgreSQL server for the store's tests, from Debian's binaries.

PostgreSQL refuses to run as root, and CI runs as root: the server then runs as
``nobody`` (uid 65534, through ``setpriv``) in a directory that user owns,
listening on 127.0.0.1 only, on a free port, with ``trust`` authentication (no
one else can reach a loopback port of a throwaway cluster in a test run). One
server per test session (per xdist worker); :meth:`stop` and :meth:`start` take it
down and bring it back on the same data and port, as an outage would.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["PostgresServer", "postgres_bin"]

_NOBODY = 65534


def postgres_bin() -> Path | None:
    """The newest installed ``/usr/lib/postgresql/<major>/bin`` holding ``initdb``."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: (
            int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0
        ),
    )
    return Path(found[-1]).parent if found else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class PostgresServer:
    def __init__(self, bin_dir: Path) -> None:
        self._bin = bin_dir
        # Not under pytest's tmp dirs: those are root's 0700, which nobody cannot cross.
        self.root = Path(tempfile.mkdtemp(prefix="opencode-tree-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self._as_root = os.geteuid() == 0
        if self._as_root:
            os.chown(self.root, _NOBODY, _NOBODY)

    def _run(self, *args: str) -> None:
        command = list(args)
        if self._as_root:
            command = [
                "setpriv",
                f"--reuid={_NOBODY}",
                f"--regid={_NOBODY}",
                "--clear-groups",
                "--",
                *command,
            ]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8"}
        result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=self.root)
        if result.returncode != 0:
            raise RuntimeError(f"{args[0]} failed ({result.returncode}): {result.stderr[-2000:]}")

    def init(self) -> None:
        self._run(
            str(self._bin / "initdb"),
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--auth=trust",
            "--encoding=UTF8",
            "--no-sync",
        )

    def start(self) -> None:
        options = f"-k {self.root} -c listen_addresses=127.0.0.1 -p {self.port} -c fsync=off"
        self._run(
            str(self._bin / "pg_ctl"),
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.root / "server.log"),
            "-w",
            "start",
        )

    def stop(self) -> None:
        self._run(str(self._bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")

    def dsn(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def throwaway_postgres() -> Iterator[PostgresServer]:
    """A started :class:`PostgresServer`, removed on the way out. Skips the test without
    the binaries, but fails under ``CI``, where ``make postgres`` must have installed them."""
    bin_dir = postgres_bin()
    if bin_dir is None:
        message = "PostgreSQL's server binaries are missing (make postgres installs them)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    server = PostgresServer(bin_dir)
    try:
        server.init()
        server.start()
        yield server
        server.stop()
    finally:
        server.remove()
