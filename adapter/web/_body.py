"""Request bodies, checked field by field before the adapter sees them.

A body is a JSON object; a field that is missing where required, of the wrong
type, empty, or not one the route knows is refused with 422 naming it, so a page
(or a script) learns exactly what to fix and nothing half-valid is sent on.
"""

from __future__ import annotations

import json
import re
from typing import Any

from starlette.requests import Request

from ._errors import invalid

__all__ = [
    "MAX_BODY_BYTES",
    "model_value",
    "optional_object",
    "optional_str",
    "read_object",
    "required_str",
    "resume_value",
    "thread_id_value",
]

#: A body larger than this is refused before it is parsed (a prompt is text only
#: here; files go through the adapter's own API).
MAX_BODY_BYTES = 4 * 1024 * 1024

#: A thread id must fit in one URL path segment (``/threads/{id}``) and a log line.
_THREAD_ID = re.compile(r"^[^/\x00-\x1f\x7f]{1,200}$")
_MODEL = re.compile(r"^[^/\s]+/\S+$")


async def read_object(request: Request, allowed: frozenset[str]) -> dict[str, Any]:
    """The body as a JSON object with only ``allowed`` keys (an empty body is ``{}``)."""
    too_large = invalid("body", f"the body is larger than {MAX_BODY_BYTES} bytes")
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
    raw = b"".join(chunks)
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise invalid("body", "the body is not valid JSON") from None
    if not isinstance(body, dict):
        raise invalid("body", f"the body must be a JSON object, not {_kind(body)}")
    for key in body:
        if key not in allowed:
            raise invalid(
                key, f"unknown field {key!r:.60} (expected: {', '.join(sorted(allowed))})"
            )
    return body


def optional_str(body: dict[str, Any], name: str) -> str | None:
    """A string field that may be absent (or null) but, when given, is not empty."""
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise invalid(name, f"{name} must be a string, not {_kind(value)}")
    if not value.strip():
        raise invalid(name, f"{name} must not be empty")
    return value


def required_str(body: dict[str, Any], name: str) -> str:
    value = optional_str(body, name)
    if value is None:
        raise invalid(name, f"{name} is required")
    return value


def thread_id_value(body: dict[str, Any]) -> str | None:
    value = optional_str(body, "thread_id")
    if value is not None and not _THREAD_ID.match(value):
        raise invalid(
            "thread_id",
            "thread_id must be at most 200 characters, without '/' or control characters",
        )
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
