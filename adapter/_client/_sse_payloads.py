"""``GET /event`` on the wire: SSE ``data:`` payloads to native event objects.

Why its own module: what arrives on the event stream is untrusted text, read for
the life of the adapter, and one payload that breaks the reader would end event
delivery for every thread of a directory. The rules for reading it are here,
apart from the client's request machinery (:mod:`adapter._client`), which only
opens the stream and hands this module its lines:

* A line or an event longer than ``max_event_bytes`` ends the stream
  (:class:`ProtocolError`): a server that sends one is broken or hostile, and it must
  not fill memory.
* Each payload is read as strict JSON (RFC 8259). ``NaN``, ``Infinity`` and numbers
  that overflow a float are refused: OpenCode's ``JSON.stringify`` never writes
  them (it writes ``null``), and every consumer downstream (a web page's
  ``JSON.parse``, an ACP client) would choke on them. A lone UTF-16 surrogate
  escape (``"\\ud800"``, which OpenCode writes when it cuts a string inside a
  pair) is read, as :mod:`adapter._base._unicode` describes.
* An event nested deeper than :data:`MAX_EVENT_DEPTH` is refused, so no consumer
  that walks an event recursively (a JSON encoder, a log renderer, the web and
  ACP faces) can hit ``RecursionError`` on one. OpenCode's own events are at most
  10 levels deep (measured on 1.18.34 fixtures); a tool's input from a model adds
  its own nesting, hence the margin.
* Whatever is refused (not JSON, not an event object, too deep) is skipped, never
  raised: the caller hears of it through ``on_skipped`` with a
  :class:`~adapter.NativeEventError` whose ``event_type`` is the event's type, or
  ``None`` when the payload could not be read far enough to know it.
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator, Callable
from typing import Any, NoReturn

import httpx
import httpx_sse
import msgspec

from .._base._nesting import deeper_than
from .._base._unicode import well_formed
from .._exceptions import NativeEventError, OpenCodeError, ProtocolError, RequestError
from .._logging import get_logger

__all__ = [
    "DEFAULT_MAX_EVENT_BYTES",
    "MAX_EVENT_DEPTH",
    "BoundedSSEStream",
    "OnSkipped",
    "RawEvent",
    "decode_event",
    "decode_events",
    "decode_json",
]

RawEvent = dict[str, Any]
OnSkipped = Callable[[NativeEventError], None]

DEFAULT_MAX_EVENT_BYTES = 4 * 1024 * 1024

#: The deepest nesting of arrays and objects a native event may have (the event
#: object itself is level 1); deeper events are skipped. serde_json's default.
MAX_EVENT_DEPTH = 128

_log = get_logger("adapter.client")

_FAST_DECODE = msgspec.json.Decoder().decode


def _not_json(constant: str) -> NoReturn:
    raise ValueError(f"{constant} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("a number out of the range of a float")
    return value


def decode_json(data: str) -> Any:
    """One payload's JSON: ``msgspec`` (3-4 times faster than ``json`` on OpenCode's
    events, see docs/benchmarks.md), and the standard library for what ``msgspec``
    refuses but strict JSON allows (a lone surrogate escape, as a delta cut inside a
    pair carries; an integer beyond 64 bits), so the decoder changes no outcome, only
    the time. Raises ``ValueError`` for what is not strict JSON and ``RecursionError``
    for what is nested too deep to decode at all.
    """
    try:
        return _FAST_DECODE(data)
    except ValueError:
        return json.loads(data, parse_constant=_not_json, parse_float=_finite)


def decode_event(data: str) -> RawEvent:
    """One ``data:`` payload as a native event object, or :class:`NativeEventError`."""
    try:
        event = decode_json(data)
    except RecursionError:
        raise NativeEventError(None, f"nested deeper than {MAX_EVENT_DEPTH} levels") from None
    except ValueError as exc:
        raise NativeEventError(None, f"not JSON ({well_formed(str(exc))[:120]})") from None
    if type(event) is not dict:
        raise NativeEventError(None, f"not an event object (JSON {type(event).__name__})")
    kind = event.get("type")
    if type(kind) is not str:
        raise NativeEventError(None, "an event object without a string type")
    # Valid JSON needs two characters per level: only a payload with more brackets
    # than the bound can be too deep, and only that one is walked.
    if (
        len(data) > 2 * MAX_EVENT_DEPTH
        and data.count("{") + data.count("[") > MAX_EVENT_DEPTH
        and deeper_than(event, MAX_EVENT_DEPTH)
    ):
        raise NativeEventError(kind, f"nested deeper than {MAX_EVENT_DEPTH} levels")
    return event


def _log_skipped(error: NativeEventError) -> None:
    _log.warning("opencode.event.malformed", reason=well_formed(str(error))[:300])


async def decode_events(
    source: httpx_sse.EventSource, max_event_bytes: int, on_skipped: OnSkipped | None = None
) -> AsyncIterator[RawEvent]:
    """The event objects of an open stream; what cannot be one goes to ``on_skipped``
    (by default a log line). Transport failures become :class:`RequestError`."""
    skipped = on_skipped or _log_skipped
    try:
        async for sse in source.aiter_sse():
            data = sse.data
            if not data:
                continue
            if len(data) > max_event_bytes:
                raise ProtocolError("event_stream", f"an event exceeds {max_event_bytes} bytes")
            try:
                event = decode_event(data)
            except NativeEventError as error:
                skipped(error)
                continue
            yield event
    except OpenCodeError:
        raise
    except httpx.TimeoutException as exc:
        raise RequestError("event_stream", f"timed out ({type(exc).__name__})") from exc
    except httpx.TransportError as exc:
        raise RequestError("event_stream", f"connection lost ({type(exc).__name__})") from exc
    except httpx.HTTPError as exc:
        # A body that does not decode (a Content-Encoding the server got wrong...).
        raise RequestError("event_stream", f"unreadable stream ({type(exc).__name__})") from exc


# Every blank line (the end of an SSE event) holds one of these, whatever its line
# endings ("\n", "\r" or "\r\n"), and nothing else does.
_EVENT_ENDS = (b"\n\n", b"\n\r", b"\r\r")


class BoundedSSEStream(httpx.AsyncByteStream):
    """Passes bytes through, refusing a line, or an event, longer than ``limit`` bytes.

    httpx-sse keeps a whole line, and the ``data:`` lines of an event until its blank
    line, before it decodes them: bounded here on the raw bytes, so neither an endless
    line nor endless short lines of one event can fill memory. Scanning is per chunk,
    at C speed (``rfind``)."""

    def __init__(self, inner: httpx.SyncByteStream | httpx.AsyncByteStream, limit: int) -> None:
        if not isinstance(inner, httpx.AsyncByteStream):
            raise TypeError("an async response stream is required")
        self._inner = inner
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        line = event = 0
        last = b""
        async for chunk in self._inner:
            if not chunk:
                continue
            cut = max(chunk.rfind(b"\n"), chunk.rfind(b"\r"))
            line = line + len(chunk) if cut < 0 else len(chunk) - cut - 1
            end = max(chunk.rfind(ending) for ending in _EVENT_ENDS)
            if end >= 0:
                event = len(chunk) - end - 2
            elif last + chunk[:1] in _EVENT_ENDS:
                event = len(chunk) - 1
            else:
                event += len(chunk)
            last = chunk[-1:]
            if line > self._limit:
                raise ProtocolError("event_stream", f"an event line exceeds {self._limit} bytes")
            if event > self._limit:
                raise ProtocolError("event_stream", f"an event exceeds {self._limit} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()
