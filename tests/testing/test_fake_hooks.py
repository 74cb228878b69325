"""The fake's hooks: what each saw (respx's ``route.calls``), and faults that stick.

The client retries an idempotent request (an abort among them) on a 5xx, so a fault
injected once is retried away; ``fake.fail_abort`` fails every attempt of one
session's abort, and a stop of its tree then fails naming that session.
"""

from __future__ import annotations

import httpx
import pytest

from adapter import OpenCodeAdapter, OpenCodeClient, RequestError, TreeStopError
from adapter.testing import RecordedRequest
from adapter.testing.fake import FakeOpenCodeServer, Hang
from tests.adapter_support import start_scripted_turn

T = "thread-1"


async def test_a_hook_lists_every_request_it_saw_in_order(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    a, b = fake.add_session(), fake.add_session()
    hook = fake.fail("POST", "/session/{id}/abort", status=503, times=1)
    assert hook.calls == [] and hook.call_count == 0 and not hook.called
    codes = [(await fake_http.post(f"/session/{sid}/abort")).status_code for sid in (a, b, a)]
    assert codes == [503, 200, 200]
    assert hook.call_count == 3 and hook.called
    assert all(isinstance(call, RecordedRequest) for call in hook.calls)
    assert [call.session_id for call in hook.calls] == [a, b, a]
    assert [call.status for call in hook.calls] == [503, 200, 200]
    assert hook.calls[0] is fake.requests[-3], "the same record as fake.requests"


async def test_a_hold_and_a_custom_hook_record_their_calls(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    seen: list[str] = []

    async def watch(request: httpx.Request) -> None:
        seen.append(request.url.path)

    hook = fake.on("*", "/session*", watch)
    hold = fake.hold("GET", "/session/status")
    hold.release()
    await fake_http.post("/session", json={"title": "x"})
    await fake_http.get("/session/status")
    assert [(c.method, c.path) for c in hook.calls] == [
        ("POST", "/session"),
        ("GET", "/session/status"),
    ]
    assert hook.calls[0].body == {"title": "x"}
    assert hold.hook is not None and hold.hook.call_count == 1
    assert hold.call_count == 1 and hold.calls == hold.hook.calls, "a hold is a hook too"
    assert fake.hold_run_end().calls == [], "a run-end hold holds runs, not requests"


async def test_a_fault_injected_once_is_retried_away_by_the_client(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer
) -> None:
    """The trap of ``fail(..., status=503, times=1)``: the client retries the abort."""
    info, _turn = await start_scripted_turn(oc, fake, T, "hang", [Hang()])
    child = fake.add_session(parent_id=info.session_id, busy=True)
    hook = fake.fail("POST", f"/session/{child}/abort", status=503, times=1)
    result = await oc.interrupt_turn(T)
    assert result.stop is not None and result.stop.ok
    assert [call.status for call in hook.calls] == [503, 200]
    assert not fake.sessions[child].busy


async def test_fail_abort_fails_every_attempt_and_the_stop_names_the_session(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer
) -> None:
    info, _turn = await start_scripted_turn(oc, fake, T, "hang", [Hang()])
    root = info.session_id
    failing = fake.add_session(parent_id=root, busy=True)
    sibling = fake.add_session(parent_id=root, busy=True)
    hook = fake.fail_abort(failing)
    with pytest.raises(TreeStopError) as caught:
        await oc.interrupt_turn(T)
    stop = caught.value
    assert stop.first_failure is not None and stop.first_failure.session_id == failing
    assert [s.session_id for s in stop.report.failures] == [failing]
    assert hook.call_count >= 4, "every attempt failed, the client's retries included"
    assert {call.status for call in hook.calls} == {503}
    assert {call.session_id for call in hook.calls} == {failing}
    assert fake.sessions[failing].busy
    assert not fake.sessions[root].busy and not fake.sessions[sibling].busy
    hook.remove()
    result = await oc.interrupt_turn(T)
    assert result.stop is not None and result.stop.ok and not fake.sessions[failing].busy


async def test_the_client_tries_an_abort_four_times_and_fail_abort_fails_them_all(
    fake: FakeOpenCodeServer,
) -> None:
    sid = fake.add_session(busy=True)
    async with OpenCodeClient(fake.base_url, transport=fake.transport) as client:
        once = fake.fail("POST", f"/session/{sid}/abort", status=503, times=1)
        assert await client.abort(sid) is True
        assert [call.status for call in once.calls] == [503, 200]
        once.remove()
        sticking = fake.fail_abort(sid)
        with pytest.raises(RequestError, match="after 4 attempts") as caught:
            await client.abort(sid)
        assert caught.value.status == 503
        assert sticking.call_count == 4
        prompt = fake.fail("POST", "/session/{id}/prompt_async", status=503, times=1)
        with pytest.raises(RequestError):
            await client.prompt_async(sid, "hi")
        assert prompt.call_count == 1, "a prompt is never retried"


async def test_fail_abort_answers_its_status_and_body(
    fake_http: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    sid = fake.add_session()
    refusal = {"name": "BadRequest", "data": {"message": "no"}}
    fake.fail_abort(sid, status=400, body=refusal)
    for _ in range(3):
        response = await fake_http.post(f"/session/{sid}/abort")
        assert response.status_code == 400 and response.json() == refusal
    other = fake.add_session()
    assert (await fake_http.post(f"/session/{other}/abort")).json() is True
