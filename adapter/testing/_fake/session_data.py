"""The data the fake keeps: sessions, messages, runs, recorded and pending requests.

Why a module: every part of the fake reads and writes these (the state keeps them,
the runner plays runs on them, the routes answer from them), so they live below all
of those. :class:`FakeSession` and :class:`FakeMessage` are public (``fake.sessions``);
their ``_``-fields belong to the fake's parts, which change them through
:class:`~.state.FakeState` and the runner.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias

import httpx

from .model_input import ModelInput
from .wire import IDLE, JSON


class Settings(Protocol):
    """The server's public settings its parts read (a test may change them any time)."""

    directory: str
    heartbeat: float | None
    provider_id: str
    model_id: str
    summary_text: str
    model_cost: Mapping[str, float]
    model_modalities: frozenset[str]
    model_inputs: list[ModelInput]
    background_subagents: bool


REDACTED = "[redacted]"
"""What a recorded request shows instead of a credential."""

_REDACTED_BYTES = REDACTED.encode()
_CREDENTIAL_HEADERS = frozenset({b"authorization", b"proxy-authorization"})
_CREDENTIAL_PARAMS = frozenset({"auth_token"})


@dataclass(slots=True)
class RecordedRequest:
    """One request the fake received (``fake.requests``, ``fake.calls(...)``, ``hook.calls``).

    ``started_at``/``ended_at`` are event-loop times (``loop.time()``); ``ended_at``
    and ``status`` are ``None`` while the request is in flight, and ``status`` stays
    ``None`` if a hook raised. For ``GET /event``, ``ended_at`` is when the stream's
    headers were returned. ``session_id`` is the ``{id}`` of a ``/session/{id}/...`` path.

    What was sent, as a respx user reads ``call.request``:

    * ``body``: the parsed JSON when the body is valid JSON (whatever its content type,
      as the server reads it), else the raw bytes; ``None`` when empty (or JSON ``null``).
    * ``query``: :class:`httpx.QueryParams`, read-only; ``query["k"]`` is the first
      value, ``query.get_list("k")`` all of them; ``dict(query)`` is a plain dict of
      the first values (a ``QueryParams`` compares equal only to a ``QueryParams``).
    * ``headers``: :class:`httpx.Headers` (case-insensitive), a copy.

    Credentials are never kept: the ``authorization`` (and ``proxy-authorization``)
    header and every ``auth_token`` query value read ``"[redacted]"``. The record keeps
    the parsed body, not the request: ``fake.requests`` grows until
    :meth:`FakeOpenCodeServer.reset_stats`.
    """

    method: str
    path: str
    session_id: str | None
    started_at: float
    ended_at: float | None = None
    status: int | None = None
    body: Any = None
    query: httpx.QueryParams = field(default_factory=httpx.QueryParams)
    headers: httpx.Headers = field(default_factory=httpx.Headers)

    @classmethod
    def of(
        cls, request: httpx.Request, content: bytes, session_id: str | None, started_at: float
    ) -> RecordedRequest:
        """The record of ``request`` whose body is ``content``, credentials redacted."""
        query = httpx.QueryParams(
            [
                (key, REDACTED if key in _CREDENTIAL_PARAMS else value)
                for key, value in request.url.params.multi_items()
            ]
        )
        # The raw bytes: a header value need not be ASCII (a directory's, sent raw).
        headers = httpx.Headers(
            [
                (name, _REDACTED_BYTES if name.lower() in _CREDENTIAL_HEADERS else value)
                for name, value in request.headers.raw
            ]
        )
        return cls(
            request.method.upper(),
            request.url.path,
            session_id,
            started_at,
            body=_parsed_body(content),
            query=query,
            headers=headers,
        )


def _parsed_body(content: bytes) -> Any:
    if not content:
        return None
    try:
        return json.loads(content)
    except (ValueError, UnicodeDecodeError):
        return content


class FakeMessage:
    """A stored message: ``info`` (the Message JSON) and its parts (in order)."""

    __slots__ = ("_parts", "info")

    def __init__(self, info: JSON) -> None:
        self.info: JSON = info
        self._parts: dict[str, JSON] = {}

    @property
    def id(self) -> str:
        """The message id (``msg_...``)."""
        return str(self.info["id"])

    @property
    def role(self) -> str:
        """``"user"`` or ``"assistant"``."""
        return str(self.info["role"])

    @property
    def parts(self) -> list[JSON]:
        """The parts, as the API returns them."""
        return list(self._parts.values())

    @property
    def text(self) -> str:
        """The concatenated text of the text parts."""
        return "".join(p.get("text", "") for p in self._parts.values() if p["type"] == "text")

    def to_json(self) -> JSON:
        """The ``{info, parts}`` object of ``GET /session/{id}/message``."""
        return {"info": self.info, "parts": list(self._parts.values())}


class FakeSession:
    """The state of one fake session (read it; change it through the fake's methods)."""

    __slots__ = (
        "_aborting",
        "_background",
        "_children",
        "_deferred",
        "_finishing",
        "_messages",
        "_pending",
        "_queue",
        "_run",
        "_runner",
        "abort_count",
        "id",
        "info",
        "parent_id",
        "status",
    )

    def __init__(self, id: str, parent_id: str | None, info: JSON) -> None:
        self.id: str = id
        """The session id (``ses_...``)."""
        self.parent_id: str | None = parent_id
        """The parent's id; ``None`` for a root."""
        self.info: JSON = info
        self.status: JSON = IDLE
        self.abort_count: int = 0
        """How many ``POST /session/{id}/abort`` requests reached this session."""
        self._children: dict[str, None] = {}
        self._messages: dict[str, FakeMessage] = {}
        self._queue: deque[Prompt] = deque()
        self._runner: asyncio.Task[None] | None = None
        self._run: Run | None = None
        self._aborting: asyncio.Future[None] | None = None
        self._pending: set[str] = set()
        self._finishing = False
        """The run has decided to end (its last step finished) and is not idle yet."""
        self._deferred: list[tuple[Prompt, Callable[[], None]]] = []
        """Prompts accepted while :attr:`_finishing`: admitted after the idle."""
        self._background: dict[str, asyncio.Task[None]] = {}
        """Running background children (id -> the watcher that reports their end)."""

    @property
    def children(self) -> list[str]:
        """Ids of the direct children, in creation order."""
        return list(self._children)

    @property
    def busy(self) -> bool:
        """True unless the status is idle."""
        return bool(self.status["type"] != "idle")

    @property
    def directory(self) -> str:
        """The session's directory: its events go to that directory's streams."""
        return str(self.info["directory"])

    @property
    def title(self) -> str:
        """The session title."""
        return str(self.info["title"])

    @property
    def messages(self) -> list[FakeMessage]:
        """The stored messages, oldest first."""
        return list(self._messages.values())

    @property
    def queued_prompts(self) -> int:
        """Prompts waiting behind the running one."""
        return len(self._queue)

    @property
    def pending_requests(self) -> list[str]:
        """Ids of this session's unanswered permission/question requests."""
        return sorted(self._pending)

    def __repr__(self) -> str:
        status = self.status["type"]
        return f"FakeSession(id={self.id!r}, parent_id={self.parent_id!r}, status={status!r})"


Outcome: TypeAlias = Literal["completed", "aborted", "failed", "blocked", "vanished"]


@dataclass(slots=True)
class Result:
    outcome: Outcome
    text: str = ""
    error: JSON | None = None
    message_id: str | None = None


@dataclass(slots=True)
class Prompt:
    user_message_id: str
    text: str
    script: str | None
    agent: str
    provider_id: str
    model_id: str
    future: asyncio.Future[Result] | None = None
    compaction: bool | None = None
    """``None`` for a prompt; for a ``summarize`` request, its ``auto`` flag."""
    variant: str | None = None


@dataclass(slots=True)
class ActiveTool:
    part: JSON
    child_id: str | None = None
    asking: bool = False


@dataclass(slots=True)
class Run:
    session: FakeSession
    prompt: Prompt
    message: FakeMessage | None = None
    step_started: bool = False
    had_tool: bool = False
    text_part: JSON | None = None
    text_buf: list[str] = field(default_factory=list)
    last_text: str = ""
    tools: dict[str, ActiveTool] = field(default_factory=dict)
    merged: list[Prompt] = field(default_factory=list)
    """Prompts sent during the run that its next model step took in (measured)."""
    answering: str | None = None
    """The user message the next model step answers, if not the run's prompt: the
    newest merged prompt, or the synthetic "continue" message after a compaction."""
    retrying: bool = False
    """OpenCode is between retries of a failed model call."""
    parked: bool = False
    """The run waits for nothing but an abort (a :class:`Hang`, an endless tool)."""


@dataclass(slots=True)
class PendingRequest:
    kind: Literal["permission", "question"]
    session_id: str
    payload: JSON
    future: asyncio.Future[Any]
