"""Compaction as the host sees it: ``thread.compacted``, and a summarize that ends a turn.

Measured on the real OpenCode 1.18.34 (and held to it by the differential suite's
``auto_compaction_mid_run`` and ``summarize_during_a_tool_step`` scenarios): an
automatic compaction happens inside the run and the agent goes on; a summarize
sent while a tool runs ends the run once that tool step finished, then the summary
is written, then the session goes idle. The host learns of both, and a turn cut
short by a summarize says so instead of completing.
"""

from __future__ import annotations

import json

import httpx
import pytest

from adapter import InvalidInputError, OpenCodeAdapter, ThreadCompacted
from adapter.testing import caught_up
from adapter.testing.fake import Compact, FakeOpenCodeServer, Text, Tool
from tests.adapter_support import Recorder, start_scripted_turn

T = "t"


def shown(rec: Recorder) -> str:
    return "".join(e.delta for e in rec.of("content.delta", T) if e.stream == "assistant_text")


async def wait_running(rec: Recorder, tool: str) -> None:
    await rec.wait_for("item.started", lambda e: e.thread_id == T and e.tool == tool)


async def test_an_automatic_compaction_is_announced_and_the_turn_goes_on(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    _, turn = await start_scripted_turn(
        oc,
        fake,
        T,
        "long",
        [Text("before. "), Compact(summary="THE DIGEST"), Text("after compaction.")],
    )
    done = await rec.wait_for("turn.completed")
    compacted = rec.of("thread.compacted", T)
    assert len(compacted) == 1
    event = compacted[0]
    assert isinstance(event, ThreadCompacted)
    assert event.auto is True and event.summary == "THE DIGEST"
    assert event.turn_id == turn.turn_id and event.summary_message_id is not None
    assert rec.events.index(event) < rec.events.index(done)
    assert done.state == "completed" and done.turn_id == turn.turn_id
    assert shown(rec) == "before. after compaction."


async def test_a_summarize_during_a_tool_step_ends_the_turn_and_says_why(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.summary_text = "what we did"
    fake.script(
        "work",
        [
            Text("working. "),
            Tool("bash", {"command": "make"}, output="built\n", duration=0.3),
            Text("never reached"),
        ],
    )
    await oc.start_session(T, model="fake/fake-model")
    turn = await oc.send_turn(T, "go [[script:work]]")
    await wait_running(rec, "bash")
    summary = await oc.summarize_thread(T)
    assert summary == "what we did"
    aborted = await rec.wait_for("turn.aborted")
    assert aborted.turn_id == turn.turn_id
    assert aborted.reason is not None and aborted.reason.startswith("summarized:")
    assert aborted.partial is not None and "working." in aborted.partial.text
    [compacted] = rec.of("thread.compacted", T)
    assert compacted.auto is False and compacted.summary == "what we did"
    assert compacted.turn_id == turn.turn_id
    assert rec.events.index(compacted) < rec.events.index(aborted)
    await caught_up(fake, oc)
    assert rec.of("turn.completed", T) == []
    assert "never reached" not in shown(rec) and "what we did" not in shown(rec)
    assert [e.status for e in rec.of("item.completed", T) if e.tool == "bash"] == ["completed"]
    # the thread is ready for the next turn, which completes normally
    fake.script("next", [Text("fresh start")])
    await oc.send_turn(T, "go [[script:next]]")
    done = await rec.wait_for("turn.completed")
    assert done.state == "completed"


async def test_another_clients_summarize_ends_the_turn_the_same_way(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("work", [Tool("bash", {"command": "make"}, duration=0.3), Text("never reached")])
    info = await oc.start_session(T)
    await oc.send_turn(T, "go [[script:work]]")
    await wait_running(rec, "bash")
    async with fake.client() as http:
        body = {"providerID": "fake", "modelID": "fake-model"}
        response = await http.post(f"/session/{info.session_id}/summarize", json=body)
        assert response.json() is True
    aborted = await rec.wait_for("turn.aborted")
    assert aborted.reason is not None and aborted.reason.startswith("summarized:")


async def test_a_summarize_between_turns_is_announced_without_a_turn(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("one", [Text("first answer")])
    bodies: list[object] = []

    async def capture(request: httpx.Request) -> None:
        bodies.append(json.loads(request.content))

    fake.on("POST", "/session/{id}/summarize", capture)
    await oc.start_session(T)  # no model of its own: the newest message's is used
    await oc.send_turn(T, "go [[script:one]]")
    await rec.wait_for("turn.completed")
    summary = await oc.summarize_thread(T)
    assert summary == fake.summary_text
    compacted = await rec.wait_for("thread.compacted")
    assert compacted.turn_id is None and compacted.auto is False
    await caught_up(fake, oc)
    assert len(rec.of("turn.started", T)) == 1 and rec.of("turn.aborted", T) == []
    assert bodies == [{"providerID": "fake", "modelID": "fake-model"}]


async def test_summarize_needs_a_model_when_nothing_names_one(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    await oc.start_session(T)
    with pytest.raises(InvalidInputError, match="needs a model"):
        await oc.summarize_thread(T)
    with pytest.raises(InvalidInputError, match="provider/model"):
        await oc.summarize_thread(T, model="no-slash")
    assert not [r for r in fake.requests if r.path.endswith("/summarize")]
