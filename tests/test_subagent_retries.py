"""A subagent's provider retries reach the host on its task (``task.updated``), as the
root's reach it as ``turn.retrying``: each attempt once, the provider's message and
the attempt number in its text, the native status in ``raw``."""

from __future__ import annotations

from adapter import OpenCodeAdapter
from adapter.testing.fake import Fail, FakeOpenCodeServer, Task, Text
from tests.adapter_support import Recorder

T = "thread"


async def test_a_subagents_retries_are_reported_on_its_task(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("child", [Fail(message="Overloaded", retries=2, retry_delay=0.05)])
    fake.script("root", [Task("explore", "child"), Text("done")])
    await oc.start_session(T)
    turn = await oc.send_turn(T, "go [[script:root]]")
    started = await rec.wait_for("task.started")
    await rec.wait_for("turn.completed")
    retries = [
        e
        for e in rec.of("task.updated", T)
        if e.session_id == started.session_id and "retrying" in (e.text or "")
    ]
    assert [e.text for e in retries] == [
        "retrying (attempt 1): Overloaded",
        "retrying (attempt 2): Overloaded",
    ]
    assert all(e.turn_id == turn.turn_id for e in retries)
    assert [e.retry.attempt for e in retries if e.retry] == [1, 2]
    assert all(e.retry and e.retry.message == "Overloaded" for e in retries)
    others = [e for e in rec.of("task.updated", T) if "retrying" not in (e.text or "")]
    assert all(e.retry is None for e in others)
    assert retries[0].to_dict()["retry"]["attempt"] == 1
    assert all((e.raw or {}).get("type") == "session.status" for e in retries)
    assert rec.of("turn.retrying", T) == [], "the root did not retry"


async def test_a_subagents_status_set_to_retry_is_reported_once(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    root = (await oc.start_session(T)).session_id
    child = fake.add_session(parent_id=root, title="API child", emit=True)
    await rec.wait_for("task.started")
    retry = {"type": "retry", "attempt": 3, "message": "Rate limited", "next": 1_900_000_000_000}
    fake.set_status(child, retry)
    fake.set_status(child, retry)  # said again: not a new attempt
    fake.set_status(child, {"type": "busy"})
    fake.set_status(child, {**retry, "attempt": 4})
    await rec.wait_for("task.updated", lambda e: "attempt 4" in (e.text or ""))
    assert [e.retry.next_at for e in rec.of("task.updated", T) if e.retry] == [1.9e9, 1.9e9]
    texts = [e.text for e in rec.of("task.updated", T)]
    assert texts == ["retrying (attempt 3): Rate limited", "retrying (attempt 4): Rate limited"]
