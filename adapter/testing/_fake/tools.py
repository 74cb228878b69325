"""The tool steps of a script: tools, ``bash``, ``task`` subagents, permissions, questions.

Why a module: a tool call is where the fake emulates most of the real server's
rules (the permission a call asks for, the session's rules that allow, ask or deny
it, ``always`` replies approved project-wide, a request that outlives an abort,
``bash``'s streamed output, a ``task`` child whose result wraps the parent's part).
:class:`ToolSteps` plays those steps for the runner; it writes through
:class:`~.writer.MessageWriter` and starts a ``task`` child's run through the
runner's queue, which it is given.
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from .background import FLAG_OFF_ERROR, BackgroundTasks, started_output, subagent_failure
from .id_minting import IdMinter
from .session_data import FakeSession, PendingRequest, Prompt, Run
from .state import FakeState
from .steps import Permission, Question, Task, Tasks, Tool
from .wire import JSON
from .writer import MessageWriter

_PERMISSION_REJECTED = "The user rejected permission to use this specific tool call."
_QUESTION_DISMISSED = "The user dismissed this question"
_EDIT_TOOLS = frozenset({"edit", "write", "patch", "multiedit", "apply_patch"})


def permission_of(step: Tool) -> tuple[str, tuple[str, ...]]:
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


def session_action(session: FakeSession, permission: str, patterns: Sequence[str]) -> str | None:
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


def denied(session: FakeSession, permission: str) -> str:
    rules = [
        r
        for r in session.info.get("permission") or ()
        if isinstance(r, dict) and fnmatch.fnmatchcase(permission, str(r.get("permission", "")))
    ]
    return (
        "The user has specified a rule which prevents you from using this specific tool "
        f"call. Here are some of the relevant rules {json.dumps(rules, separators=(',', ':'))}"
    )


class Enqueue(Protocol):
    """The runner's way in for a new prompt (a ``task`` child's)."""

    def __call__(
        self,
        session: FakeSession,
        text: str,
        *,
        script: str | None = None,
        agent: str = "build",
        provider_id: str | None = None,
        model_id: str | None = None,
        want_result: bool = False,
        before_busy: Callable[[], None] | None = None,
        parts: Sequence[JSON] | None = None,
    ) -> Prompt: ...


@dataclass(eq=False)
class ToolSteps:
    """Plays :class:`Tool`, :class:`Task`, :class:`Permission` and :class:`Question` steps."""

    _state: FakeState
    _writer: MessageWriter
    _ids: IdMinter
    _enqueue: Enqueue
    _background: BackgroundTasks

    def __post_init__(self) -> None:
        self._emit = self._state.bus.emit

    async def play(self, run: Run, step: Tool | Task | Tasks | Permission | Question) -> bool:
        """Play a tool step; whether the run goes on (a rejected request stops it)."""
        if isinstance(step, Tool):
            return await self.tool(run, step)
        if isinstance(step, Task):
            await self.task(run, step)
            return True
        if isinstance(step, Tasks):
            # Each call starts (pending, its child, running) before the next one does.
            await asyncio.gather(*(self.task(run, task) for task in step.tasks))
            return True
        if isinstance(step, Permission):
            return await self.permission(run, step)
        return await self.question(run, step)

    @staticmethod
    def default_title(step: Tool) -> str:
        if step.title is not None:
            return step.title
        for key in ("command", "filePath", "path", "pattern", "description"):
            value = step.input.get(key)
            if isinstance(value, str):
                return value
        return step.tool

    async def run_tool_body(self, run: Run, part: JSON, step: Tool) -> None:
        if step.tool == "bash" and step.error is None:
            await self.run_bash(run, part, step)
            return
        if step.duration == math.inf:
            await self._state.park(run)
        elif step.duration > 0:
            await asyncio.sleep(step.duration)
        if step.error is not None:
            self._writer.tool_error(
                run, part, step.error, dict(step.metadata) if step.metadata else None
            )
            return
        if step.tool == "todowrite" and step.output is None:
            self.todos_written(run, part, step)
            return
        prompt_id = run.answering or run.prompt.user_message_id
        self._state.files.tool_ran(prompt_id, run.session.directory, step.tool, step.input)
        output = step.output if step.output is not None else ""
        metadata: JSON = {}
        if step.tool == "read":
            metadata = {"preview": output[:200], "truncated": False}
        if step.metadata:
            metadata.update(step.metadata)
        self._writer.tool_completed(run, part, output, self.default_title(step), metadata)

    async def run_bash(self, run: Run, part: JSON, step: Tool) -> None:
        """Measured: ``metadata.output`` starts ``""`` and grows with every chunk the
        command prints (a line at a time here); empty output completes as ``(no output)``."""
        part = self._writer.tool_progress(run, part, {"output": ""})
        if step.duration == math.inf:
            await self._state.park(run)
        output = step.output or ""
        lines = output.splitlines(keepends=True)
        pause = step.duration / max(1, len(lines))
        shown = ""
        for line in lines:
            if pause > 0:
                await asyncio.sleep(pause)
            shown += line
            part = self._writer.tool_progress(run, part, {"output": shown})
        if not lines and pause > 0:
            await asyncio.sleep(pause)
        output = output or "(no output)"
        metadata: JSON = {"output": output, "exit": 0, "truncated": False}
        metadata.update(step.metadata or {})
        self._writer.tool_completed(run, part, output, self.default_title(step), metadata)

    async def tool(self, run: Run, step: Tool) -> bool:
        """A tool the server config allows. The session's own rules are checked after the
        config's and the last match wins (measured): ``ask`` makes it a permission request
        (as :class:`Permission`), ``deny`` fails the call. False: the run stops."""
        permission, patterns = permission_of(step)
        action = session_action(run.session, permission, patterns)
        if action == "ask":
            return await self.permission(run, Permission(permission, patterns, tool=step))
        part = self._writer.tool_start(
            run,
            step.tool,
            step.input,
            before_running=self.todo_list(run, step) if step.tool == "todowrite" else None,
        )
        await asyncio.sleep(0)
        if action == "deny":
            self._writer.tool_error(run, part, denied(run.session, permission), None)
        else:
            await self.run_tool_body(run, part, step)
        return True

    def todo_list(self, run: Run, step: Tool) -> Callable[[JSON], JSON | None]:
        """Measured on 1.18.34: ``todowrite`` sends ``todo.updated`` (the session's whole
        list, as the call's input gives it) between the call's ``pending`` and
        ``running`` parts."""

        def announce(_pending: JSON) -> None:
            todos = step.input.get("todos")
            self._emit(
                "todo.updated",
                {"sessionID": run.session.id, "todos": todos if isinstance(todos, list) else []},
            )

        return announce

    def todos_written(self, run: Run, part: JSON, step: Tool) -> None:
        """Measured on 1.18.34: ``todowrite`` answers the list as indented JSON, with the
        list in ``metadata.todos`` and ``"<n> todos"`` as title, n the ones not completed."""
        todos = step.input.get("todos")
        todos = todos if isinstance(todos, list) else []
        open_ = sum(1 for t in todos if not isinstance(t, dict) or t.get("status") != "completed")
        output = json.dumps(todos, indent=2, ensure_ascii=False)
        metadata: JSON = {"todos": todos}
        metadata.update(step.metadata or {})
        self._writer.tool_completed(run, part, output, f"{open_} todos", metadata)

    async def task(self, run: Run, step: Task) -> None:
        parent = run.session
        prompt_text = step.prompt or f"{step.description} [[script:{step.script}]]"
        tool_input: JSON = {
            "description": step.description,
            "prompt": prompt_text,
            "subagent_type": step.subagent_type,
        }
        if step.background:
            tool_input["background"] = True
            if not self._background.enabled:
                # Measured without the flag: the call fails, no child is created.
                part = self._writer.tool_start(run, "task", tool_input)
                await asyncio.sleep(0)
                self._writer.tool_error(run, part, FLAG_OFF_ERROR, None)
                return
        child_box: list[FakeSession] = []

        def create_child(_pending: JSON) -> JSON:
            # The child exists before the part turns running (same tick as on the real server).
            # Measured: a task child runs in its parent's directory.
            child = self._state.create_session(
                parent.id,
                f"{step.description} (@{step.subagent_type} subagent)",
                parent.directory,
                agent=step.subagent_type,
            )
            child_box.append(child)
            metadata: JSON = {
                "parentSessionId": parent.id,
                "sessionId": child.id,
                "model": {"modelID": run.prompt.model_id, "providerID": run.prompt.provider_id},
            }
            if step.background:
                metadata["background"] = True
            return metadata

        part = self._writer.tool_start(
            run, "task", tool_input, title=step.description, before_running=create_child
        )
        child = child_box[0]
        metadata: JSON = part["state"]["metadata"]
        run.tools[part["id"]].child_id = child.id
        message = run.message
        assert message is not None
        running = part
        child_prompt = self._enqueue(
            child,
            prompt_text,
            script=step.script,
            agent=step.subagent_type,
            provider_id=run.prompt.provider_id,
            model_id=run.prompt.model_id,
            want_result=True,
            # Measured: the running part is announced again after the child's prompt.
            before_busy=lambda: self._state.store_part(message, running),
        )
        assert child_prompt.future is not None
        if step.background:
            # Measured: the part completes at once; the parent's run goes on.
            self._background.launch(run.prompt, parent, child, child_prompt, step)
            done: JSON = {**metadata, "jobId": child.id}
            self._writer.tool_completed(run, part, started_output(child.id), step.description, done)
            return
        result = await asyncio.shield(child_prompt.future)
        part = run.tools[part["id"]].part
        if result.outcome == "completed":
            output = (
                f'<task id="{child.id}" state="completed">\n'
                f"<task_result>\n{result.text}\n</task_result>\n</task>"
            )
            self._writer.tool_completed(run, part, output, step.description, metadata)
        elif result.outcome == "aborted":
            # Measured on 1.18.34 (the differential scenarios abort_task_child_only,
            # parallel_tasks_one_aborted, busy_tree_found_at_attach): a child aborted
            # alone says idle once more before its parent's call ends.
            self._state.set_idle(child)
            self._writer.tool_error(run, part, "Task cancelled", metadata)
        else:
            failed = subagent_failure(child.id, result.error)
            self._writer.tool_error(run, part, failed, metadata)

    def open_request(
        self, run: Run, kind: Literal["permission", "question"], payload: JSON
    ) -> asyncio.Future[Any]:
        """Register a permission/question request and emit ``<kind>.asked``."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        request_id = payload["id"]
        self._state.requests_pending[request_id] = PendingRequest(
            kind, run.session.id, payload, future
        )
        run.session._pending.add(request_id)
        self._emit(f"{kind}.asked", payload)
        return future

    async def ask(self, request_id: str, future: asyncio.Future[Any]) -> Any:
        """Wait for the reply to a request :meth:`open_request` opened."""
        ghost = False
        try:
            return await future
        except asyncio.CancelledError:
            # The run was aborted. Measured on 1.18.34: the request outlives it, still
            # listed, and a later reply answers true and emits `replied` but runs nothing.
            ghost = not self._state.closed
            raise
        finally:
            if not ghost:
                self._state.forget_request(request_id)

    async def permission(self, run: Run, step: Permission) -> bool:
        patterns = tuple(step.patterns)
        tool = step.tool
        if tool is None:
            if step.permission == "bash":
                tool_input: JSON = {"command": patterns[0] if patterns else "", "description": ""}
            else:
                tool_input = {"patterns": list(patterns)}
            tool = Tool(step.permission, tool_input)
        action = session_action(run.session, step.permission, patterns)
        if action in ("allow", "deny"):
            # A session rule decides before the config's ``ask`` (it comes last: measured).
            part = self._writer.tool_start(run, tool.tool, tool.input)
            await asyncio.sleep(0)
            if action == "deny":
                self._writer.tool_error(run, part, denied(run.session, step.permission), None)
            else:
                await self.run_tool_body(run, part, tool)
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
            if self.approved_always(step.permission, patterns):
                return
            payload: JSON = {
                "id": self._ids.new("per"),
                "sessionID": run.session.id,
                "permission": step.permission,
                "patterns": list(patterns),
                "metadata": metadata,
                "always": always,
                "tool": {"messageID": pending["messageID"], "callID": pending["callID"]},
            }
            asked.append((payload["id"], self.open_request(run, "permission", payload)))

        part = self._writer.tool_start(run, tool.tool, tool.input, before_running=ask)
        if asked:
            active = run.tools[part["id"]]
            active.asking = True
            reply = await self.ask(*asked[0])
            active.asking = False
            if reply == "reject":
                self._writer.tool_error(run, part, _PERMISSION_REJECTED, None)
                return False
            if reply == "always":
                for pattern in always or patterns:
                    self._state.always.add((step.permission, pattern))
        await self.run_tool_body(run, part, tool)
        return True

    def approved_always(self, permission: str, patterns: Sequence[str]) -> bool:
        """Whether earlier ``always`` replies cover every pattern (project-wide, measured)."""
        approved = [p for perm, p in self._state.always if perm == permission]
        return bool(patterns) and all(
            any(fnmatch.fnmatchcase(pattern, rule) for rule in approved) for pattern in patterns
        )

    async def question(self, run: Run, step: Question) -> bool:
        questions = [dict(q) for q in step.questions]
        asked: list[tuple[str, asyncio.Future[Any]]] = []

        def ask(pending: JSON) -> None:
            # Measured: question.asked comes between the pending and running updates.
            payload: JSON = {
                "id": self._ids.new("que"),
                "sessionID": run.session.id,
                "questions": questions,
                "tool": {"messageID": pending["messageID"], "callID": pending["callID"]},
            }
            asked.append((payload["id"], self.open_request(run, "question", payload)))

        part = self._writer.tool_start(
            run, "question", {"questions": questions}, before_running=ask
        )
        answers = await self.ask(*asked[0])
        if answers is None:
            self._writer.tool_error(run, part, _QUESTION_DISMISSED, None)
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
        self._writer.tool_completed(run, part, output, title, {"answers": answers})
        return True
