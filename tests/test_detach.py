"""Closing by detaching: the trees and open requests stay on the server for a later
process to adopt (``OpenCodeAdapter(on_close="detach")``, ``aclose(detach=True)``).

Each test runs a turn whose subagent asks a permission and waits, then closes the
adapter, and reads the fake server's records (no abort, no reply) and the events."""

from __future__ import annotations

import asyncio
from types import CoroutineType
from typing import Any

import pytest

from adapter import (
    CannotDetachError,
    InvalidInputError,
    OpenCodeAdapter,
    Timeouts,
)
from adapter.testing.fake import FakeOpenCodeServer, Permission, Task, Text
from adapter.testing.pytest_plugin import AdapterFactory
from tests.adapter_support import Recorder

T = "t-detach"
TIMEOUTS = Timeouts(connect=2.0, teardown=0.5)


def scripts(fake: FakeOpenCodeServer) -> None:
    fake.script("child", [Text("working"), Permission(patterns=["make"])])
    fake.script("root", [Text("delegating"), Task("explore", "child")])


def adapter(fake: FakeOpenCodeServer, **options: Any) -> OpenCodeAdapter:
    return OpenCodeAdapter(fake.base_url, transport=fake.transport, timeouts=TIMEOUTS, **options)


async def running_tree(fake: FakeOpenCodeServer, oc: OpenCodeAdapter) -> tuple[str, str]:
    """Start ``T`` and its turn; return (root, child) once the child waits on its request."""
    root = (await oc.start_session(T)).session_id
    await oc.send_turn(T, "go [[script:root]]")
    await fake.wait_until(lambda: len(fake.tree(root)) == 2 and bool(fake.pending_permissions()))
    child = fake.tree(root)[1]
    await pending_request(fake, oc)
    return root, child


async def pending_request(fake: FakeOpenCodeServer, oc: OpenCodeAdapter) -> None:
    """Until ``oc`` knows of an open request of ``T``."""
    await fake.wait_until(
        lambda: bool(oc.pending_requests(T)), description="the adapter knows the open request"
    )


def assert_left_alone(fake: FakeOpenCodeServer, root: str, child: str) -> None:
    assert fake.calls("POST", "/session/{id}/abort") == []
    assert fake.calls("POST", "/permission/{id}/reply") == []
    assert fake.calls("POST", "/question/{id}/reject") == []
    assert fake.sessions[root].busy and fake.sessions[child].busy
    assert len(fake.pending_permissions(session_id=child)) == 1


@pytest.mark.parametrize("how", ["option", "argument"])
async def test_detaching_leaves_the_tree_and_its_request_on_the_server_and_ends_the_thread(
    fake: FakeOpenCodeServer, how: str
) -> None:
    scripts(fake)
    tasks_before = asyncio.all_tasks()
    oc = adapter(fake, on_close="detach") if how == "option" else adapter(fake)
    async with oc:
        rec = Recorder(oc)
        root, child = await running_tree(fake, oc)
        turn_id = oc.session_info(T).active_turn_id
        if how == "argument":
            await oc.aclose(detach=True)
    await rec.task
    assert_left_alone(fake, root, child)
    [exited] = rec.of("session.exited", T)
    assert exited.turn_id == turn_id and "detached" in (exited.reason or "")
    assert rec.of("turn.aborted") == [] and rec.of("turn.completed") == []
    assert rec.of("request.resolved") == []
    [task_end] = rec.of("task.completed", T)
    assert task_end.session_id == child and "detached" in (task_end.error or "")
    assert oc.list_sessions() == []
    assert adapter_tasks(asyncio.all_tasks() - tasks_before) == []


def adapter_tasks(tasks: set[asyncio.Task[Any]]) -> list[asyncio.Task[Any]]:
    """The pending tasks not the fake server's (its runs go on: it was detached from)."""
    current = asyncio.current_task()
    return [t for t in tasks if not t.done() and t is not current and not _of_the_fake(t)]


def _of_the_fake(task: asyncio.Task[Any]) -> bool:
    coro = task.get_coro()
    return isinstance(coro, CoroutineType) and "testing/_fake/" in coro.cr_code.co_filename


async def test_a_second_adapter_resumes_a_detached_thread_whose_tree_still_runs(
    opencode_fake: FakeOpenCodeServer, opencode_adapter_factory: AdapterFactory
) -> None:
    fake = opencode_fake
    scripts(fake)
    first = await opencode_adapter_factory(timeouts=TIMEOUTS, on_close="detach")
    root, child = await running_tree(fake, first)
    cursor = first.session_info(T).resume
    await first.aclose()
    assert_left_alone(fake, root, child)
    second = await opencode_adapter_factory(timeouts=TIMEOUTS)
    info = await second.start_session(T, resume=cursor)
    assert info.session_id == root
    assert fake.sessions[root].busy and fake.sessions[child].busy
    # The request left open is still there to answer.
    await pending_request(fake, second)
    [request] = second.pending_requests(T)
    await second.respond_to_request(T, request.request_id, "accept")
    await fake.wait_until(lambda: not fake.sessions[root].busy)


async def test_the_default_close_still_aborts_the_tree(fake: FakeOpenCodeServer) -> None:
    scripts(fake)
    async with adapter(fake) as oc:
        root, _child = await running_tree(fake, oc)
    assert fake.calls("POST", f"/session/{root}/abort") != []


async def test_on_close_is_checked_and_an_owned_server_cannot_be_detached_from() -> None:
    with pytest.raises(InvalidInputError, match="'abort' or 'detach'"):
        OpenCodeAdapter("http://127.0.0.1:1", on_close="leave")  # type: ignore[arg-type]
    with pytest.raises(CannotDetachError, match="started itself"):
        OpenCodeAdapter(on_close="detach")
    assert issubclass(CannotDetachError, InvalidInputError)


async def test_detach_on_an_owned_server_is_refused_before_anything_closes(
    fake: FakeOpenCodeServer,
) -> None:
    oc = OpenCodeAdapter(binary="opencode-not-started")  # an owned server, never entered
    with pytest.raises(CannotDetachError):
        await oc.aclose(detach=True)
    with pytest.raises(InvalidInputError, match="detach"):
        await adapter(fake).aclose(detach="yes")  # type: ignore[arg-type]
