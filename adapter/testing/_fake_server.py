"""An in-process emulation of the OpenCode 1.18.x HTTP API, for tests and benchmarks.

:class:`FakeOpenCodeServer` answers a faithful subset of the OpenCode server API
(sessions, children, status, messages, prompts, abort, revert and unrevert,
summarize, session update and delete, permission and question replies, the
``/event`` SSE stream, basic auth) through an
:class:`httpx.AsyncBaseTransport`, so a client talks to it with no network::

    fake = FakeOpenCodeServer()
    fake.script("work", [Text("thinking..."), Tool("bash", {"command": "ls"}, output="a\\n")])
    async with httpx.AsyncClient(transport=fake.transport, base_url=fake.base_url) as client:
        session = (await client.post("/session", json={})).json()
        await client.post(
            f"/session/{session['id']}/prompt_async",
            json={"parts": [{"type": "text", "text": "go [[script:work]]"}]},
        )
        await fake.wait_for_event("session.idle")
    await fake.aclose()

A prompt runs a *script*: the steps registered with :meth:`FakeOpenCodeServer.script`
under the name given by a ``[[script:NAME]]`` marker in the prompt text (without
a marker, the ``"default"`` script streams ``ok``). Steps are :class:`Text`,
:class:`Tool`, :class:`Task`, :class:`Hang`, :class:`Fail` (optionally after
OpenCode's retries), :class:`Permission`, :class:`Question` and :class:`Compact` (an
automatic compaction mid-run); they produce the same events and stored message parts
as a real server driven by a model that does the same things.

Quirks of the real server that are reproduced on purpose:

* ``POST /session/{id}/abort`` answers ``true`` even for unknown ids, and returns
  only after the session's cleanup events were emitted.
* Aborting a session cancels the child sessions of its running ``task`` tools
  (recursively through tasks), but not children created through the API.
* An abort emits ``session.error`` (MessageAbortedError), ``session.status`` idle
  and ``session.idle``, then the final part and message updates, then
  ``session.status`` idle and ``session.idle`` *again*.
* A running ``bash`` tool ends ``completed`` with ``User aborted the command``;
  any other running tool ends ``error`` ``"Tool execution aborted"`` with
  ``metadata.interrupted``.
* ``GET /session/status`` lists only non-idle sessions.
* ``GET /session/{id}/children`` lists direct children only, in creation order.
* An id without the ``ses`` prefix in ``/session/{id}/...`` answers 500 ``UnknownError``.
* Pending permission and question requests outlive an abort of their session:
  still listed by ``GET /permission`` / ``GET /question`` while their tool part
  has ended ``error`` (interrupted); a reply answers ``true`` and emits
  ``replied`` but runs nothing.
* ``POST /session/{id}/revert`` only sets ``session.revert``; the next prompt
  removes the reverted messages (``message.removed``, ``message.part.removed``)
  and their tokens from the session's totals. ``unrevert`` clears the mark.
* ``DELETE /session/{id}`` deletes the subtree children first (``session.deleted``
  each) and answers ``true``; a busy deleted session keeps running (abortable).
* ``PATCH /session/{id}`` emits ``session.updated`` but leaves ``time.updated``.
* ``POST /session/{id}/summarize`` answers ``true`` after a compaction turn (its
  text is :attr:`FakeOpenCodeServer.summary_text`); while busy it waits its turn
  (the running run ends once its current tool step finished: the agent does not go
  on), and an abort drops it (still ``true``).
* A session's ``tokens`` and ``cost`` are the sums of its steps'; ``summary``,
  ``agent`` and ``model`` appear with its first prompt.
* Event order of a run: ``session.status`` busy is announced at the start of
  each model step and again before its parts stream; ``session.updated`` +
  ``session.diff`` (``[]``) follow each step's new assistant message and the
  final idle; a finished assistant message is announced twice; a completed run
  says busy once more right before idle. ``POST /session`` emits
  ``session.created`` only.
* ``permission.asked`` / ``question.asked`` come between the tool part's
  ``pending`` and ``running`` updates. ``always`` holds for every session.
* A failed model call: ``session.error`` (``APIError`` with ``statusCode``,
  ``isRetryable``, ``responseHeaders``, ``responseBody``, ``metadata``), an idle
  pair, the assistant message with ``error``, an idle pair again.
* A prompt that arrives once a run's last step finished, before its idle, is
  echoed after the idle and starts a second run (:meth:`FakeOpenCodeServer.hold_run_end`
  holds that window open); one that arrives while a step still runs joins the next step.
* A retried model call announces ``session.status`` ``retry`` per attempt
  (``Fail(retries=...)``); an abort between retries says no ``session.error``.
* A restarted server (:meth:`FakeOpenCodeServer.restart`) forgets its runs silently:
  idle, the interrupted message left incomplete, no error.
* ``task`` output is ``<task id="ses_..." state="completed">`` around a
  ``<task_result>``; ``bash`` streams ``metadata.output`` while running.
* A prompt's file parts are stored and converted as the real server does (a
  ``text/plain`` file adds two synthetic text parts; an undecodable image makes the prompt
  vanish; see :mod:`adapter.testing._fake_input`); :attr:`FakeOpenCodeServer.model_inputs`
  records what would reach the model (``system``, ``tools``, ``variant`` included).
* A session's ``permission`` rules are enforced: they come after the config's (a plain
  :class:`Tool` is one the config allows, a :class:`Permission` one it asks about) and the
  last matching rule wins; ``PATCH`` appends rules; ``task`` children get none of them.
* Invalid requests get the real bodies: ``400 BadRequest`` with the validation
  message (e.g. ``Missing key``, then a line ``at ["parts"]``) and ``kind``;
  malformed JSON is a ``500 UnknownError``; ``POST /session`` answers a bare
  ``{"_tag": "BadRequest"}`` and accepts an unknown ``parentID``.

Directories, as measured on 1.18.34 (the adapter opens one client and one event
stream per directory):

* A request's directory is ``?directory=`` (it wins), else the ``x-opencode-directory``
  header (percent-decoded), else the server's own (:attr:`FakeOpenCodeServer.directory`);
  relative paths resolve against the latter, ``.``, ``..`` and a trailing ``/`` are
  dropped, and a directory that does not exist is accepted.
* ``POST /session`` gives the session the request's directory (a child created with
  ``parentID`` too); a ``task`` child gets its parent's. ``path`` is the directory
  without its leading ``/``; ``projectID`` is ``global`` (no git repository).
* ``GET /event`` streams only the events of its directory's sessions, wherever the
  request that caused them came from (a prompt or abort sent in another directory).
  The fake sends an event about a session it does not know to every stream.
* ``GET /session/status``, ``GET /permission`` and ``GET /question`` list only the
  request directory's sessions; a reply sent in another directory answers 404
  (``PermissionNotFoundError`` / ``QuestionNotFoundError``) and the request stays.
* ``GET /session`` lists every directory's sessions; only ``?directory=`` filters (the
  header does not). Routes naming a session answer it in any directory.

Everything runs in the event loop of the caller: no threads, no sockets. Every
request is O(1) in the number of sessions (except ``GET /session``, which lists
them all).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import fnmatch
import json
import math
import posixpath
import random
import re
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, Literal, TypeAlias
from urllib.parse import parse_qs, unquote

import httpx

from ._fake_input import ModelInput, convert_parts

__all__ = [
    "COMPACTION_CONTINUE",
    "OPENCODE_VERSION",
    "Compact",
    "Fail",
    "FakeMessage",
    "FakeOpenCodeServer",
    "FakeSession",
    "Hang",
    "Hold",
    "Hook",
    "HookHandler",
    "Permission",
    "Question",
    "RecordedRequest",
    "RunEndHold",
    "Step",
    "Task",
    "Text",
    "Tool",
]

OPENCODE_VERSION = "1.18.34"
"""The server version the fake reports and emulates."""

JSON: TypeAlias = dict[str, Any]
HookHandler: TypeAlias = Callable[[httpx.Request], Awaitable[httpx.Response | None]]
"""A fault-injection handler: return a response to short-circuit, ``None`` to fall through."""

_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_MASK48 = (1 << 48) - 1
_SCRIPT_MARKER = re.compile(r"\[\[script:([^\]]+)\]\]")
_ABORTED_ERROR: JSON = {"name": "MessageAbortedError", "data": {"message": "Aborted"}}
_TOOL_ABORTED = "Tool execution aborted"
_BASH_ABORTED_OUTPUT = (
    "(no output)\n\n<shell_metadata>\nUser aborted the command\n</shell_metadata>"
)
_PERMISSION_REJECTED = "The user rejected permission to use this specific tool call."
_QUESTION_DISMISSED = "The user dismissed this question"
_SLUG_ADJECTIVES = (
    "kind", "clever", "quick", "calm", "crisp", "silent", "misty", "proud", "curious",
    "brave", "gentle", "bright", "swift", "quiet", "eager", "lucky",
)  # fmt: skip
_SLUG_NOUNS = (
    "engine", "canyon", "circuit", "knight", "squid", "panda", "meadow", "eagle", "moon",
    "river", "falcon", "harbor", "forest", "comet", "lantern", "otter",
)  # fmt: skip
_IDLE: JSON = {"type": "idle"}
_BUSY: JSON = {"type": "busy"}
_ZERO_TOKENS: JSON = {"input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}}
_STEP_TOKENS: JSON = {
    "total": 15,
    "input": 10,
    "output": 5,
    "reasoning": 0,
    "cache": {"write": 0, "read": 0},
}


# --------------------------------------------------------------------------- steps


@dataclass(frozen=True, slots=True)
class Text:
    """Stream assistant text.

    Emits the text part (empty), one ``message.part.delta`` per chunk (``chunks``
    nearly equal pieces, sleeping ``delay`` seconds before each), and the full
    part with ``time.end`` when the text block ends. Consecutive ``Text`` steps
    of one model step extend the same text part.
    """

    text: str
    chunks: int = 1
    delay: float = 0.0


@dataclass(frozen=True, slots=True)
class Tool:
    """Run a tool: part ``pending`` -> ``running`` -> ``completed`` (or ``error``).

    ``duration`` is how long it stays running (``float('inf')``: until aborted).
    ``error`` makes it end ``error`` with that message instead of ``output``.
    ``title`` defaults to the command / file path / description in ``input``.
    ``metadata`` is merged into the completed state's metadata (which always has
    ``truncated: false``, like every real tool's).

    A ``bash`` tool streams like the real one: ``running`` without metadata, then
    ``running`` with ``metadata.output: ""``, then one ``running`` per line of
    ``output`` (the output so far; spread over a finite ``duration``), then
    ``completed`` with ``metadata {output, exit: 0, truncated: false}`` and the
    command as title. Empty output completes as ``"(no output)"``.
    """

    tool: str
    input: Mapping[str, Any] = field(default_factory=dict)
    output: str | None = None
    error: str | None = None
    duration: float = 0.0
    title: str | None = None
    metadata: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Task:
    """Run a ``task`` tool that spawns a child session running ``script``.

    The child is created with ``parentID`` and titled ``"<description> (@<subagent_type>
    subagent)"``; the running part carries ``metadata.sessionId`` = the child's id.
    The part completes with the child's final text wrapped like the real tool does:
    ``<task id="ses_..." state="completed">``, ``<task_result>``, the text,
    ``</task_result>``, ``</task>``, each on a line of its own;
    it ends ``error "Task cancelled"`` if the child alone was aborted, or ``error
    "Subagent failed (task_id: ses_...): MESSAGE"`` if the child's model call failed
    (the parent then goes on with its script).
    ``prompt`` defaults to ``"<description> [[script:<script>]]"``.
    """

    description: str
    script: str
    subagent_type: str = "general"
    prompt: str | None = None


@dataclass(frozen=True, slots=True)
class Hang:
    """The current model step hangs (no output) until the session is aborted."""


@dataclass(frozen=True, slots=True)
class Fail:
    """The model call fails: ``session.error {name, data}`` and the run ends (idle).

    ``data`` adds fields to the error's ``data`` (or overrides them). An ``APIError``
    (the default, what a provider's 4xx that OpenCode does not retry produces) gets
    the real server's full ``data``: ``message, statusCode (400), isRetryable (false),
    responseHeaders, responseBody, metadata.url``.
    """

    name: str = "APIError"
    message: str = "Provider request failed"
    data: Mapping[str, Any] | None = None
    retries: int = 0
    """How often OpenCode retries the call first (the real server: 5 for a provider's
    5xx or 429). Each retry is announced ``session.status {type: "retry", attempt,
    message, next}`` (``next``: epoch ms of the next attempt), lasts ``retry_delay``
    seconds, and is followed by ``busy`` (the next attempt); ``GET /session/status``
    answers the retry status meanwhile. Then the call fails as above, with the data of
    a retryable error (``statusCode`` 500, ``isRetryable`` true, a ``server_error``
    body). An abort during the retries ends the run with no ``session.error``: the
    assistant message completes without an error, then one idle pair (measured)."""
    retry_delay: float = 0.0
    """Seconds each retry waits on the fake (the real server waits about 2.3, 4.5, 8.2,
    19.2 and 39.4 s: 74 s in all)."""


@dataclass(frozen=True, slots=True)
class Compact:
    """OpenCode compacts the session automatically here, then the agent goes on.

    What the real server does (measured on 1.18.34 with auto-compaction on) when a model
    step reports more tokens than the model's context holds: the step ends (``stop``,
    or ``tool-calls`` after a tool), a user message with a ``compaction`` part
    (``auto: true``, ``overflow: false``) is stored, then a summary assistant message
    (``agent``/``mode`` ``compaction``, ``summary: true``, answering the compaction
    message) streams ``summary`` (default :attr:`FakeOpenCodeServer.summary_text`),
    then a synthetic user message (:data:`COMPACTION_CONTINUE`, its text part
    ``synthetic: true``, ``metadata.compaction_continue``), then
    ``session.compacted``; the run continues with the rest of the script in assistant
    messages whose ``parentID`` is the synthetic message. It all happens inside one
    run: no idle until the script ends.
    """

    summary: str | None = None


COMPACTION_CONTINUE = (
    "Continue if you have next steps, or stop and ask for clarification if you are "
    "unsure how to proceed."
)
"""The text of the synthetic user message OpenCode adds after an automatic compaction."""


@dataclass(frozen=True, slots=True)
class Permission:
    """A tool call that needs permission: ``permission.asked``, then waits for the reply.

    The tool part goes ``pending``, then ``permission.asked``, then ``running``
    (input only), and waits. ``once``/``always`` run ``tool`` normally (``always``
    also pre-approves, for every session of the server like the real project-wide
    rule, later requests of this ``permission`` whose patterns all match one of
    ``always`` (or of ``patterns`` when ``always`` is empty; ``*`` is a wildcard));
    ``reject`` ends the tool ``error`` and stops the run. ``tool`` defaults to a
    tool named after ``permission`` (for ``bash``: ``{"command": patterns[0]}``).
    A ``bash`` request's ``metadata`` defaults to ``{"command": patterns[0]}`` and
    its ``always`` to ``"<program> *"`` per pattern, as the real bash tool asks.
    """

    permission: str = "bash"
    patterns: Sequence[str] = ("*",)
    always: Sequence[str] = ()
    metadata: Mapping[str, Any] | None = None
    tool: Tool | None = None


@dataclass(frozen=True, slots=True)
class Question:
    """A ``question`` tool call: ``question.asked``, then waits for a reply or reject.

    ``questions`` are ``{question, header, options: [{label, description}]}``
    objects. The part goes ``pending``, ``question.asked``, ``running``. A reply
    completes the tool (title ``"Asked N question(s)"``, ``metadata {answers,
    truncated}``); a reject ends it ``error`` and stops the run.
    """

    questions: Sequence[Mapping[str, Any]]


Step: TypeAlias = Text | Tool | Task | Hang | Fail | Permission | Question | Compact
"""Any script step."""


# --------------------------------------------------------------------------- records


@dataclass(slots=True)
class RecordedRequest:
    """One request the fake received.

    ``started_at``/``ended_at`` are event-loop times (``loop.time()``); ``ended_at``
    and ``status`` are ``None`` while the request is in flight, and ``status`` stays
    ``None`` if a hook raised. For ``GET /event``, ``ended_at`` is when the stream's
    headers were returned. ``session_id`` is the ``{id}`` of a ``/session/{id}/...`` path.
    """

    method: str
    path: str
    session_id: str | None
    started_at: float
    ended_at: float | None = None
    status: int | None = None


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

    def __init__(self, session_id: str, parent_id: str | None, info: JSON) -> None:
        self.id: str = session_id
        self.parent_id: str | None = parent_id
        self.info: JSON = info
        self.status: JSON = _IDLE
        self.abort_count: int = 0
        """How many ``POST /session/{id}/abort`` requests reached this session."""
        self._children: dict[str, None] = {}
        self._messages: dict[str, FakeMessage] = {}
        self._queue: deque[_Prompt] = deque()
        self._runner: asyncio.Task[None] | None = None
        self._run: _Run | None = None
        self._aborting: asyncio.Future[None] | None = None
        self._pending: set[str] = set()
        self._finishing = False
        """The run has decided to end (its last step finished) and is not idle yet."""
        self._deferred: list[tuple[_Prompt, Callable[[], None]]] = []
        """Prompts accepted while :attr:`_finishing`: admitted after the idle."""

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
        return f"FakeSession({self.id!r}, parent={self.parent_id!r}, status={self.status['type']})"


# --------------------------------------------------------------------------- internals


Outcome: TypeAlias = Literal["completed", "aborted", "failed", "blocked", "vanished"]


@dataclass(slots=True)
class _Result:
    outcome: Outcome
    text: str = ""
    error: JSON | None = None
    message_id: str | None = None


@dataclass(slots=True)
class _Prompt:
    user_message_id: str
    text: str
    script: str | None
    agent: str
    provider_id: str
    model_id: str
    future: asyncio.Future[_Result] | None = None
    compaction: bool | None = None
    """``None`` for a prompt; for a ``summarize`` request, its ``auto`` flag."""
    variant: str | None = None


@dataclass(slots=True)
class _ActiveTool:
    part: JSON
    child_id: str | None = None
    asking: bool = False


@dataclass(slots=True)
class _Run:
    session: FakeSession
    prompt: _Prompt
    message: FakeMessage | None = None
    step_started: bool = False
    had_tool: bool = False
    text_part: JSON | None = None
    text_buf: list[str] = field(default_factory=list)
    last_text: str = ""
    tools: dict[str, _ActiveTool] = field(default_factory=dict)
    merged: list[_Prompt] = field(default_factory=list)
    """Prompts sent during the run that its next model step took in (measured)."""
    answering: str | None = None
    """The user message the next model step answers, if not the run's prompt: the
    newest merged prompt, or the synthetic "continue" message after a compaction."""
    retrying: bool = False
    """OpenCode is between retries of a failed model call."""


@dataclass(slots=True)
class _PendingRequest:
    kind: Literal["permission", "question"]
    session_id: str
    payload: JSON
    future: asyncio.Future[Any]


class _HttpError(Exception):
    def __init__(self, response: httpx.Response) -> None:
        super().__init__(response.status_code)
        self.response = response


_EOF = object()
_DROP = object()


def _now_ms() -> int:
    return int(time.time() * 1000)


def _json_response(status: int, body: Any) -> httpx.Response:
    return httpx.Response(
        status,
        content=json.dumps(body, separators=(",", ":")).encode(),
        headers={"content-type": "application/json"},
    )


def _resolve_directory(value: str, cwd: str) -> str:
    """``value`` as the real server resolves a request's directory (measured on 1.18.34):
    relative to ``cwd``, with ``.``, ``..`` and a trailing ``/`` removed. The directory
    need not exist."""
    resolved = posixpath.normpath(posixpath.join(cwd, value))
    # POSIX keeps a leading "//"; Node's path.resolve (the server's) does not.
    return "/" + resolved.lstrip("/")


def _not_found(message: str) -> httpx.Response:
    return _json_response(404, {"name": "NotFoundError", "data": {"message": message}})


def _js(value: Any) -> str:
    """``value`` as the real server's validation messages print it (``JSON.stringify``)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _invalid(message: str, *path: str | int, kind: str = "Payload") -> httpx.Response:
    """400 as the real server's schema validation answers it (measured on 1.18.34):
    ``{"name": "BadRequest", "data": {"message", "kind"}}``, the message ending with a
    line ``  at ["key"][0]`` when ``path`` is given, ``kind`` being ``Payload`` (body),
    ``Params`` (path) or ``Query``."""
    if path:
        message += "\n  at " + "".join(f"[{json.dumps(p)}]" for p in path)
    return _json_response(400, {"name": "BadRequest", "data": {"message": message, "kind": kind}})


def _bad_request(message: str) -> httpx.Response:
    return _invalid(message)


def _expected_prefix(value: Any, prefix: str, name: str, *, kind: str) -> httpx.Response | None:
    """The 400 for an id that lacks its ``prefix`` (``msg``, ``per``, ``que``), else None."""
    if isinstance(value, str) and value.startswith(prefix):
        return None
    expected = f'Expected a string starting with "{prefix}", got {_js(value)}'
    return _invalid(expected, name, kind=kind)


_PART_TYPES = ("text", "file", "agent", "subtask")
_PART_UNION = (
    'Expected { readonly "type": "text", ... } | { readonly "type": "file", ... } | '
    '{ readonly "type": "agent", ... } | { readonly "type": "subtask", ... }'
)


def _zero_usage() -> JSON:
    return {"input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}}


def _sum_usage(total: Mapping[str, Any], step: Mapping[str, Any], *, sign: int) -> JSON:
    """``total`` plus (``sign=1``) or minus (``sign=-1``) a step's token counts."""
    cache, step_cache = total.get("cache", {}), step.get("cache", {})
    out: JSON = {
        k: total.get(k, 0) + sign * step.get(k, 0) for k in ("input", "output", "reasoning")
    }
    out["cache"] = {k: cache.get(k, 0) + sign * step_cache.get(k, 0) for k in ("read", "write")}
    return out


def _api_error_data(message: str, *, retryable: bool = False) -> JSON:
    """The ``data`` of a real ``APIError`` for a provider's 400 ``invalid_request_error``
    (or, ``retryable``, for its 500 ``server_error`` that OpenCode retried)."""
    kind = "server_error" if retryable else "invalid_request_error"
    body = json.dumps({"error": {"message": message, "type": kind, "code": None}})
    return {
        "message": message,
        "statusCode": 500 if retryable else 400,
        "isRetryable": retryable,
        "responseHeaders": {
            "connection": "close",
            "content-length": str(len(body.encode())),
            "content-type": "application/json",
        },
        "responseBody": body,
        "metadata": {"url": "http://fake-model/v1/chat/completions"},
    }


_EDIT_TOOLS = frozenset({"edit", "write", "patch", "multiedit", "apply_patch"})


def _permission_of(step: Tool) -> tuple[str, tuple[str, ...]]:
    """The permission a tool call asks for and its patterns (as the real tools do:
    ``bash`` its command, file tools their path relative to ``/``, ``webfetch`` its url)."""
    permission = "edit" if step.tool in _EDIT_TOOLS else step.tool
    value: Any = None
    if step.tool == "bash":
        value = step.input.get("command")
    elif permission in ("edit", "read"):
        value = step.input.get("filePath")
        value = value.lstrip("/") if isinstance(value, str) else None
    elif step.tool == "webfetch":
        value = step.input.get("url")
    return permission, (value if isinstance(value, str) and value else "*",)


def _session_action(session: FakeSession, permission: str, patterns: Sequence[str]) -> str | None:
    """What the session's own rules say (the last matching rule wins), or ``None`` when
    no rule of the session matches (the server config decides)."""
    rules = [r for r in session.info.get("permission") or () if isinstance(r, dict)]
    actions: list[str | None] = []
    for pattern in patterns or ("*",):
        action: str | None = None
        for rule in rules:
            if fnmatch.fnmatchcase(permission, str(rule.get("permission", ""))) and (
                fnmatch.fnmatchcase(pattern, str(rule.get("pattern", "")))
            ):
                action = str(rule.get("action"))
        actions.append(action)
    for decisive in ("deny", None, "ask"):
        if decisive in actions:
            return decisive
    return "allow"


def _denied(session: FakeSession, permission: str) -> str:
    rules = [
        r
        for r in session.info.get("permission") or ()
        if isinstance(r, dict) and fnmatch.fnmatchcase(permission, str(r.get("permission", "")))
    ]
    return (
        "The user has specified a rule which prevents you from using this specific tool "
        f"call. Here are some of the relevant rules {json.dumps(rules, separators=(',', ':'))}"
    )


def _renamed(value: Any, renames: Mapping[str, str]) -> Any:
    """A copy of recorded JSON with every string equal to a key of ``renames`` replaced."""
    if isinstance(value, str):
        return renames.get(value, value)
    if isinstance(value, Mapping):
        return {key: _renamed(item, renames) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_renamed(item, renames) for item in value]
    return value


def _chunks(text: str, n: int) -> list[str]:
    if not text:
        return []
    n = max(1, min(n, len(text)))
    size = math.ceil(len(text) / n)
    return [text[i : i + size] for i in range(0, len(text), size)]


def _compile_pattern(pattern: str) -> re.Pattern[str]:
    out = []
    for piece in re.split(r"(\{[^/{}]*\}|\*)", pattern):
        if piece == "*":
            out.append(".*")
        elif piece.startswith("{") and piece.endswith("}"):
            out.append("[^/]+")
        else:
            out.append(re.escape(piece))
    return re.compile("".join(out))


# --------------------------------------------------------------------------- hooks


class Hook:
    """A registered fault-injection handler (see :meth:`FakeOpenCodeServer.on`)."""

    def __init__(
        self,
        owner: FakeOpenCodeServer,
        method: str,
        pattern: str,
        handler: HookHandler,
    ) -> None:
        self.method = method.upper()
        self.pattern = pattern
        self.handler = handler
        self.calls = 0
        """How many requests matched this hook."""
        self._regex = _compile_pattern(pattern)
        self._owner = owner

    def matches(self, method: str, path: str) -> bool:
        """Whether a request with ``method`` and ``path`` goes through this hook."""
        return (self.method in ("*", method)) and self._regex.fullmatch(path) is not None

    def remove(self) -> None:
        """Unregister the hook (idempotent)."""
        with contextlib.suppress(ValueError):
            self._owner._hooks.remove(self)


class Hold:
    """Holds matching requests until :meth:`release` (see :meth:`FakeOpenCodeServer.hold`).

    ``started`` is set when the first matching request arrives; ``requests`` lists
    every held request. After :meth:`release`, held and later requests proceed
    normally (call ``hook.remove()`` to stop matching entirely).
    """

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.requests: list[httpx.Request] = []
        self.hook: Hook | None = None
        self._released = asyncio.Event()

    @property
    def released(self) -> bool:
        """Whether :meth:`release` was called."""
        return self._released.is_set()

    def release(self) -> None:
        """Let every held (and future) request through."""
        self._released.set()

    async def wait_started(self, timeout: float = 5.0) -> None:
        """Wait until a request is held."""
        async with asyncio.timeout(timeout):
            await self.started.wait()

    async def _handle(self, request: httpx.Request) -> httpx.Response | None:
        self.requests.append(request)
        self.started.set()
        await self._released.wait()
        return None


class RunEndHold(Hold):
    """Holds runs in their finishing window (see :meth:`FakeOpenCodeServer.hold_run_end`).

    ``started`` is set when the first matching run has finished its last step;
    ``session_ids`` lists the sessions held there (``requests`` stays empty). A prompt
    sent while a run is held is echoed after that run's idle and starts a second run,
    as on the real server. :meth:`release` lets every held (and later) run end.
    """

    def __init__(self, session_id: str | None = None) -> None:
        super().__init__()
        self.session_id = session_id
        """The session whose runs are held; ``None``: every session's."""
        self.session_ids: list[str] = []

    async def _reached(self, session_id: str) -> None:
        if self.released or self.session_id not in (None, session_id):
            return
        self.session_ids.append(session_id)
        self.started.set()
        await self._released.wait()


# --------------------------------------------------------------------------- transport


class _Transport(httpx.AsyncBaseTransport):
    def __init__(self, fake: FakeOpenCodeServer) -> None:
        self._fake = fake

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        # Like a socket transport, give up when the answer does not start within
        # the client's read timeout (httpx only enforces it on real sockets).
        timeouts = request.extensions.get("timeout")
        read = timeouts.get("read") if isinstance(timeouts, dict) else None
        if read is None:
            return await self._fake._handle(request)
        try:
            async with asyncio.timeout(read):
                return await self._fake._handle(request)
        except TimeoutError:
            raise httpx.ReadTimeout(
                "the fake server did not answer in time", request=request
            ) from None


class _Subscriber:
    __slots__ = ("closed", "directory", "queue")

    def __init__(self, directory: str) -> None:
        self.queue: asyncio.Queue[object] = asyncio.Queue()
        self.closed = False
        self.directory = directory


class _EventStream(httpx.AsyncByteStream):
    """The body of one ``GET /event`` response."""

    def __init__(
        self, fake: FakeOpenCodeServer, sub: _Subscriber, first: bytes, heartbeat: float | None
    ) -> None:
        self._fake = fake
        self._sub = sub
        self._first: bytes | None = first
        self._heartbeat = heartbeat
        self._stash: object | None = None
        self._done = False

    def __aiter__(self) -> _EventStream:
        return self

    async def __anext__(self) -> bytes:
        if self._first is not None:
            first, self._first = self._first, None
            return first
        if self._done:
            raise StopAsyncIteration
        if self._stash is not None:
            item, self._stash = self._stash, None
        elif self._heartbeat is not None:
            try:
                async with asyncio.timeout(self._heartbeat):
                    item = await self._sub.queue.get()
            except TimeoutError:
                return self._fake._frame(self._fake._envelope("server.heartbeat", {}))
        else:
            item = await self._sub.queue.get()
        if not isinstance(item, bytes):
            return self._end(item)
        chunks = [item]
        queue = self._sub.queue
        while not queue.empty():
            more = queue.get_nowait()
            if not isinstance(more, bytes):
                self._stash = more
                break
            chunks.append(more)
        return b"".join(chunks) if len(chunks) > 1 else item

    def _end(self, item: object) -> bytes:
        self._done = True
        self._fake._unsubscribe(self._sub)
        if item is _DROP:
            raise httpx.RemoteProtocolError(
                "peer closed connection without sending complete message body "
                "(incomplete chunked read)"
            )
        raise StopAsyncIteration

    async def aclose(self) -> None:
        if not self._done:
            self._done = True
            self._fake._unsubscribe(self._sub)
            self._sub.queue.put_nowait(_EOF)


# --------------------------------------------------------------------------- the server


class FakeOpenCodeServer:
    """An in-process OpenCode server; talk to it through :attr:`transport`.

    Args:
        password: require ``Authorization: Basic base64(username:password)``
            (or ``?auth_token=``) on every route, else 401.
        username: the basic-auth user (``opencode`` like the real server).
        latency: seconds to sleep before handling each request (not ``/event``).
        jitter: a uniform random ``[0, jitter)`` added to ``latency``.
        seed: seed for ids, slugs and jitter (deterministic runs).
        heartbeat: seconds between ``server.heartbeat`` events on idle streams
            (``None``: no heartbeats).
        directory: the server's working directory: that of requests naming none
            (no ``?directory=``, no ``x-opencode-directory`` header), and the base of
            relative ones. Sessions, statuses, pending requests and event streams are
            scoped by directory like on the real server (see the module docstring).
        provider_id, model_id: the model reported when a prompt names none.
        event_history: how many emitted events :attr:`events` keeps.
    """

    base_url = "http://fake-opencode"
    """A base URL to use with :attr:`transport` (any host works)."""

    def __init__(
        self,
        *,
        password: str | None = None,
        username: str = "opencode",
        latency: float = 0.0,
        jitter: float = 0.0,
        seed: int | None = None,
        heartbeat: float | None = None,
        directory: str = "/home/user/project",
        provider_id: str = "fake",
        model_id: str = "fake-model",
        event_history: int = 10_000,
    ) -> None:
        self.latency = latency
        self.jitter = jitter
        self.heartbeat = heartbeat
        self.directory = _resolve_directory(directory, "/")
        """The server's working directory (normalised like a request's)."""
        self.provider_id = provider_id
        self.model_id = model_id
        self.summary_text = "Summary of the conversation so far."
        """What the model answers to ``POST /session/{id}/summarize`` (set it per test)."""
        self.model_cost: Mapping[str, float] = {}
        """The model's prices per million tokens, as in ``opencode.json``'s model ``cost``
        (``input``, ``output``, ``cache_read``, ``cache_write``): each step then costs
        what the real server computes for its tokens (reasoning at the output price).
        Empty (the default): every step costs 0, as with a model without prices."""
        self.model_modalities: frozenset[str] = frozenset({"text"})
        """The model's input modalities (``opencode.json``'s ``modalities.input``): an
        image or PDF part reaches the model only if its kind (``image``, ``pdf``) is here."""
        self.model_inputs: list[ModelInput] = []
        """What the real server would send the model for each admitted prompt, in order
        (see :mod:`adapter.testing._fake_input`)."""
        self._auth: set[str] | None = None
        if password is not None:
            token = base64.b64encode(f"{username}:{password}".encode()).decode()
            self._auth = {token}
        self.clock_skew_ms = 0
        """How far the server's clock runs ahead of the adapter's when it mints ids
        (negative: behind), as a remote server's can: its message ids then sort after
        (before) ids the adapter mints at the same moment. The ``time`` fields keep the
        local clock."""
        self._rng = random.Random(seed)
        self._latency_rng = random.Random(None if seed is None else seed + 1)
        self._last_id = 0
        self._calls = 0
        self._holds: list[Hold] = []
        self._run_end_holds: list[RunEndHold] = []
        self._vanishing = False
        self._transport = _Transport(self)
        self._sessions: dict[str, FakeSession] = {}
        self._deleted: dict[str, FakeSession] = {}  # deleted while busy: still abortable
        self._non_idle: dict[str, JSON] = {}
        self._directory_of: dict[str, str] = {}  # session id -> directory, deleted ones too
        self._scripts: dict[str, tuple[Step, ...]] = {"default": (Text("ok"),)}
        self._requests_pending: dict[str, _PendingRequest] = {}
        self._always: set[tuple[str, str]] = set()  # (permission, pattern) replied "always"
        self._subscribers: set[_Subscriber] = set()
        self._hooks: list[Hook] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._event_waiters: dict[str, list[tuple[Callable[[JSON], bool], asyncio.Future[JSON]]]]
        self._event_waiters = {}
        self._changed: asyncio.Event | None = None
        self._closed = False
        self._event_seq = 0
        self.events: deque[JSON] = deque(maxlen=event_history)
        """The last emitted events (envelopes ``{id, type, properties}``), oldest first."""
        self.requests: list[RecordedRequest] = []
        """Every request received since the last :meth:`reset_stats`."""
        self.in_flight = 0
        """Requests being handled now (``/event`` streams excluded)."""
        self.max_in_flight = 0
        """Peak of :attr:`in_flight` since the last :meth:`reset_stats`."""

    # ------------------------------------------------------------------ public API

    @property
    def transport(self) -> httpx.AsyncBaseTransport:
        """The transport to give to ``httpx.AsyncClient(transport=...)``."""
        return self._transport

    def client(self, **kwargs: Any) -> httpx.AsyncClient:
        """A new ``httpx.AsyncClient`` on this fake (``base_url`` preset)."""
        kwargs.setdefault("base_url", self.base_url)
        return httpx.AsyncClient(transport=self._transport, **kwargs)

    @property
    def sessions(self) -> Mapping[str, FakeSession]:
        """Read-only view: session id -> :class:`FakeSession`."""
        return MappingProxyType(self._sessions)

    @property
    def closed(self) -> bool:
        """Whether :meth:`aclose` was called."""
        return self._closed

    @property
    def event_count(self) -> int:
        """Number of events emitted so far; pass it as ``since=`` to :meth:`wait_for_event`."""
        return self._event_seq

    @property
    def stream_count(self) -> int:
        """Number of open ``/event`` streams."""
        return len(self._subscribers)

    def script(self, name: str, steps: Sequence[Step]) -> None:
        """Register (or replace) the script run by prompts containing ``[[script:NAME]]``.

        The ``"default"`` script runs for prompts without a marker.
        """
        for step in steps:
            if not isinstance(
                step, Text | Tool | Task | Hang | Fail | Permission | Question | Compact
            ):
                raise TypeError(f"not a script step: {step!r}")
        self._scripts[name] = tuple(steps)

    def add_session(
        self,
        parent_id: str | None = None,
        title: str | None = None,
        busy: bool = False,
        *,
        emit: bool = False,
        directory: str | None = None,
    ) -> str:
        """Create a session directly (no request; no events unless ``emit``); return its id.

        ``busy=True`` marks it busy without a running script (an abort then emits
        ``session.error`` MessageAbortedError and goes idle). ``directory`` (resolved
        like a request's) defaults to the parent's, else to :attr:`directory`.
        """
        parent = None
        if parent_id is not None:
            parent = self._sessions.get(parent_id)
            if parent is None:
                raise KeyError(f"unknown parent session {parent_id!r}")
        if directory is not None:
            directory = _resolve_directory(directory, self.directory)
        elif parent is not None:
            directory = parent.directory
        else:
            directory = self.directory
        session = self._create_session(parent_id, title, directory, emit=emit)
        if busy:
            self._set_status(session, _BUSY, emit=emit)
        return session.id

    def set_busy(self, session_id: str, busy: bool) -> None:
        """Set a session's status busy or idle (emits ``session.status``, and
        ``session.idle`` when idle). Does not start or stop scripts."""
        session = self._session(session_id)
        if busy:
            self._set_status(session, _BUSY)
        else:
            self._set_idle(session)

    def set_status(self, session_id: str, status: Mapping[str, Any]) -> None:
        """Set any status (e.g. ``{"type": "retry", "attempt": 1, "message": "...",
        "next": ms}``) and emit ``session.status``."""
        session = self._session(session_id)
        if status.get("type") == "idle":
            self._set_idle(session)
        else:
            self._set_status(session, dict(status))

    def emit(
        self,
        type: str,
        properties: Mapping[str, Any] | None = None,
        *,
        directory: str | None = None,
    ) -> JSON:
        """Emit an arbitrary event; return its envelope.

        Like every event it goes to the streams of ``directory``, by default to those of
        the directory of the session named by ``properties["sessionID"]``; an event about
        no session the fake knows goes to every stream.
        """
        if directory is not None:
            directory = _resolve_directory(directory, self.directory)
        return self._emit(type, dict(properties or {}), directory=directory)

    def emit_raw(self, data: bytes | str) -> None:
        """Write to every stream: ``bytes`` verbatim (include the SSE framing yourself),
        a ``str`` as one SSE event whose ``data`` it is (one ``data:`` line per line of
        it), UTF-8 encoded (a lone surrogate character as the invalid bytes a broken
        encoder writes). A hostile or broken server's event, scripted as it is sent:
        ``fake.emit_raw('{"type":"session.idle","properties":{"sessionID":"ses_\\ud800"}}')``
        (a lone surrogate escaped as OpenCode's ``JSON.stringify`` writes it)."""
        if isinstance(data, str):
            framed = "".join(f"data: {line}\n" for line in data.split("\n")) + "\n"
            data = framed.encode("utf-8", "surrogatepass")
        for sub in self._subscribers:
            sub.queue.put_nowait(bytes(data))

    def replay_native(self, records: Iterable[Any], *, ids: Mapping[str, str] | None = None) -> int:
        """Emit the events of a native recording in order, as they were recorded; return
        how many. A bug report's recording plays to an adapter in a test this way.

        ``records`` are what :func:`adapter.read_native_recording` returns (or what an
        ``OpenCodeAdapter(native_recorder=...)`` recorder received): anything with an
        ``event`` mapping is emitted, gaps are skipped. ``ids`` renames the ids that are
        new here (the recorded root session -> this thread's, the recorded user message
        -> the prompt's): every string equal to a key, at any depth, becomes its value.
        Each event goes to the streams of its session's directory, like :meth:`emit`.
        Nothing else happens: the fake's sessions and scripts are not touched.
        """
        renames = dict(ids or {})
        emitted = 0
        for record in records:
            event = getattr(record, "event", None)
            if not isinstance(event, Mapping):
                continue
            envelope = _renamed(event, renames)
            properties = envelope.get("properties")
            self._send(envelope, properties if isinstance(properties, dict) else {}, None)
            emitted += 1
        return emitted

    def drop_event_streams(self, *, error: bool = True) -> int:
        """Cut every open ``/event`` stream now; return how many were cut.

        With ``error`` (default) readers get :class:`httpx.RemoteProtocolError`, like a
        connection dropped mid-body; otherwise the streams just end.
        """
        subs = list(self._subscribers)
        for sub in subs:
            self._unsubscribe(sub)
            sub.queue.put_nowait(_DROP if error else _EOF)
        self._notify()
        return len(subs)

    def reset_stats(self) -> None:
        """Clear :attr:`requests` and reset :attr:`max_in_flight` to :attr:`in_flight`."""
        self.requests = []
        self.max_in_flight = self.in_flight

    def on(self, method: str, path_pattern: str, handler: HookHandler) -> Hook:
        """Run ``handler(request)`` before matching requests are handled.

        ``method`` is an HTTP method or ``"*"``; ``path_pattern`` is an exact path,
        with ``{name}`` matching one path segment and ``*`` anything. The handler may
        return a response (sent as is), ``None`` (normal handling goes on), raise
        (e.g. ``httpx.ConnectError``), or wait. Hooks run in registration order;
        the first response wins. They run before latency and auth.
        """
        hook = Hook(self, method, path_pattern, handler)
        self._hooks.append(hook)
        return hook

    def fail(
        self,
        method: str,
        path_pattern: str,
        status: int = 503,
        times: int | None = 1,
        body: Any = None,
    ) -> Hook:
        """Answer the next ``times`` matching requests (``None``: all) with ``status``.

        ``body``: bytes/str are sent verbatim (e.g. malformed JSON); anything else
        as JSON; default an ``UnknownError`` object.
        """
        remaining = [times]

        async def handler(request: httpx.Request) -> httpx.Response | None:
            if remaining[0] is not None:
                if remaining[0] <= 0:
                    return None
                remaining[0] -= 1
            if body is None:
                return _json_response(
                    status,
                    {"name": "UnknownError", "data": {"message": f"injected failure ({status})"}},
                )
            if isinstance(body, bytes | str):
                content = body.encode() if isinstance(body, str) else body
                return httpx.Response(
                    status, content=content, headers={"content-type": "application/json"}
                )
            return _json_response(status, body)

        return self.on(method, path_pattern, handler)

    def hold(self, method: str, path_pattern: str) -> Hold:
        """Hold matching requests until ``hold.release()``."""
        hold = Hold()
        hold.hook = self.on(method, path_pattern, hold._handle)
        self._holds.append(hold)
        return hold

    async def restart(self) -> None:
        """Behave like a server that was restarted on the same data: runs vanish.

        Measured on 1.18.34 (``opencode serve`` killed mid-run, SIGTERM or SIGKILL, and
        started again on the same data directory): the run is not resumed and nothing
        is said about it. Every session is idle (``GET /session/status`` lists none);
        the interrupted assistant message stays stored as it was, with no
        ``time.completed``, no ``error`` and no ``finish``; a streaming text part keeps
        what was stored of it (``""``: deltas are not stored) and a running tool stays
        ``running``; pending permission and question requests are gone; the new
        ``/event`` streams start with ``server.connected`` and say nothing else. An
        abort of such a session then answers ``true`` with an idle pair only.

        So this cuts every ``/event`` stream (as :meth:`drop_event_streams`), ends every
        run, queued prompt and pending request with no event, and marks every session
        idle silently; sessions, messages and parts stay. A blocking ``POST .../message``
        or ``summarize`` still waiting fails with :class:`httpx.RemoteProtocolError`,
        as a request whose server went away does.
        """
        sessions = [*self._sessions.values(), *self._deleted.values()]
        self.drop_event_streams()
        self._vanishing = True
        try:
            runners: list[asyncio.Task[None]] = []
            for session in sessions:
                self._drop_queue(session, "vanished")
                self._drop_deferred(session, "vanished")
                runner = session._runner
                if runner is not None and not runner.done():
                    runner.cancel()
                    runners.append(runner)
            await asyncio.gather(*runners, return_exceptions=True)
        finally:
            self._vanishing = False
        for request_id in list(self._requests_pending):
            pending = self._forget_request(request_id)
            if pending is not None and not pending.future.done():
                pending.future.cancel()
        for session in sessions:
            session._run = None
            session._finishing = False
            if session.busy:
                self._set_status(session, _IDLE, emit=False)
        self._deleted.clear()

    def hold_run_end(self, session_id: str | None = None) -> RunEndHold:
        """Hold runs between their last finished step and their idle, until ``release()``.

        On the real server a prompt sent in the last ~60 ms of a run, or just after its
        idle, is not taken into the ending run: it is echoed *after* the run's
        ``session.idle`` and starts a second run (``busy``, an assistant message whose
        ``parentID`` is the new prompt, ``idle``). The fake's window is one event-loop
        turn; this hold keeps it open so that a test can send its prompt inside it::

            hold = fake.hold_run_end(session_id)
            ...  # start the run
            await hold.wait_started()       # the last step finished, no idle yet
            await client.post(f"/session/{session_id}/prompt_async", json=...)
            hold.release()                  # idle, then the prompt's echo and its run

        ``session_id``: hold only that session's runs (default: every session's, task
        children included). A prompt sent while a step is still going joins the run's
        next step instead (no idle in between), as measured.
        """
        hold = RunEndHold(session_id)
        self._run_end_holds.append(hold)
        self._holds.append(hold)
        return hold

    async def wait_until(self, predicate: Callable[[], bool], timeout: float = 5.0) -> None:
        """Wait until ``predicate()`` is true (re-checked on every event and request).

        Raises ``TimeoutError`` after ``timeout`` seconds.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not predicate():
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError(f"condition not met within {timeout}s")
            if self._changed is None:
                self._changed = asyncio.Event()
            changed = self._changed
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(remaining, 0.05)):
                    await changed.wait()

    async def wait_for_event(
        self,
        type: str,
        predicate: Callable[[JSON], bool] | None = None,
        *,
        timeout: float = 5.0,
        since: int | None = None,
    ) -> JSON:
        """Wait for an event of ``type`` (whose envelope passes ``predicate``); return it.

        Only events emitted after the call count, unless ``since`` (a previous
        :attr:`event_count`) asks to also search the kept history from that point.
        Raises ``TimeoutError`` after ``timeout`` seconds.
        """
        check = predicate or (lambda _event: True)
        if since is not None:
            first = self._event_seq - len(self.events)
            for index, event in enumerate(self.events):
                if first + index >= since and event["type"] == type and check(event):
                    return event
        future: asyncio.Future[JSON] = asyncio.get_running_loop().create_future()
        entry = (check, future)
        self._event_waiters.setdefault(type, []).append(entry)
        try:
            async with asyncio.timeout(timeout):
                return await future
        except TimeoutError:
            raise TimeoutError(f"no {type!r} event within {timeout}s") from None
        finally:
            waiters = self._event_waiters.get(type)
            if waiters is not None and entry in waiters:
                waiters.remove(entry)

    async def aclose(self) -> None:
        """Stop everything: end event streams, cancel scripts, fail later requests.

        Idempotent; afterwards no task created by the fake is left running.
        """
        if self._closed:
            return
        self._closed = True
        for sub in list(self._subscribers):
            self._unsubscribe(sub)
            sub.queue.put_nowait(_EOF)
        for hold in self._holds:
            hold.release()
        for session in self._sessions.values():
            if session._queue:
                self._drop_queue(session)
            self._drop_deferred(session)
        for req in self._requests_pending.values():
            if not req.future.done():
                req.future.cancel()
        self._requests_pending.clear()
        while self._tasks:
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._tasks.difference_update(tasks)
        for waiters in self._event_waiters.values():
            for _check, future in waiters:
                if not future.done():
                    future.set_exception(RuntimeError("FakeOpenCodeServer closed"))
        self._event_waiters.clear()
        self._notify()

    async def __aenter__(self) -> FakeOpenCodeServer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ------------------------------------------------------------------ ids & events

    def _new_id(self, prefix: str, *, descending: bool = False) -> str:
        value = max((_now_ms() + self.clock_skew_ms) * 0x1000 + 1, self._last_id + 1)
        self._last_id = value
        if descending:
            value = ~value
        suffix = "".join(self._rng.choices(_BASE62, k=14))
        return f"{prefix}_{value & _MASK48:012x}{suffix}"

    def _envelope(self, type: str, properties: JSON) -> JSON:
        return {"id": self._new_id("evt"), "type": type, "properties": properties}

    @staticmethod
    def _frame(envelope: JSON) -> bytes:
        return b"data: " + json.dumps(envelope, separators=(",", ":")).encode() + b"\n\n"

    def _emit(self, type: str, properties: JSON, *, directory: str | None = None) -> JSON:
        """Send an event to the streams of its directory: ``directory``, else that of the
        session it is about. Measured: a stream gets only the events of its directory's
        sessions, wherever the request that caused them came from."""
        envelope = self._envelope(type, properties)
        self._send(envelope, properties, directory)
        return envelope

    def _send(self, envelope: JSON, properties: JSON, directory: str | None) -> None:
        type = envelope.get("type")
        self._event_seq += 1
        self.events.append(envelope)
        if self._subscribers:
            session_id = properties.get("sessionID")
            if directory is None and isinstance(session_id, str):
                directory = self._directory_of.get(session_id)
            frame = self._frame(envelope)
            for sub in self._subscribers:
                if directory is None or sub.directory == directory:
                    sub.queue.put_nowait(frame)
        waiters = self._event_waiters.get(type) if isinstance(type, str) else None
        if waiters:
            for check, future in list(waiters):
                if not future.done() and check(envelope):
                    future.set_result(envelope)
                    waiters.remove((check, future))
        self._notify()

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    def _unsubscribe(self, sub: _Subscriber) -> None:
        if not sub.closed:
            sub.closed = True
            self._subscribers.discard(sub)

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task: asyncio.Task[Any] = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # ------------------------------------------------------------------ session state

    def _session(self, session_id: str) -> FakeSession:
        try:
            return self._sessions[session_id]
        except KeyError:
            raise KeyError(f"unknown session {session_id!r}") from None

    def _create_session(
        self,
        parent_id: str | None,
        title: str | None,
        directory: str,
        *,
        emit: bool = True,
        agent: str | None = None,
        permission: list[Any] | None = None,
    ) -> FakeSession:
        now = _now_ms()
        session_id = self._new_id("ses", descending=True)
        if title is None:
            iso = datetime.fromtimestamp(now / 1000, UTC).isoformat(timespec="milliseconds")
            kind = "Child session" if parent_id else "New session"
            title = f"{kind} - {iso.replace('+00:00', 'Z')}"
        slug = f"{self._rng.choice(_SLUG_ADJECTIVES)}-{self._rng.choice(_SLUG_NOUNS)}"
        # Fields and their order as GET /session/{id} shows them on 1.18.34; ``summary``,
        # ``agent`` and ``model`` appear with the first prompt (see _enqueue_prompt).
        info: JSON = {
            "id": session_id,
            "slug": slug,
            "projectID": "global",
            "directory": directory,
            "path": directory.lstrip("/"),
        }
        if parent_id is not None:
            info["parentID"] = parent_id
        info["cost"] = 0
        info["tokens"] = _zero_usage()
        info["title"] = title
        if agent is not None:
            info["agent"] = agent
        info["version"] = OPENCODE_VERSION
        info["time"] = {"created": now, "updated": now}
        if agent is not None:
            info["permission"] = []  # a task child gets its agent's (empty) rule set
        elif permission is not None:
            info["permission"] = permission
        session = FakeSession(session_id, parent_id, info)
        self._sessions[session_id] = session
        self._directory_of[session_id] = directory
        parent = self._sessions.get(parent_id) if parent_id is not None else None
        if parent is not None:
            parent._children[session_id] = None
        if emit:
            # Measured: ``session.created`` only (a prompt's events follow with its own
            # ``session.updated`` pair).
            self._emit("session.created", {"sessionID": session_id, "info": info})
        return session

    def _touch(self, session: FakeSession, **changes: Any) -> None:
        """Apply ``changes`` to the session's info (``None`` deletes a field), bump
        ``time.updated`` and emit ``session.updated``."""
        info = dict(session.info)
        for key, value in changes.items():
            if value is None:
                info.pop(key, None)
            else:
                info[key] = value
        info["time"] = {**info["time"], "updated": _now_ms()}
        session.info = info
        self._emit("session.updated", {"sessionID": session.id, "info": info})

    def _add_usage(self, session: FakeSession, tokens: Mapping[str, Any], cost: float) -> None:
        """A finished model step adds its tokens and cost to the session (measured: the
        session's ``tokens`` is the sum of its steps' ``tokens`` without ``total``).
        No event: the real server publishes the new totals with the ``session.updated``
        that precedes the next ``session.diff`` (see :meth:`_announce_diff`)."""
        session.info = {
            **session.info,
            "cost": session.info.get("cost", 0) + cost,
            "tokens": _sum_usage(session.info.get("tokens", _zero_usage()), tokens, sign=1),
        }

    def _announce_diff(self, session: FakeSession) -> None:
        """``session.updated`` (with the diff ``summary``) then ``session.diff``.

        Measured: the pair follows each new assistant message (the start of each model
        step) and the final idle of a run that did not fail; the fake changes no
        files, so the diff is ``[]`` like the real one with snapshots off.
        """
        summary = session.info.get("summary") or {"additions": 0, "deletions": 0, "files": 0}
        self._touch(session, summary=summary)
        self._emit("session.diff", {"sessionID": session.id, "diff": []})

    def _set_status(self, session: FakeSession, status: JSON, *, emit: bool = True) -> None:
        session.status = status
        if status["type"] == "idle":
            self._non_idle.pop(session.id, None)
        else:
            self._non_idle[session.id] = status
        if emit:
            self._emit("session.status", {"sessionID": session.id, "status": status})
        else:
            self._notify()

    def _set_idle(self, session: FakeSession) -> None:
        self._set_status(session, _IDLE)
        self._emit("session.idle", {"sessionID": session.id})

    def _store_part(self, message: FakeMessage, part: JSON) -> None:
        message._parts[part["id"]] = part
        self._emit(
            "message.part.updated",
            {"sessionID": part["sessionID"], "part": part, "time": _now_ms()},
        )

    def _store_message(self, session: FakeSession, message: FakeMessage, info: JSON) -> None:
        message.info = info
        session._messages[message.id] = message
        self._emit("message.updated", {"sessionID": session.id, "info": info})

    # ------------------------------------------------------------------ prompts & runs

    def _enqueue_prompt(
        self,
        session: FakeSession,
        text: str,
        *,
        message_id: str | None = None,
        script: str | None = None,
        agent: str = "build",
        provider_id: str | None = None,
        model_id: str | None = None,
        want_result: bool = False,
        compaction: bool | None = None,
        before_busy: Callable[[], None] | None = None,
        parts: Sequence[JSON] | None = None,
        options: Mapping[str, Any] | None = None,
        content: Sequence[JSON] | None = None,
    ) -> _Prompt:
        """``parts`` (stored as given, ids added) replace the single text part;
        ``options`` (``system``, ``tools``, ``variant``) are stored on the user message;
        ``content`` is what reaches the model (recorded in :attr:`model_inputs`)."""
        options = dict(options or {})
        provider_id = provider_id or self.provider_id
        model_id = model_id or self.model_id
        user_id = message_id or self._new_id("msg")
        prompt = _Prompt(user_id, text, script, agent, provider_id, model_id)
        prompt.compaction = compaction
        prompt.variant = options.get("variant")
        if want_result:
            prompt.future = asyncio.get_running_loop().create_future()

        def admit() -> None:
            self._apply_revert(session)
            message = FakeMessage({})
            info: JSON = {
                "id": user_id,
                "role": "user",
                "sessionID": session.id,
                "time": {"created": _now_ms()},
                "agent": agent,
                "model": {"providerID": provider_id, "modelID": model_id},
            }
            if prompt.variant is not None:
                info["model"]["variant"] = prompt.variant
            for key in ("system", "tools"):
                if options.get(key) is not None:
                    info[key] = options[key]
            if compaction is None:
                # Measured order: session.updated (only when the prompt gives the session
                # its agent and model: a later prompt's echo comes first), the user message
                # and its part, then session.updated again.
                model = {"id": model_id, "providerID": provider_id, "variant": "default"}
                first = {"agent": session.info.get("agent", agent), "model": model}
                if any(session.info.get(key) != value for key, value in first.items()):
                    self._touch(session, **first)
            self._store_message(session, message, info)
            ids = {"messageID": user_id, "sessionID": session.id}
            specs: Sequence[JSON]
            if compaction is not None:
                specs = [{"type": "compaction", "auto": compaction}]
            elif parts is not None:
                specs = parts
            else:
                specs = [{"type": "text", "text": text}]
            for spec in specs:
                self._store_part(message, {"id": self._new_id("prt"), **ids, **spec})
            if compaction is None:
                self.model_inputs.append(
                    ModelInput(
                        session.id,
                        user_id,
                        tuple(content or ({"type": "text", "text": text},)),
                        system=options.get("system"),
                        tools=options.get("tools"),
                        variant=prompt.variant,
                    )
                )
                self._touch(session)
            if before_busy is not None:
                before_busy()
            session._queue.append(prompt)
            if session._runner is None or session._runner.done():
                self._set_status(session, _BUSY)
                session._runner = self._spawn(self._runner(session))

        if session._finishing:
            # Measured on 1.18.34: a prompt that arrives once the run's loop decided to
            # end (its last step finished) is echoed after the run's idle, and starts a
            # second run (see :meth:`_admit_deferred`).
            session._deferred.append((prompt, admit))
        else:
            admit()
        return prompt

    def _resolve_script(self, prompt: _Prompt) -> tuple[str, tuple[Step, ...] | None]:
        name = prompt.script
        if name is None:
            match = _SCRIPT_MARKER.search(prompt.text)
            name = match.group(1).strip() if match else "default"
        return name, self._scripts.get(name)

    async def _runner(self, session: FakeSession) -> None:
        result: _Result | None = None
        prompt: _Prompt | None = None
        try:
            while True:
                while session._queue:
                    prompt = session._queue.popleft()
                    run = _Run(session, prompt)
                    session._run = run
                    try:
                        result = await self._execute(run)
                    except asyncio.CancelledError:
                        if self._vanishing:
                            # restart(): the run ends with nothing said or stored.
                            for done in (prompt, *run.merged):
                                self._finish_prompt(done, _Result("vanished"))
                            raise
                        current = asyncio.current_task()
                        if current is not None:
                            current.uncancel()
                        result = await self._cleanup_aborted(run)
                        for done in (prompt, *run.merged):
                            self._finish_prompt(done, result)
                        if self._closed or not session._queue:
                            return
                        # A prompt sent while the abort was being cleaned up runs next.
                        self._set_status(session, _BUSY)
                        continue
                    finally:
                        session._run = None
                    for done in (prompt, *run.merged):
                        self._finish_prompt(done, result)
                    if session._queue:
                        await asyncio.sleep(0)
                    else:
                        await self._finishing_window(session)
                self._end_run(session, prompt, result)
                if not self._admit_deferred(session):
                    return
                # Measured: the prompts accepted while the run was ending start a second
                # run once their echo followed the idle.
                self._set_status(session, _BUSY)
        finally:
            session._finishing = False
            session._runner = None

    async def _finishing_window(self, session: FakeSession) -> None:
        """The moment between a run's last finished step and its idle.

        Measured on 1.18.34: a prompt sent from about 60 ms before the idle to just
        after it is not taken into the ending run; it is echoed after the idle and
        starts a run of its own. The fake's window is one event-loop turn, or as long
        as a :meth:`FakeOpenCodeServer.hold_run_end` hold keeps it open.
        """
        session._finishing = True
        for hold in list(self._run_end_holds):
            await hold._reached(session.id)
        await asyncio.sleep(0)

    def _admit_deferred(self, session: FakeSession) -> bool:
        """Echo the prompts deferred by the finishing window; whether any is queued."""
        session._finishing = False
        deferred, session._deferred = session._deferred, []
        for _prompt, admit in deferred:
            admit()
        return bool(session._queue)

    def _end_run(
        self, session: FakeSession, prompt: _Prompt | None, result: _Result | None
    ) -> None:
        """The events that end a run, as measured on 1.18.34.

        Completed: ``busy`` once more, then idle, then the diff pair. Blocked (a
        rejected permission or question): idle, then the diff pair. Failed: the
        second idle pair only (the first came with ``session.error``), no diff.
        """
        regular = prompt is not None and prompt.compaction is None
        outcome = result.outcome if result is not None else None
        if regular and outcome == "completed":
            self._set_status(session, _BUSY)
        self._set_idle(session)
        if regular and outcome in ("completed", "blocked"):
            self._announce_diff(session)

    @staticmethod
    def _finish_prompt(prompt: _Prompt, result: _Result) -> None:
        if prompt.future is not None and not prompt.future.done():
            prompt.future.set_result(result)

    def _drop_queue(self, session: FakeSession, outcome: Outcome = "aborted") -> None:
        while session._queue:
            self._finish_prompt(session._queue.popleft(), _Result(outcome))

    def _drop_deferred(self, session: FakeSession, outcome: Outcome = "aborted") -> None:
        deferred, session._deferred = session._deferred, []
        for prompt, _admit in deferred:
            self._finish_prompt(prompt, _Result(outcome))

    async def _execute(self, run: _Run) -> _Result:
        if run.prompt.compaction is not None:
            return await self._compact(run)
        name, steps = self._resolve_script(run.prompt)
        self._start_message(run)
        await asyncio.sleep(0)
        if steps is None:
            return self._fail(run, Fail("UnknownError", f"unknown fake script: {name}"))
        for step in steps:
            if isinstance(step, Compact):
                await self._auto_compact(run, step)
                continue
            if isinstance(step, Text | Hang | Fail) and run.had_tool:
                if self._summary_waits(run.session):
                    return self._end_for_summary(run)
                self._finish_step(run, "tool-calls")
                self._start_message(run)
                await asyncio.sleep(0)
            if isinstance(step, Text):
                await self._do_text(run, step)
            elif isinstance(step, Tool):
                if not await self._do_tool(run, step):
                    return self._blocked(run)
            elif isinstance(step, Task):
                await self._do_task(run, step)
            elif isinstance(step, Permission):
                if not await self._do_permission(run, step):
                    return self._blocked(run)
            elif isinstance(step, Question):
                if not await self._do_question(run, step):
                    return self._blocked(run)
            elif isinstance(step, Hang):
                # Measured: the step-start part is stored once the model answers, even
                # if it then sends nothing.
                self._ensure_step(run)
                await asyncio.get_running_loop().create_future()
            else:
                if step.retries > 0:
                    await self._retry(run, step)
                return self._fail(run, step)
            await asyncio.sleep(0)
        if run.had_tool:
            if self._summary_waits(run.session):
                return self._end_for_summary(run)
            # The model is called again with the tool results and finishes.
            self._finish_step(run, "tool-calls")
            self._start_message(run)
            await asyncio.sleep(0)
        self._finish_step(run, "stop")
        return _Result("completed", run.last_text, None, run.message.id if run.message else None)

    @staticmethod
    def _summary_waits(session: FakeSession) -> bool:
        """Whether a manual ``summarize`` is queued behind the run."""
        return any(prompt.compaction is False for prompt in session._queue)

    def _end_for_summary(self, run: _Run) -> _Result:
        """Measured on 1.18.34: a ``summarize`` sent during a tool step ends the run once
        that step finished (``tool-calls``); the summary runs next and the agent does not
        continue (not even after the summary: the run's idle follows it)."""
        self._finish_step(run, "tool-calls")
        return _Result("completed", run.last_text, None, run.message.id if run.message else None)

    async def _compact(self, run: _Run) -> _Result:
        """A ``summarize`` turn (measured): one ``summary`` assistant message of agent
        ``compaction`` streams :attr:`summary_text`, then ``session.compacted``."""
        self._start_message(run, agent="compaction")
        await asyncio.sleep(0)
        await self._do_text(run, Text(self.summary_text))
        self._finish_step(run, "stop")
        self._emit("session.compacted", {"sessionID": run.session.id})
        return _Result("completed", run.last_text, None, run.message.id if run.message else None)

    async def _auto_compact(self, run: _Run, step: Compact) -> None:
        """An automatic compaction inside a run, in the measured order (see :class:`Compact`)."""
        session = run.session
        self._finish_step(run, "tool-calls" if run.had_tool else "stop")
        compaction_id = self._store_user_message(
            run, {"type": "compaction", "auto": True, "overflow": False}
        )
        self._set_status(session, _BUSY)
        self._start_message(run, agent="compaction", parent_id=compaction_id)
        self._set_status(session, _BUSY)
        self._announce_diff(session)
        await asyncio.sleep(0)
        summary = self.summary_text if step.summary is None else step.summary
        await self._do_text(run, Text(summary))
        self._finish_step(run, "stop")
        run.last_text = ""  # the summary is not the agent's answer
        now = _now_ms()
        run.answering = self._store_user_message(
            run,
            {
                "type": "text",
                "text": COMPACTION_CONTINUE,
                "synthetic": True,
                "time": {"start": now, "end": now},
                "metadata": {"compaction_continue": True},
            },
        )
        self._emit("session.compacted", {"sessionID": session.id})
        self._start_message(run)
        await asyncio.sleep(0)

    def _store_user_message(self, run: _Run, part: JSON) -> str:
        """A user message the server adds to a run by itself (no ``session.updated``)."""
        prompt = run.prompt
        message = FakeMessage({})
        info: JSON = {
            "id": self._new_id("msg"),
            "role": "user",
            "sessionID": run.session.id,
            "time": {"created": _now_ms()},
            "agent": prompt.agent,
            "model": {"providerID": prompt.provider_id, "modelID": prompt.model_id},
        }
        self._store_message(run.session, message, info)
        ids = {"messageID": info["id"], "sessionID": run.session.id, "id": self._new_id("prt")}
        self._store_part(message, {**ids, **part})
        return str(info["id"])

    async def _retry(self, run: _Run, step: Fail) -> None:
        """OpenCode's retries of a failing model call (measured order: ``retry`` status,
        the wait, ``busy`` for the next attempt)."""
        run.retrying = True
        for attempt in range(1, step.retries + 1):
            next_ms = _now_ms() + int(step.retry_delay * 1000)
            status = {"type": "retry", "attempt": attempt, "message": step.message, "next": next_ms}
            self._set_status(run.session, status)
            await asyncio.sleep(step.retry_delay)
            self._set_status(run.session, _BUSY)
        run.retrying = False

    def _start_message(
        self, run: _Run, *, agent: str | None = None, parent_id: str | None = None
    ) -> None:
        """A new assistant message (a model step) answering the run's newest user
        message, or ``parent_id``; ``agent`` (``compaction``) makes a summary message,
        whose events the caller announces."""
        prompt = run.prompt
        session = run.session
        message = FakeMessage({})
        regular = agent is None and prompt.compaction is None
        agent = agent or prompt.agent
        if parent_id is None:
            parent_id = run.answering or prompt.user_message_id
        if run.message is not None and regular:
            # Measured: each later model step is announced busy before its message, and
            # takes in the prompts sent meanwhile: it answers the newest one (parentID)
            # and they get no run of their own.
            self._set_status(session, _BUSY)
            while session._queue and session._queue[0].compaction is None:
                run.merged.append(session._queue.popleft())
                parent_id = run.answering = run.merged[-1].user_message_id
        info: JSON = {
            "id": self._new_id("msg"),
            "parentID": parent_id,
            "role": "assistant",
            "mode": agent,
            "agent": agent,
            "path": {"cwd": session.directory, "root": "/"},
        }
        if agent == "compaction":
            info["summary"] = True
        if prompt.variant is not None:
            info["variant"] = prompt.variant
        info |= {
            "cost": 0,
            "tokens": _ZERO_TOKENS,
            "modelID": prompt.model_id,
            "providerID": prompt.provider_id,
            "time": {"created": _now_ms()},
            "sessionID": session.id,
        }
        run.message = message
        run.step_started = False
        run.had_tool = False
        self._store_message(session, message, info)
        if regular:
            # Measured: session.updated (the diff summary appears with the first step)
            # and session.diff, then busy again before the step streams.
            self._announce_diff(session)
            self._set_status(session, _BUSY)
        elif prompt.compaction is not None and "summary" not in session.info:
            self._touch(session, summary={"additions": 0, "deletions": 0, "files": 0})

    def _ensure_step(self, run: _Run) -> FakeMessage:
        message = run.message
        assert message is not None
        if not run.step_started:
            run.step_started = True
            part: JSON = {
                "id": self._new_id("prt"),
                "messageID": message.id,
                "sessionID": run.session.id,
                "type": "step-start",
            }
            self._store_part(message, part)
        return message

    def _close_text(self, run: _Run) -> None:
        part = run.text_part
        if part is None or run.message is None:
            return
        text = "".join(run.text_buf)
        final = dict(part)
        final["text"] = text
        final["time"] = {"start": part["time"]["start"], "end": _now_ms()}
        run.text_part = None
        run.text_buf = []
        run.last_text = text
        self._store_part(run.message, final)

    def _finish_step(self, run: _Run, reason: str) -> None:
        message = self._ensure_step(run)
        self._close_text(run)
        part: JSON = {
            "id": self._new_id("prt"),
            "reason": reason,
            "messageID": message.id,
            "sessionID": run.session.id,
            "type": "step-finish",
            "tokens": _STEP_TOKENS,
            "cost": self._step_cost(_STEP_TOKENS),
        }
        self._store_part(message, part)
        info = dict(message.info)
        info["tokens"] = _STEP_TOKENS
        info["cost"] = part["cost"]
        info["time"] = {"created": info["time"]["created"], "completed": _now_ms()}
        info["finish"] = reason
        self._store_message(run.session, message, info)
        # Measured: the finished assistant message is announced twice.
        self._emit("message.updated", {"sessionID": run.session.id, "info": info})
        self._add_usage(run.session, _STEP_TOKENS, part["cost"])

    def _step_cost(self, tokens: Mapping[str, Any]) -> float:
        """A step's cost from :attr:`model_cost` (measured on 1.18.34: 8068 input and 10
        output tokens at 1000 and 2000 per million cost 8.088)."""
        price = self.model_cost
        if not price:
            return 0  # the real server's JSON says 0, not 0.0
        cache = tokens["cache"]
        spent: float = (
            tokens["input"] * price.get("input", 0)
            + (tokens["output"] + tokens["reasoning"]) * price.get("output", 0)
            + cache["read"] * price.get("cache_read", 0)
            + cache["write"] * price.get("cache_write", 0)
        )
        return spent / 1_000_000

    async def _do_text(self, run: _Run, step: Text) -> None:
        message = self._ensure_step(run)
        part = run.text_part
        if part is None:
            now = _now_ms()
            part = {
                "id": self._new_id("prt"),
                "messageID": message.id,
                "sessionID": run.session.id,
                "type": "text",
                "text": "",
                "time": {"start": now},
            }
            run.text_part = part
            self._store_part(message, part)
        for chunk in _chunks(step.text, step.chunks):
            if step.delay > 0:
                await asyncio.sleep(step.delay)
            run.text_buf.append(chunk)
            self._emit(
                "message.part.delta",
                {
                    "sessionID": run.session.id,
                    "messageID": message.id,
                    "partID": part["id"],
                    "field": "text",
                    "delta": chunk,
                },
            )

    def _tool_start(
        self,
        run: _Run,
        tool: str,
        tool_input: Mapping[str, Any],
        *,
        title: str | None = None,
        metadata: JSON | None = None,
        child_id: str | None = None,
        before_running: Callable[[JSON], JSON | None] | None = None,
    ) -> JSON:
        """Store the part ``pending`` then ``running`` (``input``, ``time.start``, and
        ``title``/``metadata`` if given). ``before_running(pending_part)`` runs between
        the two (it may emit events, like a permission request) and returns the
        running state's metadata."""
        message = self._ensure_step(run)
        self._close_text(run)
        run.had_tool = True
        part_id = self._new_id("prt")
        self._calls += 1
        call_id = f"call_{self._calls}_0"
        pending: JSON = {
            "id": part_id,
            "messageID": message.id,
            "sessionID": run.session.id,
            "type": "tool",
            "tool": tool,
            "callID": call_id,
            "state": {"status": "pending", "input": {}, "raw": ""},
        }
        run.tools[part_id] = _ActiveTool(pending, child_id)
        self._store_part(message, pending)
        if before_running is not None:
            metadata = before_running(pending)
        state: JSON = {"status": "running", "input": dict(tool_input), "time": {"start": _now_ms()}}
        if title is not None:
            state["title"] = title
        if metadata is not None:
            state["metadata"] = metadata
        running = dict(pending)
        running["state"] = state
        run.tools[part_id] = _ActiveTool(running, child_id)
        self._store_part(message, running)
        return running

    def _tool_progress(self, run: _Run, part: JSON, metadata: JSON) -> JSON:
        """A ``running`` update with new ``metadata`` (a bash tool's output so far)."""
        running = dict(part)
        running["state"] = {**part["state"], "metadata": metadata}
        run.tools[part["id"]].part = running
        assert run.message is not None
        self._store_part(run.message, running)
        return running

    def _tool_end(self, run: _Run, part: JSON, state: JSON) -> None:
        run.tools.pop(part["id"], None)
        final = dict(part)
        final["state"] = state
        assert run.message is not None
        self._store_part(run.message, final)

    def _tool_completed(
        self, run: _Run, part: JSON, output: str, title: str, metadata: JSON
    ) -> None:
        running = part["state"]
        state: JSON = {
            "status": "completed",
            "input": running["input"],
            "output": output,
            # Measured: every completed tool's metadata carries ``truncated``.
            "metadata": {"truncated": False, **metadata},
            "title": title,
            "time": {"start": running["time"]["start"], "end": _now_ms()},
        }
        self._tool_end(run, part, state)

    def _tool_error(self, run: _Run, part: JSON, error: str, metadata: JSON | None) -> None:
        running = part["state"]
        state: JSON = {"status": "error", "input": running.get("input", {}), "error": error}
        if metadata is not None:
            state["metadata"] = metadata
        now = _now_ms()
        state["time"] = {"start": running.get("time", {}).get("start", now), "end": now}
        self._tool_end(run, part, state)

    @staticmethod
    def _default_title(step: Tool) -> str:
        if step.title is not None:
            return step.title
        for key in ("command", "filePath", "path", "pattern", "description"):
            value = step.input.get(key)
            if isinstance(value, str):
                return value
        return step.tool

    async def _run_tool_body(self, run: _Run, part: JSON, step: Tool) -> None:
        if step.tool == "bash" and step.error is None:
            await self._run_bash(run, part, step)
            return
        if step.duration == math.inf:
            await asyncio.get_running_loop().create_future()
        elif step.duration > 0:
            await asyncio.sleep(step.duration)
        if step.error is not None:
            self._tool_error(run, part, step.error, dict(step.metadata) if step.metadata else None)
            return
        output = step.output if step.output is not None else ""
        metadata: JSON = {}
        if step.tool == "read":
            metadata = {"preview": output[:200], "truncated": False}
        if step.metadata:
            metadata.update(step.metadata)
        self._tool_completed(run, part, output, self._default_title(step), metadata)

    async def _run_bash(self, run: _Run, part: JSON, step: Tool) -> None:
        """Measured: ``metadata.output`` starts ``""`` and grows with every chunk the
        command prints (a line at a time here); empty output completes as ``(no output)``."""
        part = self._tool_progress(run, part, {"output": ""})
        if step.duration == math.inf:
            await asyncio.get_running_loop().create_future()
        output = step.output or ""
        lines = output.splitlines(keepends=True)
        pause = step.duration / max(1, len(lines))
        shown = ""
        for line in lines:
            if pause > 0:
                await asyncio.sleep(pause)
            shown += line
            part = self._tool_progress(run, part, {"output": shown})
        if not lines and pause > 0:
            await asyncio.sleep(pause)
        output = output or "(no output)"
        metadata: JSON = {"output": output, "exit": 0, "truncated": False}
        metadata.update(step.metadata or {})
        self._tool_completed(run, part, output, self._default_title(step), metadata)

    async def _do_tool(self, run: _Run, step: Tool) -> bool:
        """A tool the server config allows. The session's own rules are checked after the
        config's and the last match wins (measured): ``ask`` makes it a permission request
        (as :class:`Permission`), ``deny`` fails the call. False: the run stops."""
        permission, patterns = _permission_of(step)
        action = _session_action(run.session, permission, patterns)
        if action == "ask":
            return await self._do_permission(run, Permission(permission, patterns, tool=step))
        part = self._tool_start(run, step.tool, step.input)
        await asyncio.sleep(0)
        if action == "deny":
            self._tool_error(run, part, _denied(run.session, permission), None)
        else:
            await self._run_tool_body(run, part, step)
        return True

    async def _do_task(self, run: _Run, step: Task) -> None:
        parent = run.session
        prompt_text = step.prompt or f"{step.description} [[script:{step.script}]]"
        tool_input = {
            "description": step.description,
            "prompt": prompt_text,
            "subagent_type": step.subagent_type,
        }
        child_box: list[FakeSession] = []

        def create_child(_pending: JSON) -> JSON:
            # The child exists before the part turns running (same tick as on the real server).
            # Measured: a task child runs in its parent's directory.
            child = self._create_session(
                parent.id,
                f"{step.description} (@{step.subagent_type} subagent)",
                parent.directory,
                agent=step.subagent_type,
            )
            child_box.append(child)
            return {
                "parentSessionId": parent.id,
                "sessionId": child.id,
                "model": {"modelID": run.prompt.model_id, "providerID": run.prompt.provider_id},
            }

        part = self._tool_start(
            run, "task", tool_input, title=step.description, before_running=create_child
        )
        child = child_box[0]
        metadata: JSON = part["state"]["metadata"]
        run.tools[part["id"]].child_id = child.id
        message = run.message
        assert message is not None
        running = part
        child_prompt = self._enqueue_prompt(
            child,
            prompt_text,
            script=step.script,
            agent=step.subagent_type,
            provider_id=run.prompt.provider_id,
            model_id=run.prompt.model_id,
            want_result=True,
            # Measured: the running part is announced again after the child's prompt.
            before_busy=lambda: self._store_part(message, running),
        )
        assert child_prompt.future is not None
        result = await asyncio.shield(child_prompt.future)
        part = run.tools[part["id"]].part
        if result.outcome == "completed":
            output = (
                f'<task id="{child.id}" state="completed">\n'
                f"<task_result>\n{result.text}\n</task_result>\n</task>"
            )
            self._tool_completed(run, part, output, step.description, metadata)
        elif result.outcome == "aborted":
            self._tool_error(run, part, "Task cancelled", metadata)
        else:
            error = result.error or {}
            message_text = str(error.get("data", {}).get("message", "Task failed"))
            failed = f"Subagent failed (task_id: {child.id}): {message_text}"
            self._tool_error(run, part, failed, metadata)

    def _open_request(
        self, run: _Run, kind: Literal["permission", "question"], payload: JSON
    ) -> asyncio.Future[Any]:
        """Register a permission/question request and emit ``<kind>.asked``."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        request_id = payload["id"]
        self._requests_pending[request_id] = _PendingRequest(kind, run.session.id, payload, future)
        run.session._pending.add(request_id)
        self._emit(f"{kind}.asked", payload)
        return future

    async def _ask(self, request_id: str, future: asyncio.Future[Any]) -> Any:
        """Wait for the reply to a request :meth:`_open_request` opened."""
        ghost = False
        try:
            return await future
        except asyncio.CancelledError:
            # The run was aborted. Measured on 1.18.34: the request outlives it, still
            # listed, and a later reply answers true and emits `replied` but runs nothing.
            ghost = not self._closed
            raise
        finally:
            if not ghost:
                self._forget_request(request_id)

    def _forget_request(self, request_id: str) -> _PendingRequest | None:
        pending = self._requests_pending.pop(request_id, None)
        if pending is not None:
            owner = self._sessions.get(pending.session_id) or self._deleted.get(pending.session_id)
            if owner is not None:
                owner._pending.discard(request_id)
        return pending

    async def _do_permission(self, run: _Run, step: Permission) -> bool:
        patterns = tuple(step.patterns)
        tool = step.tool
        if tool is None:
            if step.permission == "bash":
                tool_input: JSON = {"command": patterns[0] if patterns else "", "description": ""}
            else:
                tool_input = {"patterns": list(patterns)}
            tool = Tool(step.permission, tool_input)
        action = _session_action(run.session, step.permission, patterns)
        if action in ("allow", "deny"):
            # A session rule decides before the config's ``ask`` (it comes last: measured).
            part = self._tool_start(run, tool.tool, tool.input)
            await asyncio.sleep(0)
            if action == "deny":
                self._tool_error(run, part, _denied(run.session, step.permission), None)
            else:
                await self._run_tool_body(run, part, tool)
            return True
        metadata = dict(step.metadata or {})
        always = list(step.always)
        if step.permission == "bash" and patterns:
            # Measured: a bash request carries its command and "<program> *" by default.
            if step.metadata is None:
                metadata = {"command": patterns[0]}
            if not always:
                programs = (p.split()[0] for p in patterns if p.split() and p != "*")
                always = list(dict.fromkeys(f"{program} *" for program in programs))
        asked: list[tuple[str, asyncio.Future[Any]]] = []

        def ask(pending: JSON) -> None:
            # Measured: permission.asked comes between the pending and running updates.
            if self._approved_always(step.permission, patterns):
                return
            payload: JSON = {
                "id": self._new_id("per"),
                "sessionID": run.session.id,
                "permission": step.permission,
                "patterns": list(patterns),
                "metadata": metadata,
                "always": always,
                "tool": {"messageID": pending["messageID"], "callID": pending["callID"]},
            }
            asked.append((payload["id"], self._open_request(run, "permission", payload)))

        part = self._tool_start(run, tool.tool, tool.input, before_running=ask)
        if asked:
            active = run.tools[part["id"]]
            active.asking = True
            reply = await self._ask(*asked[0])
            active.asking = False
            if reply == "reject":
                self._tool_error(run, part, _PERMISSION_REJECTED, None)
                return False
            if reply == "always":
                for pattern in always or patterns:
                    self._always.add((step.permission, pattern))
        await self._run_tool_body(run, part, tool)
        return True

    def _approved_always(self, permission: str, patterns: Sequence[str]) -> bool:
        """Whether earlier ``always`` replies cover every pattern (project-wide, measured)."""
        approved = [p for perm, p in self._always if perm == permission]
        return bool(patterns) and all(
            any(fnmatch.fnmatchcase(pattern, rule) for rule in approved) for pattern in patterns
        )

    async def _do_question(self, run: _Run, step: Question) -> bool:
        questions = [dict(q) for q in step.questions]
        asked: list[tuple[str, asyncio.Future[Any]]] = []

        def ask(pending: JSON) -> None:
            # Measured: question.asked comes between the pending and running updates.
            payload: JSON = {
                "id": self._new_id("que"),
                "sessionID": run.session.id,
                "questions": questions,
                "tool": {"messageID": pending["messageID"], "callID": pending["callID"]},
            }
            asked.append((payload["id"], self._open_request(run, "question", payload)))

        part = self._tool_start(run, "question", {"questions": questions}, before_running=ask)
        answers = await self._ask(*asked[0])
        if answers is None:
            self._tool_error(run, part, _QUESTION_DISMISSED, None)
            return False
        pairs = ", ".join(
            f'"{q.get("question", "")}"="{", ".join(a) if a else "Unanswered"}"'
            for q, a in zip(questions, answers, strict=False)
        )
        output = (
            f"User has answered your questions: {pairs}. "
            "You can now continue with the user's answers in mind."
        )
        count = len(questions)
        title = f"Asked {count} question{'' if count == 1 else 's'}"
        self._tool_completed(run, part, output, title, {"answers": answers})
        return True

    def _blocked(self, run: _Run) -> _Result:
        self._finish_step(run, "tool-calls")
        return _Result("blocked", run.last_text, None, run.message.id if run.message else None)

    def _fail(self, run: _Run, step: Fail) -> _Result:
        """Measured order: ``session.error``, an idle pair, the assistant message with
        ``error`` (completed, no ``finish``), then (from :meth:`_end_run`) another idle pair."""
        self._close_text(run)
        data: JSON = {"message": step.message}
        if step.name == "APIError":
            data |= _api_error_data(step.message, retryable=step.retries > 0)
        if step.data:
            data.update(step.data)
        error: JSON = {"name": step.name, "data": data}
        self._emit("session.error", {"sessionID": run.session.id, "error": error})
        self._set_idle(run.session)
        message = run.message
        if message is not None:
            info = dict(message.info)
            info["time"] = {"created": info["time"]["created"], "completed": _now_ms()}
            info["error"] = error
            self._store_message(run.session, message, info)
        return _Result("failed", run.last_text, error, message.id if message else None)

    async def _cleanup_aborted(self, run: _Run) -> _Result:
        session = run.session
        message = run.message
        if run.retrying and message is not None:
            # Measured: an abort between retries completes the assistant message with no
            # error, then one idle pair; no session.error.
            info = dict(message.info)
            info["time"] = {"created": info["time"]["created"], "completed": _now_ms()}
            self._store_message(session, message, info)
            self._set_idle(session)
            return _Result("aborted", run.last_text, None, message.id)
        # Task children go first, like on the real server.
        for active in list(run.tools.values()):
            if active.child_id is not None and active.child_id in self._sessions:
                await self._abort_session(self._sessions[active.child_id])
        self._emit("session.error", {"sessionID": session.id, "error": _ABORTED_ERROR})
        self._set_idle(session)
        message = run.message
        if message is not None:
            self._close_text(run)
            for active in list(run.tools.values()):
                part = active.part
                state = part["state"]
                if state["status"] == "pending":
                    self._tool_error(run, part, _TOOL_ABORTED, {"interrupted": True})
                elif part["tool"] == "bash" and not active.asking:
                    title = str(state["input"].get("command", "bash"))
                    metadata: JSON = {
                        "output": _BASH_ABORTED_OUTPUT,
                        "exit": None,
                        "truncated": False,
                    }
                    self._tool_completed(run, part, _BASH_ABORTED_OUTPUT, title, metadata)
                else:
                    metadata = {**state.get("metadata", {}), "interrupted": True}
                    self._tool_error(run, part, _TOOL_ABORTED, metadata)
            info = dict(message.info)
            info["time"] = {"created": info["time"]["created"], "completed": _now_ms()}
            info["error"] = _ABORTED_ERROR
            self._store_message(session, message, info)
            self._set_idle(session)
        return _Result("aborted", run.last_text, _ABORTED_ERROR, message.id if message else None)

    async def _abort_session(self, session: FakeSession) -> None:
        if session._aborting is not None:
            await asyncio.shield(session._aborting)
            return
        runner = session._runner
        if runner is None or runner.done():
            if session.status["type"] == "busy":
                self._emit("session.error", {"sessionID": session.id, "error": _ABORTED_ERROR})
            self._set_idle(session)
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        session._aborting = done
        self._drop_queue(session)
        try:
            runner.cancel()
            await asyncio.wait({runner})
            if runner.cancelled():
                # Cancelled before its first step ran: clean up here.
                self._drop_queue(session)
                session._run = None
                session._runner = None
                self._emit("session.error", {"sessionID": session.id, "error": _ABORTED_ERROR})
                self._set_idle(session)
        finally:
            session._aborting = None
            done.set_result(None)
        if session._deferred and not self._closed:
            # The abort cut a run's finishing window: what the window accepted still runs.
            self._admit_deferred(session)

    # ------------------------------------------------------------------ HTTP

    async def _handle(self, request: httpx.Request) -> httpx.Response:
        loop = asyncio.get_running_loop()
        method = request.method.upper()
        path = request.url.path
        is_stream = method == "GET" and path == "/event"
        session_id = None
        if path.startswith("/session/"):
            segment = path.split("/", 3)[2]
            if segment and segment != "status":
                session_id = segment
        record = RecordedRequest(method, path, session_id, loop.time())
        self.requests.append(record)
        if not is_stream:
            self.in_flight += 1
            if self.in_flight > self.max_in_flight:
                self.max_in_flight = self.in_flight
        self._notify()
        try:
            if self._closed:
                raise httpx.ConnectError("fake OpenCode server is closed", request=request)
            response: httpx.Response | None = None
            for hook in list(self._hooks):
                if hook.matches(method, path):
                    hook.calls += 1
                    response = await hook.handler(request)
                    if response is not None:
                        break
            if response is None:
                if self._closed:
                    raise httpx.ConnectError("fake OpenCode server is closed", request=request)
                if not is_stream:
                    delay = self.latency
                    if self.jitter > 0:
                        delay += self._latency_rng.uniform(0, self.jitter)
                    await asyncio.sleep(max(0.0, delay))
                response = await self._route(request, method, path)
            record.status = response.status_code
            return response
        finally:
            record.ended_at = loop.time()
            if not is_stream:
                self.in_flight -= 1
            self._notify()

    def _authorized(self, request: httpx.Request) -> bool:
        if self._auth is None:
            return True
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() == "basic" and token.strip() in self._auth:
            return True
        query = parse_qs(request.url.query.decode())
        return any(t in self._auth for t in query.get("auth_token", []))

    def _request_directory(self, request: httpx.Request) -> str:
        """The directory a request is served in (measured on 1.18.34): ``?directory=``,
        else the ``x-opencode-directory`` header (percent-decoded; raw non-ASCII bytes
        read as Latin-1, as the real server does), else :attr:`directory`."""
        query = parse_qs(request.url.query.decode()).get("directory")
        if query and query[0]:
            return _resolve_directory(query[0], self.directory)
        for name, raw in request.headers.raw:
            if name.lower() == b"x-opencode-directory" and raw:
                value = raw.decode("latin-1")
                with contextlib.suppress(UnicodeDecodeError):
                    value = unquote(value, errors="strict")
                return _resolve_directory(value, self.directory)
        return self.directory

    async def _body(self, request: httpx.Request) -> JSON:
        raw = await request.aread()
        if not raw:
            return {}
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            # Measured: malformed JSON is an unexpected error (500), not a 400.
            raise _HttpError(self._unexpected_error()) from None
        if not isinstance(body, dict):
            raise _HttpError(_invalid(f"Expected object, got {_js(body)}"))
        return body

    def _unexpected_error(self) -> httpx.Response:
        """The real server's 500 for what its handlers did not expect (malformed JSON,
        an id without its ``ses`` prefix in the path)."""
        message = "Unexpected server error. Check server logs for details."
        ref = f"err_{self._rng.getrandbits(32):08x}"
        return _json_response(
            500, {"name": "UnknownError", "data": {"message": message, "ref": ref}}
        )

    async def _route(self, request: httpx.Request, method: str, path: str) -> httpx.Response:
        if not self._authorized(request):
            return httpx.Response(
                401,
                content=b"Unauthorized",
                headers={"www-authenticate": 'Basic realm="Secure Area"'},
            )
        parts = [p for p in path.split("/") if p]
        try:
            return await self._dispatch(request, method, parts)
        except _HttpError as exc:
            return exc.response

    async def _dispatch(
        self, request: httpx.Request, method: str, parts: list[str]
    ) -> httpx.Response:
        n = len(parts)
        head = parts[0] if parts else ""
        if head == "global" and parts == ["global", "health"] and method == "GET":
            return _json_response(200, {"healthy": True, "version": OPENCODE_VERSION})
        if head == "event" and n == 1 and method == "GET":
            return self._open_stream(self._request_directory(request))
        if head == "session":
            if n == 1:
                if method == "POST":
                    return await self._post_session(request)
                if method == "GET":
                    return self._list_sessions(request)
            elif n == 2 and parts[1] == "status" and method == "GET":
                return self._list_status(self._request_directory(request))
            elif n >= 2:
                return await self._session_route(request, method, parts)
        if parts == ["experimental", "control-plane", "move-session"] and method == "POST":
            return await self._move_session(request)
        if head == "permission":
            if n == 1 and method == "GET":
                return self._list_pending("permission", self._request_directory(request))
            if n == 3 and parts[2] == "reply" and method == "POST":
                bad_id = _expected_prefix(parts[1], "per", "requestID", kind="Params")
                if bad_id is not None:
                    return bad_id
                body = await self._body(request)
                if "reply" not in body:
                    return _invalid("Missing key", "reply")
                directory = self._request_directory(request)
                return self._reply_permission(parts[1], body["reply"], directory)
        if head == "question":
            if n == 1 and method == "GET":
                return self._list_pending("question", self._request_directory(request))
            if n == 3 and method == "POST" and parts[2] in ("reply", "reject"):
                bad_id = _expected_prefix(parts[1], "que", "requestID", kind="Params")
                if bad_id is not None:
                    return bad_id
                answers = None
                if parts[2] == "reply":
                    body = await self._body(request)
                    if "answers" not in body:
                        return _invalid("Missing key", "answers")
                    answers = body["answers"]
                    if not isinstance(answers, list):
                        return _invalid(f"Expected array, got {_js(answers)}", "answers")
                    for index, answer in enumerate(answers):
                        if not isinstance(answer, list):
                            got = f"Expected QuestionAnswer, got {_js(answer)}"
                            return _invalid(got, "answers", index)
                directory = self._request_directory(request)
                return self._reply_question(parts[1], parts[2], answers, directory)
        return httpx.Response(404, content=b"404 Not Found", headers={"content-type": "text/plain"})

    async def _session_route(
        self, request: httpx.Request, method: str, parts: list[str]
    ) -> httpx.Response:
        session_id = parts[1]
        rest = parts[2:]
        known = (
            (not rest and method == "GET")
            or (rest == ["children"] and method == "GET")
            or (rest == ["abort"] and method == "POST")
            or (rest == ["message"] and method in ("GET", "POST"))
            or (len(rest) == 2 and rest[0] == "message" and method == "GET")
            or (rest == ["prompt_async"] and method == "POST")
            or (rest == ["revert"] and method == "POST")
            or (rest == ["unrevert"] and method == "POST")
            or (rest == ["summarize"] and method == "POST")
            or (not rest and method in ("PATCH", "DELETE"))
            or (rest == ["fork"] and method == "POST")
            or (len(rest) == 2 and rest[0] == "permissions" and method == "POST")
        )
        if not known:
            return httpx.Response(404, content=b"404 Not Found")
        if not session_id.startswith("ses"):
            return self._unexpected_error()
        if rest == ["abort"]:
            session = self._sessions.get(session_id) or self._deleted.get(session_id)
            if session is not None:
                session.abort_count += 1
                await self._abort_session(session)
            return _json_response(200, True)
        session = self._sessions.get(session_id)
        if len(rest) == 2 and rest[0] == "message":
            # Measured: the message id is validated, and looked up, before the session.
            bad_id = _expected_prefix(rest[1], "msg", "messageID", kind="Params")
            if bad_id is not None:
                return bad_id
            message = session._messages.get(rest[1]) if session is not None else None
            if message is None:
                return _not_found(f"Message not found: {rest[1]}")
            return _json_response(200, message.to_json())
        if session is None:
            return _not_found(f"Session not found: {session_id}")
        if not rest and method == "PATCH":
            return await self._patch_session(request, session)
        if not rest and method == "DELETE":
            return self._delete_session(session)
        if rest == ["fork"]:
            return await self._fork_session(request, session)
        if not rest:
            return _json_response(200, session.info)
        if rest == ["children"]:
            children = self._sessions
            return _json_response(200, [children[c].info for c in session._children])
        if rest[0] == "message":
            if method == "GET":
                return self._list_messages(request, session)
            return await self._prompt(request, session, wait=True)
        if rest == ["prompt_async"]:
            return await self._prompt(request, session, wait=False)
        if rest == ["revert"]:
            return await self._revert(request, session)
        if rest == ["unrevert"]:
            return self._unrevert(session)
        if rest == ["summarize"]:
            return await self._summarize(request, session)
        # legacy: POST /session/{id}/permissions/{permissionID} {response}
        body = await self._body(request)
        return self._reply_permission(rest[1], body.get("response"), None)

    async def _post_session(self, request: httpx.Request) -> httpx.Response:
        # Measured: this route answers any invalid body (malformed JSON included) with a
        # bare ``400 {"_tag": "BadRequest"}``, and an unknown ``parentID`` is accepted.
        invalid = _json_response(400, {"_tag": "BadRequest"})
        try:
            body = await self._body(request)
        except _HttpError:
            return invalid
        parent_id = body.get("parentID")
        title = body.get("title")
        if parent_id is not None and (
            not isinstance(parent_id, str) or not parent_id.startswith("ses")
        ):
            return invalid
        if title is not None and not isinstance(title, str):
            return invalid
        permission = body.get("permission")
        if permission is not None and not isinstance(permission, list):
            return invalid
        # Measured: the session (a child by ``parentID`` too) gets the request's directory.
        directory = self._request_directory(request)
        session = self._create_session(parent_id, title, directory, permission=permission)
        return _json_response(200, session.info)

    def _list_sessions(self, request: httpx.Request) -> httpx.Response:
        query = parse_qs(request.url.query.decode())
        roots = query.get("roots", ["false"])[0] == "true"
        # Measured: sessions of every directory, unless ``?directory=`` names one (the
        # header does not filter).
        only = query.get("directory", [""])[0]
        directory = _resolve_directory(only, self.directory) if only else None
        infos = [
            s.info
            for s in self._sessions.values()
            if not (roots and s.parent_id is not None)
            and (directory is None or s.directory == directory)
        ]
        # Measured: most recently updated first; on a tie the newer session first
        # (ids sort that way: they count down).
        infos.sort(key=lambda info: (-info["time"]["updated"], info["id"]))
        return _json_response(200, infos)

    def _list_messages(self, request: httpx.Request, session: FakeSession) -> httpx.Response:
        messages = session._messages.values()
        limit = parse_qs(request.url.query.decode()).get("limit")
        if limit and not limit[0].isdigit():
            return _invalid("Expected an integer, got NaN", "limit", kind="Query")
        if limit:
            count = int(limit[0])
            all_messages = list(messages)
            return _json_response(
                200, [m.to_json() for m in all_messages[max(0, len(all_messages) - count) :]]
            )
        return _json_response(200, [m.to_json() for m in messages])

    @staticmethod
    def _invalid_prompt(body: JSON) -> httpx.Response | None:
        """The real server's 400 for an invalid prompt body (measured), else None."""
        if "parts" not in body:
            return _invalid("Missing key", "parts")
        parts = body["parts"]
        if not isinstance(parts, list):
            return _invalid(f"Expected array, got {_js(parts)}", "parts")
        for index, part in enumerate(parts):
            if not isinstance(part, dict) or part.get("type") not in _PART_TYPES:
                return _invalid(f"{_PART_UNION}, got {_js(part)}", "parts", index)
            if part["type"] == "text":
                if "text" not in part:
                    return _invalid("Missing key", "parts", index, "text")
                if not isinstance(part["text"], str):
                    got = f"Expected string, got {_js(part['text'])}"
                    return _invalid(got, "parts", index, "text")
            if part["type"] == "file":
                for key in ("mime", "url"):
                    if key not in part:
                        return _invalid("Missing key", "parts", index, key)
                    if not isinstance(part[key], str):
                        got = f"Expected string, got {_js(part[key])}"
                        return _invalid(got, "parts", index, key)
        for key in ("system", "variant"):
            value = body.get(key)
            if value is not None and not isinstance(value, str):
                return _invalid(f"Expected string | null, got {_js(value)}", key)
        tools = body.get("tools")
        if tools is not None:
            if not isinstance(tools, dict):
                return _invalid(f"Expected object, got {_js(tools)}", "tools")
            for name, enabled in tools.items():
                if not isinstance(enabled, bool):
                    return _invalid(f"Expected boolean, got {_js(enabled)}", "tools", name)
        if "messageID" in body:
            bad_id = _expected_prefix(body["messageID"], "msg", "messageID", kind="Payload")
            if bad_id is not None:
                return bad_id
        model = body.get("model")
        if model is not None and not isinstance(model, dict):
            return _invalid(f"Expected object | null, got {_js(model)}", "model")
        agent = body.get("agent")
        if agent is not None and not isinstance(agent, str):
            return _invalid(f"Expected string | null, got {_js(agent)}", "agent")
        return None

    async def _prompt(
        self, request: httpx.Request, session: FakeSession, *, wait: bool
    ) -> httpx.Response:
        if not await request.aread():
            return _invalid("Expected object, got undefined")
        body = await self._body(request)
        invalid = self._invalid_prompt(body)
        if invalid is not None:
            return invalid
        raw_parts = body["parts"]
        text = "".join(
            str(p.get("text", ""))
            for p in raw_parts
            if isinstance(p, dict) and p.get("type") == "text"
        )
        raw_model = body.get("model")
        model: JSON = raw_model if isinstance(raw_model, dict) else {}
        message_id = body.get("messageID")
        agent = body.get("agent")
        converted = convert_parts(raw_parts, modalities=self.model_modalities)
        if converted.dropped:
            # Measured: an image the server cannot decode: 204 (400 on /message), nothing
            # stored, no run.
            return httpx.Response(204) if not wait else _json_response(400, {"_tag": "BadRequest"})
        script: str | None = None
        if converted.failure is not None:
            script = f"__unsupported__:{converted.failure}"
            self._scripts[script] = (Fail(name="UnknownError", message=converted.failure),)
        prompt = self._enqueue_prompt(
            session,
            text,
            message_id=message_id,
            script=script,
            agent=agent if isinstance(agent, str) else "build",
            provider_id=model.get("providerID"),
            model_id=model.get("modelID"),
            want_result=wait,
            parts=converted.stored,
            options={k: body.get(k) for k in ("system", "tools", "variant")},
            content=converted.content,
        )
        if not wait:
            return httpx.Response(204)
        assert prompt.future is not None
        result = await asyncio.shield(prompt.future)
        if result.outcome == "vanished":
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
        message = session._messages.get(result.message_id or "")
        if message is None:
            message = session._messages.get(prompt.user_message_id)
        return _json_response(200, message.to_json() if message else {"info": {}, "parts": []})

    @staticmethod
    def _busy_error(session: FakeSession) -> httpx.Response:
        return _json_response(
            409,
            {
                "_tag": "SessionBusyError",
                "sessionID": session.id,
                "message": f"Session is busy: {session.id}",
            },
        )

    async def _revert(self, request: httpx.Request, session: FakeSession) -> httpx.Response:
        """Mark messages reverted (measured): they stay stored until the next prompt."""
        body = await self._body(request)
        message_id = body.get("messageID")
        part_id = body.get("partID")
        if not isinstance(message_id, str):
            return _invalid("Missing key", "messageID")
        if session.busy:
            return self._busy_error(session)
        revert: JSON | None = None
        last_user: str | None = None
        for message in session._messages.values():
            if message.role == "user":
                last_user = message.id
            before: list[str] = []
            for part in message._parts.values():
                if (message.id == message_id and part_id is None) or part["id"] == part_id:
                    # Like OpenCode: a part with no text or tool before it in its message
                    # reverts the whole turn, from the user message that started it.
                    if any(t in ("text", "tool") for t in before):
                        revert = {"messageID": message.id, "partID": part["id"]}
                    else:
                        revert = {"messageID": last_user or message.id}
                    break
                before.append(part["type"])
            if revert is not None:
                break
        if revert is None:
            return _json_response(200, session.info)  # unknown message: nothing changes
        self._emit("session.diff", {"sessionID": session.id, "diff": []})
        self._touch(session, revert=revert)
        return _json_response(200, session.info)

    def _unrevert(self, session: FakeSession) -> httpx.Response:
        if session.busy:
            return self._busy_error(session)
        if "revert" in session.info:
            self._touch(session, revert=None)
        return _json_response(200, session.info)

    def _apply_revert(self, session: FakeSession) -> None:
        """The prompt after a revert removes what it hid: ``message.removed`` for each
        later message, ``message.part.removed`` for the parts of a partly reverted one,
        then ``session.updated`` without ``revert`` and with their tokens taken off."""
        revert = session.info.get("revert")
        if revert is None:
            return
        ids = list(session._messages)
        message_id, part_id = revert["messageID"], revert.get("partID")
        start = ids.index(message_id) if message_id in ids else len(ids)
        tokens: JSON = session.info.get("tokens", _zero_usage())
        cost = session.info.get("cost", 0)
        for mid in ids[start + 1 if part_id else start :]:
            removed = session._messages.pop(mid)
            if removed.role == "assistant":
                tokens = _sum_usage(tokens, removed.info.get("tokens", {}), sign=-1)
                cost -= removed.info.get("cost", 0)
            self._emit("message.removed", {"sessionID": session.id, "messageID": mid})
        kept = session._messages.get(message_id) if part_id else None
        if kept is not None and part_id in kept._parts:
            part_ids = list(kept._parts)
            for pid in part_ids[part_ids.index(part_id) :]:
                del kept._parts[pid]
                self._emit(
                    "message.part.removed",
                    {"sessionID": session.id, "messageID": message_id, "partID": pid},
                )
        self._touch(session, revert=None, tokens=tokens, cost=cost)

    async def _patch_session(self, request: httpx.Request, session: FakeSession) -> httpx.Response:
        """``title``, ``time.archived``, ``permission`` (appended), ``metadata``; other
        fields are ignored. Measured: emits ``session.updated`` and leaves ``time.updated``
        alone."""
        body = await self._body(request)
        info = dict(session.info)
        title = body.get("title")
        if title is not None:
            if not isinstance(title, str):
                return _bad_request("title must be a string")
            info["title"] = title
        times = body.get("time")
        if isinstance(times, dict) and isinstance(times.get("archived"), int | float):
            info["time"] = {**info["time"], "archived": times["archived"]}
        if isinstance(body.get("permission"), list):
            # Measured: the rules are appended to the session's (the last match wins).
            info["permission"] = [*(info.get("permission") or []), *body["permission"]]
        if "metadata" in body:
            info["metadata"] = body["metadata"]
        session.info = info
        self._emit("session.updated", {"sessionID": session.id, "info": info})
        return _json_response(200, info)

    def _delete_session(self, session: FakeSession) -> httpx.Response:
        """Delete a session and its subtree, children first (measured: ``session.deleted``
        per session, depth first in creation order, then ``200 true``). A busy session
        keeps running; it can still be aborted, and its pending requests stay listed."""
        order: list[FakeSession] = []

        def walk(node: FakeSession) -> None:
            for child_id in node._children:
                child = self._sessions.get(child_id)
                if child is not None:
                    walk(child)
            order.append(node)

        walk(session)
        for node in order:
            del self._sessions[node.id]
            parent = self._sessions.get(node.parent_id) if node.parent_id else None
            if parent is not None:
                parent._children.pop(node.id, None)
            if node.busy:
                self._deleted[node.id] = node
            self._emit("session.deleted", {"sessionID": node.id, "info": node.info})
        return _json_response(200, True)

    async def _fork_session(self, request: httpx.Request, session: FakeSession) -> httpx.Response:
        """``POST /session/{id}/fork {messageID?}`` (measured on 1.18.34).

        A new root session (no ``parentID``) in the *original's* directory, whatever
        directory the request names, titled ``"<title> (fork #1)"`` (``#n+1`` for a
        fork of ``#n``), without the original's permission rules, usage or model; every
        message before ``messageID`` (all of them when it names none of the session's)
        copied with new, later ids, parts and ``parentID`` following. Events: its
        ``session.created``, then ``message.updated`` and the parts of each copy.
        Malformed JSON, a non-object body or a ``messageID`` without ``msg`` is a bare
        ``400 {"_tag": "BadRequest"}``; other keys are ignored."""
        invalid = _json_response(400, {"_tag": "BadRequest"})
        try:
            body = await self._body(request)
        except _HttpError:
            return invalid
        until = body.get("messageID")
        if until is not None and (not isinstance(until, str) or not until.startswith("msg")):
            return invalid
        match = re.fullmatch(r"(.+) \(fork #(\d+)\)", session.title)
        title = f"{match[1]} (fork #{int(match[2]) + 1})" if match else f"{session.title} (fork #1)"
        fork = self._create_session(None, title, session.directory)
        new_ids: dict[str, str] = {}
        for message in session.messages:
            if message.id == until:
                break
            new_ids[message.id] = self._new_id("msg")
            info = {**message.info, "id": new_ids[message.id], "sessionID": fork.id}
            if "parentID" in info:
                info["parentID"] = new_ids.get(info["parentID"], info["parentID"])
            copy = FakeMessage(info)
            self._store_message(fork, copy, info)
            for part in message.parts:
                ids = {"id": self._new_id("prt"), "sessionID": fork.id, "messageID": copy.id}
                self._store_part(copy, {**part, **ids})
        return _json_response(200, fork.info)

    async def _move_session(self, request: httpx.Request) -> httpx.Response:
        """``POST /experimental/control-plane/move-session {sessionID, destination:
        {directory}, moveChanges?}`` (measured on 1.18.34): 204 and no event; the
        session's directory becomes the one given, as given (not normalised), so its
        later events go to that directory's streams; ``time.updated`` moves. An unknown
        session is a 400 ``MoveSessionError``. The fake has one project, so it never
        answers the real one's "Destination directory belongs to another project"
        (a hook can)."""
        body = await self._body(request)
        destination = body.get("destination")
        if not isinstance(destination, dict):
            return _invalid("Missing key", "destination")
        directory = destination.get("directory")
        if not isinstance(directory, str):
            return _invalid("Missing key", "destination", "directory")
        session = self._sessions.get(str(body.get("sessionID")))
        if session is None:
            message = f"Session not found: {body.get('sessionID')}"
            return _json_response(400, {"name": "MoveSessionError", "data": {"message": message}})
        info = {**session.info, "directory": directory, "path": directory.lstrip("/")}
        info["time"] = {**info["time"], "updated": _now_ms()}
        session.info = info
        self._directory_of[session.id] = directory
        self._notify()
        return httpx.Response(204)

    async def _summarize(self, request: httpx.Request, session: FakeSession) -> httpx.Response:
        """Compact the session (measured): a user message with a ``compaction`` part
        is stored at once; the summary turn runs after the current run (the request
        blocks until then) and answers ``true``, also when an abort dropped it."""
        body = await self._body(request)
        provider_id, model_id = body.get("providerID"), body.get("modelID")
        if not isinstance(provider_id, str) or not isinstance(model_id, str):
            return _bad_request("providerID and modelID are required")
        auto = body.get("auto", False)
        prompt = self._enqueue_prompt(
            session,
            "",
            agent=str(session.info.get("agent", "build")),
            provider_id=provider_id,
            model_id=model_id,
            want_result=True,
            compaction=bool(auto),
        )
        assert prompt.future is not None
        result = await asyncio.shield(prompt.future)
        if result.outcome == "vanished":
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
        return _json_response(200, True)

    def _list_status(self, directory: str) -> httpx.Response:
        """Measured: the non-idle sessions of the request's directory only."""
        of = self._directory_of
        return _json_response(
            200, {sid: st for sid, st in self._non_idle.items() if of.get(sid) == directory}
        )

    def _in_directory(self, pending: _PendingRequest, directory: str | None) -> bool:
        return directory is None or self._directory_of.get(pending.session_id) == directory

    def _list_pending(self, kind: str, directory: str) -> httpx.Response:
        """Measured: the pending requests of the request directory's sessions only."""
        return _json_response(
            200,
            [
                r.payload
                for r in self._requests_pending.values()
                if r.kind == kind and self._in_directory(r, directory)
            ],
        )

    def _reply_permission(
        self, request_id: str, reply: Any, directory: str | None
    ) -> httpx.Response:
        """``directory``: the request's (measured: a request of another directory is not
        found); ``None`` for the legacy route, whose scoping was not measured."""
        if reply not in ("once", "always", "reject"):
            return _invalid(f'Expected "once" | "always" | "reject", got {_js(reply)}', "reply")
        pending = self._requests_pending.get(request_id)
        if (
            pending is None
            or pending.kind != "permission"
            or not self._in_directory(pending, directory)
        ):
            return _json_response(
                404,
                {
                    "_tag": "PermissionNotFoundError",
                    "requestID": request_id,
                    "message": f"Permission request not found: {request_id}",
                },
            )
        self._forget_request(request_id)
        self._emit(
            "permission.replied",
            {"sessionID": pending.session_id, "requestID": request_id, "reply": reply},
        )
        if not pending.future.done():
            pending.future.set_result(reply)
        return _json_response(200, True)

    def _reply_question(
        self, request_id: str, action: str, answers: list[Any] | None, directory: str
    ) -> httpx.Response:
        pending = self._requests_pending.get(request_id)
        if (
            pending is None
            or pending.kind != "question"
            or not self._in_directory(pending, directory)
        ):
            return _json_response(
                404,
                {
                    "_tag": "QuestionNotFoundError",
                    "requestID": request_id,
                    "message": f"Question request not found: {request_id}",
                },
            )
        self._forget_request(request_id)
        if action == "reply":
            self._emit(
                "question.replied",
                {"sessionID": pending.session_id, "requestID": request_id, "answers": answers},
            )
        else:
            self._emit(
                "question.rejected", {"sessionID": pending.session_id, "requestID": request_id}
            )
        if not pending.future.done():
            pending.future.set_result(answers)
        return _json_response(200, True)

    def _open_stream(self, directory: str) -> httpx.Response:
        sub = _Subscriber(directory)
        self._subscribers.add(sub)
        first = self._frame(self._envelope("server.connected", {}))
        stream = _EventStream(self, sub, first, self.heartbeat)
        self._notify()
        return httpx.Response(
            200,
            stream=stream,
            headers={"content-type": "text/event-stream", "cache-control": "no-cache"},
        )
