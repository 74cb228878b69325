"""Request bodies and thread ids, checked before the adapter sees them.

A body is a JSON object; a field that is missing where required, of the wrong
type, empty, or not one the route knows is refused with 422 naming it, so a page
(or a script) learns exactly what to fix and nothing half-valid is sent on.

A body is untrusted bytes first (``docs/web.md``, "Bodies and thread ids"): it is
refused with 413 past :data:`MAX_BODY_BYTES` before it is read further, and with
422 when it nests past :data:`MAX_JSON_DEPTH` (found without recursion, before the
standard library's recursive parser could run out of stack), when it is not
strict JSON (``NaN``, ``Infinity``, a number out of range) or when a string, key
included, holds a lone UTF-16 surrogate (``"\\ud800"``: no UTF-8 encoder accepts
it, so it would break every answer and log line that repeats it). The thread id
grammar (``_thread_ids``) applies to the body's ``thread_id`` and every path.
"""

from __future__ import annotations

import array
import json
import re
from itertools import accumulate
from typing import Any

import msgspec
from starlette.requests import Request

from adapter._base._ids import is_session_id
from adapter._base._json_fields import optional_string
from adapter._base._unicode import has_surrogates, surrogate_path

from ._errors import ApiError, invalid
from ._thread_ids import MAX_THREAD_ID_CHARS, thread_id_problem

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_THREAD_ID_CHARS",
    "model_value",
    "optional_object",
    "optional_str",
    "path_session_id",
    "path_thread_id",
    "read_object",
    "required_str",
    "resume_value",
    "thread_id_problem",
    "thread_id_value",
]

#: A body larger than this is refused before it is parsed (a prompt is text only
#: here; files go through the adapter's own API).
MAX_BODY_BYTES = 4 * 1024 * 1024

#: Containers (objects and arrays) a body may nest, the body itself included. The
#: deepest body a route takes is 4 levels (``{"resume": {...}}``, ``{"answers": {q: [a]}}``).
MAX_JSON_DEPTH = 32

_MODEL = re.compile(r"^[^/\s]+/\S+$")

# msgspec decodes strict JSON (no NaN, no number out of range, no lone surrogate)
# in C, several times faster than ``json``, and bounds its own depth (1000) without
# recursion in Python.
_STRICT = msgspec.json.Decoder()
# A ``\\u`` escape of a UTF-16 surrogate, paired or not: only then is the slow
# diagnosis of a refused body worth running.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
# One JSON string, or an unterminated one up to the end: every match attempt that
# starts at a quote succeeds, so removing them all is linear.
_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+(?:"|\\?\Z)', re.DOTALL)
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"[]{}")


async def read_object(request: Request, allowed: frozenset[str]) -> dict[str, Any]:
    """The body as a JSON object with only ``allowed`` keys (an empty body is ``{}``)."""
    raw = await _read(request)
    if not raw.strip():
        return {}
    body = _decode(raw)
    if not isinstance(body, dict):
        raise invalid("body", f"the body must be a JSON object, not {_kind(body)}")
    for key in body:
        if key not in allowed:
            raise invalid(
                key, f"unknown field {key!r:.60} (expected: {', '.join(sorted(allowed))})"
            )
    return body


async def _read(request: Request) -> bytes:
    too_large = ApiError(413, "too_large", f"the body is larger than {MAX_BODY_BYTES} bytes")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise too_large
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():  # stop reading once over the bound
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


def _decode(raw: bytes) -> Any:
    """Strict JSON, at most :data:`MAX_JSON_DEPTH` deep, without a lone surrogate."""
    # Counting every bracket, strings included, over-counts: most bodies need no scan.
    if raw.count(b"[") + raw.count(b"{") > MAX_JSON_DEPTH and _depth(raw) > MAX_JSON_DEPTH:
        raise invalid("body", f"the body is nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        return _STRICT.decode(raw)
    except msgspec.DecodeError as exc:
        if _SURROGATE_ESCAPE.search(raw) is not None:
            _diagnose_surrogates(raw)
        raise invalid("body", f"the body is not valid JSON ({exc!s:.100})") from None


def _depth(raw: bytes) -> int:
    """The deepest nesting of ``raw``'s brackets outside strings, in linear time and
    without recursion (a million ``[`` are a 2 MB body)."""
    steps = _STRING.sub(b"", raw).translate(_STEPS, _NOT_BRACKETS)
    return max(accumulate(array.array("b", steps)), default=0)


def _diagnose_surrogates(raw: bytes) -> None:
    """Raise the 422 naming the field of a lone surrogate, if that is what ``msgspec``
    refused (it says only "invalid utf-16 surrogate pair" or "truncated"). The
    standard library keeps a lone surrogate in the ``str`` it returns (it recurses per
    level: :func:`_decode` has bounded the depth first)."""
    try:
        value = json.loads(raw, parse_constant=_no_constant)
    except (ValueError, UnicodeDecodeError):
        return  # the caller says "not valid JSON"
    field = _surrogate_field(value)
    if field is not None:
        raise invalid(field, f"{field} holds a lone UTF-16 surrogate (a half of a pair)")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _surrogate_field(value: Any) -> str | None:
    """The top-level field whose value (or key) holds a lone surrogate; ``body`` for
    a top-level key or a body that is not an object."""
    if isinstance(value, dict):
        for key, item in value.items():
            if has_surrogates(key):
                return "body"
            if surrogate_path(item) is not None:
                return str(key)
        return None
    return "body" if surrogate_path(value) is not None else None


# --------------------------------------------------------------------------- thread ids


def path_thread_id(request: Request) -> str:
    """The path's ``{thread_id}``, refused with 422 (``field: thread_id``) outside the
    grammar, whatever the adapter holds: a host may make any id through the adapter,
    the web API addresses only those of its grammar (``GET /threads`` lists all)."""
    thread_id: str = request.path_params["thread_id"]
    problem = thread_id_problem(thread_id)
    if problem is not None:
        raise invalid("thread_id", problem)
    return thread_id


def path_session_id(request: Request) -> str:
    """The path's ``{session_id}``: an OpenCode session id (``ses_`` and up to 128 of
    ``A-Za-z0-9_-``), else 422 (``field: session_id``)."""
    session_id: str = request.path_params["session_id"]
    if not is_session_id(session_id):
        raise invalid("session_id", f"not a session id: {session_id!r:.80}")
    return session_id


def optional_str(body: dict[str, Any], name: str) -> str | None:
    """A string field that may be absent (or null) but, when given, is not empty."""
    value = optional_string(
        body, name, lambda wrong: invalid(name, f"{name} must be a string, not {_kind(wrong)}")
    )
    if value is not None and not value.strip():
        raise invalid(name, f"{name} must not be empty")
    return value


def required_str(body: dict[str, Any], name: str) -> str:
    value = optional_str(body, name)
    if value is None:
        raise invalid(name, f"{name} is required")
    return value


def thread_id_value(body: dict[str, Any]) -> str | None:
    value = optional_str(body, "thread_id")
    if value is not None and (problem := thread_id_problem(value)) is not None:
        raise invalid("thread_id", problem)
    return value


def model_value(body: dict[str, Any]) -> str | None:
    value = optional_str(body, "model")
    if value is not None and not _MODEL.match(value):
        raise invalid("model", f"model must look like 'provider/model', got {value!r:.80}")
    return value


def optional_object(body: dict[str, Any], name: str) -> dict[str, Any] | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise invalid(name, f"{name} must be a JSON object, not {_kind(value)}")
    return value


def resume_value(body: dict[str, Any]) -> dict[str, Any] | None:
    """A resume cursor as ``SessionInfo.resume`` gives it. The adapter ignores a
    malformed cursor (and starts a new session); a client that asked to resume is
    told instead."""
    cursor = optional_object(body, "resume")
    if cursor is None:
        return None
    session_id = cursor.get("session_id")
    if cursor.get("schema") != 1 or not isinstance(session_id, str) or not session_id:
        raise invalid(
            "resume", 'resume must be a cursor {"schema": 1, "session_id": "ses_..."} as returned'
        )
    return cursor


def _kind(value: object) -> str:
    """The JSON name of a value's type, for messages (never the value itself)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"
