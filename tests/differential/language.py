"""The neutral scenario language, and its translation to both targets' script steps.

A scenario is written once: what the *model* does on each request (:data:`Turn`) and
what the *client* does over HTTP (:data:`Action`). :func:`fake_steps` turns model
turns into :mod:`adapter.testing.fake` steps, :func:`model_steps` into
:mod:`adapter.testing.model` steps, so the fake and a real server driven by the
scripted model are asked to do the same thing.

The two script systems select steps differently, which the driver reconciles:
the fake runs the script named in *each* prompt, the scripted model picks the
script named in the *first* user message of a conversation and answers its Nth
request with step N. So a session's second prompt continues its first prompt's
model script (see :attr:`Prompt.fresh_history`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from adapter.testing import fake
from adapter.testing import model as scripted

# --------------------------------------------------------------------------- model turns


@dataclass(frozen=True)
class Say:
    """The model answers with text."""

    text: str


@dataclass(frozen=True)
class CallBash:
    """The model calls ``bash``; ``stdout`` is what the command prints.

    ``seconds``: how long the command runs (``inf``: until aborted) — the real
    command must take that long too (e.g. ``sleep 30``). ``needs_permission``: the
    session's rules ask before ``bash`` runs (the scenario's session must be
    created with ``ask_bash=True``; the fake gets a ``Permission`` step shaped like
    the real server's request: pattern = the command, ``always`` = its first word + ``*``).
    """

    command: str
    stdout: str
    description: str = "run it"
    seconds: float = 0.0
    needs_permission: bool = False


@dataclass(frozen=True)
class CallTask:
    """The model calls ``task``: a ``general`` subagent child runs script ``child``.

    ``background``: the call asks for a background subagent (``"background": true``; the
    scenario needs :attr:`Scenario.background_subagents` for it to run in the background).
    The parent's run goes on with the next turns up to its answer; the turns after that
    are the parent's run on the child's result (the real conversation simply goes on;
    the fake gets them as the ``Task``'s ``result_script``, see :func:`fake_scripts`).
    """

    description: str
    child: str
    background: bool = False


@dataclass(frozen=True)
class CallTasks:
    """The model calls ``task`` several times in one answer: the children run side by side."""

    tasks: tuple[CallTask, ...]


@dataclass(frozen=True)
class CallTodo:
    """The model calls ``todowrite`` with ``todos`` (each ``{content, status, priority}``)."""

    todos: tuple[Mapping[str, str], ...]


@dataclass(frozen=True)
class CallQuestion:
    """The model calls the ``question`` tool with ``questions``."""

    questions: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True)
class Hangs:
    """The model call never answers (until the session is aborted)."""


@dataclass(frozen=True)
class Fails:
    """The model call fails with HTTP ``status`` and an OpenAI error ``{message, type}``."""

    status: int = 400
    type: str = "invalid_request_error"
    message: str = "scripted bad request"

    @property
    def retried(self) -> bool:
        """Whether OpenCode retries the call first (measured: a 5xx or 429, or a body
        whose type is ``server_error``): five times over about 74 s."""
        return self.status >= 500 or self.status == 429 or self.type == "server_error"


FAKE_RETRY_DELAY = 15.0
"""Seconds each of the fake's five retries waits: about the real server's 74 s in all, so a
scenario that acts during the retries finds both targets still retrying."""


OVERFLOW_TOKENS = 200_000
"""The prompt tokens an :class:`Overflows` answer reports: above the test model's context
(128000), so an OpenCode with auto-compaction on compacts the session."""

CONTINUATION_TEXT = "done"
"""What the scripted model answers a request with no script marker (its ``default_text``)."""


@dataclass(frozen=True)
class Overflows:
    """The model answers ``text`` but reports more tokens than its context holds.

    On a server with auto-compaction (:attr:`Scenario.auto_compaction`) OpenCode then
    compacts the session inside the run (a summary, a synthetic "continue" message) and
    calls the model again; the fake plays it as ``Text(text), Compact()``. The real
    continuation request no longer carries the script marker (it was compacted away),
    so the scripted model answers it with :data:`CONTINUATION_TEXT`: the turn after an
    ``Overflows`` must be ``Say(CONTINUATION_TEXT)``, the script's last.
    """

    text: str


Turn: TypeAlias = (
    Say | CallBash | CallTask | CallTasks | CallTodo | CallQuestion | Hangs | Fails | Overflows
)
"""One model request's answer."""

ENDS_A_RUN = (Say, Hangs, Fails)
"""Turns after which the model is not called again (a tool call always is)."""


# --------------------------------------------------------------------------- client actions


@dataclass(frozen=True)
class Create:
    """``POST /session``; the new session is known as ``alias`` from then on."""

    alias: str
    title: str | None = None
    parent: str | None = None
    ask_bash: bool = False
    """Give the session the rule ``bash * ask`` (the real server's way to ask permission)."""
    directory: str | None = None
    """Create it in the named other directory (see :data:`Directory`), not the target's own."""


@dataclass(frozen=True)
class Prompt:
    """Send a prompt whose text selects script ``script`` (``[[script:…]]``).

    ``blocking`` uses ``POST /session/{id}/message`` (answers at the end of the run)
    instead of ``prompt_async``; the driver waits for its answer before the next action.
    ``fresh_history``: the model sees none of the session's earlier messages (after a
    revert of all of them), so the real conversation starts over with this script.
    """

    session: str
    script: str
    blocking: bool = False
    fresh_history: bool = False
    directory: str | None = None
    """Send it in the named other directory (see :data:`Directory`)."""
    by_another_client: bool = False
    """Sent by a second, plain client (a connection of its own, without the scenario's
    event stream, no ``messageID``): a run the scenario's watcher did not start, as
    another worker, ``opencode attach`` or a script would start it."""


COMMANDS: Mapping[str, Mapping[str, Any]] = {
    "hello": {"template": "Say hello to $ARGUMENTS", "description": "Greets"},
    "sub": {"template": "Investigate $ARGUMENTS", "description": "Delegates", "subtask": True},
}
"""The slash commands of a :attr:`Scenario.commands` scenario's configuration (``opencode.json``'s
``command``; the fake's ``inventory.commands``): ``hello`` runs in the session, ``sub`` as a
``task`` child on the real server."""


@dataclass(frozen=True)
class Command:
    """``POST /session/{id}/command``: the configured ``command`` (see :data:`COMMANDS`) with
    the marker of script ``script`` as its arguments. It answers when the run has ended;
    the driver waits for that answer. The scenario needs ``commands=True``."""

    session: str
    script: str
    command: str = "hello"


@dataclass(frozen=True)
class Call:
    """Any HTTP request. ``path`` and string values in ``body`` are templates:

    ``{alias}`` → the session's id; ``{msg:alias:N}`` → the id of its Nth stored
    message; ``{permission:alias}`` / ``{question:alias}`` → the id of its first
    pending request; ``{dir:NAME}`` → the named directory's path, percent-encoded (for
    a ``?directory=`` query). Ids are looked up with unrecorded requests.
    """

    method: str
    path: str
    body: Any = None
    directory: str | None = None
    """Send it in the named other directory (see :data:`Directory`)."""


@dataclass(frozen=True)
class Fork:
    """``POST /session/{source}/fork``, with ``{"messageID"}`` of the source's stored
    message number ``before`` when given; the fork is known as ``alias`` from then on (so
    its messages, status and events are compared like any scenario session's)."""

    alias: str
    source: str
    before: int | None = None


@dataclass(frozen=True)
class WaitIdle:
    """Wait until the session went idle after its last prompt (or now), and things settled."""

    session: str


@dataclass(frozen=True)
class WaitFor:
    """Wait until an event matching ``event`` (an :class:`~.order.On`) was streamed."""

    event: Any


@dataclass(frozen=True)
class WaitModelCall:
    """Wait until the session's model call is in flight (a ``Hangs`` turn has started).

    On a real server: the model request is open and OpenCode took in the stream's first
    chunk (its ``step-start`` part); on the fake: the assistant message exists and the run
    waits in its ``Hang`` step (``wait_hanging``).
    """

    session: str


@dataclass(frozen=True)
class Settle:
    """Wait until no event of the scenario arrived for a short quiet period."""


@dataclass(frozen=True)
class Attach:
    """What a client attaching to ``session``'s tree reads, through a fresh client of its own:
    ``GET /session/status``, then ``GET /session/{id}/children`` from ``session`` down
    (recursively, by the server's answers, not the events), then ``GET /session/{id}/message``
    of each session found. Each read is recorded and compared like a :class:`Call`; a session
    the walk finds is named by its place in the walk (``root/0/1``: the second child of the
    first child), and the status is reduced to the walked tree's sessions (the real server
    is shared: it can list other scenarios' sessions)."""

    session: str


Action: TypeAlias = (
    Create | Prompt | Command | Call | Fork | WaitIdle | WaitFor | WaitModelCall | Settle | Attach
)

Directory: TypeAlias = str
"""The name of a directory other than the target's own (``"second"``): each target maps it
to a fresh path of its own for the scenario (a trailing ``/`` in the name is kept in the
path), sends the request's ``x-opencode-directory`` header with it, and records that
directory's ``/event`` stream beside its own."""


def directories(actions: Sequence[Action]) -> list[Directory]:
    """The other directories ``actions`` name, without a trailing ``/``, in order."""
    names: list[str] = []
    for action in actions:
        named = [getattr(action, "directory", None)]
        if isinstance(action, Call):
            named += re.findall(r"\{dir:([^{}]+)\}", action.path)
        for name in named:
            if isinstance(name, str) and name.rstrip("/") not in names:
                names.append(name.rstrip("/"))
    return names


@dataclass(frozen=True)
class Scenario:
    """A named scenario: scripts (name → turns), actions, and event-order constraints."""

    name: str
    actions: Sequence[Action]
    scripts: Mapping[str, Sequence[Turn]] = field(default_factory=dict)
    constraints: Sequence[Any] = ()
    auto_compaction: bool = False
    """Run on a real server with auto-compaction on (``OPENCODE_DISABLE_AUTOCOMPACT=0``,
    ``compaction.auto``), not the shared one; see :func:`auto_compaction_server_options`."""
    background_subagents: bool = False
    """Run on a real server with background subagents on (:data:`BACKGROUND_SUBAGENTS_ENV`),
    and on a ``FakeOpenCodeServer(background_subagents=True)``."""
    commands: bool = False
    """Run on a real server whose configuration has :data:`COMMANDS` (the fake gets them
    too), not the shared one; see :func:`command_server_options`."""
    compared_runs: Sequence[str] = ()
    """Sessions (aliases) whose whole event stream is compared between the targets, not
    only constrained: its :func:`~.compare.milestones` (the order of user and assistant
    messages, statuses, parts and idles, repeats collapsed) must be equal."""

    def __post_init__(self) -> None:
        for name, turns in self.scripts.items():
            for index, turn in enumerate(turns):
                if not isinstance(turn, Overflows):
                    continue
                if not self.auto_compaction:
                    raise ValueError(f"{self.name}: Overflows needs auto_compaction=True")
                if list(turns[index + 1 :]) != [Say(CONTINUATION_TEXT)]:
                    raise ValueError(
                        f"{self.name}: script {name!r} must end Overflows(...), "
                        f"Say({CONTINUATION_TEXT!r}) (the real continuation has no script)"
                    )
        for name, turns in self.scripts.items():
            if not turns or not isinstance(turns[-1], ENDS_A_RUN):
                raise ValueError(
                    f"{self.name}: script {name!r} must end with Say, Hangs or Fails "
                    "(after a tool call the real model is called again)"
                )
            for turn in turns:
                calls = turn.tasks if isinstance(turn, CallTasks) else (turn,)
                for call in calls:
                    if isinstance(call, CallTask) and call.child not in self.scripts:
                        raise ValueError(f"{self.name}: unknown child script {call.child!r}")


BACKGROUND_SUBAGENTS_ENV = {"OPENCODE_EXPERIMENTAL_BACKGROUND_SUBAGENTS": "true"}
"""The environment that turns OpenCode's background subagents on (1.18.34: experimental)."""


def auto_compaction_server_options() -> dict[str, Any]:
    """``RealOpenCodeServer`` keyword arguments for :attr:`Scenario.auto_compaction`."""
    return {
        "extra_env": {"OPENCODE_DISABLE_AUTOCOMPACT": "0"},
        "config_overrides": {"compaction": {"auto": True}},
    }


def command_server_options() -> dict[str, Any]:
    """``RealOpenCodeServer`` keyword arguments for :attr:`Scenario.commands`."""
    return {"config_overrides": {"command": {k: dict(v) for k, v in COMMANDS.items()}}}


# --------------------------------------------------------------------------- translation


def bash_input(turn: CallBash) -> dict[str, Any]:
    """The ``bash`` tool's arguments, identical on both targets."""
    return {"command": turn.command, "description": turn.description}


def task_prompt(description: str, script_name: str) -> str:
    """The child's prompt, as :func:`adapter.testing.model.task_call` writes it."""
    return f"Subtask: {description}. {scripted.script_marker(script_name)}"


def error_body(turn: Fails) -> dict[str, Any]:
    """The body of the model's error answer (OpenAI's error format)."""
    return {"error": {"message": turn.message, "type": turn.type, "code": None}}


def fake_task(turn: CallTask, names: Mapping[str, str], *, after: str | None = None) -> fake.Task:
    """The fake's ``task`` call of ``turn``; a background one plays ``after`` on its result."""
    child = names[turn.child]
    prompt = task_prompt(turn.description, child)
    if turn.background:
        return fake.Task(
            turn.description, child, prompt=prompt, background=True, result_script=after
        )
    return fake.Task(turn.description, child, prompt=prompt)


def fake_scripts(
    name: str, turns: Sequence[Turn], names: Mapping[str, str]
) -> dict[str, list[fake.Step]]:
    """The fake's scripts for the script ``name`` (a run name) of ``turns``.

    The real model answers a parent's run on a background child's result with the next
    turns of the same conversation; the fake runs a script per run. So the turns are
    cut after each answer (:data:`ENDS_A_RUN`) that follows a background ``task`` call:
    the first piece is ``name``, the Nth later one ``name~N``, which the Nth background
    call of the script names as its ``result_script`` (children end in launch order).
    """
    pieces: list[list[Turn]] = [[]]
    backgrounds = 0
    for turn in turns:
        pieces[-1].append(turn)
        if isinstance(turn, CallTask) and turn.background:
            backgrounds += 1
        if isinstance(turn, ENDS_A_RUN) and len(pieces) <= backgrounds:
            pieces.append([])
    scripts: dict[str, list[fake.Step]] = {}
    launched = 0
    for index, piece in enumerate(piece for piece in pieces if piece):
        scripts[name if index == 0 else f"{name}~{index}"] = fake_steps(
            piece, names, script=name, launched=launched
        )
        launched += sum(1 for turn in piece if isinstance(turn, CallTask) and turn.background)
    return scripts


def fake_steps(
    turns: Sequence[Turn],
    names: Mapping[str, str],
    *,
    script: str | None = None,
    launched: int = 0,
) -> list[fake.Step]:
    """The fake's steps for ``turns``; ``names`` maps local script names to run names.
    ``script`` is the run name of the script they belong to and ``launched`` how many
    background calls came before them in it (see :func:`fake_scripts`)."""
    steps: list[fake.Step] = []
    backgrounds = launched
    for turn in turns:
        if isinstance(turn, Say):
            steps.append(fake.Text(turn.text))
        elif isinstance(turn, CallBash):
            tool = fake.Tool("bash", bash_input(turn), output=turn.stdout, duration=turn.seconds)
            if turn.needs_permission:
                first_word = turn.command.split()[0]
                steps.append(
                    fake.Permission(
                        "bash",
                        patterns=(turn.command,),
                        always=(f"{first_word} *",),
                        metadata={"command": turn.command},
                        tool=tool,
                    )
                )
            else:
                steps.append(tool)
        elif isinstance(turn, CallTask):
            after: str | None = None
            if turn.background:
                backgrounds += 1
                after = f"{script}~{backgrounds}" if script is not None else None
            steps.append(fake_task(turn, names, after=after))
        elif isinstance(turn, CallTasks):
            steps.append(fake.Tasks([fake_task(call, names) for call in turn.tasks]))
        elif isinstance(turn, CallTodo):
            steps.append(fake.Tool("todowrite", {"todos": [dict(t) for t in turn.todos]}))
        elif isinstance(turn, CallQuestion):
            steps.append(fake.Question([dict(q) for q in turn.questions]))
        elif isinstance(turn, Hangs):
            steps.append(fake.Hang())
        elif isinstance(turn, Overflows):
            steps += [fake.Text(turn.text), fake.Compact()]
        else:
            body = json.dumps(error_body(turn))
            steps.append(
                fake.Fail(
                    "APIError",
                    turn.message,
                    data={"statusCode": turn.status, "responseBody": body},
                    retries=5 if turn.retried else 0,
                    retry_delay=FAKE_RETRY_DELAY,
                )
            )
    return steps


def model_steps(turns: Sequence[Turn], names: Mapping[str, str]) -> list[scripted.Step]:
    """The scripted model's steps for ``turns`` (one step per model request)."""
    steps: list[scripted.Step] = []
    for turn in turns:
        if isinstance(turn, Say):
            steps.append(scripted.Text(turn.text))
        elif isinstance(turn, CallBash):
            steps.append(scripted.ToolCalls([scripted.ToolCall("bash", bash_input(turn))]))
        elif isinstance(turn, CallTask | CallTasks):
            calls = turn.tasks if isinstance(turn, CallTasks) else (turn,)
            tasks = [
                scripted.task_call(call.description, names[call.child], background=call.background)
                for call in calls
            ]
            steps.append(scripted.ToolCalls(tasks))
        elif isinstance(turn, CallTodo):
            todos = {"todos": [dict(t) for t in turn.todos]}
            steps.append(scripted.ToolCalls([scripted.ToolCall("todowrite", todos)]))
        elif isinstance(turn, CallQuestion):
            call = scripted.ToolCall("question", {"questions": [dict(q) for q in turn.questions]})
            steps.append(scripted.ToolCalls([call]))
        elif isinstance(turn, Hangs):
            steps.append(scripted.Hang())
        elif isinstance(turn, Overflows):
            steps.append(scripted.Text(turn.text, prompt_tokens=OVERFLOW_TOKENS))
        else:
            steps.append(scripted.HttpError(turn.status, error_body(turn)))
    return steps
