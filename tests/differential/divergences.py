"""The one registry of known, harmless divergences between the fake and a real server.

Everything the differential suite tolerates is listed here, each with the reason it
cannot matter to a client; every other difference fails a scenario. There are three
kinds of entries:

* :data:`RULES` — normalisation rules applied to every response body, event and state
  snapshot of *both* targets before they are compared (ids, clocks, usage figures...);
* :data:`NOISE_EVENTS` — event types left out of the comparison of event-type sets;
* :data:`UNDOCUMENTED_RESPONSES` — answers the real server gives that its own OpenAPI
  spec does not describe, with the schema they are checked against instead;
* :data:`SPEC_PATCHES` — fields the real server sends that its spec forbids;
* :data:`SHARED_SERVER_SCOPE` — why session listings are reduced to the scenario's sessions.

Add an entry only after measuring on a real server that the difference is harmless,
and say why in ``reason``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

KEEP = object()
"""What a rule's ``replace`` returns to leave a value alone."""


class Context(Protocol):
    """What rules need from the normaliser of one target's recording."""

    directories: tuple[tuple[str, str], ...]
    """(path, placeholder) pairs, longest path first."""

    def placeholder(self, raw_id: str) -> str: ...

    def call_placeholder(self, raw_id: str) -> str: ...


@dataclass(frozen=True)
class Rule:
    """Replace a value at a JSON ``path`` (keys; ``[]`` for list items) when it matches."""

    name: str
    reason: str
    replace: Callable[[tuple[str, ...], Any, Context], Any]


ID_RE = re.compile(r"\b(ses|msg|prt|per|que|evt|tool)_[0-9a-fA-F]{12}[0-9A-Za-z]{8,}")
ISO_RE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")
_TIME_KEYS = frozenset(
    {"created", "updated", "start", "end", "completed", "compacting", "archived"}
)


def _strings(path: tuple[str, ...], value: Any, ctx: Context) -> Any:
    if not isinstance(value, str):
        return KEEP
    out = ID_RE.sub(lambda m: ctx.placeholder(m.group(0)), value)
    for directory, placeholder in ctx.directories:
        out = out.replace(directory, placeholder)
    return ISO_RE.sub("<iso>", out)


def _call_id(path: tuple[str, ...], value: Any, ctx: Context) -> Any:
    if path and path[-1] == "callID" and isinstance(value, str):
        return ctx.call_placeholder(value)
    return KEEP


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _timestamps(path: tuple[str, ...], value: Any, ctx: Context) -> Any:
    if not _number(value) or not path:
        return KEEP
    if len(path) >= 2 and path[-2] == "time" and path[-1] in _TIME_KEYS:
        return "<ts>"
    # ``next`` is only ever a retry status's (in events and in ``GET /session/status``).
    if path[-1] in ("time", "next"):
        return "<ts>"
    return KEEP


def _usage(path: tuple[str, ...], value: Any, ctx: Context) -> Any:
    if _number(value) and ("tokens" in path or path[-1:] == ("cost",)):
        return "<n>"
    return KEEP


def _per_key(key: str, placeholder: str) -> Callable[[tuple[str, ...], Any, Context], Any]:
    def replace(path: tuple[str, ...], value: Any, ctx: Context) -> Any:
        return placeholder if path[-1:] == (key,) and isinstance(value, str) else KEEP

    return replace


def _error_ref(path: tuple[str, ...], value: Any, ctx: Context) -> Any:
    if path[-1:] == ("ref",) and isinstance(value, str) and value.startswith("err_"):
        return "<err-ref>"
    return KEEP


def _model_url(path: tuple[str, ...], value: Any, ctx: Context) -> Any:
    if path[-2:] == ("metadata", "url") and "error" in path and isinstance(value, str):
        return "<model-url>"
    return KEEP


def _summary_text(path: tuple[str, ...], value: Any, ctx: Context) -> Any:
    if not (isinstance(value, dict) and isinstance(value.get("info"), dict)):
        return KEEP
    if value["info"].get("summary") is not True or not isinstance(value.get("parts"), list):
        return KEEP
    parts = [
        {**p, "text": "<summary text>"} if isinstance(p, dict) and p.get("type") == "text" else p
        for p in value["parts"]
    ]
    return {**value, "parts": parts}


RULES: tuple[Rule, ...] = (
    Rule(
        "callID",
        "tool call ids come from the model (the scripted model mints random `call_<hex>`, the "
        "fake `call_N_0`); clients only use them to pair a part with its permission/question",
        _call_id,
    ),
    Rule(
        "timestamps",
        "wall-clock times (`time.created/updated/start/end/completed`, a part event's `time`, "
        "a retry's `next`) differ per run; only their presence is compared",
        _timestamps,
    ),
    Rule(
        "usage figures",
        "token counts and costs are computed from the scripted model's invented `usage` and "
        "the real prompt size (system prompt, tool schemas); only their shape is compared",
        _usage,
    ),
    Rule(
        "slug",
        "a session's slug is a random adjective-noun pair",
        _per_key("slug", "<slug>"),
    ),
    Rule(
        "version",
        "the fake reports the release it emulates; a release-matrix run against another "
        "binary would otherwise differ in every Session object",
        _per_key("version", "<version>"),
    ),
    Rule(
        "error ref",
        "the real server tags an unexpected error with a random `data.ref` (`err_<hex>`) "
        "that points into its log",
        _error_ref,
    ),
    Rule(
        "model URL in provider errors",
        "a provider error names the model's URL, which is configuration (the scripted "
        "model's port), not behaviour",
        _model_url,
    ),
    Rule(
        "summary text",
        "the text of a compaction summary (`info.summary: true`) is whatever the model "
        "answers: the scripted model answers tool-less requests with its title text, the "
        "fake with a fixed sentence; the parts' shape is still compared",
        _summary_text,
    ),
    Rule(
        "ids, directories and ISO times inside strings",
        "session/message/part/request ids are random per run (mapped to stable placeholders: "
        "sessions by alias, messages and parts by position, the rest by first appearance); the "
        "project directory is a temp dir on the real server; untitled sessions embed the "
        "creation time in their title",
        _strings,
    ),
)


NOISE_EVENTS: Mapping[str, str] = {
    "server.connected": "first event of every stream; the driver waits for it, on both targets",
    "server.heartbeat": "timer-driven keep-alive (every ~10 s), not caused by the scenario",
    "plugin.added": "the real server's plugin loading at instance start-up, not per scenario",
    "catalog.updated": "the real server's model catalogue refresh at start-up",
    "integration.updated": "the real server's integration registry at start-up",
    "reference.updated": "the real server's reference index at start-up",
    "installation.updated": "auto-update bookkeeping (disabled offline)",
    "lsp.updated": "language-server status; no LSP runs in the empty project",
    "lsp.client.diagnostics": "language-server diagnostics; no LSP runs in the empty project",
    "file.watcher.updated": "the real server's file watcher, not session behaviour",
    "project.updated": "project metadata refresh at instance start-up",
    "mcp.tools.changed": "MCP registry; none configured",
}
"""Event types that are not compared (neither their presence nor their schema)."""

NOISE_PREFIXES: tuple[str, ...] = ("tui.", "pty.", "workspace.", "vcs.")
"""Prefixes of event families that are not about sessions (UI, terminals, git)."""


def is_noise(event_type: str) -> bool:
    """Whether ``event_type`` is left out of the comparison."""
    return event_type in NOISE_EVENTS or event_type.startswith(NOISE_PREFIXES)


UNDOCUMENTED_RESPONSES: Mapping[int, tuple[str, Mapping[str, Any]]] = {
    500: (
        "the real server answers 500 UnknownError for a session id without the `ses` prefix "
        "(measured), which its OpenAPI spec does not list; checked against this schema instead",
        {
            "type": "object",
            "required": ["name", "data"],
            "properties": {
                "name": {"const": "UnknownError"},
                "data": {
                    "type": "object",
                    "required": ["message"],
                    "properties": {"message": {"type": "string"}},
                },
            },
        },
    ),
}
"""Status → (reason, JSON schema) for answers the spec omits but the real server gives."""

SHARED_SERVER_SCOPE = (
    "the real server is shared by every scenario and test of a run, so its session "
    "listings (`GET /session`) also hold sessions of others: listings are reduced to the "
    "scenario's own sessions before they are compared. In the state snapshot they are "
    "compared as a set, and their order is checked on each target against the measured "
    "rule (newest time.updated first): which session a turn touched last is timing on "
    "the real server (nested_task's root and child swapped places between two CI runs)"
)
"""Why list bodies are scoped to the scenario's sessions (see ``compare.scoped``)."""


@dataclass(frozen=True)
class SpecPatch:
    """A correction to the real server's spec: it emits something its spec forbids."""

    pointer: str
    """Where in the spec (``/``-separated keys from the root), set to ``value``."""
    value: Any
    reason: str


SPEC_PATCHES: tuple[SpecPatch, ...] = (
    SpecPatch(
        "components/schemas/ToolStateError/properties/title",
        {"type": "string"},
        "measured on 1.18.34: a task tool aborted while its child runs ends `error` with the "
        "running state's `title` kept, which `ToolStateError` (additionalProperties: false) "
        "does not declare; the real server is the truth, so both targets may send it",
    ),
)
"""Applied to the spec before any validation, on both targets alike."""
