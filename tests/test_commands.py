"""``run_command``: a slash command as a turn, on the fake.

Measured on ``opencode serve`` 1.18.34 (and 1.14.48 to 1.18.3):
``POST /session/{id}/command {command, arguments, messageID?, model?, agent?}`` writes
a user message (the id given, the command's template with ``$ARGUMENTS`` replaced),
runs it as a prompt's run, and answers 200 with the assistant message only once the
run has ended (an abort ends it early). A request cancelled, even 50 ms after it was
sent, still runs on the server; an unknown command is a bare 500 (its reason in a
``session.error``), and nothing runs.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from adapter import InvalidInputError, OpenCodeAdapter, RequestError, Timeouts
from adapter.testing.fake import FakeOpenCodeServer, Hang, Task, Text, Tool
from tests.adapter_support import Recorder, SentBodies

T = "thread"
HELLO = {"name": "hello", "description": "Greets", "template": "Say hello to $ARGUMENTS"}
COMMAND = "/session/{id}/command"


@pytest.fixture
def fake_options() -> dict[str, Any]:
    return {"seed": 7}


@pytest.fixture
def timeouts() -> Timeouts:
    return Timeouts(connect=2.0, abort=5.0)


@pytest.fixture(autouse=True)
def hello(fake: FakeOpenCodeServer) -> None:
    fake.inventory.commands.insert(2, dict(HELLO))


async def test_a_command_runs_as_a_turn_with_the_events_and_usage_of_a_prompt(
    fake: FakeOpenCodeServer, oc: OpenCodeAdapter, rec: Recorder
) -> None:
    fake.script("cmd", [Tool("bash", {"command": "ls"}, output="a\n"), Text("hello world")])
    bodies = SentBodies(fake, COMMAND)
    root = (await oc.start_session(T)).session_id
    turn = await oc.run_command(T, "hello", "world [[script:cmd]]")
    completed = await rec.wait_for("turn.completed")
    assert completed.turn_id == turn.turn_id and completed.state == "completed"
    assert [e.turn_id for e in rec.of("turn.started")] == [turn.turn_id]
    assert any(e.type == "item.completed" and e.turn_id == turn.turn_id for e in rec.events)
    assert "hello world" in "".join(e.delta for e in rec.of("content.delta"))
    assert completed.usage is not None and completed.usage.output_tokens > 0
    sent = {"command": "hello", "arguments": "world [[script:cmd]]"}
    assert bodies == [sent | {"messageID": bodies[0]["messageID"]}]
    first = fake.sessions[root].messages[0]
    # The server took our message id: the echo is recognised as the turn's own.
    assert (first.id, first.text) == (bodies[0]["messageID"], "Say hello to world [[script:cmd]]")
    assert [r.status for r in fake.calls("POST", COMMAND)] == [200]
    assert oc.session_info(T).status == "ready"


async def test_model_agent_and_a_leading_slash_are_passed_as_the_server_takes_them(
    fake: FakeOpenCodeServer, oc: OpenCodeAdapter, rec: Recorder
) -> None:
    fake.script("cmd", [Text("ok")])
    bodies = SentBodies(fake, COMMAND)
    await oc.start_session(T)
    await oc.run_command(T, "/hello", "[[script:cmd]]", model="fake/fake-model", agent="plan")
    await rec.wait_for("turn.completed")
    assert bodies[0]["command"] == "hello"
    assert (bodies[0]["model"], bodies[0]["agent"]) == ("fake/fake-model", "plan")


async def test_an_unknown_command_is_refused_naming_the_known_ones_and_nothing_is_sent(
    fake: FakeOpenCodeServer, oc: OpenCodeAdapter, rec: Recorder
) -> None:
    await oc.start_session(T)
    with pytest.raises(InvalidInputError) as caught:
        await oc.run_command(T, "nope")
    assert "'nope'" in str(caught.value)
    assert "init, review, hello, customize-opencode" in str(caught.value)
    assert fake.calls("POST", COMMAND) == []
    assert rec.of("turn.started") == []
    assert oc.session_info(T).status == "ready"


@pytest.mark.parametrize(
    ("name", "arguments", "agent"),
    [("", "", None), ("hello", 5, None), ("hello", "", ""), (None, "", None)],
)
async def test_bad_arguments_are_refused_before_anything_is_sent(
    fake: FakeOpenCodeServer, oc: OpenCodeAdapter, name: Any, arguments: Any, agent: Any
) -> None:
    await oc.start_session(T)
    fake.reset_stats()
    with pytest.raises(InvalidInputError):
        await oc.run_command(T, name, arguments, agent=agent)
    with pytest.raises(InvalidInputError):
        await oc.run_command(T, "hello", model="no-slash")
    assert fake.requests == []


async def test_a_command_is_refused_while_a_turn_runs_and_that_turn_goes_on(
    fake: FakeOpenCodeServer, oc: OpenCodeAdapter, rec: Recorder
) -> None:
    fake.script("long", [Hang()])
    await oc.start_session(T)
    running = await oc.send_turn(T, "go [[script:long]]")
    with pytest.raises(InvalidInputError, match="has one running"):
        await oc.run_command(T, "hello", "x")
    assert fake.calls("POST", COMMAND) == []
    assert oc.session_info(T).active_turn_id == running.turn_id
    result = await oc.interrupt_turn(T)
    assert result.turn_id == running.turn_id


async def test_a_stop_during_a_command_stops_its_whole_tree_and_its_request_returns(
    fake: FakeOpenCodeServer, oc: OpenCodeAdapter, rec: Recorder
) -> None:
    fake.script("child", [Hang()])
    fake.script("cmd", [Tool("bash", {"command": "ls"}, output="a\n"), Task("look", "child")])
    root = (await oc.start_session(T)).session_id
    turn = await oc.run_command(T, "hello", "[[script:cmd]]")
    child = (await rec.wait_for("child.started")).session_id
    result = await oc.interrupt_turn(T)
    aborted = await rec.wait_for("turn.aborted")
    assert aborted.turn_id == turn.turn_id == result.turn_id
    assert result.stop is not None
    assert {s.session_id: s.outcome for s in result.stop} == {root: "aborted", child: "aborted"}
    assert [c.tool for c in result.partial.completed_calls] == ["bash"]
    assert not fake.sessions[root].busy and not fake.sessions[child].busy
    # The blocking request came back with the aborted answer.
    await fake.wait_until(
        lambda: [r.status for r in fake.calls("POST", COMMAND)] == [200],
        description="the command request answered 200",
    )
    assert oc.session_info(T).status == "ready"


async def test_a_stop_before_the_server_has_the_command_waits_for_it_then_aborts_its_run(
    fake: FakeOpenCodeServer, oc: OpenCodeAdapter, rec: Recorder
) -> None:
    # A cancelled command request still runs on the server: cancelling it would leave
    # its run going after the stop. The stop waits until the server has it, then aborts.
    fake.script("cmd", [Hang()])
    root = (await oc.start_session(T)).session_id
    hold = fake.hold("POST", COMMAND)
    sending = asyncio.create_task(oc.run_command(T, "hello", "[[script:cmd]]"))
    await hold.wait_started()
    turn_id = oc.session_info(T).active_turn_id
    stopping = asyncio.create_task(oc.interrupt_turn(T))
    await fake.wait_until(
        lambda: oc.session_info(T).status == "stopping", description="the thread is stopping"
    )
    assert not [r for r in fake.requests if r.path.endswith("/abort")]
    hold.release()
    result = await stopping
    assert (await sending).turn_id == turn_id == result.turn_id
    assert (await rec.wait_for("turn.aborted")).turn_id == turn_id
    assert not fake.sessions[root].busy
    answer = fake.sessions[root].messages[-1]
    assert answer.role == "assistant" and answer.info["error"]["name"] == "MessageAbortedError"


async def test_a_refused_command_ends_its_turn_and_raises(
    fake: FakeOpenCodeServer, oc: OpenCodeAdapter, rec: Recorder
) -> None:
    await oc.start_session(T)
    with pytest.raises(RequestError) as caught:
        await oc.run_command(T, "hello", "x", agent="nobody")
    assert caught.value.status == 500
    aborted = await rec.wait_for("turn.aborted")
    assert aborted.reason.startswith("The command was not accepted: ")
    assert oc.session_info(T).status == "ready"
    fake.script("ok", [Text("fine")])
    await oc.run_command(T, "hello", "[[script:ok]]")
    assert (await rec.wait_for("turn.completed")).state == "completed"


async def test_a_prompt_sent_during_a_command_turn_steers_it(
    fake: FakeOpenCodeServer, oc: OpenCodeAdapter, rec: Recorder
) -> None:
    fake.script("cmd", [Tool("bash", {"command": "ls"}, output="a\n"), Text("first")])
    await oc.start_session(T)
    hold = fake.hold_run_end()
    turn = await oc.run_command(T, "hello", "[[script:cmd]]")
    await hold.wait_started()
    fake.script("more", [Text("second")])
    steer = await oc.send_turn(T, "and this [[script:more]]")
    hold.release()
    completed = await rec.wait_for("turn.completed")
    assert steer.turn_id == turn.turn_id == completed.turn_id
    assert len(rec.of("turn.started")) == 1
