"""A prompt whose id sorts below the server's latest message ids, on a real ``opencode serve``.

The adapter mints its prompts' message ids with its own wall clock; the server mints
the assistant message ids with its own. With the adapter's clock behind the server's
(a remote server with clock skew), a prompt's id sorts below the assistant message
that is running. These tests send such prompts through the plain client and check
that the server answers them: an assistant message whose ``parentID`` is the prompt.
1.18.34 does (it orders by creation time); 1.18.3, 1.17.19 and 1.15.13 do not (they
take the user message with the highest id as the last one): the expected failures in
``releases.toml``. So the adapter's id clock follows the server's ids
(``tests/test_skewed_server_ids.py``); the last test runs the adapter with its clock a
minute behind and checks that its steer and its next turn are answered.
"""

from __future__ import annotations

import pytest

from adapter import Message, OpenCodeAdapter, OpenCodeClient
from adapter._base import _ids
from adapter._base._ids import _MonotonicIdClock, _now_ms, mint_message_id
from adapter.testing import RealOpenCodeServer, ScriptedModelServer
from adapter.testing.model import Text, script_marker
from tests.adapter_support import Recorder
from tests.real.test_history_real import bash, wait_idle, wait_tool_running

pytestmark = pytest.mark.real

SKEW_MS = 60_000  # the prompt's clock is a minute behind the server's


def past_message_id() -> str:
    """An id in the adapter's scheme, stamped a minute ago."""
    stamp = _MonotonicIdClock(lambda: _now_ms() - SKEW_MS).next()
    return f"msg_{stamp:012x}{mint_message_id()[16:]}"


def answers_to(messages: list[Message], message_id: str) -> list[Message]:
    return [m for m in messages if m.info.role == "assistant" and m.info.parent_id == message_id]


async def send_and_check_it_is_answered(
    client: OpenCodeClient, session_id: str, text: str, message_id: str
) -> None:
    """Sends ``text`` as ``message_id``; once idle, an answer to it has finished (``stop``)."""
    await client.prompt_async(session_id, text, message_id=message_id)
    await wait_idle(client, session_id)

    messages = await client.messages(session_id)
    answers = answers_to(messages, message_id)
    assert answers, [(m.info.id, m.info.role, m.info.parent_id) for m in messages]
    assert answers[-1].info.finish == "stop"


async def test_a_steer_whose_id_sorts_below_the_running_step_is_answered(
    opencode_client: OpenCodeClient, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    scripted_model.script(
        unique_name, [bash("sleep 1.5; echo built"), Text("after the tool"), Text("more")]
    )
    session = await opencode_client.create_session(title="skewed steer")
    first = mint_message_id()
    await opencode_client.prompt_async(
        session.id, "build " + script_marker(unique_name), message_id=first
    )
    await wait_tool_running(opencode_client, session.id)
    running = [
        m.info.id for m in await opencode_client.messages(session.id) if m.info.role == "assistant"
    ]
    steer = past_message_id()
    assert steer < min(running) and steer < first  # below everything the server holds
    await send_and_check_it_is_answered(opencode_client, session.id, "and also lint", steer)


async def test_a_new_turns_prompt_whose_id_sorts_below_the_last_answer_is_answered(
    opencode_client: OpenCodeClient, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    scripted_model.script(unique_name, [Text("first answer"), Text("second answer")])
    session = await opencode_client.create_session(title="skewed new turn")
    first = mint_message_id()
    await opencode_client.prompt_async(
        session.id, "hello " + script_marker(unique_name), message_id=first
    )
    await wait_idle(opencode_client, session.id)
    last_answer = answers_to(await opencode_client.messages(session.id), first)[-1].info.id
    second = past_message_id()
    assert second < last_answer and second < first
    await send_and_check_it_is_answered(opencode_client, session.id, "a new question", second)


async def test_the_adapter_with_its_clock_behind_the_servers_gets_its_steer_and_next_turn_answered(
    real_server: RealOpenCodeServer,
    scripted_model: ScriptedModelServer,
    opencode_client: OpenCodeClient,
    unique_name: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The adapter's clock a minute behind the server's, through its `now_ms` hook.
    monkeypatch.setattr(_ids, "_clock", _MonotonicIdClock(lambda: _now_ms() - SKEW_MS))
    scripted_model.script(
        unique_name,
        [bash("sleep 1.5; echo built"), Text("answer to the steer"), Text("answer to turn 2")],
    )
    async with OpenCodeAdapter(real_server.base_url, directory=str(real_server.directory)) as oc:
        rec = Recorder(oc)
        session_id = (await oc.start_session("skewed", title="skewed clock")).session_id
        turn = await oc.send_turn("skewed", "build " + script_marker(unique_name))
        await wait_tool_running(opencode_client, session_id)
        await oc.send_turn("skewed", "and also lint")
        done = await rec.wait_for("turn.completed", lambda e: e.turn_id == turn.turn_id, 60)
        assert (done.state, done.error) == ("completed", None)
        second = await oc.send_turn("skewed", "a new question")
        done = await rec.wait_for("turn.completed", lambda e: e.turn_id == second.turn_id, 60)
        assert (done.state, done.error) == ("completed", None)
        await rec.close()

    messages = await opencode_client.messages(session_id)
    ids = [m.info.id for m in messages]
    assert ids == sorted(ids), "each prompt's id sorts after every id before it"
    for message in messages:
        if message.info.role == "user":
            assert answers_to(messages, message.info.id), message.info.id


async def test_the_newest_message_is_what_a_limit_of_one_returns(
    opencode_client: OpenCodeClient, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    """What a resume relies on to note the server's newest id
    (``adapter._adapter._observe_newest_message``): ``?limit=1`` is the newest message,
    the last of the full list, not the first."""
    scripted_model.script(unique_name, [Text("first answer"), Text("second answer")])
    session = await opencode_client.create_session(title="newest")
    for text in ("hello " + script_marker(unique_name), "again"):
        await opencode_client.prompt_async(session.id, text, message_id=mint_message_id())
        await wait_idle(opencode_client, session.id)
    everything = await opencode_client.messages(session.id)
    assert len(everything) == 4
    [newest] = await opencode_client.messages(session.id, limit=1)
    assert newest.info.id == everything[-1].info.id
    assert newest.info.role == "assistant"
