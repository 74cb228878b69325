"""A thread's stored history read as turns: what is reverted, and where each turn starts.

Why this exists: ``rollback_thread(n)`` promises to revert the last ``n``
*turns*, but the server stores *messages*. One turn can hold several user
messages: steers the host sent while it ran, a follow-up the server merged
into the running loop, and the user messages the server writes itself during
an automatic compaction. Counting user messages half-reverts a steered turn;
:func:`turn_starts` finds the user message each turn starts with.

How a turn looks in ``GET /session/{id}/message`` on the real server 1.18.34
(measured with a scripted model; ``tests/real/test_history_real.py`` pins it):

* **A steer** (``prompt_async`` while the run works): its user message is
  stored when it is accepted, *before* the running assistant message
  completes: user A (created 0 ms), assistant (parent A, created 1392,
  completed 4549, ``finish: "tool-calls"``), user B (created 3452), assistant
  (parent B, created 4554). The same while text streams: B created 653 ms,
  the running assistant completed 2152 ms. The step after a steer names the
  steer as its ``parentID``, exactly as a new turn's first step does, so
  ``parentID`` cannot tell the two apart; time can.
* **A separate turn** (sent after the run went idle): its user message is
  created after the previous assistant message completed (152 ms and 147 ms
  later in two runs).
* **Automatic compaction** mid-turn: after a step, the server writes a user
  message whose only part is ``{"type": "compaction", "auto": true, ...}``
  (2 ms after the step completed), a summary assistant message (``summary:
  true``, ``agent: "compaction"``), then a user message whose only part is a
  text part ``{"synthetic": true, "metadata": {"compaction_continue": true}}``
  ("Continue if you have next steps, or stop..."), and the turn goes on from
  it. Both are created after the previous assistant completed, so by time
  alone they would look like new turns: they are recognised by their parts.

The rule :func:`turn_starts` applies to each user message, in stored order:

1. the first user message starts a turn;
2. with ``known_turns`` (the adapter's own record: message id -> turn id), a
   listed message starts a turn exactly when its turn id differs from the
   current turn's;
3. a message the server wrote (a ``compaction`` part, or only ``synthetic``
   text) never starts one;
4. otherwise a message sent while the current turn's run was still going
   joins that turn: it directly follows another user message (the run had
   not yet produced an assistant message), or the latest assistant message
   before it had not completed, or had finished ``"tool-calls"`` (the loop
   goes on to another step), or completed after the message was created.
   Any other user message starts a turn.

Known limits of rule 4 (stored messages carry no idle time): a follow-up the
server merged into the loop in the few milliseconds between a final step's
completion and the loop's exit counts as a new turn, and a prompt whose run
failed before writing any assistant message is joined by the next prompt.
The adapter's ``known_turns`` settles both for the prompts it sent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from .._client._responses import Message, MessageInfo, Part

__all__ = ["is_server_written", "turn_starts", "unreverted"]

#: Part types a person (or host) puts into a prompt, beside non-synthetic text.
_AUTHORED_PART_TYPES = frozenset({"file", "agent", "subtask"})


def unreverted(messages: Sequence[Message], revert: object) -> tuple[Message, ...]:
    """``messages`` before a session's ``revert`` mark ``{messageID, partID?}``: from
    that message on (or, with a part, from that part of it on) everything is reverted."""
    if not isinstance(revert, Mapping) or not isinstance(revert.get("messageID"), str):
        return tuple(messages)
    message_id, part_id = revert["messageID"], revert.get("partID")
    kept: list[Message] = []
    for message in messages:
        if message.info.id == message_id:
            parts = [p.id for p in message.parts]
            if isinstance(part_id, str) and part_id in parts:
                kept.append(replace(message, parts=message.parts[: parts.index(part_id)]))
            break
        kept.append(message)
    return tuple(kept)


def is_server_written(message: Message) -> bool:
    """Whether a user message was written by the server, not sent as a prompt: it
    carries a ``compaction`` part, or synthetic text and nothing a prompt carries."""
    if any(part.type == "compaction" for part in message.parts):
        return True
    synthetic = [part for part in message.parts if _is_synthetic_text(part)]
    return bool(synthetic) and not any(_is_authored(part) for part in message.parts)


def turn_starts(
    messages: Sequence[Message], known_turns: Mapping[str, str] | None = None
) -> list[Message]:
    """The user messages that start a turn, in stored order (see the module's rule).

    ``messages`` is a session's history in stored order (``GET
    /session/{id}/message``, oldest first). ``known_turns`` maps the message ids
    the adapter sent to the id of the turn each was sent as; it takes
    precedence over what the stored messages suggest.
    """
    known = known_turns or {}
    starts: list[Message] = []
    current_turn: str | None = None  # the current turn's id, when the adapter knows it
    previous: MessageInfo | None = None
    last_assistant: MessageInfo | None = None
    for message in messages:
        info = message.info
        if info.role == "assistant":
            last_assistant = info
        else:
            if not starts:
                start = True
            elif info.id in known:
                start = known[info.id] != current_turn
            elif is_server_written(message):
                start = False
            else:
                start = not _sent_while_running(info, previous, last_assistant)
            if start:
                starts.append(message)
                current_turn = known.get(info.id)
        previous = info
    return starts


def _sent_while_running(
    user: MessageInfo, previous: MessageInfo | None, last_assistant: MessageInfo | None
) -> bool:
    if previous is not None and previous.role == "user":
        return True  # no assistant message since the turn's last prompt: it had not answered
    if last_assistant is None:
        return False
    if last_assistant.completed is None:
        return True
    if last_assistant.error is None and last_assistant.finish == "tool-calls":
        return True
    return user.created is not None and user.created < last_assistant.completed


def _is_synthetic_text(part: Part) -> bool:
    return part.type == "text" and part.raw.get("synthetic") is True


def _is_authored(part: Part) -> bool:
    if part.type == "text":
        return part.raw.get("synthetic") is not True
    return part.type in _AUTHORED_PART_TYPES
