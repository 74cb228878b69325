"""The library's log lines are safe to keep and to share: a traceback never shows a frame's
local variables (one may hold a password or a token), and a lone UTF-16 surrogate never
stops a strict UTF-8 stream, in every format, the ACP command's included.

A test of internals: the library's own loggers (``adapter._logging.get_logger``) write
the lines checked, set up as ``configure_logging`` or as the ACP command does
(``adapter.cli._acp._log_to``); no public name makes either."""

from __future__ import annotations

import argparse
import io
import json
import logging
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from adapter import configure_logging
from adapter._logging import get_logger
from adapter.cli._acp import _log_to

LOCAL_SECRET = "s3cret-value"


def _fails_holding_a_secret() -> None:
    api_key = LOCAL_SECRET  # a frame local that a locals-printing traceback would show
    raise RuntimeError(f"failed after {len(api_key)} characters")


class StrictStream(io.TextIOWrapper):
    """A strict UTF-8 text stream (a lone surrogate raises), as a pipe or file can be."""

    def __init__(self, *, tty: bool = False) -> None:
        super().__init__(io.BytesIO(), encoding="utf-8", errors="strict", write_through=True)
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty

    def text(self) -> str:
        """What was written, without the terminal's colour codes."""
        buffer = self.buffer
        assert isinstance(buffer, io.BytesIO)
        return re.sub(r"\x1b\[[0-9;]*m", "", buffer.getvalue().decode("utf-8"))


def _acp_logging(stream: StrictStream, fmt: str) -> None:
    _log_to(stream, argparse.Namespace(log_format=fmt, verbose=True))


LOG_SETUPS: dict[str, Callable[[StrictStream], None]] = {
    "console": lambda s: configure_logging(format="console", level="DEBUG", file=s),
    "console-tty": lambda s: configure_logging(format="console", level="DEBUG", file=s),
    "json": lambda s: configure_logging(format="json", level="DEBUG", file=s),
    "acp-console": lambda s: _acp_logging(s, "console"),
    "acp-json": lambda s: _acp_logging(s, "json"),
}


@pytest.fixture
def root_handlers() -> Iterator[None]:
    """The ACP command adds a standard-library handler: removed after the test."""
    before = list(logging.getLogger().handlers)
    level = logging.getLogger().level
    yield
    logging.getLogger().handlers[:] = before
    logging.getLogger().setLevel(level)


@pytest.mark.parametrize("setup", list(LOG_SETUPS))
def test_a_logged_traceback_never_prints_local_variables(setup: str, root_handlers: None) -> None:
    stream = StrictStream(tty=setup.endswith("tty"))
    LOG_SETUPS[setup](stream)
    log = get_logger("adapter.test")
    try:
        _fails_holding_a_secret()
    except RuntimeError as exc:
        log.exception("failed.exception")
        log.error("failed.exc_info", exc_info=True)
        log.error("failed.exc_info_object", exc_info=exc)
    text = stream.text()
    assert text.count("_fails_holding_a_secret") >= 3, text
    assert "failed after 12 characters" in text
    assert LOCAL_SECRET not in text


class ReprQuotesTheServer:
    def __repr__(self) -> str:
        return "<session titled c\udc00d>"


@pytest.mark.parametrize("setup", list(LOG_SETUPS))
def test_a_log_line_with_lone_surrogates_is_written(setup: str, root_handlers: None) -> None:
    stream = StrictStream(tty=setup.endswith("tty"))
    LOG_SETUPS[setup](stream)
    log = get_logger("adapter.test")
    log.warning(
        "title\ud800",
        title="a\ud800b",
        nested={"k\udfff": ["x\ud83d", 1]},
        thing=ReprQuotesTheServer(),
    )
    try:
        raise ValueError("bad \udc80 input")
    except ValueError:
        log.exception("failed")
    text = stream.text()
    if "json" in setup:
        first, second = (json.loads(line) for line in text.splitlines())
        assert first["title"] == "a\ufffdb" and first["event"] == "title\ufffd"
        assert first["nested"] == {"k\ufffd": ["x\ufffd", 1]}
        assert first["thing"] == "<session titled c\ufffdd>"
        assert "\\ud" not in text, "no lone surrogate escape in the JSON either"
        assert second["event"] == "failed" and "bad \ufffd input" in json.dumps(
            second["exception"], ensure_ascii=False
        )
    else:
        assert "a\ufffdb" in text and "bad \ufffd input" in text
        assert "k\ufffd" in text and "x\ufffd" in text and "c\ufffdd" in text


@pytest.mark.parametrize("fmt", ["console", "json"])
def test_the_acp_commands_standard_library_log_lines_are_well_formed(
    fmt: str, root_handlers: None
) -> None:
    """The ACP SDK logs through the standard library, to the same stream as structlog."""
    stream = StrictStream()
    _acp_logging(stream, fmt)
    sdk = logging.getLogger("acp.connection")
    sdk.warning("received %s", "a\ud800b")
    try:
        _fails_holding_a_secret()
    except RuntimeError:
        sdk.exception("handler failed on \udfff")
    text = stream.text()
    assert "received a\ufffdb" in text and "handler failed on \ufffd" in text
    assert "_fails_holding_a_secret" in text and LOCAL_SECRET not in text


def test_no_library_log_call_hands_structlog_a_live_exception() -> None:
    """A host may render the library's records with its own structlog
    ``ProcessorFormatter``, whose default console renderer's rich tracebacks print
    every frame's locals. So the library logs an exception as text
    (Python's formatted traceback), never as ``exc_info`` or through ``.exception()``."""
    import ast

    offenders: list[str] = []
    import adapter

    for path in sorted(Path(adapter.__file__).parent.rglob("*.py")):
        if "testing" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            logger = ast.unparse(node.func.value)
            is_log = logger.endswith(("_log", "log", "logger"))
            if is_log and (
                node.func.attr == "exception" or any(k.arg == "exc_info" for k in node.keywords)
            ):
                offenders.append(f"{path}:{node.lineno}: {ast.unparse(node)[:80]}")
    assert offenders == [], (
        "log the formatted traceback instead, as adapter/web/_errors.py does: "
        'error_type=type(exc).__name__, traceback="".join(traceback.format_exception(exc))'
    )
