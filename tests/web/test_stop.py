"""``POST /threads/{id}/stop``: one stop however many clicks, and a failed stop is a 502."""

from __future__ import annotations

import asyncio

import httpx

from adapter import OpenCodeAdapter
from adapter.testing import caught_up
from adapter.testing.fake import FakeOpenCodeServer, Hang, Task, Tool
from tests.adapter_support import Recorder, held_abort, refuse

T = "t"


def root_aborts(fake: FakeOpenCodeServer, root: str) -> int:
    return sum(
        1 for r in fake.requests if r.method == "POST" and r.path == f"/session/{root}/abort"
    )


async def running_tree(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer, rec: Recorder, name: str
) -> tuple[str, str]:
    """Root -> task child (hanging), after a finished tool call of the root."""
    fake.script(f"{name}-child", [Hang()])
    fake.script(
        name,
        [Tool("bash", {"command": "echo hi"}, output="hi\n"), Task("explore", f"{name}-child")],
    )
    if not any(t["thread_id"] == T for t in (await client.get("/threads")).json()):
        await client.post("/threads", json={"thread_id": T})
    root = (await client.get(f"/threads/{T}")).json()["session_id"]
    sent = await client.post(f"/threads/{T}/turns", json={"text": f"[[script:{name}]]"})
    await rec.wait_for("child.started", lambda e: e.turn_id == sent.json()["turn_id"])
    return root, sent.json()["turn_id"]


async def test_a_stop_answers_the_report_and_what_finished(
    app_client: httpx.AsyncClient, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    root, turn_id = await running_tree(app_client, fake, rec, "one")
    response = await app_client.post(f"/threads/{T}/stop")
    assert response.status_code == 200
    body = response.json()
    assert body["turn_id"] == turn_id
    stop = body["stop"]
    assert stop["ok"] is True and stop["root_id"] == root
    assert len(stop["sessions"]) == 2 and stop["sessions"][0]["session_id"] == root
    for session in stop["sessions"]:
        assert set(session) >= {"session_id", "parent_id", "depth", "outcome", "started", "ended"}
    assert {"elapsed", "max_in_flight"} <= set(stop)
    tools = body["partial"]["tool_calls"]
    assert any(t["output"] == "hi\n" for t in tools), body["partial"]
    assert all(not fake.sessions[s["session_id"]].busy for s in stop["sessions"])


async def test_fifty_concurrent_stops_share_one_stop(
    app_client: httpx.AsyncClient, oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    # What one stop of this tree costs, done through the adapter directly.
    root, _ = await running_tree(app_client, fake, rec, "direct")
    before = root_aborts(fake, root)
    await oc.interrupt_turn(T)
    per_stop = root_aborts(fake, root) - before
    assert per_stop >= 1
    await rec.wait_for("turn.aborted")

    root, turn_id = await running_tree(app_client, fake, rec, "clicked")
    before = root_aborts(fake, root)
    hold = fake.hold("POST", f"/session/{root}/abort")
    clicks = [asyncio.create_task(app_client.post(f"/threads/{T}/stop")) for _ in range(50)]
    await hold.wait_started()
    await caught_up(fake, oc)  # every click reaches interrupt_turn while the stop is held
    assert (await app_client.get(f"/threads/{T}")).json()["status"] == "stopping"
    hold.release()
    responses = await asyncio.gather(*clicks)
    assert {r.status_code for r in responses} == {200}
    bodies = [r.json() for r in responses]
    assert all(b == bodies[0] for b in bodies)
    assert bodies[0]["turn_id"] == turn_id
    assert root_aborts(fake, root) - before == per_stop, "fifty clicks made more than one stop"
    assert len(rec.of("turn.aborted", T)) == 2


async def test_a_failed_stop_is_502_with_its_report(
    app_client: httpx.AsyncClient, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    root, _ = await running_tree(app_client, fake, rec, "refused")
    refusal = refuse(fake, "POST", f"/session/{root}/abort", "refused", times=None)
    response = await app_client.post(f"/threads/{T}/stop")
    assert response.status_code == 502
    body = response.json()
    assert body["error"]["type"] == "stop_failed" and body["error"]["message"]
    assert body["stop"]["ok"] is False and body["stop"]["root_id"] == root
    [root_entry] = [s for s in body["stop"]["sessions"] if s["session_id"] == root]
    assert root_entry["outcome"] != "aborted" and "refused" in (root_entry["error"] or "")
    refusal.remove()
    retried = await app_client.post(f"/threads/{T}/stop")
    assert retried.status_code == 200 and retried.json()["stop"]["ok"] is True


async def test_a_stop_with_no_turn_running_is_a_stop_of_nothing(
    app_client: httpx.AsyncClient,
) -> None:
    await app_client.post("/threads", json={"thread_id": T})
    response = await app_client.post(f"/threads/{T}/stop")
    assert response.status_code == 200
    assert response.json()["turn_id"] is None


async def test_a_stop_of_a_closing_thread_is_a_conflict(
    app_client: httpx.AsyncClient, oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    root, _ = await running_tree(app_client, fake, rec, "closing")
    hold, closing = await held_abort(fake, root, oc.stop_session(T))
    response = await app_client.post(f"/threads/{T}/stop")
    assert response.status_code == 409 and response.json()["error"]["type"] == "conflict"
    hold.release()
    await closing
