"""The script runner: each session's prompt queue, and the runs that play its scripts.

Why a module: a run is where the fake's timing rules live (a prompt joins the next
model step of a running run, or waits behind it; one sent in a run's finishing
window is echoed after the idle and starts a run of its own; a ``summarize`` ends
a run at its next step boundary; an abort cleans up in the measured order; a
restart ends runs silently). :class:`ScriptRunner` owns those rules; the steps'
output is written by :mod:`.writer` and the tool steps are played by :mod:`.tools`.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .background import BackgroundTasks
from .id_minting import IdMinter
from .model_input import ModelInput
from .session_data import FakeMessage, FakeSession, Outcome, Prompt, Result, Run, Settings
from .state import FakeState
from .steps import COMPACTION_CONTINUE, STEP_TYPES, Compact, Fail, Hang, Step, Text
from .tools import ToolSteps
from .wire import BUSY, JSON, now_ms
from .writer import MessageWriter

if TYPE_CHECKING:
    from .hooks import RunEndHold

_SCRIPT_MARKER = re.compile(r"\[\[script:([^\]]+)\]\]")
_ABORTED_ERROR: JSON = {"name": "MessageAbortedError", "data": {"message": "Aborted"}}
_TOOL_ABORTED = "Tool execution aborted"
_BASH_ABORTED_OUTPUT = (
    "(no output)\n\n<shell_metadata>\nUser aborted the command\n</shell_metadata>"
)


def api_error_data(message: str, *, retryable: bool = False) -> JSON:
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


class ScriptRunner:
    """Queues prompts per session and plays their scripts, one run at a time."""

    def __init__(self, state: FakeState, ids: IdMinter, settings: Settings) -> None:
        self._state = state
        self._ids = ids
        self._settings = settings
        self._emit = state.bus.emit
        self.writer = MessageWriter(state, ids, settings)
        self.background = BackgroundTasks(
            state, settings, self.enqueue_prompt, self._spawn, self.abort_session
        )
        self.tools = ToolSteps(state, self.writer, ids, self.enqueue_prompt, self.background)
        self.scripts: dict[str, tuple[Step, ...]] = {"default": (Text("ok"),)}
        self.run_end_holds: list[RunEndHold] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._vanishing = False

    def script(self, name: str, steps: Sequence[Step]) -> None:
        for step in steps:
            if not isinstance(step, STEP_TYPES):
                raise TypeError(f"not a script step: {step!r}")
        self.scripts[name] = tuple(steps)

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task: asyncio.Task[Any] = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def enqueue_prompt(
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
    ) -> Prompt:
        """``parts`` (stored as given, ids added) replace the single text part;
        ``options`` (``system``, ``tools``, ``variant``) are stored on the user message;
        ``content`` is what reaches the model (recorded in :attr:`model_inputs`)."""
        options = dict(options or {})
        provider_id = provider_id or self._settings.provider_id
        model_id = model_id or self._settings.model_id
        user_id = message_id or self._ids.new("msg")
        prompt = Prompt(user_id, text, script, agent, provider_id, model_id)
        prompt.compaction = compaction
        prompt.variant = options.get("variant")
        if want_result:
            prompt.future = asyncio.get_running_loop().create_future()

        def admit() -> None:
            self._state.apply_revert(session)
            message = FakeMessage({})
            info: JSON = {
                "id": user_id,
                "role": "user",
                "sessionID": session.id,
                "time": {"created": now_ms()},
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
                    self._state.touch(session, **first)
            self._state.store_message(session, message, info)
            ids = {"messageID": user_id, "sessionID": session.id}
            specs: Sequence[JSON]
            if compaction is not None:
                specs = [{"type": "compaction", "auto": compaction}]
            elif parts is not None:
                specs = parts
            else:
                specs = [{"type": "text", "text": text}]
            for spec in specs:
                self._state.store_part(message, {"id": self._ids.new("prt"), **ids, **spec})
            if compaction is None:
                self._settings.model_inputs.append(
                    ModelInput(
                        session.id,
                        user_id,
                        tuple(content or ({"type": "text", "text": text},)),
                        system=options.get("system"),
                        tools=options.get("tools"),
                        variant=prompt.variant,
                    )
                )
                self._state.touch(session)
            if before_busy is not None:
                before_busy()
            session._queue.append(prompt)
            if session._runner is None or session._runner.done():
                self._state.set_status(session, BUSY)
                session._runner = self._spawn(self._run_queue(session))

        if session._finishing:
            # Measured on 1.18.34: a prompt that arrives once the run's loop decided to
            # end (its last step finished) is echoed after the run's idle, and starts a
            # second run (see :meth:`admit_deferred`).
            session._deferred.append((prompt, admit))
        else:
            admit()
        return prompt

    def _resolve_script(self, prompt: Prompt) -> tuple[str, tuple[Step, ...] | None]:
        name = prompt.script
        if name is None:
            match = _SCRIPT_MARKER.search(prompt.text)
            name = match.group(1).strip() if match else "default"
        return name, self.scripts.get(name)

    async def _run_queue(self, session: FakeSession) -> None:
        result: Result | None = None
        prompt: Prompt | None = None
        try:
            while True:
                while session._queue:
                    prompt = session._queue.popleft()
                    run = Run(session, prompt)
                    session._run = run
                    try:
                        result = await self._execute(run)
                    except asyncio.CancelledError:
                        if self._vanishing:
                            # restart(): the run ends with nothing said or stored.
                            for done in (prompt, *run.merged):
                                self._finish_prompt(done, Result("vanished"))
                            raise
                        current = asyncio.current_task()
                        if current is not None:
                            current.uncancel()
                        result = await self._cleanup_aborted(run)
                        for done in (prompt, *run.merged):
                            self._finish_prompt(done, result)
                        if self._state.closed or not session._queue:
                            return
                        # A prompt sent while the abort was being cleaned up runs next.
                        self._state.set_status(session, BUSY)
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
                if not self.admit_deferred(session):
                    return
                # Measured: the prompts accepted while the run was ending start a second
                # run once their echo followed the idle.
                self._state.set_status(session, BUSY)
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
        for hold in list(self.run_end_holds):
            await hold._reached(session.id)
        await asyncio.sleep(0)

    def admit_deferred(self, session: FakeSession) -> bool:
        """Echo the prompts deferred by the finishing window; whether any is queued."""
        session._finishing = False
        deferred, session._deferred = session._deferred, []
        for _prompt, admit in deferred:
            admit()
        return bool(session._queue)

    def _end_run(self, session: FakeSession, prompt: Prompt | None, result: Result | None) -> None:
        """The events that end a run, as measured on 1.18.34.

        Completed: ``busy`` once more, then idle, then the diff pair. Blocked (a
        rejected permission or question): idle, then the diff pair. Failed: the
        second idle pair only (the first came with ``session.error``), no diff.
        """
        regular = prompt is not None and prompt.compaction is None
        outcome = result.outcome if result is not None else None
        if regular and outcome == "completed":
            self._state.set_status(session, BUSY)
        self._state.set_idle(session)
        if regular and outcome in ("completed", "blocked"):
            assert prompt is not None
            self._state.announce_diff(session, prompt.user_message_id)

    @staticmethod
    def _finish_prompt(prompt: Prompt, result: Result) -> None:
        if prompt.future is not None and not prompt.future.done():
            prompt.future.set_result(result)

    def drop_queue(self, session: FakeSession, outcome: Outcome = "aborted") -> None:
        while session._queue:
            self._finish_prompt(session._queue.popleft(), Result(outcome))

    def drop_deferred(self, session: FakeSession, outcome: Outcome = "aborted") -> None:
        deferred, session._deferred = session._deferred, []
        for prompt, _admit in deferred:
            self._finish_prompt(prompt, Result(outcome))

    async def _execute(self, run: Run) -> Result:
        if run.prompt.compaction is not None:
            return await self._compact(run)
        name, steps = self._resolve_script(run.prompt)
        self.writer.start_message(run)
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
                self.writer.finish_step(run, "tool-calls")
                self.writer.start_message(run)
                await asyncio.sleep(0)
            if isinstance(step, Text):
                await self.writer.text(run, step)
            elif isinstance(step, Hang):
                # Measured: the step-start part is stored once the model answers, even
                # if it then sends nothing.
                self.writer.ensure_step(run)
                await self._state.park(run)
            elif isinstance(step, Fail):
                if step.retries > 0:
                    await self._retry(run, step)
                return self._fail(run, step)
            elif not await self.tools.play(run, step):
                return self._blocked(run)
            await asyncio.sleep(0)
        if run.had_tool:
            if self._summary_waits(run.session):
                return self._end_for_summary(run)
            # The model is called again with the tool results and finishes.
            self.writer.finish_step(run, "tool-calls")
            self.writer.start_message(run)
            await asyncio.sleep(0)
        self.writer.finish_step(run, "stop")
        return Result("completed", run.last_text, None, run.message.id if run.message else None)

    @staticmethod
    def _summary_waits(session: FakeSession) -> bool:
        """Whether a manual ``summarize`` is queued behind the run."""
        return any(prompt.compaction is False for prompt in session._queue)

    def _end_for_summary(self, run: Run) -> Result:
        """Measured on 1.18.34: a ``summarize`` sent during a tool step ends the run once
        that step finished (``tool-calls``); the summary runs next and the agent does not
        continue (not even after the summary: the run's idle follows it)."""
        self.writer.finish_step(run, "tool-calls")
        return Result("completed", run.last_text, None, run.message.id if run.message else None)

    async def _compact(self, run: Run) -> Result:
        """A ``summarize`` turn (measured): one ``summary`` assistant message of agent
        ``compaction`` streams :attr:`summary_text`, then ``session.compacted``."""
        self.writer.start_message(run, agent="compaction")
        await asyncio.sleep(0)
        await self.writer.text(run, Text(self._settings.summary_text))
        self.writer.finish_step(run, "stop")
        self._emit("session.compacted", {"sessionID": run.session.id})
        return Result("completed", run.last_text, None, run.message.id if run.message else None)

    async def _auto_compact(self, run: Run, step: Compact) -> None:
        """An automatic compaction inside a run, in the measured order (see :class:`Compact`)."""
        session = run.session
        self.writer.finish_step(run, "tool-calls" if run.had_tool else "stop")
        compaction_id = self.writer.store_user_message(
            run, {"type": "compaction", "auto": True, "overflow": False}
        )
        self._state.set_status(session, BUSY)
        self.writer.start_message(run, agent="compaction", parent_id=compaction_id)
        self._state.set_status(session, BUSY)
        self._state.announce_diff(session)
        await asyncio.sleep(0)
        summary = self._settings.summary_text if step.summary is None else step.summary
        await self.writer.text(run, Text(summary))
        self.writer.finish_step(run, "stop")
        run.last_text = ""  # the summary is not the agent's answer
        now = now_ms()
        run.answering = self.writer.store_user_message(
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
        self.writer.start_message(run)
        await asyncio.sleep(0)

    async def _retry(self, run: Run, step: Fail) -> None:
        """OpenCode's retries of a failing model call (measured order: ``retry`` status,
        the wait, ``busy`` for the next attempt)."""
        run.retrying = True
        for attempt in range(1, step.retries + 1):
            next_ms = now_ms() + int(step.retry_delay * 1000)
            status = {"type": "retry", "attempt": attempt, "message": step.message, "next": next_ms}
            self._state.set_status(run.session, status)
            await asyncio.sleep(step.retry_delay)
            self._state.set_status(run.session, BUSY)
        run.retrying = False

    def _blocked(self, run: Run) -> Result:
        self.writer.finish_step(run, "tool-calls")
        return Result("blocked", run.last_text, None, run.message.id if run.message else None)

    def _fail(self, run: Run, step: Fail) -> Result:
        """Measured order: ``session.error``, an idle pair, the assistant message with
        ``error`` (completed, no ``finish``), then (from :meth:`_end_run`) another idle pair."""
        self.writer.close_text(run)
        data: JSON = {"message": step.message}
        if step.name == "APIError":
            data |= api_error_data(step.message, retryable=step.retries > 0)
        if step.data:
            data.update(step.data)
        error: JSON = {"name": step.name, "data": data}
        self._emit("session.error", {"sessionID": run.session.id, "error": error})
        self._state.set_idle(run.session)
        message = run.message
        if message is not None:
            info = dict(message.info)
            info["time"] = {"created": info["time"]["created"], "completed": now_ms()}
            info["error"] = error
            self._state.store_message(run.session, message, info)
        return Result("failed", run.last_text, error, message.id if message else None)

    async def _cleanup_aborted(self, run: Run) -> Result:
        session = run.session
        message = run.message
        if run.retrying and message is not None:
            # Measured: an abort between retries completes the assistant message with no
            # error, then one idle pair; no session.error.
            info = dict(message.info)
            info["time"] = {"created": info["time"]["created"], "completed": now_ms()}
            self._state.store_message(session, message, info)
            self._state.set_idle(session)
            return Result("aborted", run.last_text, None, message.id)
        # Task children go first, like on the real server (background ones too).
        for active in list(run.tools.values()):
            if active.child_id is not None and active.child_id in self._state.sessions:
                await self.abort_session(self._state.sessions[active.child_id])
        await self.background.stop_children(session)
        self._emit("session.error", {"sessionID": session.id, "error": _ABORTED_ERROR})
        self._state.set_idle(session)
        message = run.message
        if message is not None:
            self.writer.close_text(run)
            for active in list(run.tools.values()):
                part = active.part
                state = part["state"]
                if state["status"] == "pending":
                    self.writer.tool_error(run, part, _TOOL_ABORTED, {"interrupted": True})
                elif part["tool"] == "bash" and not active.asking:
                    title = str(state["input"].get("command", "bash"))
                    metadata: JSON = {
                        "output": _BASH_ABORTED_OUTPUT,
                        "exit": None,
                        "truncated": False,
                    }
                    self.writer.tool_completed(run, part, _BASH_ABORTED_OUTPUT, title, metadata)
                else:
                    metadata = {**state.get("metadata", {}), "interrupted": True}
                    self.writer.tool_error(run, part, _TOOL_ABORTED, metadata)
            info = dict(message.info)
            info["time"] = {"created": info["time"]["created"], "completed": now_ms()}
            info["error"] = _ABORTED_ERROR
            self._state.store_message(session, message, info)
            self._state.set_idle(session)
        return Result("aborted", run.last_text, _ABORTED_ERROR, message.id if message else None)

    async def abort_session(self, session: FakeSession) -> None:
        if session._aborting is not None:
            await asyncio.shield(session._aborting)
            return
        runner = session._runner
        if runner is None or runner.done():
            # Measured: an idle parent's abort stops its background children first.
            await self.background.stop_children(session)
            if session.status["type"] == "busy":
                self._emit("session.error", {"sessionID": session.id, "error": _ABORTED_ERROR})
            self._state.set_idle(session)
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        session._aborting = done
        self.drop_queue(session)
        try:
            runner.cancel()
            await asyncio.wait({runner})
            if runner.cancelled():
                # Cancelled before its first step ran: clean up here.
                self.drop_queue(session)
                session._run = None
                session._runner = None
                self._emit("session.error", {"sessionID": session.id, "error": _ABORTED_ERROR})
                self._state.set_idle(session)
        finally:
            session._aborting = None
            done.set_result(None)
        if session._deferred and not self._state.closed:
            # The abort cut a run's finishing window: what the window accepted still runs.
            self.admit_deferred(session)

    # ------------------------------------------------------------------ HTTP

    async def vanish(self, sessions: Sequence[FakeSession]) -> None:
        """End every run and queued prompt of ``sessions`` with nothing said or stored
        (a restarted server forgets its runs)."""
        self._vanishing = True
        try:
            runners: list[asyncio.Task[None]] = []
            for session in sessions:
                self.drop_queue(session, "vanished")
                self.drop_deferred(session, "vanished")
                runner = session._runner
                if runner is not None and not runner.done():
                    runner.cancel()
                    runners.append(runner)
            await asyncio.gather(*runners, return_exceptions=True)
        finally:
            self._vanishing = False

    def drop_all_queues(self) -> None:
        """Answer every queued and deferred prompt ``aborted`` (the server closes)."""
        for session in self._state.sessions.values():
            if session._queue:
                self.drop_queue(session)
            self.drop_deferred(session)

    async def cancel_tasks(self) -> None:
        """Cancel every run until none is left (a cancelled run may start no other)."""
        while self._tasks:
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._tasks.difference_update(tasks)
