"""The check of one line an ACP client sent, before the SDK sees it.

Why its own module: the ACP SDK's reader trusts its input. A line that is JSON but
not an object (``[1,2,3]``, ``"hello"``, ``42``) ends its receive loop with a
traceback, ``null`` reads as the end of input, malformed JSON is logged and never
answered, and a nesting too deep for the parser is never answered either. An agent
that an editor drives must answer or drop a bad line and go on, as JSON-RPC 2.0 asks.

:func:`check_line` decides, without I/O, what becomes of one line (the framing, the
bound on a line's length and the writing are :mod:`adapter.acp._transport`'s):

* :class:`Accept`: a JSON object the SDK can route: a request or notification (a
  string ``method``, an ``id`` that is a string, an integer or null), or a response
  to one of the agent's requests (``result`` or an object ``error``).
* :class:`Refuse`: the JSON-RPC error response to write: ``-32700`` parse error for
  what is not UTF-8 JSON (``NaN`` and ``Infinity`` are not JSON either), ``-32600``
  invalid request for JSON that is no request object (a batch: ACP does not use
  JSON-RPC batches), an ``id`` or ``method`` of the wrong type, a nesting deeper
  than :data:`MAX_DEPTH`, or more than :data:`MAX_VALUES` values (refused before the
  parse: a 32 MiB line of ``[],`` would be 1.4 GB of Python lists); and ``-32602``
  invalid params for params holding a lone UTF-16 surrogate (a string no UTF-8
  encoder takes, so nothing the agent could pass to OpenCode). The error carries the
  request's ``id`` when it is a well-typed one, else ``null``.
* :class:`Drop`: nothing to answer (a malformed response, or a notification, which
  JSON-RPC never answers), logged by the transport.
* ``None``: a blank line, skipped as the SDK does.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, NoReturn

from acp import RequestError

from adapter._base._nesting import deeper_than
from adapter._base._unicode import has_surrogates, surrogate_path, well_formed_data

__all__ = [
    "MAX_DEPTH",
    "MAX_LINE_BYTES",
    "MAX_VALUES",
    "Accept",
    "Drop",
    "Refuse",
    "Verdict",
    "check_line",
    "too_long",
]

#: The longest line read (bytes, without its newline). The largest prompt the adapter
#: takes (``MAX_PROMPT_BYTES``, 20 MiB) is 26.7 MiB in base64, plus its envelope.
MAX_LINE_BYTES = 32 * 1024 * 1024
#: The deepest nesting of objects and arrays in a message, the message itself being
#: level 1. ACP's messages are a few levels deep; ``_meta`` is free-form, and 64 levels
#: leave it room while keeping every walk of a message (the SDK's copies, pydantic's
#: validation) far from Python's recursion limit.
MAX_DEPTH = 64
#: The most values (array elements, object members, containers) in a message outside
#: its strings. ACP's messages hold a few dozen; an image or a file is one string.
MAX_VALUES = 100_000


@dataclass(frozen=True, slots=True)
class Accept:
    """A message the SDK can route."""

    message: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Refuse:
    """A line answered with a JSON-RPC error (``response`` is the whole answer)."""

    response: dict[str, Any]
    reason: str


@dataclass(frozen=True, slots=True)
class Drop:
    """A line nothing answers (JSON-RPC answers no response and no notification)."""

    reason: str


Verdict = Accept | Refuse | Drop

# An escaped surrogate code unit: only lines holding one can decode to a lone surrogate
# (raw surrogate bytes are not UTF-8, and the strict decode refuses them).
_ESCAPED_SURROGATE = re.compile(rb"\\u[dD][89abcdefABCDEF]")


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_no_constant)
# A JSON string (possessive: linear however many escapes it holds), or a character that
# starts a value outside strings.
_TOKEN = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"|[,\[{]')


def _structure(data: bytes) -> int:
    return data.count(b",") + data.count(b"[") + data.count(b"{")


def _too_many_values(line: bytes) -> bool:
    """Whether the line holds more than :data:`MAX_VALUES` values outside its strings
    (a text full of commas is one value). Counting commas and brackets over the whole
    line is a bound; only a line past it is scanned token by token, without copies,
    stopping as soon as the count is known. In valid JSON a string is an element, a key
    or a member's value, so there are at most three tokens per value: more tokens than
    that is not a message either."""
    if _structure(line) <= MAX_VALUES:
        return False
    values = 0
    for tokens, token in enumerate(_TOKEN.finditer(line), 1):
        if token.end() - token.start() == 1:  # a string is at least its two quotes
            values += 1
        if values > MAX_VALUES or tokens > 3 * MAX_VALUES + 3:
            return True
    return False


def _refuse(error: RequestError, rid: Any, reason: str) -> Refuse:
    error.data = {"details": reason}
    return Refuse({"jsonrpc": "2.0", "id": rid, "error": error.to_error_obj()}, reason)


def too_long(limit: int) -> Refuse:
    """The answer to a line longer than ``limit`` bytes (its ``id`` was never read)."""
    return _refuse(RequestError.invalid_request(), None, f"a line is longer than {limit} bytes")


def _valid_id(value: Any) -> bool:
    return value is None or (type(value) is int) or (type(value) is str)


def check_line(line: bytes) -> Verdict | None:
    """What becomes of one line (without its newline); never raises."""
    stripped = line.strip()
    if not stripped:
        return None
    # Before the decode: a line refused for its size costs no copy of it.
    if _too_many_values(stripped):
        return _refuse(
            RequestError.invalid_request(), None, f"more than {MAX_VALUES} values in a message"
        )
    try:
        text = stripped.decode("utf-8")
    except UnicodeDecodeError:
        return _refuse(RequestError.parse_error(), None, "the line is not UTF-8")
    try:
        value = _DECODER.decode(text)
    except RecursionError:
        return _refuse(
            RequestError.invalid_request(), None, f"nested deeper than {MAX_DEPTH} levels"
        )
    except ValueError as exc:  # JSONDecodeError, NaN/Infinity, an integer too long
        return _refuse(RequestError.parse_error(), None, f"not JSON: {exc}")
    if isinstance(value, list):
        return _refuse(
            RequestError.invalid_request(), None, "JSON-RPC batches are not supported by ACP"
        )
    if not isinstance(value, dict):
        kind = "null" if value is None else type(value).__name__
        return _refuse(
            RequestError.invalid_request(), None, f"a message is a JSON object, not {kind}"
        )
    return _check_message(value, stripped)


def _check_message(message: dict[str, Any], line: bytes) -> Verdict:
    rid = message.get("id")
    clean_id = _valid_id(rid) and not (isinstance(rid, str) and has_surrogates(rid))
    readable_id = rid if clean_id else None
    # Only a line with as many brackets as the limit can be nested that deep.
    if line.count(b"{") + line.count(b"[") > MAX_DEPTH and deeper_than(message, MAX_DEPTH):
        if "method" not in message:
            return Drop(f"a response nested deeper than {MAX_DEPTH} levels")
        return _refuse(
            RequestError.invalid_request(), readable_id, f"nested deeper than {MAX_DEPTH} levels"
        )
    surrogates = _ESCAPED_SURROGATE.search(line) is not None and surrogate_path(message) is not None
    if "method" not in message:
        return _check_response(message, surrogates)
    if not _valid_id(rid):
        return _refuse(
            RequestError.invalid_request(), None, "an id is a string, an integer or null"
        )
    if not isinstance(message["method"], str):
        return _refuse(RequestError.invalid_request(), readable_id, "the method is not a string")
    if not surrogates:
        return Accept(message)
    if "id" not in message:
        return Drop("a notification holds a lone UTF-16 surrogate")
    if has_surrogates(message["method"]) or readable_id is not rid:
        return _refuse(
            RequestError.invalid_request(),
            readable_id,
            "the method or id holds a lone UTF-16 surrogate",
        )
    return _refuse(
        RequestError.invalid_params(),
        rid,
        "a string holds a lone UTF-16 surrogate (half of a character, not text)",
    )


def _check_response(message: dict[str, Any], surrogates: bool) -> Verdict:
    """A response to the agent's request, or no message at all."""
    if "result" not in message and "error" not in message:
        return _refuse(
            RequestError.invalid_request(), None, "neither a request (no method) nor a response"
        )
    if "id" not in message or not _valid_id(message["id"]):
        return Drop("a response without a usable id")
    if "error" in message and not isinstance(message["error"], dict):
        return Drop("a response whose error is not an object")
    # The agent is waiting for it: a lone half becomes U+FFFD rather than the answer
    # being lost (an id holding one matches no request of the agent anyway).
    return Accept(well_formed_data(message) if surrogates else message)
