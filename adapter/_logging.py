"""Structured logging.

The library logs through ``structlog`` and never configures it on import: the
host decides where logs go. :func:`configure_logging` is a convenience for
command-line use and tests (console or JSON lines on stderr, level filter).

What it writes is safe to keep and to share: a traceback shows the frames, never
their local variables (one may hold a password or a token), and every string is
well formed (:mod:`adapter._unicode`), so a lone UTF-16 surrogate from the
server cannot make a strict UTF-8 stream refuse the line.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, Literal, TextIO

import structlog
from structlog.tracebacks import ExceptionDictTransformer
from structlog.typing import EventDict, WrappedLogger

from ._exceptions import InvalidInputError
from ._unicode import well_formed, well_formed_data

__all__ = ["WellFormedFormatter", "configure_logging", "get_logger"]


def get_logger(name: str) -> Any:
    """The logger of one library module (``adapter.client``, ``adapter.stop``...)."""
    return structlog.get_logger(name)


def configure_logging(
    *,
    format: Literal["console", "json"] = "console",
    level: int | str = logging.INFO,
    file: TextIO | None = None,
) -> None:
    """Send structlog output to ``file`` (default stderr) as console lines or JSON
    lines, filtered by ``level``. Tracebacks never show local variables."""
    numeric = logging.getLevelName(level) if isinstance(level, str) else level
    if not isinstance(numeric, int):
        raise InvalidInputError(f"unknown log level {level!r}")
    stream = file if file is not None else sys.stderr
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if format == "json":
        # The exception as data (frames, types, messages) before the strings are
        # made well formed; structlog's ready-made `dict_tracebacks` shows locals.
        processors.append(
            structlog.processors.ExceptionRenderer(ExceptionDictTransformer(show_locals=False))
        )
    processors.append(_well_formed_event)
    if format == "json":
        processors.append(structlog.processors.JSONRenderer(default=_json_fallback))
    else:
        colors = _isatty(stream)
        # structlog's default console traceback is rich's *with* locals.
        traceback_format: Any = (
            structlog.dev.RichTracebackFormatter(show_locals=False)
            if colors
            else structlog.dev.plain_traceback
        )
        renderer = structlog.dev.ConsoleRenderer(
            colors=colors, exception_formatter=traceback_format
        )
        processors.append(_WellFormedLine(renderer))
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=stream),
        cache_logger_on_first_use=False,
    )


class WellFormedFormatter(logging.Formatter):
    """A standard-library formatter whose lines are well formed, for a library that
    logs through ``logging`` to the same stream (the ACP SDK). Its tracebacks are
    Python's, which never show locals."""

    def format(self, record: logging.LogRecord) -> str:
        return well_formed(super().format(record))


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or minimal stream
        return False


def _well_formed_event(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """Every string of the event, keys and nested values included, well formed.
    The exception (``exc_info``) is left for the renderer: JSON has turned it into
    data already, the console renderer formats it and :class:`_WellFormedLine`
    cleans the text."""
    exc_info = event_dict.pop("exc_info", None)
    cleaned: EventDict = well_formed_data(event_dict)
    if exc_info is not None:
        cleaned["exc_info"] = exc_info
    return cleaned


def _json_fallback(value: object) -> Any:
    """What JSON cannot hold as is (an object, an exception): structlog's rule
    (``__structlog__()``, else ``repr``), made well formed, since a ``__repr__`` can
    quote the server verbatim."""
    custom = getattr(value, "__structlog__", None)
    return well_formed_data(custom() if callable(custom) else repr(value))


class _WellFormedLine:
    """The console renderer, with its whole line made well formed: a traceback's
    message and an object's ``repr`` can quote the server too."""

    def __init__(self, renderer: structlog.dev.ConsoleRenderer) -> None:
        self._renderer = renderer

    def __call__(self, logger: WrappedLogger, method: str, event_dict: EventDict) -> str:
        return well_formed(self._renderer(logger, method, event_dict))
