"""A steer the server refuses, with nothing sent after it, leaves a turn that still ends (B31).

A steer is a prompt sent while a turn runs: it joins that turn, which then waits for its
echo before it may end. If the server refuses the steer, no echo will ever come; the
refused steer must be forgotten so that the turn ends ``turn.completed`` as soon as its
run does, with the usual settle, not once the echo watchdog (``Timeouts.echo``) gives up
on it (as ``failed``, ``PromptNotStarted``). Another, accepted, steer would hide the
damage (its echo moves the turn on), so here nothing is sent after the refused one.

Every way a ``prompt_async`` can fail is covered: a 400, a 5xx (the client never retries
a prompt: a retry could run it twice), a connection refused, an answer lost (the adapter
then asks whether the message landed: it did not), and no answer within
``Timeouts.submit``. Each in two orders: refused while the run goes on, and refused
after the run has already gone idle (its idle came while the turn waited for the steer's
echo).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx
import pytest

from adapter import OpenCodeAdapter, RequestError, Timeouts
from adapter.testing import FakeOpenCodeServer, caught_up
from adapter.testing.fake import Hook, Permission, Text
from tests.adapter_support import Recorder, refuse

T = "t"
PROMPT = "/session/{id}/prompt_async"
#: The echo watchdog's bound: a turn that waits for the refused steer's echo ends only
#: after it (and then ``failed``).
ECHO = 30.0
#: How long the turn may take to end once its run has: a tenth of ``ECHO``, far more
#: than the settle takes (a status read), far less than the watchdog would.
PROMPTLY = ECHO / 10
#: How long the server may take to accept a prompt (the "no answer" refusal waits it out).
SUBMIT = 1.0


@pytest.fixture
def timeouts() -> Timeouts:
    return Timeouts(connect=2.0, echo=ECHO, submit=SUBMIT)


def _bad_request(fake: FakeOpenCodeServer) -> Hook:
    return refuse(fake, "POST", PROMPT, "steer refused")


def _server_error(fake: FakeOpenCodeServer) -> Hook:
    # times=None: any retry would fail too (there must be none: see the module docstring).
    return fake.fail("POST", PROMPT, status=503, times=None)


def _raising(fake: FakeOpenCodeServer, error: type[httpx.TransportError]) -> Hook:
    async def fail(request: httpx.Request) -> httpx.Response:
        raise error("injected transport failure", request=request)

    return fake.on("POST", PROMPT, fail)


def _connection_refused(fake: FakeOpenCodeServer) -> Hook:
    return _raising(fake, httpx.ConnectError)


def _answer_lost(fake: FakeOpenCodeServer) -> Hook:
    # Delivery unknown: the adapter reads the message back, and the fake never had it.
    return _raising(fake, httpx.RemoteProtocolError)


def _never_answered(fake: FakeOpenCodeServer) -> Hook:
    async def hang(request: httpx.Request) -> httpx.Response:
        await asyncio.Event().wait()  # cancelled once Timeouts.submit has passed
        raise AssertionError("unreachable")

    return fake.on("POST", PROMPT, hang)


REFUSALS: dict[str, Callable[[FakeOpenCodeServer], Hook]] = {
    "400": _bad_request,
    "503": _server_error,
    "connection-refused": _connection_refused,
    "answer-lost": _answer_lost,
    "no-answer": _never_answered,
}


async def _turn_waiting_on_a_permission(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> tuple[str, str, str]:
    """A turn whose run waits for a permission reply: its session, its id and the
    request's id."""
    fake.script("asks", [Permission("bash", ["ls"]), Text("answered")])
    info = await oc.start_session(T)
    turn = await oc.send_turn(T, "start [[script:asks]]")
    opened = await rec.wait_for("request.opened")
    return info.session_id, turn.turn_id, opened.request_id


async def _refused_steer(oc: OpenCodeAdapter, turn_id: str) -> None:
    with pytest.raises(RequestError) as caught:
        await oc.send_turn(T, "refused steer")
    assert caught.value.operation == "prompt_async"
    [info] = oc.list_sessions()
    assert info.status == "running" and info.active_turn_id == turn_id, "the turn goes on"


async def _ends_completed(
    fake: FakeOpenCodeServer, rec: Recorder, turn_id: str, refusal: Hook
) -> None:
    """The turn ends ``completed``, promptly, and it was the steer's only send."""
    done = await rec.wait_for("turn.completed", timeout=PROMPTLY)
    assert done.turn_id == turn_id and done.state == "completed"
    assert rec.types(T).count("turn.started") == 1
    assert rec.of("turn.aborted", T) == [] and rec.of("turn.failed", T) == []
    assert refusal.call_count == 1, "a prompt is never sent twice"
    assert len(fake.calls("POST", PROMPT)) == 2, "the turn's prompt and the refused steer"


@pytest.mark.parametrize("refusal", REFUSALS)
async def test_a_steer_refused_while_the_run_goes_on_is_forgotten(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder, refusal: str
) -> None:
    _, turn_id, request_id = await _turn_waiting_on_a_permission(oc, fake, rec)
    hook = REFUSALS[refusal](fake)
    await _refused_steer(oc, turn_id)
    await caught_up(fake, oc)
    assert rec.of("turn.completed", T) == [] and rec.of("turn.aborted", T) == []
    await oc.respond_to_request(T, request_id, "accept")  # the run ends, nothing more is sent
    await _ends_completed(fake, rec, turn_id, hook)


@pytest.mark.parametrize("refusal", REFUSALS)
async def test_a_steer_refused_after_the_run_went_idle_is_forgotten(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder, refusal: str
) -> None:
    """The run's idle comes while the steer is on its way (the turn waits for its echo,
    so that idle cannot end it); then the steer is refused: nothing else will come."""
    root, turn_id, request_id = await _turn_waiting_on_a_permission(oc, fake, rec)
    held = fake.hold("POST", PROMPT)  # runs first: the refusal comes once it is released
    hook = REFUSALS[refusal](fake)
    steer = asyncio.create_task(_refused_steer(oc, turn_id))
    await held.wait_started()
    await oc.respond_to_request(T, request_id, "accept")
    await fake.wait_until(lambda: not fake.sessions[root].busy, description="the run's idle")
    await caught_up(fake, oc)
    assert rec.of("turn.completed", T) == [], "the turn waits while the steer may land"
    held.release()
    await steer
    await _ends_completed(fake, rec, turn_id, hook)
