"""Question requests against a real ``opencode serve``: checked answers and rejection.

The real server takes any answer list; the adapter refuses one that does not fit
the questions before sending it. Rejecting a question (``reject_user_input``)
fails the asking tool call and ends the run: the model is not called again.
"""

from __future__ import annotations

import time

import pytest

from adapter import InvalidInputError, OpenCodeAdapter
from adapter.testing import RealOpenCodeServer, ScriptedModelServer
from adapter.testing.model import Text, ToolCall, ToolCalls, script_marker
from tests.adapter_support import Recorder
from tests.real.waits import holds_for

pytestmark = pytest.mark.real

QUESTION = {
    "question": "Which color?",
    "header": "Color",
    "options": [{"label": "red", "description": "warm"}, {"label": "blue", "description": "cold"}],
}


async def test_a_typo_is_refused_and_a_rejected_question_ends_the_run(
    real_server: RealOpenCodeServer, scripted_model: ScriptedModelServer, unique_name: str
) -> None:
    scripted_model.script(
        unique_name,
        [ToolCalls([ToolCall("question", {"questions": [QUESTION]})]), Text("never said")],
    )
    async with OpenCodeAdapter(real_server.base_url, directory=str(real_server.directory)) as oc:
        rec = Recorder(oc)
        session_id = (await oc.start_session("t", title="question reject")).session_id
        turn = await oc.send_turn("t", "go " + script_marker(unique_name))
        asked = await rec.wait_for("user-input.requested", timeout=30)
        with pytest.raises(InvalidInputError, match="'Colour'"):
            await oc.respond_to_user_input("t", asked.request_id, {"Colour": "red"})
        assert rec.of("user-input.resolved", "t") == []
        rejected_at = time.monotonic()
        await oc.reject_user_input("t", asked.request_id)
        resolved = await rec.wait_for("user-input.resolved", timeout=30)
        assert resolved.decision == "rejected"
        done = await rec.wait_for("turn.completed", timeout=30)
        assert done.turn_id == turn.turn_id and done.state == "completed"
        await holds_for(  # the run ended
            0.2,
            lambda: scripted_model.requests_after(rejected_at, [session_id]) == [],
            "no model request after the reject",
        )
        items = [e for e in rec.of("item.completed", "t") if e.tool == "question"]
        assert [e.status for e in items] == ["error"]
        assert "never said" not in "".join(e.delta for e in rec.of("content.delta", "t"))
    await rec.close()
