"""A Stop that starts no extra model call: the order of the stop's requests.

Measured on OpenCode 1.18.34 (``benchmarks/real_stop.py --cost``, ``docs/interrupt.md``):
aborting a session cancels its ``task`` subagents first and interrupts the session
itself only once they have wound down; meanwhile the cancelled ``task`` call ends and
the session starts one more model step. A second abort that arrives in that window
interrupts it at once. So the stop aborts the root twice and the tree it already knows
right behind the root's first abort, while that is in flight; pending permission
requests are rejected only after every abort. The real server's side is pinned by
``tests/real/test_stop_cost_real.py``; these tests pin the order on the fake.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from adapter import (
    InvalidInputError,
    OpenCodeAdapter,
    OpenCodeClient,
    StopReport,
    Timeouts,
    stop_tree,
)
from adapter.testing import caught_up
from adapter.testing.fake import FakeOpenCodeServer, Hang, Hold, Permission, Task
from tests.adapter_support import Recorder, busy_branch, held_abort, start_scripted_turn

T = "thread-1"
# One stop aborts the root three times: its abort and two second aborts (abort_root_twice).
ROOT_ABORTS_PER_STOP = 3


@pytest.fixture
async def opencode_client(fake: FakeOpenCodeServer) -> AsyncIterator[OpenCodeClient]:
    async with OpenCodeClient(fake.base_url, transport=fake.transport) as c:
        yield c


@pytest.fixture
def timeouts() -> Timeouts:
    return Timeouts(abort=2.0, tree=2.0)


def log(fake: FakeOpenCodeServer) -> list[str]:
    return [f"{r.method} {r.path}" for r in fake.requests]


def abort_of(sid: str) -> str:
    return f"POST /session/{sid}/abort"


async def every_abort_sent_while_the_roots_is_held(
    fake: FakeOpenCodeServer, hold: Hold, tree: list[str]
) -> None:
    """Every session of ``tree`` (root first) is aborted, and the root twice, while the
    root's first abort is held and went out first; then the hold is released."""
    async with asyncio.timeout(2):
        while not all(abort_of(s) in log(fake) for s in tree[1:]) or len(hold.requests) < 2:
            await asyncio.sleep(0.001)
    assert log(fake)[0] == abort_of(tree[0])
    hold.release()


async def test_known_sessions_and_the_roots_second_abort_go_out_while_its_first_is_in_flight(
    fake: FakeOpenCodeServer, opencode_client: OpenCodeClient
) -> None:
    root = fake.add_session(busy=True)
    child, grandchild = busy_branch(fake, root)
    hold = fake.hold("POST", f"/session/{root}/abort")
    stop = asyncio.create_task(
        stop_tree(
            opencode_client, root, known=[(grandchild, child), (child, root)], abort_root_twice=True
        )
    )
    await hold.wait_started()
    async with asyncio.timeout(2):
        while len(hold.requests) < 2 or abort_of(grandchild) not in log(fake):
            await asyncio.sleep(0.001)
    seen = log(fake)
    assert seen[0] == abort_of(root), "the root's abort goes out first"
    assert abort_of(child) in seen and abort_of(grandchild) in seen
    assert f"GET /session/{root}/children" not in seen, "the root is listed once stopped"
    hold.release()
    report = await stop
    assert report.ok and sorted(report.session_ids) == sorted([root, child, grandchild])
    assert [(s.session_id, s.parent_id, s.depth) for s in report] == [
        (root, None, 0),
        (child, root, 1),
        (grandchild, child, 2),
    ]
    done = log(fake)
    # the root and the known session with known children are aborted again twice (their
    # outcome is not a re-abort); a known leaf only once
    assert done.count(abort_of(root)) == 3 and done.count(abort_of(child)) == 3
    assert done.count(abort_of(grandchild)) == 1
    assert report[root].reaborts == 0
    assert not any(fake.sessions[s].busy for s in (root, child, grandchild))


async def test_a_known_session_outside_the_tree_is_never_touched(
    fake: FakeOpenCodeServer, opencode_client: OpenCodeClient
) -> None:
    root = fake.add_session(busy=True)
    stranger_parent = fake.add_session(busy=True)
    stranger = fake.add_session(parent_id=stranger_parent, busy=True)
    report = await stop_tree(
        opencode_client, root, known=[(stranger, stranger_parent), ("not-an-id", root)]
    )
    assert report.session_ids == (root,)
    assert not any(stranger in p or stranger_parent in p for p in log(fake))
    assert fake.sessions[stranger].busy


async def test_a_failed_second_root_abort_does_not_fail_the_stop(
    fake: FakeOpenCodeServer, opencode_client: OpenCodeClient
) -> None:
    root = fake.add_session(busy=True)
    seen = 0

    async def second_fails(request: httpx.Request) -> httpx.Response | None:
        nonlocal seen
        seen += 1
        return httpx.Response(400, json={"name": "BadRequest"}) if seen == 2 else None

    fake.on("POST", f"/session/{root}/abort", second_fails)
    report = await stop_tree(opencode_client, root, abort_root_twice=True)
    assert seen == 3 and report.ok and report[root].outcome == "aborted"


async def test_interrupt_aborts_the_known_tree_before_the_roots_abort_returns_and_rejects_after(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("asks", [Permission("bash", ["ls"]), Hang()])
    fake.script("child", [Task("deeper", "asks")])
    info, _ = await start_scripted_turn(oc, fake, T, "root", [Task("explore", "child")])
    opened = await rec.wait_for("request.opened")
    tree = [info.session_id, *(e.session_id for e in rec.of("child.started", T))]
    assert len(tree) == 3
    fake.reset_stats()
    hold, stop = await held_abort(fake, info.session_id, oc.interrupt_turn(T))
    await every_abort_sent_while_the_roots_is_held(fake, hold, tree)
    result = await stop
    assert result.stop is not None and result.stop.ok
    done = log(fake)
    reply = f"POST /permission/{opened.request_id}/reply"
    assert reply in done, "the pending request is rejected on the server"
    last_abort = max(i for i, p in enumerate(done) if p.endswith("/abort"))
    assert done.index(reply) > last_abort, "rejected only after every abort"


async def test_stop_session_uses_the_same_order_while_the_thread_closes(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("child", [Task("deeper", "hang")])
    fake.script("hang", [Hang()])
    info, _ = await start_scripted_turn(oc, fake, T, "root", [Task("explore", "child")])
    async with asyncio.timeout(2):
        while len(rec.of("child.started", T)) < 2:
            await asyncio.sleep(0.001)
    tree = [info.session_id, *(e.session_id for e in rec.of("child.started", T))]
    fake.reset_stats()
    hold, closing = await held_abort(fake, info.session_id, oc.stop_session(T))
    await every_abort_sent_while_the_roots_is_held(fake, hold, tree)
    await closing
    await rec.wait_for("session.exited")


async def test_output_of_a_step_begun_during_the_stop_is_late(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    """The real server's extra step answers the turn's own prompt: its text is neither
    emitted as the stopped turn's output nor part of its partial result."""
    fake.script("child", [Hang()])
    info, _ = await start_scripted_turn(oc, fake, T, "root", [Task("explore", "child")])
    await rec.wait_for("child.started")
    async with httpx.AsyncClient(transport=fake.transport, base_url=fake.base_url) as http:
        stored = (await http.get(f"/session/{info.session_id}/message")).json()
    prompt_id = next(m["info"]["id"] for m in stored if m["info"]["role"] == "user")
    hold, stop = await held_abort(fake, info.session_id, oc.interrupt_turn(T))
    root = info.session_id
    message = {
        "id": "msg_zzzzzzzzzzzzextrastep0001",
        "sessionID": root,
        "role": "assistant",
        "parentID": prompt_id,
        "time": {"created": 1},
    }
    part = {
        "id": "prt_zzzzzzzzzzzzextrastep0001",
        "messageID": message["id"],
        "sessionID": root,
        "type": "text",
        "text": "",
        "time": {"start": 1},
    }
    fake.emit("message.updated", {"sessionID": root, "info": message})
    fake.emit("message.part.updated", {"sessionID": root, "part": part, "time": 1})
    fake.emit(
        "message.part.delta",
        {
            "sessionID": root,
            "messageID": message["id"],
            "partID": part["id"],
            "field": "text",
            "delta": "EXTRA STEP",
        },
    )
    fake.emit(
        "message.part.updated",
        {
            "sessionID": root,
            "part": {**part, "text": "EXTRA STEP", "time": {"start": 1, "end": 2}},
            "time": 2,
        },
    )
    await caught_up(fake, oc)
    hold.release()
    result = await stop
    await rec.wait_for("turn.aborted")
    assert not [e for e in rec.of("content.delta", T) if "EXTRA" in e.delta]
    assert "EXTRA" not in result.partial.text


async def walk_with_held_second_aborts(
    fake: FakeOpenCodeServer, client: OpenCodeClient, **options: Any
) -> tuple[str, str, Hold, asyncio.Task[StopReport]]:
    """A walk of a root with one busy child whose root aborts are held; the root's first
    abort is replaced (as the adapter does when the server acknowledged it), so only its
    two second aborts reach the fake: (root, child, the hold, the walk)."""
    root = fake.add_session(busy=False)
    child = fake.add_session(parent_id=root, busy=True)
    hold = fake.hold("POST", f"/session/{root}/abort")

    async def acknowledged() -> None:
        return None

    walk = asyncio.create_task(
        stop_tree(
            client,
            root,
            root_abort=acknowledged,
            known=[(child, root)],
            abort_root_twice=True,
            timeout=60,
            **options,
        )
    )
    await fake.wait_until(lambda: len(hold.requests) == 2, description="both second aborts held")
    return root, child, hold, walk


async def test_the_walk_returns_only_once_its_second_aborts_are_answered(
    fake: FakeOpenCodeServer, opencode_client: OpenCodeClient
) -> None:
    """Only a session's first abort counts, but every abort's answer is awaited: a
    request given up on can still reach the server after the walk returned and stop the
    next turn."""
    root, child, hold, walk = await walk_with_held_second_aborts(fake, opencode_client)
    await fake.wait_until(
        lambda: bool(fake.calls("GET", f"/session/{child}/children")),
        description="the walk stopped and listed the child",
    )
    # Everything but the held second aborts is done: the walk must still be waiting.
    done, _ = await asyncio.wait([walk], timeout=0.5)
    assert not done, "the walk returned while its second aborts were unanswered"
    hold.release()
    async with asyncio.timeout(5):
        report = await walk
    assert report.ok
    assert [r.status for r in fake.calls("POST", f"/session/{root}/abort")] == [200, 200]


async def test_second_aborts_never_answered_are_given_up_at_their_bound(
    fake: FakeOpenCodeServer, opencode_client: OpenCodeClient
) -> None:
    """``second_abort_timeout`` bounds that wait (from the root's abort's start); the
    first aborts' outcomes are the report's, so the walk still succeeds."""
    _, child, hold, walk = await walk_with_held_second_aborts(
        fake, opencode_client, second_abort_timeout=0.3
    )
    async with asyncio.timeout(5):  # unbounded: held until the walk's 60 s timeout
        report = await walk
    assert report.ok and not fake.sessions[child].busy
    assert fake.in_flight == 0 and not hold.released


async def test_second_abort_timeout_must_be_positive(opencode_client: OpenCodeClient) -> None:
    with pytest.raises(InvalidInputError, match="second_abort_timeout"):
        await stop_tree(opencode_client, "ses_x", second_abort_timeout=0)


class WalkCounter(httpx.AsyncBaseTransport):
    """Counts the stop's requests (aborts and child listings) in flight, and holds them
    until ``release`` once ``limit`` are in flight, so that the bound is reached."""

    def __init__(self, inner: httpx.AsyncBaseTransport, limit: int) -> None:
        self.inner = inner
        self.limit = limit
        self.in_flight = 0
        self.peak = 0
        self.paths: list[str] = []  # in flight now
        self.reached = asyncio.Event()
        self.release = asyncio.Event()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if not request.url.path.endswith(("/abort", "/children")):
            return await self.inner.handle_async_request(request)
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        self.paths.append(request.url.path)
        try:
            if self.in_flight >= self.limit:
                self.reached.set()
            await self.release.wait()
            return await self.inner.handle_async_request(request)
        finally:
            self.in_flight -= 1
            self.paths.remove(request.url.path)


async def test_interrupt_of_a_wide_known_tree_never_has_more_than_8_requests_in_flight(
    fake: FakeOpenCodeServer,
) -> None:
    """20 known children with a known grandchild each: 40 seeded aborts and 42 second
    aborts (the root and every known child, twice) join the walk's own aborts and
    listings, and together they never exceed the 8 permits."""
    counter = WalkCounter(fake.transport, limit=8)
    async with OpenCodeAdapter(
        fake.base_url, transport=counter, timeouts=Timeouts(abort=5.0, tree=5.0)
    ) as oc:
        rec = Recorder(oc)
        try:
            fake.script("hang", [Hang()])
            info = await oc.start_session(T)
            root = info.session_id
            await oc.send_turn(T, "go [[script:hang]]")
            tree = [root]
            for _ in range(20):
                child = fake.add_session(parent_id=root, busy=True, emit=True)
                tree += [child, fake.add_session(parent_id=child, busy=True, emit=True)]
            await caught_up(fake, oc)
            known = await oc.session_tree(T)
            assert sorted(n.session_id for n in known.sessions) == sorted(tree)
            stop = asyncio.create_task(oc.interrupt_turn(T))
            async with asyncio.timeout(5):
                await counter.reached.wait()
            await caught_up(fake, oc)
            assert counter.in_flight == 8, "a free permit is taken, no ninth request goes out"
            # the root's abort, and behind it while it is held the first seven known
            # sessions' (seeds go out by depth, in the order the events showed them)
            children = tree[1::2]
            held = [f"/session/{s}/abort" for s in [root, *children[:7]]]
            assert sorted(counter.paths) == sorted(held)
            counter.release.set()
            result = await stop
            assert result.stop is not None and result.stop.ok
            assert sorted(result.stop.session_ids) == sorted(tree)
            done = log(fake)
            assert done.count(abort_of(root)) == ROOT_ABORTS_PER_STOP
            assert all(done.count(abort_of(c)) == 3 for c in children), "second aborts too"
            assert counter.peak == 8 and result.stop.max_in_flight == 8
        finally:
            counter.release.set()
            await rec.close()
