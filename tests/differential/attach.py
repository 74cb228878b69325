"""The :class:`~.language.Attach` action: what a client attaching to a busy tree reads.

A host that restarts mid-turn, or another worker, finds a run it did not start; before any
event reaches it, it reads the server: which sessions are busy, the tree below the root
(``/children``, recursively) and each session's stored messages (the running ``task``
part whose ``metadata.sessionId`` names its child, the unfinished assistant message).
This module plays those reads through a fresh client and records them, so the fake's
answers are compared with the real server's as any request's are.

Why a module of its own: :mod:`.driver` runs every action; this one walks the server's
answers rather than the scenario's aliases, which is a concern of its own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx

Request = Callable[[httpx.AsyncClient, str, str, Any, str, str], Awaitable[Any]]
"""The driver's ``request(client, method, path, body, label, phase)`` (returns an
:class:`~.driver.Exchange`)."""


async def attach(
    client: httpx.AsyncClient, root_alias: str, root_id: str, request: Request
) -> None:
    """Read ``GET /session/status``, the tree below ``root_id`` and each session's messages,
    every read recorded through ``request`` under a label naming the session by its place
    in the walk (``{root/0}``). The status body is reduced to the walked tree's sessions."""
    status = await request(
        client, "GET", "/session/status", None, _label("/session/status"), "scenario"
    )
    tree: list[tuple[str, str]] = [(root_alias, root_id)]
    index = 0
    while index < len(tree):
        alias, sid = tree[index]
        index += 1
        path = f"/session/{sid}/children"
        found = await request(
            client, "GET", path, None, _label(f"/session/{{{alias}}}/children"), "scenario"
        )
        if found.status == 200 and isinstance(found.body, list):
            tree += [
                (f"{alias}/{n}", str(child["id"]))
                for n, child in enumerate(found.body)
                if isinstance(child, dict) and "id" in child
            ]
    for alias, sid in tree:
        path = f"/session/{sid}/message"
        await request(
            client, "GET", path, None, _label(f"/session/{{{alias}}}/message"), "scenario"
        )
    if isinstance(status.body, dict):
        walked = {sid for _alias, sid in tree}
        status.body = {sid: value for sid, value in status.body.items() if sid in walked}


def _label(route: str) -> str:
    return f"GET {route} (attach)"
