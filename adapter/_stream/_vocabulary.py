"""How OpenCode's native vocabulary maps onto the canonical one."""

from __future__ import annotations

import re
from typing import Literal

from .._client import PermissionReply
from .._types._events import ItemType

__all__ = [
    "Decision",
    "is_placeholder_title",
    "item_type_for_tool",
    "permission_reply_for",
]

Decision = Literal["accept", "accept_for_session", "decline"]

_PLACEHOLDER = re.compile(r"^(New session|Child session) - \d{4}-\d{2}-\d{2}T[0-9:.]+Z?$")

_COMMAND = {"bash", "shell"}
_FILE_CHANGE = {"edit", "write", "patch", "multiedit", "apply_patch"}
_WEB = {"webfetch", "websearch", "codesearch"}
_BUILTIN_OTHER = {
    "read", "grep", "glob", "list", "ls", "todowrite", "todoread", "question",
    "skill", "lsp", "batch", "invalid", "execute", "plan_enter", "plan_exit",
}  # fmt: skip


def is_placeholder_title(title: str) -> bool:
    """OpenCode names new sessions ``New session - <ISO>`` until it generates a title."""
    return _PLACEHOLDER.match(title) is not None


def item_type_for_tool(tool: str) -> ItemType:
    if tool in _COMMAND:
        return "command"
    if tool in _FILE_CHANGE:
        return "file_change"
    if tool in _WEB:
        return "web"
    if tool == "task":
        return "subagent"
    if tool in _BUILTIN_OTHER:
        return "other"
    # OpenCode names MCP tools `<server>_<tool>`.
    return "mcp" if "_" in tool else "other"


_REPLIES: dict[str, PermissionReply] = {
    "accept": "once",
    "accept_for_session": "always",
    "decline": "reject",
}


def permission_reply_for(decision: str) -> PermissionReply:
    try:
        return _REPLIES[decision]
    except KeyError:
        from .._exceptions import InvalidInputError

        raise InvalidInputError(
            f"decision must be accept, accept_for_session or decline, got {decision!r:.40}"
        ) from None


DECISION_FOR_REPLY: dict[str, str] = {
    "once": "accept",
    "always": "accept_for_session",
    "reject": "decline",
}
