"""How deep decoded JSON nests, found without recursion.

Why its own module: three faces bound the nesting of JSON they did not write (the
event pump for the server's events, the ACP agent for a client's lines; the web
app scans raw bytes before parsing instead), because every consumer after them
(the standard library's ``json``, pydantic, structlog) recurses per level and
would meet ``RecursionError``. One walk serves them: iterative, so it cannot run
out of stack itself, visiting each container once and returning at the first one
past the bound.
"""

from __future__ import annotations

from typing import Any

__all__ = ["deeper_than"]


def deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` nests arrays and objects more than ``limit`` levels deep
    (``value`` itself, when a container, is level 1)."""
    if type(value) is not dict and type(value) is not list:
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if type(node) is dict else node
        for child in children:
            if type(child) is dict or type(child) is list:
                if depth >= limit:
                    return True
                stack.append((child, depth + 1))
    return False
