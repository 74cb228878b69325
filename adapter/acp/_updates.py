"""Canonical events of one thread -> ACP ``session/update`` payloads.

ACP has no notion of a session tree: a client shows one flat list of tool calls
and one answer. So every tool call of every session of the tree becomes an ACP
``tool_call`` (a subagent's are titled after the subagent, ``explore > bash …``),
and each ``task`` call carries its subagent's progress as its content: one line
per call of the child, nested to any depth (a grandchild's calls indented under
the child's ``task`` line), then the child's short answer once the task ended.
The links come from ``child.started`` (the child's parent session) and the task
call that spawned it (OpenCode's ``metadata.sessionId`` on the running task part,
else the task whose ``description`` starts the child's title, else the parent's
newest unlinked task call).

Only the root's answer and reasoning are streamed as ``agent_message_chunk`` /
``agent_thought_chunk``: the adapter emits ``content.delta`` for the root only,
and a subagent's text is its task's result, not the answer.

Nothing here does I/O: :class:`UpdateMapper` turns one event into zero or more
updates, and the agent sends them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from acp.helpers import (
    plan_entry,
    start_tool_call,
    text_block,
    tool_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_plan,
    update_tool_call,
    update_user_message_text,
)
from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    AvailableCommandsUpdate,
    ConfigOptionUpdate,
    ContentToolCallContent,
    CurrentModeUpdate,
    PlanEntry,
    PlanEntryPriority,
    PlanEntryStatus,
    ToolCallProgress,
    ToolCallStart,
    ToolCallStatus,
    ToolKind,
    UsageUpdate,
    UserMessageChunk,
)
from acp.schema import Cost as AcpCost

from adapter import (
    AnyEvent,
    ChildStarted,
    ContentDelta,
    ItemCompleted,
    ItemEvent,
    ItemStarted,
    ItemUpdated,
    Message,
    PartialResult,
    TaskStarted,
    TurnUsageUpdated,
)

__all__ = ["SessionUpdate", "UpdateMapper", "history_updates", "raw_text", "tool_kind"]

SessionUpdate: TypeAlias = (
    AgentMessageChunk
    | AgentThoughtChunk
    | AgentPlanUpdate
    | ToolCallStart
    | ToolCallProgress
    | UserMessageChunk
    | UsageUpdate
    | AvailableCommandsUpdate
    | CurrentModeUpdate
    | ConfigOptionUpdate
)

_KINDS: dict[str, ToolKind] = {
    "bash": "execute",
    "shell": "execute",
    "edit": "edit",
    "write": "edit",
    "patch": "edit",
    "multiedit": "edit",
    "apply_patch": "edit",
    "read": "read",
    "grep": "search",
    "glob": "search",
    "list": "search",
    "ls": "search",
    "codesearch": "search",
    "websearch": "search",
    "webfetch": "fetch",
    "task": "think",
    "todowrite": "think",
    "todoread": "think",
}

_STATUSES: dict[str, ToolCallStatus] = {
    "pending": "pending",
    "running": "in_progress",
    "completed": "completed",
    "error": "failed",
}

#: How much of a subagent's answer its task call shows (the raw output has it all).
SUMMARY_CHARS = 600
_INPUT_KEYS = ("command", "filePath", "path", "pattern", "url", "description", "query")
_TASK_RESULT = re.compile(r"<task_result>\s*(.*?)\s*</task_result>", re.S)


def tool_kind(tool: str) -> ToolKind:
    """The ACP kind of an OpenCode tool: clients pick icons and treatment by it."""
    return _KINDS.get(tool, "other")


def _one_line(text: str, limit: int = 80) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _preview(tool: str, tool_input: Mapping[str, Any], title: str | None = None) -> str:
    """A call's title: the tool and its main argument. OpenCode's own title is only a
    fallback: it changes as the call runs (a ``read`` ends titled with the bare path)."""
    for key in _INPUT_KEYS:
        value = tool_input.get(key)
        if isinstance(value, str) and value:
            return f"{tool} {_one_line(value)}"
    return f"{tool} {_one_line(title)}" if title else tool


def task_summary(output: str | None) -> str:
    """The subagent's answer inside a task call's output (``<task_result>``), shortened."""
    if not output:
        return ""
    match = _TASK_RESULT.search(output)
    text = (match.group(1) if match else output).strip()
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"


_PLAN_STATUSES: dict[str, PlanEntryStatus] = {
    "pending": "pending",
    "in_progress": "in_progress",
    "completed": "completed",
}
_PRIORITIES: dict[str, PlanEntryPriority] = {"high": "high", "medium": "medium", "low": "low"}


def plan_from_todos(todos: object) -> AgentPlanUpdate | None:
    """The root's todo list (``todowrite``'s input) as an ACP ``plan``: the whole list, as
    the protocol asks; cancelled todos are left out (they will not be done)."""
    if not isinstance(todos, list):
        return None
    entries: list[PlanEntry] = []
    for todo in todos:
        if not isinstance(todo, Mapping) or not isinstance(todo.get("content"), str):
            continue
        status = _PLAN_STATUSES.get(str(todo.get("status")))
        if status is None:
            continue
        priority = _PRIORITIES.get(str(todo.get("priority")), "medium")
        entries.append(plan_entry(todo["content"], priority=priority, status=status))
    return update_plan(entries)


def usage_update(event: TurnUsageUpdated) -> UsageUpdate | None:
    """``turn.usage`` as ACP's ``usage_update``: the root's context used and its size (the
    context meter), and the cost of the whole tree, subagents included (``opencode acp``
    sends the root's only). ``None`` while the meter has no figure (no root step ended, or
    the model's context size is unknown): ACP's ``size`` is required."""
    usage = event.usage
    if usage is None or usage.context_tokens is None or not usage.context_limit:
        return None
    return UsageUpdate(
        session_update="usage_update",
        used=max(0, usage.context_tokens),
        size=usage.context_limit,
        cost=AcpCost(amount=usage.cost, currency="USD"),
    )


def raw_text(raw: object, *path: str) -> str | None:
    """The non-empty string at ``path`` in a native event's JSON (``None`` when a step
    of the path is absent or not an object, or the value is not such a string)."""
    value = raw
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value if isinstance(value, str) and value else None


@dataclass(slots=True)
class _Call:
    """One tool call as the client was told of it."""

    call_id: str
    session_id: str
    tool: str
    title: str
    status: ToolCallStatus
    tool_input: Mapping[str, Any]
    output: str | None = None
    child_session: str | None = None  # a task call's subagent
    terminal: bool = False


@dataclass(slots=True)
class UpdateMapper:
    """The translation state of one ACP session (one adapter thread)."""

    root_session_id: str
    _calls: dict[str, _Call] = field(default_factory=dict)
    _by_session: dict[str, list[str]] = field(default_factory=dict)
    _parents: dict[str, str] = field(default_factory=dict)
    _titles: dict[str, str] = field(default_factory=dict)
    _spawner: dict[str, str] = field(default_factory=dict)  # child session -> task call id
    _task_children: dict[str, str] = field(
        default_factory=dict
    )  # task call id -> child (task.started)
    #: The root's answer text sent in the current turn (to send only what a stop kept).
    sent_text: str = ""

    def new_turn(self) -> None:
        self.sent_text = ""

    def call_id(self, session_id: str, item_id: str) -> str:
        """The ACP tool call id of an item: the item id for the root, else prefixed by its
        session (call ids are only unique within a session)."""
        return item_id if session_id == self.root_session_id else f"{session_id}/{item_id}"

    def known_call(self, call_id: str) -> bool:
        return call_id in self._calls

    def note_task(self, event: TaskStarted) -> None:
        """Remember which subagent a ``task`` call spawned (``task.started`` says it for
        sure), for a client that names the subagent by the call it was shown."""
        if event.item_id is not None:
            self._task_children[self.call_id(event.parent_session_id, event.item_id)] = (
                event.session_id
            )

    def task_child(self, call_id: str) -> str | None:
        """The subagent session the ``task`` call ``call_id`` spawned, if known."""
        child = self._task_children.get(call_id)
        if child is not None:
            return child
        call = self._calls.get(call_id)
        return call.child_session if call is not None and call.tool == "task" else None

    def label(self, session_id: str) -> str:
        """The subagent path of a session, for titles (``""`` for the root)."""
        names: list[str] = []
        current = session_id
        seen: set[str] = set()
        while current != self.root_session_id and current not in seen:
            seen.add(current)
            spawner = self._calls.get(self._spawner.get(current, ""))
            desc = spawner.tool_input.get("description") if spawner else None
            names.append(
                desc if isinstance(desc, str) and desc else self._titles.get(current, "subagent")
            )
            parent = self._parents.get(current)
            if parent is None:
                break
            current = parent
        return " > ".join(reversed([_one_line(n, 40) for n in names]))

    def title_for(
        self, session_id: str, tool: str, tool_input: Mapping[str, Any], title: str | None
    ) -> str:
        base = _preview(tool, tool_input, title)
        label = self.label(session_id)
        return f"{label} > {base}" if label else base

    # -- events ---------------------------------------------------------------------

    def updates(self, event: AnyEvent) -> list[SessionUpdate]:
        if isinstance(event, ContentDelta):
            if event.session_id != self.root_session_id or not event.delta:
                return []
            if event.stream == "reasoning_text":
                return [update_agent_thought_text(event.delta)]
            self.sent_text += event.delta
            return [update_agent_message_text(event.delta)]
        if isinstance(event, ChildStarted):
            return self._child(event)
        if isinstance(event, TurnUsageUpdated):
            usage = usage_update(event)
            return [usage] if usage is not None else []
        if isinstance(event, ItemStarted | ItemUpdated | ItemCompleted):
            return self._item(event)
        return []

    def _child(self, event: ChildStarted) -> list[SessionUpdate]:
        self._parents[event.session_id] = event.parent_id
        if event.title:
            self._titles[event.session_id] = event.title
        if event.session_id in self._spawner:
            return []
        spawner = self._find_spawner(event.parent_id, event.title)
        if spawner is None:
            return []
        return self._link(spawner, event.session_id)

    def _find_spawner(self, parent: str, title: str | None) -> _Call | None:
        tasks = [
            self._calls[c]
            for c in self._by_session.get(parent, [])
            if self._calls[c].tool == "task" and self._calls[c].child_session is None
        ]
        for call in tasks:
            desc = call.tool_input.get("description")
            if title and isinstance(desc, str) and desc and title.startswith(desc):
                return call
        running = [c for c in tasks if not c.terminal]
        return running[-1] if running else None

    def _link(self, call: _Call, child: str) -> list[SessionUpdate]:
        call.child_session = child
        self._spawner[child] = call.call_id
        return self._refresh_ancestors(child)

    def _relink(self, call: _Call, child: str | None) -> None:
        """OpenCode's ``metadata.sessionId`` names the task's child for sure: it overrides
        a link guessed from titles (parallel tasks of one description)."""
        if child is None or call.child_session == child:
            return
        if call.child_session is not None:
            self._spawner.pop(call.child_session, None)
        other = self._calls.get(self._spawner.get(child, ""))
        if other is not None:
            other.child_session = None
        self._spawner[child] = call.call_id
        call.child_session = child

    def _item(self, event: ItemEvent) -> list[SessionUpdate]:
        sid = event.session_id
        call_id = self.call_id(sid, event.item_id)
        status = _STATUSES.get(event.status, "in_progress")
        call = self._calls.get(call_id)
        out: list[SessionUpdate] = []
        tool_input = dict(event.input)
        if call is None:
            call = _Call(
                call_id,
                sid,
                event.tool,
                self.title_for(sid, event.tool, tool_input, event.title),
                status,
                tool_input,
            )
            self._calls[call_id] = call
            self._by_session.setdefault(sid, []).append(call_id)
            out.append(
                start_tool_call(
                    call_id,
                    call.title,
                    kind=tool_kind(event.tool),
                    status=status,
                    raw_input=tool_input or None,
                )
            )
        else:
            call.status = status
            call.tool_input = tool_input or call.tool_input
            call.title = self.title_for(sid, event.tool, call.tool_input, event.title)
        if isinstance(event, ItemCompleted):
            call.terminal = True
            call.output = event.detail
        if event.tool == "task":
            # OpenCode's ``metadata.sessionId`` of a running task part: the child it spawned.
            child = raw_text(event.raw, "properties", "part", "state", "metadata", "sessionId")
            self._relink(call, child)
        if out and not isinstance(event, ItemCompleted):
            out.extend(self._refresh_ancestors(sid))
            return out
        out.append(
            update_tool_call(
                call_id,
                title=call.title,
                status=status,
                raw_input=tool_input or None,
                raw_output=event.detail if isinstance(event, ItemCompleted) else None,
                content=self._content(call),
            )
        )
        out.extend(self._refresh_ancestors(sid))
        if (
            event.tool == "todowrite"
            and sid == self.root_session_id
            and isinstance(event, ItemCompleted)
            and status == "completed"
        ):
            plan = plan_from_todos(tool_input.get("todos"))
            if plan is not None:
                out.append(plan)
        return out

    # -- a task call's content: its subagent's progress ---------------------------------

    def _content(self, call: _Call) -> list[ContentToolCallContent] | None:
        if call.tool == "task":
            text = self._task_text(call)
            return [tool_content(text_block(text))] if text else None
        if call.terminal and call.output:
            return [tool_content(text_block(call.output))]
        return None

    def _task_text(self, call: _Call) -> str:
        lines = self._progress_lines(call.child_session, 0, set()) if call.child_session else []
        summary = task_summary(call.output) if call.status == "completed" else (call.output or "")
        if summary:
            lines.append(summary)
        return "\n".join(lines)

    def _progress_lines(self, session: str | None, depth: int, seen: set[str]) -> list[str]:
        if session is None or session in seen:
            return []
        seen.add(session)
        lines: list[str] = []
        for cid in self._by_session.get(session, []):
            call = self._calls[cid]
            base = _preview(call.tool, call.tool_input)
            lines.append(f"{'  ' * depth}- {base} [{call.status}]")
            if call.tool == "task":
                lines.extend(self._progress_lines(call.child_session, depth + 1, seen))
        return lines

    def _refresh_ancestors(self, session: str) -> list[SessionUpdate]:
        """The progress of every task call above ``session`` changed: resend their content."""
        out: list[SessionUpdate] = []
        seen: set[str] = set()
        current = session
        while current != self.root_session_id and current not in seen:
            seen.add(current)
            spawner = self._calls.get(self._spawner.get(current, ""))
            if spawner is None:
                break
            content = self._content(spawner)
            if content:
                out.append(update_tool_call(spawner.call_id, content=content))
            current = spawner.session_id
        return out

    # -- after a stop ---------------------------------------------------------------------

    def after_stop(self, partial: PartialResult) -> list[SessionUpdate]:
        """What the stopped turn produced that the client was not told yet: the calls it
        still shows running end (``failed`` when the stop interrupted them), and the
        answer text the stream had not delivered."""
        out: list[SessionUpdate] = []
        ended = {self.call_id(c.session_id, c.call_id): c for c in partial.tool_calls}
        for call in self._calls.values():
            if call.terminal:
                continue
            result = ended.get(call.call_id)
            call.terminal = True
            call.status = (
                "completed" if result is not None and result.status == "completed" else "failed"
            )
            output = None if result is None else (result.output or result.error)
            call.output = output
            out.append(
                update_tool_call(
                    call.call_id, status=call.status, raw_output=output, content=self._content(call)
                )
            )
        root = partial.sessions.get(partial.root_session_id)
        text = root.text if root is not None else partial.text
        if text.startswith(self.sent_text) and len(text) > len(self.sent_text):
            rest = text[len(self.sent_text) :]
            self.sent_text = text
            out.append(update_agent_message_text(rest))
        return out


def history_updates(messages: Sequence[Message]) -> list[SessionUpdate]:
    """A stored conversation as the updates a client replays on ``session/load``: the
    user's text, the answers, reasoning, and each tool call with how it ended."""
    out: list[SessionUpdate] = []
    for message in messages:
        user = message.info.role == "user"
        for part in message.parts:
            if part.type == "text" and part.text and not part.raw.get("synthetic"):
                out.append(
                    update_user_message_text(part.text)
                    if user
                    else update_agent_message_text(part.text)
                )
            elif part.type == "reasoning" and part.text and not user:
                out.append(update_agent_thought_text(part.text))
            elif part.type == "tool" and part.tool and part.state is not None:
                state = part.state
                output = state.output if state.status == "completed" else state.error
                content = (
                    [
                        tool_content(
                            text_block(task_summary(output) if part.tool == "task" else output)
                        )
                    ]
                    if output
                    else None
                )
                out.append(
                    start_tool_call(
                        part.call_id or part.id,
                        _preview(part.tool, state.input, state.title),
                        kind=tool_kind(part.tool),
                        status=_STATUSES.get(state.status, "failed")
                        if state.status in ("completed", "error")
                        else "failed",
                        raw_input=dict(state.input) or None,
                        raw_output=output,
                        content=content,
                    )
                )
    return out
