"""Requests of children the adapter did not see born: found, announced once, never stale.

A request (permission, question) of a session no thread owns yet is routed by its
ancestry (``GET /session/{id}`` up to a known session, retried while it fails). These
tests pin what a host sees around that lookup: a request answered elsewhere while the
lookup retries is never announced and stops the lookup; a child's or grandchild's
request raised while the event stream was down is recovered on the reconnect; a
reconnect during the resume's recovery announces each live request once and none
that was answered meanwhile.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from adapter import OpenCodeAdapter, Timeouts
from adapter.testing import caught_up
from adapter.testing.fake import FakeOpenCodeServer, Permission, Question, Tool
from tests.adapter_support import Recorder

T = "thread-1"
PROCEED = {
    "question": "Proceed?",
    "header": "Proceed",
    "options": [{"label": "yes", "description": ""}, {"label": "no", "description": ""}],
}
#: How a request is answered by another client (the TUI), per kind of answer.
ANSWERS: dict[str, tuple[str, dict[str, Any]]] = {
    "permission": ("/permission/{id}/reply", {"reply": "once"}),
    "question": ("/question/{id}/reply", {"answers": [["yes"]]}),
    "question-rejected": ("/question/{id}/reject", {}),
}
#: The ``timeouts`` of ``oc`` for one test: the lookup's backoff base shortened, so that
#: its cap comes soon.
SHORT_LOOKUP_RETRY = pytest.mark.parametrize(
    "timeouts", [Timeouts(owner_lookup_retry=0.01)], ids=["short-lookup-retry"]
)
#: The canonical events that announce a request.
ANNOUNCED = ("request.opened", "user-input.requested")


def unseen_grandchild(fake: FakeOpenCodeServer, root_id: str) -> tuple[str, str]:
    """``(middle, grandchild)`` under the root, created with no event: only the
    ancestry lookup tells whose requests the grandchild raises."""
    middle = fake.add_session(parent_id=root_id)
    return middle, fake.add_session(parent_id=middle)


async def prompt(fake: FakeOpenCodeServer, session_id: str, script: str) -> None:
    """Another client starts a run of ``session_id`` on the fake's ``script``."""
    async with fake.client() as http:
        body = {"parts": [{"type": "text", "text": f"go [[script:{script}]]"}]}
        await http.post(f"/session/{session_id}/prompt_async", json=body)


async def pending_request(fake: FakeOpenCodeServer, session_id: str) -> str:
    await fake.wait_until(lambda: bool(fake.sessions[session_id].pending_requests))
    [request_id] = fake.sessions[session_id].pending_requests
    return request_id


async def answer_elsewhere(fake: FakeOpenCodeServer, how: str, request_id: str) -> None:
    path, body = ANSWERS[how]
    async with fake.client() as http:
        response = await http.post(path.format(id=request_id), json=body)
    assert response.status_code == 200


async def adapter_caught_up(
    fake: FakeOpenCodeServer, rec: Recorder, root_id: str, mark: str
) -> None:
    """Everything emitted so far has been read by the adapter: a root title change
    emitted now comes after it on the same stream, and the host sees it."""
    async with fake.client() as http:
        await http.patch(f"/session/{root_id}", json={"title": mark})
    await rec.wait_for("thread.metadata.updated", lambda e: e.title == mark)


def lookups_running() -> int:
    """The ancestry lookups still running (``SessionOwners.route_request``), told by their
    asyncio task's name (``…:route-request``). Whether a lookup still retries has no
    public view, and these tests assert what holds once every lookup is over; only the
    task's name is read, through asyncio's public ``all_tasks``."""
    tasks = asyncio.all_tasks()
    return sum(1 for t in tasks if t.get_name().endswith(":route-request") and not t.done())


async def settled(fake: FakeOpenCodeServer, rec: Recorder, root_id: str) -> None:
    """The adapter has no ancestry lookup left running, and the host has seen every
    event it emitted."""
    await fake.wait_until(
        lambda: lookups_running() == 0, timeout=10.0, description="every ancestry lookup ended"
    )
    await adapter_caught_up(fake, rec, root_id, "settled")


def of_request(request_id: str) -> Callable[[Any], bool]:
    """Matches the events of the request ``request_id``."""
    return lambda event: bool(event.request_id == request_id)


class FlakyAncestry:
    """``GET /session/{middle}`` fails (503) until :meth:`heal`; counts the tries."""

    def __init__(self, fake: FakeOpenCodeServer, middle: str) -> None:
        self.tries = 0
        self.tried = asyncio.Event()
        self._healed = False
        fake.on("GET", f"/session/{middle}", self._handle)

    def heal(self) -> None:
        self._healed = True

    async def _handle(self, request: httpx.Request) -> httpx.Response | None:
        if self._healed:
            return None
        self.tries += 1
        self.tried.set()
        return httpx.Response(503, json={"name": "UnknownError", "data": {"message": "flaky"}})


def script_asking(fake: FakeOpenCodeServer, how: str) -> str:
    step = Permission("bash", ["make *"]) if how == "permission" else Question([PROCEED])
    fake.script("asks", [step])
    return "asks"


# -- a reply during a retrying ancestry lookup (B50, B52) ------------------------------------


def ask_outside_a_tool_call(fake: FakeOpenCodeServer, session_id: str) -> str:
    """The fake emits a permission request of ``session_id`` that no tool call raised; its id."""
    request_id = "per_asked_from_outside_a_tool_call"
    fake.emit(
        "permission.asked",
        {"id": request_id, "sessionID": session_id, "permission": "edit", "patterns": ["*.py"]},
    )
    return request_id


@pytest.mark.parametrize("how", list(ANSWERS))
async def test_a_grandchilds_request_answered_elsewhere_while_its_ancestry_lookup_retries_is_never_announced(  # noqa: E501
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder, how: str
) -> None:
    """The lookup succeeds only after the answer: announcing the request then would
    show a prompt nobody waits for, and answering it would fail."""
    info = await oc.start_session(T)
    middle, grandchild = unseen_grandchild(fake, info.session_id)
    ancestry = FlakyAncestry(fake, middle)
    await prompt(fake, grandchild, script_asking(fake, how))
    request_id = await pending_request(fake, grandchild)
    async with asyncio.timeout(5):
        await ancestry.tried.wait()  # the lookup is retrying
    await answer_elsewhere(fake, how, request_id)
    await adapter_caught_up(fake, rec, info.session_id, "after the answer")
    ancestry.heal()  # a lookup still going would now find the thread
    await settled(fake, rec, info.session_id)
    assert [e for e in rec.events if e.type in ANNOUNCED] == []
    assert not rec.of("runtime.warning")
    assert oc.pending_requests(T) == []


@SHORT_LOOKUP_RETRY
async def test_an_ancestry_lookup_stops_retrying_once_its_request_is_answered(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    """The ancestry never answers, but the request was answered elsewhere: no more
    tries (at most the one in flight) and no warning about a request that is done."""
    info = await oc.start_session(T)
    middle, grandchild = unseen_grandchild(fake, info.session_id)
    ancestry = FlakyAncestry(fake, middle)
    await prompt(fake, grandchild, script_asking(fake, "permission"))
    request_id = await pending_request(fake, grandchild)
    async with asyncio.timeout(5):
        await ancestry.tried.wait()
    await answer_elsewhere(fake, "permission", request_id)
    await adapter_caught_up(fake, rec, info.session_id, "after the answer")
    tries = ancestry.tries
    await settled(fake, rec, info.session_id)
    assert ancestry.tries <= tries + 1
    assert not rec.of("runtime.warning")
    assert not rec.of("request.opened")


async def test_a_lookup_whose_first_request_is_answered_still_delivers_the_sessions_other_request(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    """Two requests of one session wait on one lookup: the answer to one must not stop
    the lookup for the other (nothing lost), nor let the answered one through."""
    info = await oc.start_session(T)
    middle, grandchild = unseen_grandchild(fake, info.session_id)
    lookup = fake.hold("GET", f"/session/{middle}")
    await prompt(fake, grandchild, script_asking(fake, "permission"))
    answered = await pending_request(fake, grandchild)
    await lookup.wait_started()
    other = ask_outside_a_tool_call(fake, grandchild)
    await answer_elsewhere(fake, "permission", answered)
    await adapter_caught_up(fake, rec, info.session_id, "after the answer")
    lookup.release()
    opened = await rec.wait_for("request.opened", timeout=10.0)
    assert (opened.thread_id, opened.request_id, opened.session_id) == (T, other, grandchild)
    await settled(fake, rec, info.session_id)
    assert [e.request_id for e in rec.of("request.opened")] == [other]
    assert not rec.of("runtime.warning")


@SHORT_LOOKUP_RETRY
async def test_every_request_waiting_on_a_lookup_that_fails_is_surfaced_as_a_warning(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    """Never dropped silently: the session's second request, which waited on the
    first one's lookup, gets its own warning when the ancestry stays unreadable."""
    info = await oc.start_session(T)
    middle, grandchild = unseen_grandchild(fake, info.session_id)
    lookup = fake.hold("GET", f"/session/{middle}")  # its first try, until both wait
    FlakyAncestry(fake, middle)  # then every try fails
    await prompt(fake, grandchild, script_asking(fake, "permission"))
    first = await pending_request(fake, grandchild)
    await lookup.wait_started()
    other = ask_outside_a_tool_call(fake, grandchild)
    await adapter_caught_up(fake, rec, info.session_id, "both asked")
    lookup.release()
    await settled(fake, rec, info.session_id)
    warned = sorted(e.request_id for e in rec.of("runtime.warning", T))
    assert warned == sorted([first, other])
    assert not rec.of("request.opened")


# -- requests raised while the event stream was down (B47) -------------------------------------


async def test_a_childs_and_a_grandchilds_requests_raised_during_an_outage_are_recovered_once(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    """The stream has no replay: the reconnect's recovery lists them, the grandchild's
    through its ancestry, and each reaches the parent thread once, answerable."""
    fake.script("child-asks", [Permission("bash", ["make child"])])
    fake.script("grandchild-asks", [Permission("bash", ["make grandchild"])])
    info = await oc.start_session(T)
    child = fake.add_session(parent_id=info.session_id, emit=True)
    await rec.wait_for("child.started", lambda e: e.session_id == child)
    _, grandchild = unseen_grandchild(fake, info.session_id)
    reconnect = fake.hold("GET", "/event")
    fake.drop_event_streams()
    await reconnect.wait_started()
    await prompt(fake, child, "child-asks")
    await prompt(fake, grandchild, "grandchild-asks")
    asked = {await pending_request(fake, child), await pending_request(fake, grandchild)}
    reconnect.release()
    for request_id in asked:
        opened = await rec.wait_for("request.opened", of_request(request_id))
        assert opened.thread_id == T
        await oc.respond_to_request(T, request_id, "accept")
        resolved = await rec.wait_for("request.resolved", of_request(request_id))
        assert resolved.decision == "accept"
    assert sorted(e.request_id for e in rec.of("request.opened")) == sorted(asked)
    assert {e.session_id for e in rec.of("request.opened")} == {child, grandchild}


# -- a reconnect during the resume's recovery (B48) ---------------------------------------------


class StaleListing:
    """Each ``GET /permission`` lists the pending requests at once, then answers only
    when the gate opens: a listing read while the server went on."""

    _INNER = "x-test-inner"

    def __init__(self, fake: FakeOpenCodeServer) -> None:
        self.listed = 0
        self.gate = asyncio.Event()
        self._fake = fake
        fake.on("GET", "/permission", self._handle)

    async def _handle(self, request: httpx.Request) -> httpx.Response | None:
        if self._INNER in request.headers:
            return None
        inner = httpx.Request(
            request.method, request.url, headers={**request.headers, self._INNER: "1"}
        )
        fresh = await self._fake.transport.handle_async_request(inner)
        body = await fresh.aread()
        self.listed += 1
        await self.gate.wait()
        return httpx.Response(fresh.status_code, content=body, headers=fresh.headers)


async def test_a_reconnect_while_the_resumes_recovery_reads_announces_each_live_request_once(
    oc: OpenCodeAdapter,
    fake: FakeOpenCodeServer,
    rec: Recorder,
) -> None:
    """Both recoveries (the resume's, the reconnect's) read the same listing: the root's
    and a grandchild's live requests are announced once each; a grandchild's request
    answered elsewhere after the listing was read is not announced at all (its tool
    runs on, so it looks live; only its ``replied`` event tells)."""
    fake.script("root-asks", [Permission("bash", ["make root"])])
    fake.script("asks", [Permission("bash", ["make live"])])
    busy = Tool("bash", {"command": "make answered"}, duration=float("inf"))
    fake.script("answered", [Permission("bash", ["make answered"], tool=busy)])
    root = fake.add_session(title="elsewhere")
    middle, live = unseen_grandchild(fake, root)
    answered = fake.add_session(parent_id=middle)
    for session_id, script in ((root, "root-asks"), (live, "asks"), (answered, "answered")):
        await prompt(fake, session_id, script)
    root_request = await pending_request(fake, root)
    live_request = await pending_request(fake, live)
    answered_request = await pending_request(fake, answered)
    listing = StaleListing(fake)
    await oc.start_session(T, resume={"schema": 1, "session_id": root})
    await fake.wait_until(lambda: listing.listed == 1)  # the resume's recovery has read
    fake.drop_event_streams()
    await fake.wait_until(lambda: listing.listed == 2)  # so has the reconnect's
    await answer_elsewhere(fake, "permission", answered_request)
    await adapter_caught_up(fake, rec, root, "after the answer")
    listing.gate.set()
    await caught_up(fake, oc)  # both recoveries have finished
    await settled(fake, rec, root)
    opened = sorted(e.request_id for e in rec.of("request.opened", T))
    assert opened == sorted([root_request, live_request])
    for request_id in (root_request, live_request):
        await oc.respond_to_request(T, request_id, "accept")
        await rec.wait_for("request.resolved", of_request(request_id))
    assert len(rec.of("request.opened")) == 2
