"""Structured logging.

The library logs through ``structlog`` and never configures it on import: the
host decides where logs go. :func:`configure_logging` is a convenience for
command-line use and tests (console or JSON lines on stderr, level filter).
"""

from __future__ import annotations

import logging
import sys
from typing import Any, Literal

import structlog

from ._exceptions import InvalidInputError

__all__ = ["configure_logging", "get_logger"]


def get_logger(name: str) -> Any:
    """The logger of one library module (``adapter.client``, ``adapter.stop``...)."""
    return structlog.get_logger(name)


def configure_logging(
    *, format: Literal["console", "json"] = "console", level: int | str = logging.INFO
) -> None:
    """Send structlog output to stderr as console lines or JSON lines, filtered by ``level``."""
    numeric = logging.getLevelName(level) if isinstance(level, str) else level
    if not isinstance(numeric, int):
        raise InvalidInputError(f"unknown log level {level!r}")
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if format == "json"
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
