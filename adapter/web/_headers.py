"""The headers every answer of the app carries, so a browser never uses it against the user.

The page is one HTML file, one script and one stylesheet of its own, and talks
only to its own origin (``fetch`` and ``EventSource``). So its Content Security
Policy allows exactly that and nothing from any other origin: even if server data
ever reached the DOM as HTML, no injected script, inline handler, remote image or
form could run or leak it. The page cannot be framed (clickjacking the Stop or
Allow buttons), no answer is content-sniffed into something else, no URL leaks in
a ``Referer``, and no other origin can embed an answer (``<script src>`` of the
JSON). Set on every response, errors and the event stream included: a JSON
answer opened as a document gets the same policy.

A pure ASGI middleware (``BaseHTTPMiddleware`` would buffer the event stream); a
header a route sets itself is kept.
"""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["CONTENT_SECURITY_POLICY", "SECURITY_HEADERS", "SecurityHeaders"]

#: What the page needs, nothing more: its own script and stylesheet, ``fetch`` and
#: ``EventSource`` to its own origin, and the empty ``data:`` favicon.
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)

SECURITY_HEADERS: tuple[tuple[str, str], ...] = (
    ("Content-Security-Policy", CONTENT_SECURITY_POLICY),
    ("X-Frame-Options", "DENY"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("Cross-Origin-Resource-Policy", "same-origin"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
)


class SecurityHeaders:
    """Adds :data:`SECURITY_HEADERS` to every HTTP response the app sends."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS:
                    headers.setdefault(name, value)
            await send(message)

        await self._app(scope, receive, send_with_headers)
