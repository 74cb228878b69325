"""What the fake's answers look like on the wire: JSON bodies, error bodies, clocks.

Why a module: the real server's error bodies (a ``BadRequest`` with its validation
path, a ``NotFoundError``, an ``UnknownError`` with a ``ref``) are reproduced by the
router, the session routes and the request replies alike; written once here they
cannot drift apart. Also the small value helpers every part of the fake shares
(the epoch-ms clock, a request directory's resolution, token sums).
"""

from __future__ import annotations

import json
import posixpath
import time
from collections.abc import Mapping
from typing import Any, TypeAlias

import httpx

OPENCODE_VERSION = "1.18.34"
"""The server version the fake reports and emulates."""

JSON: TypeAlias = dict[str, Any]

IDLE: JSON = {"type": "idle"}
BUSY: JSON = {"type": "busy"}


class HttpError(Exception):
    """Raised by a handler to answer ``response`` at once (a body that fails validation)."""

    def __init__(self, response: httpx.Response) -> None:
        super().__init__(response.status_code)
        self.response = response


def now_ms() -> int:
    return int(time.time() * 1000)


def json_response(status: int, body: Any) -> httpx.Response:
    return httpx.Response(
        status,
        content=json.dumps(body, separators=(",", ":")).encode(),
        headers={"content-type": "application/json"},
    )


def resolve_directory(value: str, cwd: str) -> str:
    """``value`` as the real server resolves a request's directory (measured on 1.18.34):
    relative to ``cwd``, with ``.``, ``..`` and a trailing ``/`` removed. The directory
    need not exist."""
    resolved = posixpath.normpath(posixpath.join(cwd, value))
    # POSIX keeps a leading "//"; Node's path.resolve (the server's) does not.
    return "/" + resolved.lstrip("/")


def not_found(message: str) -> httpx.Response:
    return json_response(404, {"name": "NotFoundError", "data": {"message": message}})


def session_not_found(session_id: str) -> httpx.Response:
    return not_found(f"Session not found: {session_id}")


def js(value: Any) -> str:
    """``value`` as the real server's validation messages print it (``JSON.stringify``)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def invalid(message: str, *path: str | int, kind: str = "Payload") -> httpx.Response:
    """400 as the real server's schema validation answers it (measured on 1.18.34):
    ``{"name": "BadRequest", "data": {"message", "kind"}}``, the message ending with a
    line ``  at ["key"][0]`` when ``path`` is given, ``kind`` being ``Payload`` (body),
    ``Params`` (path) or ``Query``."""
    if path:
        message += "\n  at " + "".join(f"[{json.dumps(p)}]" for p in path)
    return json_response(400, {"name": "BadRequest", "data": {"message": message, "kind": kind}})


def expected_prefix(value: Any, prefix: str, name: str, *, kind: str) -> httpx.Response | None:
    """The 400 for an id that lacks its ``prefix`` (``msg``, ``per``, ``que``), else None."""
    if isinstance(value, str) and value.startswith(prefix):
        return None
    expected = f'Expected a string starting with "{prefix}", got {js(value)}'
    return invalid(expected, name, kind=kind)


def zero_usage() -> JSON:
    return {"input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}}


def sum_usage(total: Mapping[str, Any], step: Mapping[str, Any], *, sign: int) -> JSON:
    """``total`` plus (``sign=1``) or minus (``sign=-1``) a step's token counts."""
    cache, step_cache = total.get("cache", {}), step.get("cache", {})
    out: JSON = {
        k: total.get(k, 0) + sign * step.get(k, 0) for k in ("input", "output", "reasoning")
    }
    out["cache"] = {k: cache.get(k, 0) + sign * step_cache.get(k, 0) for k in ("read", "write")}
    return out
