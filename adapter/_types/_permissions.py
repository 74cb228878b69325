"""Permission modes: named presets and raw OpenCode rules for a thread's session.

Why presets are whole rule lists that start with a catch-all: measured on
OpenCode 1.18.34, a tool call is checked against the server config's
``permission`` rules followed by the session's, and the **last** matching rule
wins (so a session rule beats the config either way), and ``PATCH /session/{id}``
*appends* the rules it is given instead of replacing them. A preset that begins
with ``{"permission": "*", "pattern": "*", "action": "allow"}`` therefore decides
every permission by itself, wherever it is appended: switching a live thread
from ``ask`` to ``full-access`` and back works by appending the new preset.

What each preset does (``docs/adapter.md``, "Permission modes"):

* ``full-access``: everything allowed, nothing asked.
* ``auto-edit``: file edits allowed; ``bash``, ``webfetch``, ``websearch``,
  ``codesearch``, ``external_directory`` and ``doom_loop`` ask.
* ``ask``: as ``auto-edit``, and ``edit`` (every file write) asks too.

Reads, searches, todos, questions and ``task`` are allowed by all three. Session
rules do not reach ``task`` subagents (measured: a child's ``bash`` ran without
asking under a root with ``bash: ask``); they follow the server config.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from .._exceptions import InvalidInputError

__all__ = [
    "PRESETS",
    "PermissionAction",
    "PermissionPreset",
    "PermissionRule",
    "Permissions",
    "describe",
    "native_rules",
    "permission_rules",
]

PermissionAction: TypeAlias = Literal["allow", "ask", "deny"]
PermissionPreset: TypeAlias = Literal["ask", "auto-edit", "full-access"]

_ACTIONS: dict[str, PermissionAction] = {"allow": "allow", "ask": "ask", "deny": "deny"}


@dataclass(frozen=True, slots=True)
class PermissionRule:
    """One OpenCode rule: ``permission`` (a tool's permission name, ``*`` wildcards),
    ``pattern`` (what the call touches: a command, a path; ``*`` wildcards), ``action``."""

    permission: str
    pattern: str
    action: PermissionAction

    def to_native(self) -> dict[str, str]:
        return {"permission": self.permission, "pattern": self.pattern, "action": self.action}


Permissions: TypeAlias = PermissionPreset | Sequence[PermissionRule | Mapping[str, str]]
"""What ``start_session(permissions=...)`` takes: a preset name or raw rules."""

_ALLOW_ALL = PermissionRule("*", "*", "allow")
_RISKY = ("bash", "webfetch", "websearch", "codesearch", "external_directory", "doom_loop")

PRESETS: Mapping[str, tuple[PermissionRule, ...]] = {
    "full-access": (_ALLOW_ALL,),
    "auto-edit": (_ALLOW_ALL, *(PermissionRule(name, "*", "ask") for name in _RISKY)),
    "ask": (
        _ALLOW_ALL,
        PermissionRule("edit", "*", "ask"),
        *(PermissionRule(name, "*", "ask") for name in _RISKY),
    ),
}
"""Each preset's rules, in the order they are sent."""


def permission_rules(permissions: object) -> tuple[PermissionRule, ...]:
    """Check ``permissions`` (a preset name or raw rules) and return its rules;
    raise ``InvalidInputError`` naming the bad field otherwise."""
    if isinstance(permissions, str):
        preset = PRESETS.get(permissions)
        if preset is None:
            raise InvalidInputError(
                f"permissions must be one of {', '.join(map(repr, PRESETS))} "
                f"or a list of rules, got {permissions!r:.40}"
            )
        return preset
    if not isinstance(permissions, Sequence) or isinstance(permissions, bytes):
        raise InvalidInputError(
            f"permissions must be a preset name or a list of rules, "
            f"got {type(permissions).__name__}"
        )
    if not permissions:
        raise InvalidInputError("permissions is an empty list of rules")
    rules: list[PermissionRule] = []
    for index, item in enumerate(permissions):
        field = f"permissions[{index}]"
        if isinstance(item, PermissionRule):
            values: Mapping[str, object] = item.to_native()
        elif isinstance(item, Mapping):
            values = item
            unknown = set(values) - {"permission", "pattern", "action"}
            if unknown:
                raise InvalidInputError(f"{field} has unknown keys: {sorted(map(str, unknown))}")
        else:
            raise InvalidInputError(f"{field} must be a rule mapping, got {type(item).__name__}")
        for key in ("permission", "pattern"):
            value = values.get(key)
            if not isinstance(value, str) or not value:
                raise InvalidInputError(f"{field}.{key} must be a non-empty string")
        raw_action = values.get("action")
        action = _ACTIONS.get(raw_action) if isinstance(raw_action, str) else None
        if action is None:
            raise InvalidInputError(
                f"{field}.action must be one of {tuple(_ACTIONS)}, got {raw_action!r:.40}"
            )
        rules.append(PermissionRule(str(values["permission"]), str(values["pattern"]), action))
    return tuple(rules)


def describe(permissions: object) -> str | tuple[PermissionRule, ...]:
    """What ``SessionInfo.permissions`` shows: the preset's name, or the rules."""
    if isinstance(permissions, str):
        return permissions
    return permission_rules(permissions)


def native_rules(rules: Sequence[PermissionRule]) -> list[dict[str, str]]:
    """Rules as OpenCode's ``permission`` field takes them."""
    return [rule.to_native() for rule in rules]
