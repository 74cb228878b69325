"""History by turns: ``turn_starts`` on hand-built histories, and ``unreverted``.

The histories copy what the real server 1.18.34 stored (times in ms from the
first prompt, parents, finishes and parts as measured; see
``adapter/_threads/_turn_boundaries.py``). ``tests/real/test_history_real.py`` checks the rule
on histories the real server builds.
"""

from __future__ import annotations

from typing import Any

from adapter import Message
from adapter._threads._turn_boundaries import is_server_written, turn_starts, unreverted

SESSION = "ses_history"


class History:
    """Builds one session's stored messages, as ``GET /session/{id}/message`` lists them."""

    def __init__(self) -> None:
        self.messages: list[Message] = []

    def _add(self, info: dict[str, Any], parts: list[dict[str, Any]]) -> str:
        message_id = f"msg_{len(self.messages):03d}"
        info = {"id": message_id, "sessionID": SESSION, **info}
        for index, part in enumerate(parts):
            part.update(id=f"prt_{len(self.messages):03d}_{index}", messageID=message_id)
            part["sessionID"] = SESSION
        self.messages.append(Message.parse({"info": info, "parts": parts}))
        return message_id

    def user(self, text: str, created: float, **part: Any) -> str:
        return self._add(
            {"role": "user", "time": {"created": created}},
            [{"type": "text", "text": text, **part}],
        )

    def compaction(self, created: float) -> str:
        return self._add(
            {"role": "user", "time": {"created": created}},
            [{"type": "compaction", "auto": True, "overflow": False}],
        )

    def continue_(self, created: float) -> str:
        return self.user(
            "Continue if you have next steps, or stop and ask for clarification",
            created,
            synthetic=True,
            metadata={"compaction_continue": True},
        )

    def assistant(
        self,
        parent: str,
        created: float,
        completed: float | None,
        finish: str | None = "stop",
        *,
        error: str | None = None,
        summary: bool = False,
    ) -> str:
        time: dict[str, float] = {"created": created}
        if completed is not None:
            time["completed"] = completed
        info: dict[str, Any] = {"role": "assistant", "parentID": parent, "time": time}
        if finish is not None:
            info["finish"] = finish
        if error is not None:
            info["error"] = {"name": error, "data": {"message": error}}
        if summary:
            info |= {"summary": True, "agent": "compaction"}
        return self._add(info, [{"type": "text", "text": "answer"}])

    def starts(self, known: dict[str, str] | None = None) -> list[str]:
        return [m.info.id for m in turn_starts(self.messages, known)]


def test_empty_history_has_no_turn() -> None:
    assert turn_starts([]) == []


def test_separate_turns_each_start_one() -> None:
    h = History()
    a = h.user("A", 0)
    h.assistant(a, 12, 134, "tool-calls")
    h.assistant(a, 138, 212)
    b = h.user("B separate", 364)  # 152 ms after the run's last step completed
    h.assistant(b, 377, 460)
    assert h.starts() == [a, b]


def test_a_steer_during_a_tool_step_joins_the_turn() -> None:
    h = History()
    a = h.user("A", 0)
    h.assistant(a, 1392, 4549, "tool-calls")
    b = h.user("B steer", 3452)  # stored while the tool step ran
    h.assistant(b, 4554, 4644)
    c = h.user("C next", 4800)
    h.assistant(c, 4810, 4900)
    assert h.starts() == [a, c]


def test_a_prompt_during_streaming_text_joins_the_turn() -> None:
    h = History()
    a = h.user("A", 0)
    h.assistant(a, 70, 2152, "stop")
    b = h.user("B during text", 653)
    h.assistant(b, 2162, 2300)
    assert h.starts() == [a]


def test_a_prompt_between_loop_steps_joins_the_turn() -> None:
    """After a ``tool-calls`` step the loop goes on: a prompt stored in the gap is a steer."""
    h = History()
    a = h.user("A", 0)
    h.assistant(a, 10, 100, "tool-calls")
    b = h.user("B", 102)
    h.assistant(b, 105, 200)
    assert h.starts() == [a]


def test_a_prompt_while_the_step_is_still_open_joins_the_turn() -> None:
    h = History()
    a = h.user("A", 0)
    h.assistant(a, 10, None, None)  # running now: no completion yet
    h.user("B", 5000)
    assert h.starts() == [a]


def test_prompts_stored_before_the_first_answer_join_the_turn() -> None:
    """A fresh server took 1.4 s to write the first assistant message: a steer sent
    in that time is stored right after the first prompt."""
    h = History()
    a = h.user("A", 0)
    h.user("B quick steer", 500)
    h.user("C another", 700)
    h.assistant(a, 1392, 1500)
    assert h.starts() == [a]


def test_a_prompt_after_a_failed_or_aborted_step_starts_a_turn() -> None:
    """An aborted step has ``time.completed`` and no finish; a failed one an error."""
    h = History()
    a = h.user("A", 0)
    h.assistant(a, 10, 300, None, error="MessageAbortedError")
    b = h.user("B", 400)
    h.assistant(b, 410, 500, "tool-calls", error="APIError")
    c = h.user("C", 600)
    assert h.starts() == [a, b, c]


def test_a_prompt_created_after_the_completion_is_a_new_turn_even_by_one_ms() -> None:
    h = History()
    a = h.user("A", 0)
    h.assistant(a, 10, 500)
    b = h.user("B", 500)  # equal: the step had completed
    assert h.starts() == [a, b]


def test_automatic_compaction_stays_in_its_turn() -> None:
    """Measured: the compaction message came 2 ms after the step completed, the
    synthetic continue 3 ms after the summary: by time alone both look like turns."""
    h = History()
    a = h.user("A", 0)
    h.assistant(a, 1506, 2415, "tool-calls")
    h.assistant(a, 2421, 2535, "tool-calls")
    compaction = h.compaction(2537)
    h.assistant(compaction, 2547, 2588, summary=True)
    cont = h.continue_(2591)
    h.assistant(cont, 2596, 2648)
    b = h.user("B next turn", 2694)
    h.assistant(b, 2704, 2768)
    assert h.starts() == [a, b]


def test_manual_summarize_after_a_turn_belongs_to_it() -> None:
    h = History()
    a = h.user("A", 0)
    h.assistant(a, 10, 100)
    compaction = h.compaction(5000)
    h.assistant(compaction, 5010, 5100, summary=True)
    b = h.user("B", 9000)
    assert h.starts() == [a, b]


def test_server_written_messages() -> None:
    h = History()
    h.compaction(0)
    h.continue_(1)
    h.user("real prompt", 2)
    h._add(  # a prompt with a file: synthetic text describes the file, the file is authored
        {"role": "user", "time": {"created": 3}},
        [
            {"type": "text", "text": "Called the Read tool", "synthetic": True},
            {"type": "file", "mime": "text/plain", "url": "file:///x"},
        ],
    )
    h._add({"role": "user", "time": {"created": 4}}, [])
    assert [is_server_written(m) for m in h.messages] == [True, True, False, False, False]


def test_known_turns_take_precedence() -> None:
    h = History()
    a = h.user("A", 0)
    h.assistant(a, 10, 100)
    b = h.user("B", 200)  # by time a new turn, but the adapter sent it as a steer of t1
    h.assistant(b, 210, 300)
    c = h.user("C", 250)  # by time a steer, but the adapter sent it as its own turn
    h.assistant(c, 310, 400)
    assert h.starts() == [a, b]
    assert h.starts({a: "t1", b: "t1", c: "t2"}) == [a, c]


def test_known_and_unknown_messages_mix() -> None:
    """Messages from before the adapter (a resumed thread) follow the stored rule; the
    first message the adapter sent starts its turn even if time says steer."""
    h = History()
    old = h.user("from another client", 0)
    h.assistant(old, 10, None, None)
    mine = h.user("adapter's prompt", 20)
    h.assistant(mine, 30, 40)
    compaction = h.compaction(50)
    h.assistant(compaction, 60, 70, summary=True)
    h.continue_(80)
    assert h.starts() == [old]
    assert h.starts({mine: "turn-1"}) == [old, mine]


def test_the_first_user_message_starts_a_turn_whatever_it_is() -> None:
    h = History()
    h.assistant("msg_gone", 0, 5)  # a history cut by ?limit= can start with an answer
    first = h.continue_(10)
    h.assistant(first, 20, 30)
    b = h.user("B", 40)
    assert h.starts() == [first, b]


def test_unreverted_cuts_at_the_revert_mark() -> None:
    h = History()
    a = h.user("A", 0)
    answer = h.assistant(a, 10, 20)
    b = h.user("B", 30)
    h.assistant(b, 40, 50)
    ids = [m.info.id for m in h.messages]
    assert [m.info.id for m in unreverted(h.messages, None)] == ids
    assert [m.info.id for m in unreverted(h.messages, {"messageID": b})] == [a, answer]
    assert [m.info.id for m in unreverted(h.messages, {"messageID": 7})] == ids
    part = h.messages[1].parts[0].id
    kept = unreverted(h.messages, {"messageID": answer, "partID": part})
    assert [m.info.id for m in kept] == [a, answer]
    assert kept[1].parts == ()
    unknown_part = unreverted(h.messages, {"messageID": answer, "partID": "prt_nope"})
    assert [m.info.id for m in unknown_part] == [a]
