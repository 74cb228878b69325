"""Structured logging, quiet until the host asks.

The library logs through ``structlog`` onto the standard library's ``logging``
(the ``adapter`` logger and its children: ``adapter.client``, ``adapter.web``...),
the setup structlog documents for libraries: the host's own ``logging``
configuration decides what is shown and where, and a host that configured nothing
sees nothing (a ``NullHandler`` on ``adapter``; debug and info are dropped by the
level before any event is built). The library never calls ``structlog.configure``,
so a host's own structlog configuration is left alone.
:func:`configure_logging` is a convenience for command-line use and tests: one
handler on ``adapter`` writing console or JSON lines to stderr, level filtered.

What it writes is safe to keep and to share: a traceback shows the frames, never
their local variables (one may hold a password or a token), and every string is
well formed (:mod:`adapter._base._unicode`), so a lone UTF-16 surrogate from the
server cannot make a strict UTF-8 stream refuse the line.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, Literal, TextIO

import structlog
from structlog.tracebacks import ExceptionDictTransformer
from structlog.typing import EventDict, Processor, WrappedLogger

from ._base._unicode import well_formed, well_formed_data
from ._exceptions import InvalidInputError

__all__ = ["WellFormedFormatter", "configure_logging", "get_logger"]

#: The parent of every logger of the library.
LIBRARY_LOGGER = "adapter"
logging.getLogger(LIBRARY_LOGGER).addHandler(logging.NullHandler())


class _Event(dict[str, Any]):
    """An event on its way through ``logging`` (``record.msg``): a dict for
    structlog's :class:`~structlog.stdlib.ProcessorFormatter` and for JSON
    formatters, one readable line (``event key=value ...``) for a plain
    ``%(message)s`` formatter a host may have."""

    def __str__(self) -> str:
        fields = " ".join(f"{key}={value!r}" for key, value in self.items() if key != "event")
        return well_formed(f"{self.get('event', '')} {fields}".rstrip())


def _as_record(logger: WrappedLogger, method: str, event_dict: EventDict) -> Any:
    """The last processor: the event as the message of a ``logging`` record,
    formatted by whichever handler the host installed."""
    return structlog.stdlib.ProcessorFormatter.wrap_for_formatter(
        logger, method, _Event(event_dict)
    )


#: Built once: nothing is done for a level the ``logging`` configuration drops.
_LIBRARY_PROCESSORS: list[Processor] = [structlog.stdlib.filter_by_level, _as_record]


def get_logger(name: str) -> Any:
    """The logger of one library module (``adapter.client``, ``adapter.stop``...):
    structlog's bound logger over ``logging.getLogger(name)``."""
    # Bound at once: the processors are the library's own, never the global
    # configuration, so no lazy proxy has to look them up on every call.
    return structlog.wrap_logger(
        logging.getLogger(name),
        processors=_LIBRARY_PROCESSORS,
        wrapper_class=structlog.stdlib.BoundLogger,
    ).bind()


def configure_logging(
    *,
    format: Literal["console", "json"] = "console",
    level: int | str = logging.INFO,
    file: TextIO | None = None,
) -> None:
    """Show the library's logs on ``file`` (default stderr) as console lines or JSON
    lines, filtered by ``level``: one handler on the ``adapter`` logger (a second call
    replaces it), which then no longer propagates to the root logger. Tracebacks
    never show local variables."""
    numeric = logging.getLevelName(level) if isinstance(level, str) else level
    if not isinstance(numeric, int):
        raise InvalidInputError(f"unknown log level {level!r}")
    stream = file if file is not None else sys.stderr
    handler = logging.StreamHandler(stream)
    handler.setFormatter(_formatter(format, stream))
    handler.set_name(_HANDLER_NAME)
    library = logging.getLogger(LIBRARY_LOGGER)
    for old in [h for h in library.handlers if h.get_name() == _HANDLER_NAME]:
        library.removeHandler(old)
    library.addHandler(handler)
    library.setLevel(numeric)
    library.propagate = False  # shown once, here, not again by a root handler


#: The name of the handler :func:`configure_logging` installs (replaced on a new call).
_HANDLER_NAME = "adapter.configure_logging"


def _formatter(format: Literal["console", "json"], stream: TextIO) -> logging.Formatter:
    processors: list[Processor] = [
        structlog.stdlib.ProcessorFormatter.remove_processors_meta,
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
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
    return structlog.stdlib.ProcessorFormatter(processors=processors)


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
