"""The ACP agent's extension method: stop one subagent, ``_opencode/stop_subagent``.

Why its own module: ACP has one Cancel, for the whole prompt; a client that shows the
subagents' ``task`` calls has no way to stop one of them. Claude's ACP agent has a
pull request for the same need (``_session/stop_tasks``, agentclientprotocol/
claude-agent-acp #995); this is OpenCode's, under ACP's rule for extensions (a method
name starting with ``_``, announced in ``initialize``'s ``_meta``).

The params name the ACP session and the subagent, either by its OpenCode session id
(``subagentSessionId``) or by the ``task`` call the client was shown (``toolCallId``,
mapped to the child through ``task.started``'s ``item_id``). Everything is checked
before anything is sent to OpenCode: a malformed request, an unknown session, a call
that spawned no subagent of this session, the root itself (``session/cancel`` stops it)
or another session's subagent are ``invalid params`` and nothing is stopped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from acp import RequestError

from adapter import InvalidInputError, OpenCodeAdapter, OpenCodeError, StopReport

from ._updates import UpdateMapper

__all__ = [
    "EXTENSIONS_META",
    "STOP_SUBAGENT",
    "StopTarget",
    "invalid",
    "parse_stop_target",
    "stop_answer",
    "stop_subagent",
]

#: The method as it goes on the wire (the SDK hands the agent the name without ``_``).
STOP_SUBAGENT = "_opencode/stop_subagent"
_PARAMS = ("sessionId", "subagentSessionId", "toolCallId")
#: An id longer than this is no id of OpenCode's nor of this agent's.
_MAX_ID = 512

#: ``initialize``'s ``_meta``: the extensions this agent answers and their params.
EXTENSIONS_META: dict[str, Any] = {
    "opencode": {
        "extensions": {
            STOP_SUBAGENT: {
                "params": [["sessionId", "subagentSessionId"], ["sessionId", "toolCallId"]],
                "result": ["stopped", "report"],
            }
        }
    }
}


@dataclass(frozen=True, slots=True)
class StopTarget:
    """A checked ``_opencode/stop_subagent`` request: one of the two targets is set."""

    session_id: str
    subagent_session_id: str | None
    tool_call_id: str | None


def invalid(message: str, **data: Any) -> RequestError:
    return RequestError(-32602, message, data or None)


def parse_stop_target(params: Mapping[str, Any]) -> StopTarget:
    """The request's target, or ``invalid params`` naming what is wrong."""
    unknown = sorted(str(k)[:40] for k in params if k not in _PARAMS)
    if unknown:
        raise invalid(f"unknown params: {', '.join(unknown)}", allowed=list(_PARAMS))
    values: dict[str, str] = {}
    for key in _PARAMS:
        if key not in params:
            continue
        value = params[key]
        if not isinstance(value, str) or not value or len(value) > _MAX_ID:
            raise invalid(f"{key} must be a non-empty string of at most {_MAX_ID} characters")
        values[key] = value
    if "sessionId" not in values:
        raise invalid("sessionId is required")
    if ("subagentSessionId" in values) == ("toolCallId" in values):
        raise invalid("give exactly one of subagentSessionId and toolCallId")
    return StopTarget(
        values["sessionId"], values.get("subagentSessionId"), values.get("toolCallId")
    )


def stop_answer(report: StopReport) -> dict[str, Any]:
    """The method's result: the sessions the stop aborted, and the walk's whole report."""
    stopped = [s.session_id for s in report.sessions if s.outcome == "aborted"]
    return {"stopped": stopped, "report": report.to_dict()}


async def stop_subagent(
    adapter: OpenCodeAdapter, thread_id: str, mapper: UpdateMapper, target: StopTarget
) -> dict[str, Any]:
    """Stop the target (its call mapped to its subagent by ``mapper``) in the thread's
    tree; the adapter refuses the root and sessions outside the tree, nothing sent."""
    child = target.subagent_session_id
    if target.tool_call_id is not None:
        child = mapper.task_child(target.tool_call_id)
        if child is None:
            raise invalid(
                "toolCallId names no task call with a subagent in this session",
                toolCallId=target.tool_call_id,
            )
    assert child is not None  # parse_stop_target: exactly one of the two
    try:
        report = await adapter.stop_subagent(thread_id, child)
    except InvalidInputError as exc:
        raise invalid(str(exc), subagentSessionId=child) from exc
    except OpenCodeError as exc:
        raise RequestError(-32603, f"the stop failed: {exc}", {"subagentSessionId": child}) from exc
    return stop_answer(report)
