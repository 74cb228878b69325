"""The script steps of the fake: what a scripted model does during a run.

Why a module: the steps are the vocabulary of every test that scripts the fake
(``fake.script("work", [Text(...), Tool(...)])``); they are plain frozen records,
kept apart from the runner that plays them (:mod:`.runner`, :mod:`.tools`) so that a
reader finds what a step promises without reading how it is played.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias


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

    A ``todowrite`` tool sends ``todo.updated`` (its ``todos``) between ``pending`` and
    ``running`` and, without ``output``, completes as the real one: the list as indented
    JSON, ``metadata.todos``, and ``"<n> todos"`` (those not completed) as title.
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

    ``background=True`` is the model asking for a background subagent (the call's input
    gets ``"background": true``). On a server with background subagents on
    (``FakeOpenCodeServer(background_subagents=True)``, the real server's
    ``OPENCODE_EXPERIMENTAL_BACKGROUND_SUBAGENTS=true``) the part completes at once
    ("Background task started", ``metadata.background``/``jobId``), the parent goes on
    with its script while the child runs, and when the child ends on its own a
    synthetic user message (``<task id=... state="completed">`` or ``state="error"``)
    makes the parent run ``result_script`` (default: the ``"default"`` script); a
    child aborted alone gets no message. Without the flag the call ends ``error``
    and no child is created, as on the real server (see :mod:`.background`).
    """

    description: str
    script: str
    subagent_type: str = "general"
    prompt: str | None = None
    background: bool = False
    result_script: str | None = None
    """The script of the parent's run on a background child's result."""


@dataclass(frozen=True, slots=True)
class Tasks:
    """Several ``task`` calls in one model step, their children running side by side.

    Measured on 1.18.34 (one model answer with two ``task`` calls): call after call, the
    call's ``pending`` part, its child's ``session.created``, its ``running`` part; then
    each child runs on its own and each call ends with its child (as :class:`Task`); the
    parent's next step starts once every call ended. Aborting one child ends its call
    ``error "Task cancelled"`` while its siblings and the parent go on.
    """

    tasks: Sequence[Task]


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


Step: TypeAlias = Text | Tool | Task | Tasks | Hang | Fail | Permission | Question | Compact
"""Any script step."""

STEP_TYPES = (Text, Tool, Task, Tasks, Hang, Fail, Permission, Question, Compact)
"""The step classes, for ``isinstance`` checks."""
