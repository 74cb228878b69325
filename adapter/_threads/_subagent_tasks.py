"""Subagents as tasks: one row per child session of a thread's tree, from start to end.

Why it exists: ``child.started`` says a subagent joined, but a host that draws a row
per subagent must also know what it is doing and, above all, when and how it ended:
after a Stop a row left "running" is a bug the user sees. So every child of the tree
(spawned by a ``task`` call, or created through the API) gets ``task.started``, throttled
``task.updated`` and **exactly one** ``task.completed``, however it ends: on its own,
by a Stop of the turn, by ``stop_subagent``, by the thread's end or the server's exit.
One module keeps that promise, so every kind of child (background subagents included)
reuses it.

What ends a task (measured on OpenCode 1.18.34, two parallel ``task`` children, one
aborted: ``tests/fixtures/events-parallel-task-abort-1.18.34.jsonl``):

* a child of a ``task`` call ends when that call ends: the parent's ``task`` part turns
  ``completed`` (its output wraps the child's answer in ``<task_result>``) or ``error``
  (``"Task cancelled"`` when the child alone was aborted, ``"Tool execution aborted"``
  when its parent was: both ``stopped``; any other error, such as ``"Subagent failed
  ..."``, is ``failed``). A call that completes after its child's ``MessageAbortedError``
  is ``stopped`` too (OpenCode 1.15.13 completes an aborted child's call with its partial
  answer). The child's own ``session.idle`` comes a moment earlier and carries no result,
  so it is not the signal;
* a child created through the API has no call, and a background child's call completes
  at once (``metadata.background``, measured): both end at their first ``session.idle``
  after they ran (``stopped`` after a ``MessageAbortedError``, ``failed`` after another
  ``session.error``, else ``completed`` with its last text);
* a stop ends every task it stopped (the caller names them, before the turn's end);
* the end of a turn ends the ``task``-call children of that turn still open (their call
  cannot outlive the root's run: a lost event must not leave a row running), and the
  thread's end ends every task still open, ``stopped``. Both come before the turn's or
  the thread's own end event, so a host closes its rows first. A thread that is detached
  (the adapter closed with ``detach``) leaves its subagents working on the server: their
  tasks end ``stopped`` for this adapter, with an ``error`` that says they were detached.

Which call spawned a child: OpenCode announces the child's ``session.created`` around
the call's ``pending`` part (no input yet) and before its ``running`` part, whose
``metadata.sessionId`` names the child (same millisecond, measured on 1.18.34). Holding
a child only while a call of its parent was ``pending`` failed once, in a full real-suite
run (a parallel sibling announced without its call), so the hold does not depend on that.
So a child whose title has the form ``"<description> (@<agent> subagent)"`` (what OpenCode
titles a ``task`` child) is held until a call names it, or a call of its parent without
``metadata.sessionId`` has that description and agent, and ``task.started`` carries the
call's ``item_id``, ``description`` and ``agent``. A held child ends with its call or a stop,
not at its own idle; one that no call named by the end of its turn is announced then, as an
API child.

A subagent's provider retries (its ``session.status`` ``retry``, what the root's
``turn.retrying`` reports for the root) are a ``task.updated`` each, at once and not
throttled, once per attempt: ``text`` ``"retrying (attempt N): <provider message>"``,
``raw`` the native status (``next``, the next attempt's time, is in it).

Nothing here awaits; ``task.updated`` is sent by a timer of the event loop.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypedDict

from .._base._ids import is_session_id
from .._base._unicode import well_formed
from .._client._native import (
    MessageUpdated,
    NativeEvent,
    PartDelta,
    PartUpdated,
    SessionErrored,
    SessionIdle,
    SessionStatusChanged,
)
from .._client._responses import Part
from .._types._events import (
    Event,
    RetryStatus,
    TaskCompleted,
    TaskStarted,
    TaskStatus,
    TaskUpdated,
)
from .._types._usage import SessionUsage

__all__ = ["DETACHED", "RESULT_LIMIT", "SNIPPET_LIMIT", "UPDATE_INTERVAL", "SubagentTasks"]

#: The ``error`` of a task whose thread was detached (it still runs on the server).
DETACHED = "detached: the subagent goes on on the server, no longer followed here"

#: Characters of a task's result or error that are kept.
RESULT_LIMIT = 4096
#: Characters of what a running task does, on ``task.updated``.
SNIPPET_LIMIT = 200
#: Seconds between two ``task.updated`` of one task, at the least.
UPDATE_INTERVAL = 0.5
#: ``task`` calls whose child is remembered (a hostile stream stays bounded).
_MAX_CALLS = 10_000
#: The clock of the throttle (a test sets its own).
_now = time.monotonic
#: Assistant messages of one task whose usage is kept (a hostile stream stays bounded).
_MAX_MESSAGES = 1000

_SUBAGENT_TITLE = re.compile(r"(?P<description>.*) \(@(?P<agent>[^\s()]+) subagent\)", re.S)
#: The child's answer in its call's output: ``<task id=… state=…>`` around it on 1.18.34, a
#: ``task_id: …`` line before it on 1.14.48 (measured).
_TASK_RESULT = re.compile(r"<task_result>(?P<result>.*)</task_result>", re.S)
#: A ``task`` call's error that means its child was stopped, not that it failed.
_STOPPED_ERRORS = ("Task cancelled", "Tool execution aborted")


def bounded(text: str | None, limit: int = RESULT_LIMIT) -> str | None:
    """``text`` cut to ``limit`` characters (well-formed, a marker says how much went)."""
    if text is None or len(text) <= limit:
        return text
    return well_formed(text[:limit]) + f"… [{len(text) - limit} more characters]"


def _tail(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SNIPPET_LIMIT else "…" + well_formed(text[-SNIPPET_LIMIT + 1 :])


@dataclass(frozen=True, slots=True)
class _Call:
    """What a ``task`` call says of the child it names."""

    item_id: str
    description: str | None
    agent: str | None
    background: bool


@dataclass(eq=False, slots=True)
class _Task:
    session_id: str
    parent_id: str
    turn_id: str | None
    title: str | None
    call: _Call | None = None
    announced: bool = False
    held: bool = False  # waiting for the call that spawned it to name it
    ran: bool = False
    aborted: bool = False
    error: str | None = None
    answer: str | None = None  # the latest text part (an API child's result)
    text_part: str | None = None
    text_tail: str = ""
    doing: tuple[str | None, str | None] = (None, None)
    shown: tuple[str | None, str | None] = (None, None)
    shown_at: float = -float("inf")
    timer: asyncio.TimerHandle | None = None
    #: Its assistant messages (their latest usage), by id.
    spent: dict[str, SessionUsage] = field(default_factory=dict)
    #: The provider retry under way (its last ``session.status`` ``retry``), if any.
    retry: RetryStatus | None = None

    def usage(self) -> SessionUsage:
        return sum(self.spent.values(), SessionUsage())


class _TaskEventIds(TypedDict):
    """What every ``task.*`` event of one task names: its thread, turn and session."""

    thread_id: str
    turn_id: str | None
    session_id: str


class SubagentTasks:
    """The tasks of one thread's tree: open ones by session, and which have ended."""

    def __init__(self, thread_id: str, emit: Callable[[Event], None]) -> None:
        self._thread_id = thread_id
        self._emit = emit
        self._open: dict[str, _Task] = {}
        self._ended: set[str] = set()
        #: Children named by a ``task`` call (their call, for when the child joins).
        self._named: dict[str, _Call] = {}
        #: The child of each ``task`` call that named (or matched) one, by ``item_id``.
        self._by_call: dict[str, str] = {}

    # -- reading ----------------------------------------------------------------------

    @property
    def running(self) -> tuple[str, ...]:
        """Sessions whose task has started (or is held) and not ended."""
        return tuple(self._open)

    def has_task(self, session_id: str) -> bool:
        """Whether ``session_id`` is (or was) a task of this thread."""
        return session_id in self._open or session_id in self._ended

    # -- a child joins ------------------------------------------------------------------

    def joined(
        self, session_id: str, parent_id: str, turn_id: str | None, title: str | None
    ) -> None:
        """A child joined the tree (``child.started`` was just sent)."""
        if self.has_task(session_id):
            return
        task = _Task(session_id, parent_id, turn_id, title, call=self._named.pop(session_id, None))
        self._open[session_id] = task
        if task.call is None and _subagent_title(title):
            task.held = True  # its call names it in a moment (module docstring)
            return
        self._announce(task)

    def call_seen(self, part: Part) -> str | None:
        """A ``task`` tool part of the tree: remember the call, name its child. Returns
        the child it names, if any (the caller adopts it, then calls :meth:`call_ended`)."""
        state = part.state
        if state is None:
            return None
        item_id = part.call_id or part.id
        description = state.input.get("description")
        agent = state.input.get("subagent_type")
        call = _Call(
            item_id,
            description if isinstance(description, str) else None,
            agent if isinstance(agent, str) else None,
            state.input.get("background") is True,
        )
        child = state.metadata.get("sessionId")
        if not isinstance(child, str) or not is_session_id(child):
            child = self._by_call.get(item_id) or self._held_for(part.session_id, call)
            if child is None:
                return None
        if len(self._by_call) < _MAX_CALLS:
            self._by_call[item_id] = child
        task = self._open.get(child)
        if task is None:
            if child not in self._ended:
                self._named[child] = call
        elif not task.announced:
            task.call = call
            self._announce(task)
        return child

    def _held_for(self, parent_id: str, call: _Call) -> str | None:
        """The oldest held child of ``parent_id`` whose title is this call's description
        and agent: a call that does not name its child (no ``metadata.sessionId``) yet."""
        if call.description is None or call.agent is None:
            return None
        for task in self._open.values():
            if (
                task.held
                and task.parent_id == parent_id
                and _subagent_title(task.title) == (call.description, call.agent)
            ):
                return task.session_id
        return None

    def call_ended(self, part: Part, child: str) -> None:
        """The ``task`` part that named ``child``: its end is the child's end."""
        state = part.state
        task = self._open.get(child)
        if state is None or task is None or state.status not in ("completed", "error"):
            return
        if state.status == "completed" and state.metadata.get("background") is True:
            return  # started in the background: the child works on, and ends at its idle
        if state.status == "completed":
            output = state.output or ""
            match = _TASK_RESULT.search(output)
            result = match["result"].removeprefix("\n").removesuffix("\n") if match else output
            # OpenCode 1.15.13 completes the call of an aborted child with what it had
            # written (measured): the child's MessageAbortedError says it was stopped.
            status: TaskStatus = "stopped" if task.aborted else "completed"
            self._end(task, status, result=result)
            return
        error = state.error or "the task failed"
        stopped = state.metadata.get("interrupted") is True or error.startswith(_STOPPED_ERRORS)
        self._end(task, "stopped" if stopped else "failed", error=error)

    # -- what a child does ----------------------------------------------------------------

    def observe(self, event: NativeEvent) -> None:
        """An event of a session of the tree other than the root."""
        task = self._open.get(event.session_id or "")
        if task is None:
            return
        if type(event) is PartUpdated:
            if event.part.message_id in task.spent:  # an answer's part, not its prompt's
                self._part(task, event.part)
        elif type(event) is PartDelta:
            if event.field == "text" and event.message_id in task.spent:
                if event.part_id != task.text_part:
                    task.text_part, task.text_tail = event.part_id, ""
                task.text_tail = (task.text_tail + event.delta)[-4 * SNIPPET_LIMIT :]
                self._doing(task, None, _tail(task.text_tail))
        elif type(event) is MessageUpdated:
            if event.role == "assistant" and (
                event.message_id in task.spent or len(task.spent) < _MAX_MESSAGES
            ):
                task.spent[event.message_id] = SessionUsage.of(event.usage)
        elif type(event) is SessionStatusChanged:
            if event.status.is_busy:
                task.ran = True
            status = event.status
            if status.type == "retry":
                retry = RetryStatus(
                    status.attempt or 0, status.message or "", _seconds(status.next)
                )
                if retry != task.retry:
                    task.retry = retry
                    self._retrying(task, retry, event.raw)
            else:
                task.retry = None  # the next attempt began (busy), or the run ended
        elif type(event) is SessionErrored:
            error = event.error
            if error is not None and error.name == "MessageAbortedError":
                task.aborted = True
            else:
                task.error = (error.message if error else None) or "the session failed"
        elif type(event) is SessionIdle and _ends_at_idle(task):
            if task.aborted:
                self._end(task, "stopped")
            elif task.error is not None:
                self._end(task, "failed", error=task.error)
            else:
                self._end(task, "completed", result=task.answer)

    def _part(self, task: _Task, part: Part) -> None:
        if part.type == "text" and part.text is not None:
            if part.raw.get("synthetic") is True:
                return
            task.answer = bounded(part.text)
            task.text_part, task.text_tail = part.id, part.text[-4 * SNIPPET_LIMIT :]
            if part.text:
                self._doing(task, None, _tail(task.text_tail))
        elif part.type == "tool" and part.state is not None and part.tool is not None:
            state = part.state
            if state.status in ("pending", "running"):
                what = state.title or _first_text(
                    state.input, ("description", "command", "filePath", "pattern")
                )
                self._doing(task, part.tool, _tail(what) if what else None)

    def _doing(self, task: _Task, tool: str | None, text: str | None) -> None:
        """What the task does changed: ``task.updated`` now, or at the end of the
        interval (reading what it does then), and only if it differs from the last."""
        task.doing = (tool, text)
        if task.timer is not None or not task.announced:
            return
        wait = task.shown_at + UPDATE_INTERVAL - _now()
        if wait <= 0:
            self._show(task)
        else:
            task.timer = asyncio.get_running_loop().call_later(wait, self._show, task)

    def _retrying(self, task: _Task, retry: RetryStatus, raw: Mapping[str, object]) -> None:
        """A new provider retry: told at once (each attempt), as what the task does."""
        text = _tail(f"retrying (attempt {retry.attempt}): {retry.message}")
        task.doing = (None, text)
        if not task.announced:
            return  # told with its task.started (_announce shows what it does)
        if task.timer is not None:
            task.timer.cancel()
        self._show(task, retry=retry, raw=raw)

    def _show(
        self,
        task: _Task,
        *,
        retry: RetryStatus | None = None,
        raw: Mapping[str, object] | None = None,
    ) -> None:
        task.timer = None
        if self._open.get(task.session_id) is not task or task.doing == task.shown:
            return
        task.shown, task.shown_at = task.doing, _now()
        tool, text = task.doing
        self._emit(
            TaskUpdated(
                **self._ids_of(task),
                tool=tool,
                text=text,
                retry=retry,
                raw=raw,
            )
        )

    # -- ends -----------------------------------------------------------------------------

    def stopped(
        self, session_ids: Iterable[str], usage: Mapping[str, SessionUsage] | None = None
    ) -> None:
        """A stop ended these sessions: their open tasks end ``stopped`` (``usage``: what
        the stop read back from the server, per session, when it did)."""
        for sid in session_ids:
            task = self._open.get(sid)
            if task is not None:
                self._end(task, "stopped", usage=(usage or {}).get(sid))

    def turn_ended(self, turn_id: str, status: TaskStatus) -> None:
        """The turn ended: the ``task``-call children it spawned that are still open end
        with it (a background call outlives its turn and is left open); a child no call
        named is announced as an API child (its run is over: no call of it can name one)."""
        for task in list(self._open.values()):
            if task.turn_id != turn_id:
                continue
            if task.held:
                self._announce(task)
            elif task.call is not None and not task.call.background:
                self._end(task, status)

    def thread_ended(self) -> None:
        """The thread ended (``stop_session``, the adapter's close, the server's exit)."""
        for task in list(self._open.values()):
            self._end(task, "stopped")
        self._named.clear()
        self._by_call.clear()

    def detached(self) -> None:
        """The thread was detached: its subagents go on on the server, but this adapter
        follows them no more; every open task ends (``stopped``) saying so."""
        for task in list(self._open.values()):
            self._end(task, "stopped", error=DETACHED)

    def _ids_of(self, task: _Task) -> _TaskEventIds:
        return {
            "thread_id": self._thread_id,
            "turn_id": task.turn_id,
            "session_id": task.session_id,
        }

    def _announce(self, task: _Task) -> None:
        task.held = False
        if task.announced:
            return
        task.announced = True
        call = task.call
        if call is not None:
            description, agent = call.description, call.agent
        else:
            parsed = _subagent_title(task.title)
            description = parsed[0] if parsed else task.title
            agent = parsed[1] if parsed else None
        self._emit(
            TaskStarted(
                **self._ids_of(task),
                parent_session_id=task.parent_id,
                item_id=call.item_id if call is not None else None,
                description=description,
                agent=agent,
            )
        )
        if task.doing != task.shown:
            self._doing(task, *task.doing)

    def _end(
        self,
        task: _Task,
        status: TaskStatus,
        *,
        result: str | None = None,
        error: str | None = None,
        usage: SessionUsage | None = None,
    ) -> None:
        self._announce(task)  # a task.completed always follows its task.started
        if task.timer is not None:
            task.timer.cancel()
            task.timer = None
        del self._open[task.session_id]
        self._ended.add(task.session_id)
        self._emit(
            TaskCompleted(
                **self._ids_of(task),
                status=status,
                result=bounded(result),
                error=bounded(error),
                usage=usage if usage is not None else task.usage(),
            )
        )


def _seconds(epoch: float | None) -> float | None:
    """OpenCode's ``next`` is epoch milliseconds; :class:`RetryStatus` holds seconds."""
    return epoch / 1000 if epoch is not None and epoch > 1e11 else epoch


def _ends_at_idle(task: _Task) -> bool:
    """Whether ``task`` ends at its own idle: a child no call waits for (one created
    through the API, or started in the background) once it ran."""
    call_waits = task.call is not None and not task.call.background
    return task.ran and not task.held and not call_waits


def _subagent_title(title: str | None) -> tuple[str, str] | None:
    """``("<description>", "<agent>")`` of a ``"<description> (@<agent> subagent)"`` title."""
    match = _SUBAGENT_TITLE.fullmatch(title) if title else None
    return (match["description"], match["agent"]) if match else None


def _first_text(values: Mapping[str, object], keys: Iterable[str]) -> str | None:
    for key in keys:
        value = values.get(key)
        if isinstance(value, str) and value:
            return value
    return None
