"""The real server's message ids are what the adapter mints (B33, ``tests/test_ids.py``).

The adapter names its prompts' user messages with ids in OpenCode's own scheme, so that
the server orders them among the ids it mints itself. This reads a real session back
and checks the scheme on the server's ids: the same shape, a stamp that is the
creation millisecond times 0x1000 plus a counter that starts at 1, and the stored
order that of the ids.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from adapter import OpenCodeClient
from adapter._base._ids import mint_message_id
from adapter.testing import ScriptedModelServer
from adapter.testing.model import Text, script_marker
from tests.test_ids import MESSAGE_ID, stamp_of

pytestmark = pytest.mark.real

MS_BITS = (1 << 36) - 1  # the millisecond part of a 48-bit stamp


async def test_the_servers_message_ids_follow_the_scheme_the_adapter_mints(
    opencode_client: OpenCodeClient, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    scripted_model.script(unique_name, [Text("first"), Text("second")])
    session = await opencode_client.create_session(title="ids")
    ours: list[str] = []
    for n in range(2):
        message_id = mint_message_id()  # as the adapter does: right before the send
        ours.append(message_id)
        text = f"question {n} " + script_marker(unique_name)
        await opencode_client.prompt_async(session.id, text, message_id=message_id)
        deadline = time.monotonic() + 30
        while len(await opencode_client.messages(session.id)) < 2 * (n + 1) or session.id in (
            await opencode_client.status()
        ):
            assert time.monotonic() < deadline, "the run did not finish"
            await asyncio.sleep(0.1)
    messages = await opencode_client.messages(session.id)
    ids = [m.info.id for m in messages]
    assert [m.info.id for m in messages if m.info.role == "user"] == ours
    assert ids == sorted(ids), "stored in id order, ours among the server's"
    for message in messages:
        assert MESSAGE_ID.fullmatch(message.info.id), message.info.id
        stamp = stamp_of(message.info.id)
        assert stamp & 0xFFF >= 1, "the counter starts at 1"
        if message.info.role == "assistant":
            # Minted by the server when it created the message (within a second).
            created = int(message.info.created or 0) & MS_BITS
            assert abs((stamp >> 12) - created) < 1000, (message.info.id, created)
