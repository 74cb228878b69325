"""Ownership of background tasks: every task the adapter starts is awaited by it."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from .._logging import get_logger

__all__ = ["TaskOwner", "TaskScope", "first_of"]

T = TypeVar("T")
_log = get_logger("adapter.tasks")


class TaskOwner:
    """A small nursery that does not cancel its host.

    ``asyncio.TaskGroup`` cancels the task that entered it when a child fails;
    inside a library that task is the host's, so a failing event pump would
    cancel the host's request handler. Here a failure is logged (and the
    spawner decides what it means), and ``aclose`` cancels and awaits
    everything that is left, so no task outlives the owner.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = False

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(
        self, coro: Coroutine[Any, Any, T], *, name: str, log_errors: bool = True
    ) -> asyncio.Task[T]:
        """Start an owned task. With ``log_errors=False`` its failure is the awaiter's
        business (it is retrieved there), not worth an error line."""
        if self._closed:
            coro.close()
            raise RuntimeError(f"{self._name} is closed")
        task = asyncio.get_running_loop().create_task(coro, name=f"{self._name}:{name}")
        self._tasks.add(task)
        task.add_done_callback(self._done if log_errors else self._tasks.discard)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            _log.error("adapter.task_failed", task=task.get_name(), error=repr(exc))

    async def aclose(self) -> None:
        self._closed = True
        while self._tasks:
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def scope(self, name: str) -> TaskScope:
        """A group of this owner's tasks that belong to one thing (a thread, a turn)
        and end with it: :meth:`TaskScope.cancel` cancels them when it ends."""
        return TaskScope(self, name)


class TaskScope:
    """The tasks of one turn or thread. They are spawned and awaited by the
    :class:`TaskOwner` (nothing outlives the adapter); the scope cancels them
    the moment their turn or thread ends, so no task ever has to find out
    afterwards that the thing it worked for is gone."""

    def __init__(self, owner: TaskOwner, name: str) -> None:
        self._owner = owner
        self._name = name
        self._tasks: set[asyncio.Task[Any]] = set()
        self._cancelled = False

    def __len__(self) -> int:
        return len(self._tasks)

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def spawn(
        self, coro: Coroutine[Any, Any, T], *, name: str, log_errors: bool = True
    ) -> asyncio.Task[T] | None:
        """Start a task of this scope; ``None`` (and nothing started) once the scope ended.
        ``log_errors`` as for :meth:`TaskOwner.spawn`."""
        if self._cancelled:
            coro.close()
            return None
        task = self._owner.spawn(coro, name=f"{self._name}:{name}", log_errors=log_errors)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def cancel(self) -> None:
        """End the scope: cancel what still runs (the owner awaits it) and start nothing more."""
        self._cancelled = True
        current = asyncio.current_task()
        for task in list(self._tasks):
            if task is not current:
                task.cancel()


async def first_of(*aws: Coroutine[Any, Any, Any]) -> None:
    """Wait until the first of ``aws`` finishes; the others are cancelled and awaited."""
    tasks = [asyncio.ensure_future(aw) for aw in aws]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
