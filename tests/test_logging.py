"""A quiet library: the adapter logs through the standard library's ``logging`` and
prints nothing until the host (or ``configure_logging``, or the CLI) says where to.

The quiet test runs in a fresh interpreter: this test process has its logging
configured by pytest, which is exactly what a host that never configured logging
does not have.
"""

from __future__ import annotations

import io
import logging
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapter import configure_logging
from adapter._logging import get_logger

ROOT = Path(__file__).resolve().parent.parent

A_TURN_AND_A_STOP = textwrap.dedent(
    """
    import asyncio

    from adapter import OpenCodeAdapter
    from adapter.testing.fake import FakeOpenCodeServer, Hang, Text


    async def main() -> None:
        fake = FakeOpenCodeServer(seed=7)
        fake.script("answer", [Text("an answer.", chunks=3)])
        fake.script("long", [Text("working"), Hang()])
        async with OpenCodeAdapter(fake.base_url, transport=fake.transport) as oc:
            events = oc.events("t")
            await oc.start_session("t", title="quiet")
            await oc.send_turn("t", "[[script:answer]]")
            async for event in events:
                if event.type == "turn.completed":
                    break
            await oc.send_turn("t", "[[script:long]]")
            result = await oc.interrupt_turn("t")
            assert result is not None
            await oc.stop_session("t")
        await fake.aclose()


    asyncio.run(main())
    """
)


def test_a_turn_and_a_stop_print_nothing_when_logging_is_unconfigured() -> None:
    done = subprocess.run(
        [sys.executable, "-c", A_TURN_AND_A_STOP],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert done.stderr == ""


@pytest.fixture
def adapter_logger() -> Iterator[logging.Logger]:
    """The library's logger, restored after the test (level, handlers, propagation)."""
    logger = logging.getLogger("adapter")
    saved = (logger.level, list(logger.handlers), logger.propagate)
    yield logger
    logger.setLevel(saved[0])
    logger.handlers[:] = saved[1]
    logger.propagate = saved[2]


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_a_hosts_standard_library_logging_receives_the_adapters_records(
    adapter_logger: logging.Logger,
) -> None:
    host = _Records()
    adapter_logger.addHandler(host)
    adapter_logger.setLevel(logging.INFO)
    log = get_logger("adapter.client")
    log.debug("dropped.by_the_host_level")
    log.info("session.started", thread_id="t-1")
    (record,) = host.records
    assert record.name == "adapter.client" and record.levelno == logging.INFO
    # A plain formatter (the host's own) shows the event and its fields.
    line = logging.Formatter("%(levelname)s %(name)s %(message)s").format(record)
    assert line.startswith("INFO adapter.client session.started")
    assert "thread_id='t-1'" in line


def test_configure_logging_turns_console_output_on_stderr(
    adapter_logger: logging.Logger, capsys: pytest.CaptureFixture[str]
) -> None:
    configure_logging(level="INFO")
    get_logger("adapter.client").info("session.started", thread_id="t-1")
    get_logger("adapter.client").debug("below.the_level")
    out, err = capsys.readouterr()
    assert out == ""
    assert "session.started" in err and "t-1" in err
    assert "below.the_level" not in err


def test_configure_logging_twice_installs_one_handler(adapter_logger: logging.Logger) -> None:
    first, second = io.StringIO(), io.StringIO()
    configure_logging(level="INFO", file=first)
    configure_logging(level="INFO", file=second)
    get_logger("adapter.stop").info("tree.stopped")
    assert first.getvalue() == ""
    assert second.getvalue().count("tree.stopped") == 1


SECRET = "sk-live-do-not-print-me"


def _fails_holding_a_secret() -> None:
    token = SECRET
    raise RuntimeError(f"failed after {len(token)} characters")


@pytest.mark.parametrize("fmt", ["console", "json"])
def test_a_configured_log_never_prints_a_frames_locals(
    fmt: str, adapter_logger: logging.Logger
) -> None:
    stream = io.StringIO()
    configure_logging(format=fmt, level="DEBUG", file=stream)  # type: ignore[arg-type]
    try:
        _fails_holding_a_secret()
    except RuntimeError:
        get_logger("adapter.test").exception("failed")
    text = stream.getvalue()
    assert "_fails_holding_a_secret" in text and "failed after 23 characters" in text
    assert SECRET not in text
