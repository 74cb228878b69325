"""The base URL of an OpenCode server: where it is, and never a secret.

Why its own module: a base URL enters at several doors (``OpenCodeClient``,
``OpenCodeAdapter``, and through them the command line's ``--url`` and
``$OPENCODE_URL`` for ``tree``, ``stop``, ``run``, ``web`` and ``acp``), and from
there it is repeated in reprs, log lines and error messages (``cannot reach
http://...``). A credential inside it, ``http://user:pass@host`` or
``?auth_token=...``, would leak through every one of them. So every door applies
the one check below, and a refusal names what is wrong without repeating the URL,
which may carry the very secret it refuses.

OpenCode's base URL is ``scheme://host[:port][/path-prefix]``. It has no
legitimate query or fragment: the project directory travels in the
``x-opencode-directory`` header or in the client's own per-request
``?directory=``, and the password in HTTP Basic auth (``password=``). ``httpx``
would even drop a base URL's query from every request. Rather than guess which
parameter names hold secrets (``token``, ``key``, ``sig``, ``X-Amz-Credential``...),
any query or fragment is refused.
"""

from __future__ import annotations

import contextlib
import ipaddress

import httpx

from .._exceptions import InvalidInputError

__all__ = ["checked_base_url", "is_loopback"]


def checked_base_url(
    base_url: object,
    *,
    name: str = "base_url",
    password_hint: str = "password=",
    directory_hint: str = "directory=",
) -> httpx.URL:
    """``base_url`` parsed, if it is an ``http(s)`` URL with a host and no secret in it.

    Raises :class:`~adapter.InvalidInputError` otherwise, whose message never holds
    the URL. ``name`` is how the caller calls the value (``--url`` on the command
    line); the hints say where the password and the project directory go instead
    (``--password-env``, ``--directory``).
    """
    if isinstance(base_url, httpx.URL):
        base_url = str(base_url)
    url: httpx.URL | None = None
    # Refused below, outside the handler: the parser's own message quotes the URL,
    # and a chained exception would carry it into a traceback.
    with contextlib.suppress(httpx.InvalidURL):
        url = httpx.URL(base_url) if isinstance(base_url, str) else None
    if url is None or not isinstance(base_url, str):
        raise InvalidInputError(f"{name} is not a valid URL")
    if url.userinfo:
        raise InvalidInputError(
            f"{name} must not carry credentials (a user or password before the host): "
            f"pass the password with {password_hint}"
        )
    part = _query_or_fragment(base_url)
    if part is not None:
        raise InvalidInputError(
            f"{name} must not have a {part}: it may carry a secret, and an OpenCode base URL "
            f"has none. Pass the password with {password_hint}, the project with {directory_hint}"
        )
    if url.scheme not in ("http", "https") or not url.host:
        raise InvalidInputError(
            f"{name} must be an http(s) URL with a host, such as http://127.0.0.1:4096"
        )
    return url


def _query_or_fragment(text: str) -> str | None:
    # The raw text, not the parsed URL: an empty "?" or "#" parses to nothing but
    # says the caller meant something that will not be sent.
    marks = [i for i in (text.find("?"), text.find("#")) if i >= 0]
    if not marks:
        return None
    return "query string (?...)" if text[min(marks)] == "?" else "fragment (#...)"


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, without brackets) is this machine's loopback."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
