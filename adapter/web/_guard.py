"""Which requests may reach the app at all: none from another site or a rebound name.

The app starts agent runs that can execute shell commands, and it usually listens
on loopback without a token. "Only the user's own programs can reach 127.0.0.1" is
false for a web page the user visits, which has two ways in:

* **DNS rebinding**: the page re-points its own name (``evil.example``) at
  127.0.0.1, so the browser sends the page's requests here *as same-origin* and
  lets it read every answer. Only the ``Host`` header tells: it must name this
  server (a loopback name, the address the app is served on, or one the host
  listed in ``allowed_hosts``).
* **Cross-site requests**: a ``<form>`` or a no-cors ``fetch`` may *send* a POST
  anywhere (without reading the answer). Browsers mark such requests with
  ``Origin`` (and ``Sec-Fetch-Site``), and can only give them a "simple" content
  type, never ``application/json`` (that would need a CORS preflight, which this
  app never grants). So a foreign ``Origin`` is refused on any method, a
  ``Sec-Fetch-Site`` of another site is refused unless it is a plain navigation,
  and a state-changing request must be JSON.

A pure ASGI middleware (``BaseHTTPMiddleware`` would buffer the event stream), put
outside the routes and the token check: a refused request reaches no route and no
body is read, and its answer says nothing about the token. The rules and their
reasons are in ``docs/web.md``, "Cross-site requests and DNS rebinding".
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from typing import NamedTuple

from starlette.types import ASGIApp, Receive, Scope, Send

from .._client._base_url import is_loopback
from .._exceptions import InvalidInputError
from ._errors import error_response

__all__ = ["RequestGuard", "allowed_host_names", "allowed_origin_set"]

#: Methods that change nothing: a body or a content type on them is not checked.
_SAFE = frozenset({"GET", "HEAD", "OPTIONS"})
#: A host name or an IPv4 address (lowercase, no trailing dot, no port).
_NAME = re.compile(r"[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?)*")
_PORT = re.compile(r"[0-9]{1,5}")
_DEFAULT_PORT = {"http": 80, "https": 443}
_ECHO = 100  # characters of a refused header value quoted back in the message


class Origin(NamedTuple):
    """An http(s) origin with its port made explicit (``https://a`` is ``https://a:443``)."""

    scheme: str
    host: str
    port: int


class _Refusal(NamedTuple):
    status: int
    type: str
    message: str


def _normal_name(name: str) -> str | None:
    """``name`` (no brackets, no port) lowercased, an IP address in its canonical form
    (an IPv4-mapped IPv6 address as the IPv4 one), or ``None`` when it is no host name."""
    name = name.lower()
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return name if _NAME.fullmatch(name) else None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


def _host_and_port(value: str) -> tuple[str, int | None] | None:
    """A ``Host`` value's name and port (``[v6]:port`` included), or ``None`` if malformed."""
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        inside, rest = value[1:end], value[end + 1 :]
        try:
            ipaddress.IPv6Address(inside)
        except ValueError:
            return None
        name = _normal_name(inside)
    else:
        bare, colon, port_text = value.partition(":")
        rest = colon + port_text
        # An IPv6 address without brackets, or anything else with a second colon.
        name = None if ":" in port_text else _normal_name(bare)
    if name is None:
        return None
    if not rest:
        return name, None
    port_text = rest.removeprefix(":")
    if not rest.startswith(":") or not _PORT.fullmatch(port_text):
        return None
    port = int(port_text)
    return (name, port) if 0 < port <= 65535 else None


def _origin(value: str) -> Origin | None:
    """An ``Origin`` value as the browser serialises it, or ``None``: ``null``, another
    scheme, a path, user info and anything else malformed are no http(s) origin."""
    scheme, separator, rest = value.partition("://")
    scheme = scheme.lower()
    if not separator or scheme not in _DEFAULT_PORT:
        return None
    parsed = _host_and_port(rest)
    if parsed is None:
        return None
    host, port = parsed
    return Origin(scheme, host, port if port is not None else _DEFAULT_PORT[scheme])


def _strings(values: Iterable[str], option: str) -> list[str]:
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise InvalidInputError(f"{option} must be a list of strings, not one string")
    listed = list(values)
    if not all(isinstance(v, str) for v in listed):
        raise InvalidInputError(f"{option} must be a list of strings")
    return listed


def allowed_host_names(hosts: Iterable[str], *, option: str = "allowed_hosts") -> frozenset[str]:
    """``create_app(allowed_hosts=...)`` checked: names or IP addresses, without a port
    (any port is allowed) and without wildcards. ``option`` names it in the error."""
    names: set[str] = set()
    for host in _strings(hosts, option):
        bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        name = _normal_name(bare)
        if name is None:
            raise InvalidInputError(
                f"{option}: {host[:_ECHO]!r} is not a host name or an IP address "
                "(give the name only: no scheme, port, path or wildcard)"
            )
        names.add(name)
    return frozenset(names)


def allowed_origin_set(origins: Iterable[str]) -> frozenset[Origin]:
    """``create_app(allowed_origins=...)`` checked: ``http(s)://host[:port]`` each."""
    allowed: set[Origin] = set()
    for value in _strings(origins, "allowed_origins"):
        origin = _origin(value.removesuffix("/"))
        if origin is None:
            raise InvalidInputError(
                f"allowed_origins: {value[:_ECHO]!r} is not an origin "
                "(http:// or https://, a host, an optional port; no path or wildcard)"
            )
        allowed.add(origin)
    return frozenset(allowed)


class RequestGuard:
    """Refuses a foreign ``Host`` (403 ``forbidden_host``), a foreign ``Origin`` or
    cross-site fetch metadata (403 ``forbidden_origin``), and a state-changing request
    that is not JSON (415 ``unsupported_media_type``), before anything else runs."""

    def __init__(self, app: ASGIApp, *, hosts: frozenset[str], origins: frozenset[Origin]) -> None:
        self._app = app
        self._hosts = hosts
        self._origins = origins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refusal = self._refusal(scope) if scope["type"] == "http" else None
        if refusal is None:
            await self._app(scope, receive, send)
            return
        response = error_response(refusal.status, refusal.type, refusal.message)
        await response(scope, receive, send)

    def _refusal(self, scope: Scope) -> _Refusal | None:
        headers: dict[str, list[str]] = {}
        for raw_name, raw_value in scope["headers"]:
            headers.setdefault(raw_name.decode("latin-1").lower(), []).append(
                raw_value.decode("latin-1")
            )
        host = self._host(scope, headers.get("host", []))
        if host is None:
            shown = ", ".join(repr(h[:_ECHO]) for h in headers.get("host", [])) or "none"
            return _Refusal(
                403,
                "forbidden_host",
                f"Host {shown} is not a name this app is served under (a DNS-rebinding "
                "request?); a host that serves it under another name lists it in "
                "create_app(allowed_hosts=...)",
            )
        method: str = scope["method"]
        origins = headers.get("origin")
        if origins is not None:
            if len(origins) != 1 or not self._origin_allowed(origins[0], host):
                shown = ", ".join(repr(o[:_ECHO]) for o in origins)
                return _Refusal(
                    403,
                    "forbidden_origin",
                    f"cross-origin request refused (Origin {shown}); a host that calls the "
                    "API from another origin lists it in create_app(allowed_origins=...)",
                )
        elif self._cross_site(method, headers):
            return _Refusal(
                403,
                "forbidden_origin",
                "cross-site request refused (Sec-Fetch-Site: "
                f"{headers['sec-fetch-site'][0][:_ECHO]!r})",
            )
        if method not in _SAFE and not self._json_or_no_body(headers):
            return _Refusal(
                415,
                "unsupported_media_type",
                "a request with a body must send it as Content-Type: application/json",
            )
        return None

    def _host(self, scope: Scope, values: list[str]) -> tuple[str, int | None] | None:
        """The request's ``Host`` when it names this server, else ``None``."""
        if len(values) != 1:
            return None
        parsed = _host_and_port(values[0])
        if parsed is None:
            return None
        name = parsed[0]
        if name in self._hosts or is_loopback(name):
            return parsed
        server = scope.get("server")
        if server and isinstance(server[0], str) and _normal_name(server[0]) == name:
            return parsed
        return None

    def _origin_allowed(self, value: str, host: tuple[str, int | None]) -> bool:
        origin = _origin(value)
        if origin is None:
            return False
        if origin in self._origins:
            return True
        name, port = host
        # The page's own origin: what the browser sends when it is served at this Host.
        return origin.host == name and origin.port == (
            port if port is not None else _DEFAULT_PORT[origin.scheme]
        )

    @staticmethod
    def _cross_site(method: str, headers: dict[str, list[str]]) -> bool:
        """Fetch metadata of another site, when no ``Origin`` came (a no-cors ``<img>``
        or ``<script>`` GET): refused, but for a plain navigation (a link to the page)."""
        site = [s.strip().lower() for s in headers.get("sec-fetch-site", [])]
        if not site or site == ["same-origin"] or site == ["none"]:
            return False
        mode = [m.strip().lower() for m in headers.get("sec-fetch-mode", [])]
        return not (method in ("GET", "HEAD") and mode == ["navigate"])

    @staticmethod
    def _json_or_no_body(headers: dict[str, list[str]]) -> bool:
        types = headers.get("content-type")
        if types is not None:
            return len(types) == 1 and (
                types[0].partition(";")[0].strip().lower() == "application/json"
            )
        lengths = headers.get("content-length", [])
        has_body = "transfer-encoding" in headers or any(v.strip() != "0" for v in lengths)
        return not has_body
