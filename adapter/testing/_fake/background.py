"""Background subagents: ``task`` children that outlive the run of their parent.

Why a module: a background child is the one subagent whose life is not nested in a
tool call. Measured on OpenCode 1.18.34 with ``OPENCODE_EXPERIMENTAL_BACKGROUND_SUBAGENTS=true``
and the model calling ``task`` with ``"background": true``:

* the parent's ``task`` part goes ``pending`` -> ``running`` -> ``completed`` at once
  (the child exists, with ``parentID``), its output saying the task was started
  (:func:`started_output`) and its metadata carrying ``background: true`` and
  ``jobId`` (the child's id); the parent's run goes on and can end while the child works;
* when the child's run ends on its own (completed or failed), the server writes a
  user message into the parent whose one text part is ``synthetic: true``
  (:func:`finished_text`) and runs the parent on it (a new run when the parent is
  idle; while it is busy, its next model step takes the message in, like any prompt);
* a child aborted alone gets no message and the parent does not run again; its
  abort ends with three idle pairs, as a foreground child's aborted alone (one more
  than a child stopped by its parent's abort);
* aborting the parent (busy or idle) aborts its background children first, with no
  extra idle pair and no message;
* without the flag, a ``background: true`` call ends ``error`` (:data:`FLAG_OFF_ERROR`)
  and no child is created.

:class:`BackgroundTasks` keeps each parent's running background children
(``FakeSession._background``) and plays those rules; :mod:`.tools` launches them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from .session_data import FakeSession, Prompt, Result, Settings
from .state import FakeState
from .steps import Task
from .wire import JSON

BACKGROUND_FLAG = "OPENCODE_EXPERIMENTAL_BACKGROUND_SUBAGENTS"
"""The real server's environment variable that turns background subagents on."""

FLAG_OFF_ERROR = f"Background subagents require {BACKGROUND_FLAG}=true"
"""The error of a ``background: true`` call on a server without the flag (measured)."""

_STARTED_RESULT = (
    "The task is working in the background. You will be notified automatically when it "
    "finishes.\nDO NOT sleep, poll for progress, ask the task for status, or duplicate this "
    "task's work \u2014 avoid working with the same files or topics it is using.\n"
    "Work on non-overlapping tasks, or briefly tell the user what you launched and end "
    "your response."
)


def started_output(child_id: str) -> str:
    """The output of a background ``task`` call, as 1.18.34 writes it."""
    return (
        f'<task id="{child_id}" state="running">\n'
        "<summary>Background task started</summary>\n"
        f"<task_result>\n{_STARTED_RESULT}\n</task_result>\n</task>"
    )


def subagent_failure(child_id: str, error: JSON | None) -> str:
    """How OpenCode reports a child whose model call failed (foreground and background)."""
    message = str((error or {}).get("data", {}).get("message", "Task failed"))
    return f"Subagent failed (task_id: {child_id}): {message}"


def finished_text(child_id: str, description: str, result: Result) -> str:
    """The synthetic message's text once a background child ended on its own (measured)."""
    if result.outcome == "completed":
        return (
            f'<task id="{child_id}" state="completed">\n'
            f"<summary>Background task completed: {description}</summary>\n"
            f"<task_result>\n{result.text}\n</task_result>\n</task>"
        )
    return (
        f'<task id="{child_id}" state="error">\n'
        f"<summary>Background task failed: {description}</summary>\n"
        f"<task_error>\n{subagent_failure(child_id, result.error)}\n</task_error>\n</task>"
    )


@dataclass(eq=False)
class BackgroundTasks:
    """Watches each background child and tells its parent how it ended."""

    _state: FakeState
    _settings: Settings
    _enqueue: Callable[..., Prompt]
    _spawn: Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]]
    _abort: Callable[[FakeSession], Awaitable[None]]

    @property
    def enabled(self) -> bool:
        """Whether the server has the flag on (:attr:`FakeOpenCodeServer.background_subagents`)."""
        return self._settings.background_subagents

    def launch(
        self, parent: Prompt, session: FakeSession, child: FakeSession, queued: Prompt, step: Task
    ) -> None:
        """Watch ``child``, whose prompt ``queued`` was just queued, for ``session``, the
        parent, whose run's prompt ``parent`` gives the agent and model of the message back."""
        runner = child._runner
        assert queued.future is not None and runner is not None
        watcher = self._spawn(self._watch(session, child, queued.future, runner, parent, step))
        session._background[child.id] = watcher

    async def _watch(
        self,
        session: FakeSession,
        child: FakeSession,
        future: asyncio.Future[Result],
        runner: asyncio.Task[None],
        parent: Prompt,
        step: Task,
    ) -> None:
        result = await asyncio.shield(future)
        # The message back follows the child's idle (measured).
        await asyncio.wait({runner})
        if session._background.get(child.id) is not asyncio.current_task():
            return  # the parent's abort stopped it: nothing more is said
        del session._background[child.id]
        if self._state.closed or result.outcome == "vanished":
            return
        if result.outcome == "aborted":
            # Measured: a background child aborted alone says idle once more.
            self._state.set_idle(child)
            return
        text = finished_text(child.id, step.description, result)
        self._enqueue(
            session,
            text,
            script=step.result_script,
            agent=parent.agent,
            provider_id=parent.provider_id,
            model_id=parent.model_id,
            parts=[{"type": "text", "text": text, "synthetic": True}],
        )

    async def stop_children(self, session: FakeSession) -> None:
        """Abort ``session``'s running background children (its own abort does, first)."""
        watchers, session._background = session._background, {}
        for child_id, watcher in watchers.items():
            watcher.cancel()
            child = self._state.find(child_id)
            if child is not None:
                await self._abort(child)
