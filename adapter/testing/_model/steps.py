"""The model server's script steps: what the scripted model answers, request by request.

Why a module: tests and the demo build scripts from these steps and from
:func:`script_marker` / :func:`task_call`; they are plain records, apart from the
HTTP server that plays them (:mod:`.server`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias

#: Matches a ``[[script:NAME]]`` marker; group 1 is the script name.
SCRIPT_MARKER_RE: Final = re.compile(r"\[\[script:([A-Za-z0-9_.\-/]+)\]\]")

_MODEL_NAME: Final = "fake-model"
_READ_SIZE: Final = 65536


def script_marker(name: str) -> str:
    """Return the marker that selects script ``name`` when put in a first user message."""
    if not SCRIPT_MARKER_RE.fullmatch(f"[[script:{name}]]"):
        raise ValueError(f"invalid script name {name!r}: use letters, digits, '_', '.', '-', '/'")
    return f"[[script:{name}]]"


@dataclass(frozen=True)
class Text:
    """Stream ``text`` as assistant content, ``chunk_size`` characters per SSE chunk.

    ``delay`` seconds are waited before every chunk after the first one ("slow
    streaming"); the wait ends early if the client disconnects. ``prompt_tokens``
    overrides the reported usage (e.g. above the model's context limit, to make
    OpenCode compact the session).
    """

    text: str
    chunk_size: int = 32
    delay: float = 0.0
    prompt_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.chunk_size < 1:
            raise ValueError("chunk_size must be >= 1")
        if self.delay < 0:
            raise ValueError("delay must be >= 0")


@dataclass(frozen=True)
class ToolCall:
    """One function call requested by the model.

    ``arguments`` is serialised to JSON. ``call_id`` defaults to a fresh unique id.
    """

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    call_id: str | None = None


@dataclass(frozen=True)
class ToolCalls:
    """Answer with one or more tool calls (``finish_reason == "tool_calls"``).

    ``text``, if given, is streamed as assistant content before the calls,
    ``chunk_size`` characters per chunk with ``delay`` seconds before every chunk after
    the first one, as :class:`Text` streams (a slow answer that then calls a tool).
    ``prompt_tokens`` overrides the reported usage (see :class:`Text`).
    """

    calls: Sequence[ToolCall]
    text: str = ""
    prompt_tokens: int | None = None
    chunk_size: int = 32
    delay: float = 0.0

    def __post_init__(self) -> None:
        calls = tuple(self.calls)
        if not calls:
            raise ValueError("ToolCalls needs at least one ToolCall")
        if self.chunk_size < 1:
            raise ValueError("chunk_size must be >= 1")
        if self.delay < 0:
            raise ValueError("delay must be >= 0")
        object.__setattr__(self, "calls", calls)


@dataclass(frozen=True)
class Hang:
    """Stream ``text_before`` (may be empty), then keep the response open.

    The response stays open until the client disconnects (recorded as
    ``ModelRequest.disconnected``) or the server is closed.
    """

    text_before: str = ""


def _default_error_body() -> dict[str, Any]:
    return {"error": {"message": "scripted error", "type": "server_error", "code": None}}


@dataclass(frozen=True)
class HttpError:
    """Answer with HTTP ``status`` and ``body`` (a string, or a mapping sent as JSON).

    What OpenCode 1.18.34 does with the answer decides how the turn ends (measured):
    a 5xx or a 429, and any status whose body mentions a retry keyword such as
    ``server_error`` (the default body), is **retried** five times over about 74 s,
    each retry announced as ``session.status {type: "retry"}``; any other 4xx fails
    the turn **at once** with ``session.error`` ``APIError``. Say which you mean with
    :meth:`invalid_request` or :meth:`server_error`.
    """

    status: int
    body: str | Mapping[str, Any] = field(default_factory=_default_error_body)

    def __post_init__(self) -> None:
        if not 400 <= self.status <= 599:
            raise ValueError("HttpError.status must be a 4xx or 5xx code")

    @classmethod
    def invalid_request(cls, message: str = "scripted error", status: int = 400) -> HttpError:
        """A provider error OpenCode does not retry: the turn fails at once (``APIError``)."""
        if not 400 <= status <= 499 or status == 429:
            raise ValueError("invalid_request needs a 4xx status other than 429")
        body = {"error": {"message": message, "type": "invalid_request_error", "code": None}}
        return cls(status, body)

    @classmethod
    def server_error(cls, message: str = "scripted error", status: int = 500) -> HttpError:
        """A provider error OpenCode retries (``session.status`` ``retry``), five times."""
        if not (500 <= status <= 599 or status == 429):
            raise ValueError("server_error needs a 5xx status or 429")
        return cls(status, {"error": {"message": message, "type": "server_error", "code": None}})


#: One scripted model response.
Step: TypeAlias = Text | ToolCalls | Hang | HttpError

#: How a request was answered.
RequestKind: TypeAlias = Literal[
    "text", "tool_calls", "hang", "http_error", "default", "title", "bad_request"
]


def task_call(
    description: str, script_name: str, subagent_type: str = "general", *, background: bool = False
) -> ToolCall:
    """Build a call of OpenCode's ``task`` tool whose child conversation runs ``script_name``.

    The child's first user message is the ``prompt`` argument, which carries the
    ``[[script:script_name]]`` marker, so the child picks that script. ``background``
    adds ``"background": true`` (a background subagent: OpenCode 1.18.34 runs it only
    with ``OPENCODE_EXPERIMENTAL_BACKGROUND_SUBAGENTS=true``; without it the call fails).
    """
    prompt = f"Subtask: {description}. {script_marker(script_name)}"
    arguments: dict[str, Any] = {
        "description": description,
        "prompt": prompt,
        "subagent_type": subagent_type,
    }
    if background:
        arguments["background"] = True
    return ToolCall("task", arguments)
