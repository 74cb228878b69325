"""Normalise one target's JSON by the registry's rules, and diff two normalised values.

Ids become placeholders that mean the same thing on both targets: a session is
named by its alias in the scenario (``<ses:root/0>``), a message and a part by
their position in the session's stored messages (``<msg:root.1>``,
``<prt:root.1.2>``); any other id by its order of first appearance
(``<per#1>``). So a difference in ids is a difference in structure, never luck.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .divergences import ID_RE, KEEP, RULES, Rule

MISSING = "<missing>"
"""How a key present on one side only is shown in a diff."""


class Normaliser:
    """Applies :data:`~.divergences.RULES` to everything recorded on one target."""

    def __init__(
        self,
        known: Mapping[str, str] | None = None,
        directories: Iterable[str] | Mapping[str, str] = (),
        rules: Iterable[Rule] = RULES,
    ) -> None:
        """``directories``: paths that become ``<dir>``, or path → its own placeholder
        (a scenario's other directories must stay told apart)."""
        self._ids: dict[str, str] = dict(known or {})
        self._counters: dict[str, int] = {}
        self._calls: dict[str, str] = {}
        named = (
            dict(directories)
            if isinstance(directories, Mapping)
            else dict.fromkeys(directories, "<dir>")
        )
        pairs: dict[str, str] = {}
        for path, placeholder in named.items():
            for form in (path, path.lstrip("/")):  # ``path`` fields drop the leading "/"
                if form:
                    pairs[form] = placeholder
        # Longest first, so a directory is replaced before its own suffix.
        self.directories: tuple[tuple[str, str], ...] = tuple(
            sorted(pairs.items(), key=lambda pair: len(pair[0]), reverse=True)
        )
        self._rules = tuple(rules)

    def placeholder(self, raw_id: str) -> str:
        """The placeholder of ``raw_id`` (a new ``<prefix#n>`` at its first appearance)."""
        found = self._ids.get(raw_id)
        if found is None:
            prefix = raw_id.split("_", 1)[0]
            self._counters[prefix] = self._counters.get(prefix, 0) + 1
            found = self._ids[raw_id] = f"<{prefix}#{self._counters[prefix]}>"
        return found

    def call_placeholder(self, raw_id: str) -> str:
        """The placeholder of a tool call id, by first appearance."""
        found = self._calls.get(raw_id)
        if found is None:
            found = self._calls[raw_id] = f"<call#{len(self._calls) + 1}>"
        return found

    def __call__(self, value: Any, path: tuple[str, ...] = ()) -> Any:
        """A normalised deep copy of ``value``."""
        for rule in self._rules:
            replaced = rule.replace(path, value, self)
            if replaced is not KEEP:
                # A rule that rewrites a container still has its content normalised.
                if not isinstance(replaced, Mapping | list | tuple):
                    return replaced
                value = replaced
                break
        if isinstance(value, Mapping):
            # Keys can be ids too (``GET /session/status`` maps session ids to statuses).
            keys = {k: ID_RE.sub(lambda m: self.placeholder(m.group(0)), str(k)) for k in value}
            return {keys[k]: self(v, (*path, keys[k])) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self(v, (*path, "[]")) for v in value]
        return value


@dataclass(frozen=True)
class Difference:
    """One leaf where two normalised values differ."""

    path: str
    fake: Any
    real: Any


def diff(fake: Any, real: Any, path: str = "") -> list[Difference]:
    """Every leaf difference between ``fake`` and ``real`` (dict keys by name, lists by index)."""
    if isinstance(fake, Mapping) and isinstance(real, Mapping):
        out: list[Difference] = []
        for key in list(real) + [k for k in fake if k not in real]:
            sub = f"{path}.{key}" if path else str(key)
            if key not in fake:
                out.append(Difference(sub, MISSING, real[key]))
            elif key not in real:
                out.append(Difference(sub, fake[key], MISSING))
            else:
                out.extend(diff(fake[key], real[key], sub))
        return out
    if isinstance(fake, list) and isinstance(real, list):
        out = []
        for index in range(max(len(fake), len(real))):
            sub = f"{path}[{index}]"
            if index >= len(fake):
                out.append(Difference(sub, MISSING, real[index]))
            elif index >= len(real):
                out.append(Difference(sub, fake[index], MISSING))
            else:
                out.extend(diff(fake[index], real[index], sub))
        return out
    if type(fake) is not type(real) or fake != real:
        return [Difference(path or "<root>", fake, real)]
    return []
