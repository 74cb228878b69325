"""What the ACP agent sends is well-formed JSON, whatever text the server gave it.

Why its own module: an update carries OpenCode's text (answer deltas, titles, tool
inputs and outputs, plan entries, permission titles), and OpenCode's strings may hold
a lone UTF-16 surrogate (:mod:`adapter._base._unicode`). Two places would fail on one: the
SDK dumps each update with pydantic, whose JSON mode raises on a dict *key* holding a
surrogate (a tool input's key: the update is lost, a permission request never asked),
and its writer escapes a lone half as ``\\ud800``, which strict JSON parsers (serde,
the editors written in Rust) refuse. So:

* :class:`WellFormedClient` is the agent's one way to the client: every update and
  permission request it sends is made well formed first (:func:`well_formed_value`,
  copying only what holds a surrogate);
* :func:`encode_message` is the one encoder of every line the transport writes (the
  SDK's answers and errors too, whose messages may quote the server): UTF-8 JSON with
  lone halves as U+FFFD, and a non-finite number (which JSON has no spelling for) as
  ``null``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, TypeVar

from acp.interfaces import Client
from acp.schema import PermissionOption, RequestPermissionResponse, ToolCallUpdate
from pydantic import BaseModel

from adapter._base._unicode import has_surrogates, well_formed, well_formed_data

from ._updates import SessionUpdate

__all__ = ["WellFormedClient", "encode_message", "well_formed_value"]

T = TypeVar("T")


def well_formed_value(value: T) -> T:
    """``value`` (a pydantic model, a JSON-like value) with every string made
    :func:`~adapter._base._unicode.well_formed`; the same object when nothing changed."""
    return _clean(value)  # type: ignore[no-any-return]


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return well_formed(value)
    if isinstance(value, BaseModel):
        changed = {}
        for name in type(value).model_fields:
            old = getattr(value, name)
            new = _clean(old)
            if new is not old:
                changed[name] = new
        return value.model_copy(update=changed) if changed else value
    if isinstance(value, Mapping):
        pairs = [(_clean(k), _clean(v)) for k, v in value.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(pairs, value.items(), strict=True)):
            return value
        return dict(pairs)
    if isinstance(value, list | tuple):
        items = [_clean(v) for v in value]
        if all(new is old for new, old in zip(items, value, strict=True)):
            return value
        return items if isinstance(value, list) else tuple(items)
    return value


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _dumps(message: Any) -> str:
    return json.dumps(message, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def encode_message(message: dict[str, Any]) -> bytes:
    """One NDJSON line: the message as UTF-8 JSON, well formed, ending in a newline."""
    try:
        text = _dumps(message)
    except ValueError:  # NaN or an infinity, e.g. from a server's tool input
        message = _finite(message)
        text = _dumps(message)
    if has_surrogates(text):
        text = _dumps(well_formed_data(message))
    return text.encode("utf-8") + b"\n"


class WellFormedClient:
    """The client connection as the agent uses it, with what it sends made well formed."""

    def __init__(self, conn: Client) -> None:
        self._conn = conn

    async def session_update(self, session_id: str, update: SessionUpdate) -> None:
        await self._conn.session_update(
            session_id=well_formed(session_id), update=well_formed_value(update)
        )

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption]
    ) -> RequestPermissionResponse:
        return await self._conn.request_permission(
            session_id=well_formed(session_id),
            tool_call=well_formed_value(tool_call),
            options=well_formed_value(options),
        )
