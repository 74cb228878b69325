"""One adapter, threads in several directories of one server (against the fake).

The real server (1.18.34) scopes event streams, statuses and pending requests by
directory, and the fake copies it; the adapter opens one client and one event stream
per directory. These tests prove each thread gets exactly its own events, requests
and answers through the stream and client of its own directory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from adapter import OpenCodeAdapter
from adapter.testing.fake import FakeOpenCodeServer, Permission, Task, Text, Tool
from tests.adapter_support import Recorder

ALPHA = "/srv/alpha"
BETA = "/srv/beta"
CAFE = "/srv/café"  # non-ASCII: the adapter's client sends it as ?directory=


def of_thread(thread_id: str) -> Callable[[Any], bool]:
    return lambda event: bool(event.thread_id == thread_id)


def said(rec: Recorder, thread_id: str) -> str:
    return "".join(e.delta for e in rec.of("content.delta", thread_id))


async def test_threads_in_two_directories_each_get_their_own_events(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    bash = Tool("bash", {"command": "ls"}, output="a\n")
    fake.script("kid", [Permission("bash", ["ls"], tool=bash), Text("kid done")])
    fake.script("alpha", [Task("look", "kid"), Text("alpha answer")])
    fake.script("beta", [Text("beta answer")])
    fake.script("cafe", [Text("café answer")])
    alpha = await oc.start_session("a", directory=ALPHA)
    beta = await oc.start_session("b", directory=BETA)
    cafe = await oc.start_session("c", directory=CAFE)
    home = await oc.start_session("h")
    assert fake.sessions[alpha.session_id].directory == ALPHA
    assert fake.sessions[beta.session_id].directory == BETA
    assert fake.sessions[cafe.session_id].directory == CAFE
    assert fake.sessions[home.session_id].directory == fake.directory
    assert fake.stream_count == 4, "one event stream per directory"

    await oc.send_turn("b", "go [[script:beta]]")
    await oc.send_turn("c", "go [[script:cafe]]")
    await oc.send_turn("a", "go [[script:alpha]]")
    # The task child's permission request is in ALPHA: only ALPHA's client can answer it
    # (the server answers 404 to a reply sent in another directory).
    opened = await rec.wait_for("request.opened")
    assert opened.thread_id == "a" and opened.session_id != alpha.session_id
    assert fake.sessions[opened.session_id].directory == ALPHA
    await oc.respond_to_request("a", opened.request_id, "accept")
    await rec.wait_for("request.resolved")
    for thread in ("a", "b", "c"):
        done = await rec.wait_for("turn.completed", of_thread(thread))
        assert done.state == "completed"

    assert said(rec, "b") == "beta answer"
    assert said(rec, "c") == "café answer"
    assert said(rec, "a").endswith("alpha answer")
    assert "beta" not in said(rec, "a") and "alpha" not in said(rec, "b")
    assert rec.of("turn.started", "h") == [] and rec.of("content.delta", "h") == []
    for thread in ("a", "b", "c"):
        assert len(rec.of("turn.started", thread)) == 1
        assert len(rec.of("turn.completed", thread)) == 1
