"""The JSON text of every answer and every event frame, well formed whatever the data.

Why its own module: what the app sends comes partly from the OpenCode server (titles,
tool inputs and outputs, error messages, ids), and OpenCode writes a lone UTF-16
surrogate half as ``\\ud800`` (``adapter._base._unicode`` says why). Starlette's
``JSONResponse`` encodes to UTF-8 and raises on such a string: a stop that
succeeded answered 500, and one thread's bad title made every ``GET /threads``
fail. Non-finite numbers (a ``NaN`` cost from a broken server) are the other value
Python's ``json`` writes but no JSON parser reads. So all JSON leaves through
:func:`json_text`: the adapter's one surrogate rule (:func:`adapter._base._unicode.well_formed`,
halves side by side joined, lone ones U+FFFD) and non-finite numbers as ``null``.
Data without either is encoded once and returned as it is.
"""

from __future__ import annotations

import json
import math
from typing import Any

from starlette.responses import JSONResponse

from adapter._base._unicode import well_formed

__all__ = ["JsonResponse", "json_text"]


def json_text(value: Any) -> str:
    """``value`` as compact JSON text that encodes to UTF-8 and any JSON parser reads."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except ValueError:  # NaN or an infinity somewhere: only a broken server sends one
        text = json.dumps(
            _finite(value), ensure_ascii=False, allow_nan=False, separators=(",", ":")
        )
    # ``ensure_ascii=False`` writes a surrogate as the code point itself (every other
    # character it escapes is ASCII), so the rule applied to the whole text is the rule
    # applied to each string and key: quotes always separate two strings.
    return well_formed(text)


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


class JsonResponse(JSONResponse):
    """Starlette's ``JSONResponse`` rendered by :func:`json_text`: the one response
    class of every JSON answer of the app, successes and errors."""

    def render(self, content: Any) -> bytes:
        return json_text(content).encode("utf-8")
