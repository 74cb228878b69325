"""What ``opencode-tree`` writes on stderr besides its output: docs/cli.md's promise.

A one-shot command (``tree``, ``stop``, ``run``, ``inventory``, ``demo``) that fails says
so in one line and logs nothing else unless ``--verbose``: before, a ``stop`` on an
unreachable server printed 16 retry and stop warnings above its one-line error. ``web``
logs warnings (its stderr is a server's log), ``acp`` info (its stderr or ``--log-file``
is the editor's log of the agent). The commands run as a user runs them: a subprocess.
"""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapter.cli import amain


@pytest.fixture
def closed_url() -> Iterator[str]:
    """A loopback port bound but never listening: every connection is refused, and no
    other process can take the port while the test runs."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def opencode_tree(*argv: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "adapter", *argv],
        input=stdin.decode() if stdin is not None else None,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["stop", "ses_x"], "error: could not stop ses_x (abort): "),
        (["tree", "ses_x", "--timeout", "5"], "error: cannot reach http://127.0.0.1:"),
    ],
    ids=["stop", "tree"],
)
def test_an_unreachable_server_is_one_line_on_stderr(
    closed_url: str, argv: list[str], error: str
) -> None:
    done = opencode_tree(*argv, "--url", closed_url)
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(error) and "(after 4 attempts)" in lines[0]


def test_verbose_still_shows_every_retry(closed_url: str) -> None:
    done = opencode_tree("stop", "ses_x", "--url", closed_url, "--verbose")
    assert done.returncode == 1
    # 3 retries of each of the 3 aborts in flight, of the children read and of the status.
    assert done.stderr.count("opencode.retry") >= 9, done.stderr
    assert done.stderr.splitlines()[-1].startswith("error: could not stop ses_x")


def test_acp_logs_at_info(closed_url: str, tmp_path: Path) -> None:
    """The editor closes the pipe at once: the agent's info line ``acp.closed`` is in
    its log."""
    log = tmp_path / "acp.log"
    done = opencode_tree("acp", "--url", closed_url, "--log-file", str(log), stdin=b"")
    assert done.returncode == 0, done.stderr
    assert "[info     ] acp.closed" in log.read_text()


@pytest.fixture
def library_logger() -> Iterator[logging.Logger]:
    """The ``adapter`` logger, given back as it was (the CLI configures it in-process)."""
    logger = logging.getLogger("adapter")
    handlers, level, propagate = list(logger.handlers), logger.level, logger.propagate
    yield logger
    logger.handlers[:] = handlers
    logger.setLevel(level)
    logger.propagate = propagate


@pytest.mark.parametrize(
    ("argv", "level"),
    [
        (["tree", "ses_x", "--timeout", "5"], logging.ERROR),
        (["tree", "ses_x", "--timeout", "5", "-v"], logging.DEBUG),
        (["web", "--workers", "0", "--no-store"], logging.WARNING),
    ],
    ids=["one-shot", "verbose", "web"],
)
async def test_each_command_logs_at_its_documented_level(
    closed_url: str, library_logger: logging.Logger, argv: list[str], level: int
) -> None:
    await amain([*argv, "--url", closed_url])
    assert library_logger.level == level
