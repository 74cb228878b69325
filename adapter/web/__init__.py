"""``adapter.web``: the stop-button backend, an ASGI app a host mounts in its own.

``create_app(adapter, token=..., allowed_hosts=..., allowed_origins=...)`` serves a
page with a Stop button at ``/`` and a JSON + Server-Sent-Events API over an
:class:`adapter.OpenCodeAdapter` the host passes in (``docs/web.md``). With or
without a token it refuses cross-site and DNS-rebinding requests before any route
runs, and every answer carries a Content Security Policy and the framing, sniffing
and referrer headers. Needs the ``web`` extra (Starlette, sse-starlette; uvicorn to
serve it).
"""

from ._app import create_app

__all__ = ["create_app"]

create_app.__module__ = __name__
