"""The writer of a run's messages: model steps, their text and tool parts, in order.

Why a module: what a model step leaves behind (an assistant message, its
``step-start`` part, streamed text, tool parts going ``pending`` -> ``running`` ->
``completed``/``error``, a ``step-finish`` with tokens and cost, the message
announced twice) is the same whichever step of a script causes it. The runner
(:mod:`.runner`) and the tool steps (:mod:`.tools`) decide *what* happens;
:class:`MessageWriter` writes it the way the real server stores and announces it.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .id_minting import IdMinter
from .session_data import ActiveTool, FakeMessage, Run, Settings
from .state import FakeState
from .steps import Text
from .wire import BUSY, JSON, now_ms

_ZERO_TOKENS: JSON = {"input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}}
_STEP_TOKENS: JSON = {
    "total": 15,
    "input": 10,
    "output": 5,
    "reasoning": 0,
    "cache": {"write": 0, "read": 0},
}


def _chunks(text: str, n: int) -> list[str]:
    if not text:
        return []
    n = max(1, min(n, len(text)))
    size = math.ceil(len(text) / n)
    return [text[i : i + size] for i in range(0, len(text), size)]


@dataclass(eq=False)
class MessageWriter:
    """Stores and announces the messages and parts of runs."""

    _state: FakeState
    _ids: IdMinter
    _settings: Settings

    def __post_init__(self) -> None:
        self._emit = self._state.bus.emit
        self._calls = 0

    def store_user_message(self, run: Run, part: JSON) -> str:
        """A user message the server adds to a run by itself (no ``session.updated``)."""
        prompt = run.prompt
        message = FakeMessage({})
        info: JSON = {
            "id": self._ids.new("msg"),
            "role": "user",
            "sessionID": run.session.id,
            "time": {"created": now_ms()},
            "agent": prompt.agent,
            "model": {"providerID": prompt.provider_id, "modelID": prompt.model_id},
        }
        self._state.store_message(run.session, message, info)
        ids = {"messageID": info["id"], "sessionID": run.session.id, "id": self._ids.new("prt")}
        self._state.store_part(message, {**ids, **part})
        return str(info["id"])

    def start_message(
        self, run: Run, *, agent: str | None = None, parent_id: str | None = None
    ) -> None:
        """A new assistant message (a model step) answering the run's newest user
        message, or ``parent_id``; ``agent`` (``compaction``) makes a summary message,
        whose events the caller announces."""
        prompt = run.prompt
        session = run.session
        message = FakeMessage({})
        regular = agent is None and prompt.compaction is None
        agent = agent or prompt.agent
        if parent_id is None:
            parent_id = run.answering or prompt.user_message_id
        if run.message is not None and regular:
            # Measured: each later model step is announced busy before its message, and
            # takes in the prompts sent meanwhile: it answers the newest one (parentID)
            # and they get no run of their own.
            self._state.set_status(session, BUSY)
            while session._queue and session._queue[0].compaction is None:
                run.merged.append(session._queue.popleft())
                parent_id = run.answering = run.merged[-1].user_message_id
        info: JSON = {
            "id": self._ids.new("msg"),
            "parentID": parent_id,
            "role": "assistant",
            "mode": agent,
            "agent": agent,
            "path": {"cwd": session.directory, "root": "/"},
        }
        if agent == "compaction":
            info["summary"] = True
        if prompt.variant is not None:
            info["variant"] = prompt.variant
        info |= {
            "cost": 0,
            "tokens": _ZERO_TOKENS,
            "modelID": prompt.model_id,
            "providerID": prompt.provider_id,
            "time": {"created": now_ms()},
            "sessionID": session.id,
        }
        run.message = message
        run.step_started = False
        run.had_tool = False
        self._state.store_message(session, message, info)
        if regular:
            # Measured: session.updated (the diff summary appears with the first step)
            # and session.diff, then busy again before the step streams.
            self._state.announce_diff(session, parent_id)
            self._state.set_status(session, BUSY)
        elif prompt.compaction is not None and "summary" not in session.info:
            self._state.touch(session, summary={"additions": 0, "deletions": 0, "files": 0})

    def ensure_step(self, run: Run) -> FakeMessage:
        message = run.message
        assert message is not None
        if not run.step_started:
            run.step_started = True
            part: JSON = {
                "id": self._ids.new("prt"),
                "messageID": message.id,
                "sessionID": run.session.id,
                "type": "step-start",
            }
            self._state.store_part(message, part)
        return message

    def close_text(self, run: Run) -> None:
        part = run.text_part
        if part is None or run.message is None:
            return
        text = "".join(run.text_buf)
        final = dict(part)
        final["text"] = text
        final["time"] = {"start": part["time"]["start"], "end": now_ms()}
        run.text_part = None
        run.text_buf = []
        run.last_text = text
        self._state.store_part(run.message, final)

    def finish_step(self, run: Run, reason: str) -> None:
        message = self.ensure_step(run)
        self.close_text(run)
        part: JSON = {
            "id": self._ids.new("prt"),
            "reason": reason,
            "messageID": message.id,
            "sessionID": run.session.id,
            "type": "step-finish",
            "tokens": _STEP_TOKENS,
            "cost": self.step_cost(_STEP_TOKENS),
        }
        self._state.store_part(message, part)
        info = dict(message.info)
        info["tokens"] = _STEP_TOKENS
        info["cost"] = part["cost"]
        info["time"] = {"created": info["time"]["created"], "completed": now_ms()}
        info["finish"] = reason
        self._state.store_message(run.session, message, info)
        # Measured: the finished assistant message is announced twice.
        self._emit("message.updated", {"sessionID": run.session.id, "info": info})
        self._state.add_usage(run.session, _STEP_TOKENS, part["cost"])

    def step_cost(self, tokens: Mapping[str, Any]) -> float:
        """A step's cost from :attr:`FakeOpenCodeServer.model_cost` (measured on 1.18.34:
        8068 input and 10 output tokens at 1000 and 2000 per million cost 8.088)."""
        price = self._settings.model_cost
        if not price:
            return 0  # the real server's JSON says 0, not 0.0
        cache = tokens["cache"]
        spent: float = (
            tokens["input"] * price.get("input", 0)
            + (tokens["output"] + tokens["reasoning"]) * price.get("output", 0)
            + cache["read"] * price.get("cache_read", 0)
            + cache["write"] * price.get("cache_write", 0)
        )
        return spent / 1_000_000

    async def text(self, run: Run, step: Text) -> None:
        message = self.ensure_step(run)
        part = run.text_part
        if part is None:
            now = now_ms()
            part = {
                "id": self._ids.new("prt"),
                "messageID": message.id,
                "sessionID": run.session.id,
                "type": "text",
                "text": "",
                "time": {"start": now},
            }
            run.text_part = part
            self._state.store_part(message, part)
        for chunk in _chunks(step.text, step.chunks):
            if step.delay > 0:
                await asyncio.sleep(step.delay)
            run.text_buf.append(chunk)
            self._emit(
                "message.part.delta",
                {
                    "sessionID": run.session.id,
                    "messageID": message.id,
                    "partID": part["id"],
                    "field": "text",
                    "delta": chunk,
                },
            )

    def tool_start(
        self,
        run: Run,
        tool: str,
        tool_input: Mapping[str, Any],
        *,
        title: str | None = None,
        metadata: JSON | None = None,
        child_id: str | None = None,
        before_running: Callable[[JSON], JSON | None] | None = None,
    ) -> JSON:
        """Store the part ``pending`` then ``running`` (``input``, ``time.start``, and
        ``title``/``metadata`` if given). ``before_running(pending_part)`` runs between
        the two (it may emit events, like a permission request) and returns the
        running state's metadata."""
        message = self.ensure_step(run)
        self.close_text(run)
        run.had_tool = True
        part_id = self._ids.new("prt")
        self._calls += 1
        call_id = f"call_{self._calls}_0"
        pending: JSON = {
            "id": part_id,
            "messageID": message.id,
            "sessionID": run.session.id,
            "type": "tool",
            "tool": tool,
            "callID": call_id,
            "state": {"status": "pending", "input": {}, "raw": ""},
        }
        run.tools[part_id] = ActiveTool(pending, child_id)
        self._state.store_part(message, pending)
        if before_running is not None:
            metadata = before_running(pending)
        state: JSON = {"status": "running", "input": dict(tool_input), "time": {"start": now_ms()}}
        if title is not None:
            state["title"] = title
        if metadata is not None:
            state["metadata"] = metadata
        running = dict(pending)
        running["state"] = state
        run.tools[part_id] = ActiveTool(running, child_id)
        self._state.store_part(message, running)
        return running

    def tool_progress(self, run: Run, part: JSON, metadata: JSON) -> JSON:
        """A ``running`` update with new ``metadata`` (a bash tool's output so far)."""
        running = dict(part)
        running["state"] = {**part["state"], "metadata": metadata}
        run.tools[part["id"]].part = running
        assert run.message is not None
        self._state.store_part(run.message, running)
        return running

    def tool_end(self, run: Run, part: JSON, state: JSON) -> None:
        run.tools.pop(part["id"], None)
        final = dict(part)
        final["state"] = state
        assert run.message is not None
        self._state.store_part(run.message, final)

    def tool_completed(self, run: Run, part: JSON, output: str, title: str, metadata: JSON) -> None:
        running = part["state"]
        state: JSON = {
            "status": "completed",
            "input": running["input"],
            "output": output,
            # Measured: every completed tool's metadata carries ``truncated``.
            "metadata": {"truncated": False, **metadata},
            "title": title,
            "time": {"start": running["time"]["start"], "end": now_ms()},
        }
        self.tool_end(run, part, state)

    def tool_error(self, run: Run, part: JSON, error: str, metadata: JSON | None) -> None:
        running = part["state"]
        state: JSON = {"status": "error", "input": running.get("input", {}), "error": error}
        if metadata is not None:
            state["metadata"] = metadata
        now = now_ms()
        state["time"] = {"start": running.get("time", {}).get("start", now), "end": now}
        self.tool_end(run, part, state)
