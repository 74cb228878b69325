"""OpenCode's permission and question requests as ACP ``session/request_permission``.

A request of any session of the tree (root, subagent, grandchild) becomes one
``request_permission`` naming the tool call it belongs to (the call the client
already saw, by the same id :class:`~adapter.acp._updates.UpdateMapper` gave it),
with OpenCode's three replies as options: allow once, allow always, reject.

A question (OpenCode's ``question`` tool) is asked one question at a time, its
option labels as the options plus a "Dismiss" that rejects the question. ACP has
no free-text reply, so a question without options cannot be answered through it:
it is declined and the client is told so in the answer text (see
:func:`unanswerable`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from acp.helpers import text_block, tool_content
from acp.schema import (
    AllowedOutcome,
    ContentToolCallContent,
    FileEditToolCallContent,
    PermissionOption,
    RequestPermissionResponse,
    TerminalToolCallContent,
    ToolCallUpdate,
)

from adapter import RequestOpened, UserInputRequested

from ._updates import UpdateMapper, raw_text, tool_kind

__all__ = [
    "DISMISS",
    "PERMISSION_OPTIONS",
    "answer_for",
    "decision_for",
    "permission_tool_call",
    "question_options",
    "question_tool_call",
    "unanswerable",
]

#: OpenCode's replies (``once`` / ``always`` / ``reject``) as ACP options; the option id
#: is the adapter's decision for ``respond_to_request``.
PERMISSION_OPTIONS: tuple[PermissionOption, ...] = (
    PermissionOption(option_id="accept", name="Allow once", kind="allow_once"),
    PermissionOption(option_id="accept_for_session", name="Allow always", kind="allow_always"),
    PermissionOption(option_id="decline", name="Reject", kind="reject_once"),
)
DISMISS = "dismiss"


def _request_call_id(mapper: UpdateMapper, event: RequestOpened | UserInputRequested) -> str:
    # The model's call id of the tool the request belongs to (``properties.tool.callID``).
    call = raw_text(event.raw, "properties", "tool", "callID")
    return mapper.call_id(event.session_id, call) if call else f"request/{event.request_id}"


def permission_tool_call(mapper: UpdateMapper, event: RequestOpened) -> ToolCallUpdate:
    """The tool call a permission request is about, as ``request_permission`` names it."""
    permission = event.permission or "permission"
    patterns = ", ".join(event.patterns) or "*"
    label = mapper.label(event.session_id)
    title = f"{permission}: {patterns}"
    return ToolCallUpdate(
        tool_call_id=_request_call_id(mapper, event),
        title=f"{label} > {title}" if label else title,
        kind=tool_kind(permission),
        status="pending",
        raw_input={"permission": permission, "patterns": list(event.patterns)},
    )


def decision_for(response: RequestPermissionResponse) -> str | None:
    """The adapter decision for the client's answer; ``None`` when the client cancelled
    (it does so for a prompt it cancels: the stop withdraws the request)."""
    outcome = response.outcome
    if isinstance(outcome, AllowedOutcome):
        if outcome.option_id in {o.option_id for o in PERMISSION_OPTIONS}:
            return outcome.option_id
        return "decline"
    return None


def question_options(question: Mapping[str, Any]) -> list[PermissionOption] | None:
    """A question's option labels as options (plus Dismiss); ``None`` without options."""
    options = question.get("options")
    labels = [
        o["label"]
        for o in options or ()
        if isinstance(o, Mapping) and isinstance(o.get("label"), str) and o["label"]
    ]
    if not labels:
        return None
    return [
        *(
            PermissionOption(option_id=f"answer:{i}", name=label, kind="allow_once")
            for i, label in enumerate(labels)
        ),
        PermissionOption(option_id=DISMISS, name="Dismiss", kind="reject_once"),
    ]


def question_tool_call(
    mapper: UpdateMapper, event: UserInputRequested, question: Mapping[str, Any]
) -> ToolCallUpdate:
    text = question.get("question")
    header = question.get("header")
    title = text if isinstance(text, str) and text else "A question"
    label = mapper.label(event.session_id)
    content: list[ContentToolCallContent | FileEditToolCallContent | TerminalToolCallContent] = (
        [tool_content(text_block(header))] if isinstance(header, str) and header else []
    )
    return ToolCallUpdate(
        tool_call_id=_request_call_id(mapper, event),
        title=f"{label} > {title}" if label else title,
        kind="other",
        status="pending",
        content=content or None,
        raw_input={"questions": [dict(q) for q in event.questions]},
    )


def answer_for(
    response: RequestPermissionResponse, options: Sequence[PermissionOption]
) -> str | None:
    """The label the client chose; ``None`` for Dismiss or a cancelled request."""
    outcome = response.outcome
    if not isinstance(outcome, AllowedOutcome) or outcome.option_id == DISMISS:
        return None
    for option in options:
        if option.option_id == outcome.option_id:
            return option.name
    return None


def unanswerable(question: Mapping[str, Any]) -> str:
    """What the client is told of a question ACP cannot carry (no options to choose)."""
    text = question.get("question")
    shown = text if isinstance(text, str) and text else "(no text)"
    return (
        f"\n\n[The agent asked a question that needs a typed answer, which ACP cannot carry: "
        f"{shown!r}. It was declined; answer it in your next prompt.]\n"
    )
