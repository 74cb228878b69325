"""``POST /threads/{id}/subagents/{session_id}/stop``: one subagent stopped, nothing else.

The scenario is ``tests/test_stop_subagent.py``'s (measured on 1.18.34): two parallel
``task`` children, ``alpha`` hangs and ``beta`` waits on a permission request the test
answers once the stop returned, so "beta still runs" is a fact of the test, not of timing.
A target outside the thread (its root, another thread's subagent, an unknown or malformed
id) is refused with nothing sent to OpenCode.
"""

from __future__ import annotations

import httpx

from adapter import OpenCodeAdapter
from adapter.testing.fake import FakeOpenCodeServer
from tests.adapter_support import Recorder
from tests.test_stop_subagent import aborted, script_parallel, started_tasks
from tests.web.test_api import error_of

T = "t"


async def running(
    client: httpx.AsyncClient, fake: FakeOpenCodeServer, rec: Recorder, thread: str = T
) -> tuple[str, dict[str, str]]:
    """The parallel turn running on ``thread`` (made through the app): its root, and
    its tasks' sessions by description."""
    script_parallel(fake, depth=1)
    root = (await client.post("/threads", json={"thread_id": thread})).json()["session_id"]
    sent = await client.post(f"/threads/{thread}/turns", json={"text": "go [[script:root]]"})
    assert sent.status_code == 202, sent.text
    tasks = await started_tasks(rec, 2)
    return root, {d: e.session_id for d, e in tasks.items()}


def stop_url(session_id: str, thread: str = T) -> str:
    return f"/threads/{thread}/subagents/{session_id}/stop"


async def test_the_report_of_one_subagent_and_the_sibling_and_the_turn_go_on(
    app_client: httpx.AsyncClient, oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    root, tasks = await running(app_client, fake, rec)
    alpha, beta = tasks["alpha"], tasks["beta"]
    response = await app_client.post(stop_url(alpha))
    assert response.status_code == 200, response.text
    report = response.json()
    assert report["ok"] is True and report["root_id"] == alpha
    assert [s["session_id"] for s in report["sessions"]] == [alpha]
    assert report["sessions"][0]["outcome"] == "aborted"
    assert {"elapsed", "max_in_flight", "requests"} <= set(report)
    assert set(aborted(fake)) == {alpha}
    assert fake.sessions[beta].busy and fake.sessions[root].busy
    assert (await app_client.get(f"/threads/{T}")).json()["status"] == "running"
    stopped = await rec.wait_for("task.completed", lambda e: e.session_id == alpha)
    assert stopped.status == "stopped"
    [request] = rec.of("request.opened")
    await oc.respond_to_request(T, request.request_id, "accept")
    completed = await rec.wait_for("turn.completed")
    assert completed.state == "completed" and rec.of("turn.aborted") == []
    assert "root answer" in "".join(e.delta for e in rec.of("content.delta"))


async def test_targets_outside_the_thread_are_refused_and_nothing_is_stopped(
    app_client: httpx.AsyncClient, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    root, tasks = await running(app_client, fake, rec)
    await app_client.post("/threads", json={"thread_id": "other"})
    other_root = (await app_client.get("/threads/other")).json()["session_id"]
    for session_id, status, kind in [
        (root, 422, "invalid_input"),  # the root: the turn's Stop stops it
        ("ses_unknown", 404, "not_found"),
        (other_root, 404, "not_found"),  # another thread's session
        ("not-a-session", 422, "invalid_input"),
        ("ses_a%20b", 422, "invalid_input"),
        ("ses_" + "x" * 200, 422, "invalid_input"),
    ]:
        response = await app_client.post(stop_url(session_id))
        assert response.status_code == status, (session_id, response.text)
        error = error_of(response)
        assert error["type"] == kind, (session_id, error)
        if status == 422:
            assert error["field"] == "session_id", error
    # A subagent of this thread, addressed through another thread: not there.
    elsewhere = await app_client.post(stop_url(tasks["alpha"], "other"))
    assert elsewhere.status_code == 404 and error_of(elsewhere)["type"] == "not_found"
    unknown_thread = await app_client.post(stop_url(tasks["alpha"], "nope"))
    assert error_of(unknown_thread)["type"] == "unknown_thread"
    assert aborted(fake) == []
    assert all(fake.sessions[s].busy for s in (root, *tasks.values()))


async def test_the_body_is_guarded_as_on_every_route(
    app_client: httpx.AsyncClient, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    _, tasks = await running(app_client, fake, rec)
    url = stop_url(tasks["alpha"])
    field = await app_client.post(url, json={"session_id": tasks["beta"]})
    assert field.status_code == 422 and error_of(field)["field"] == "session_id"
    not_json = await app_client.post(url, content=b"{}", headers={"Content-Type": "text/plain"})
    assert not_json.status_code == 415
    too_big = await app_client.post(
        url, content=b" " * (4 * 1024 * 1024 + 1), headers={"Content-Type": "application/json"}
    )
    assert too_big.status_code == 413
    assert (await app_client.get(url)).status_code == 405
    assert aborted(fake) == []
