"""What a failing wait or request assertion of the fake says: what it wanted, and what it saw.

Why a module: a contract test that fails on ``condition not met within 5.0s`` leaves its
author to rerun it with prints. Every wait of the fake (:meth:`~.server.FakeOpenCodeServer.
wait_until` and the domain waits, the holds' ``wait_started``) and every request assertion
(``assert_called_once`` ...) fails with one message instead: what it waited for or
expected, and the fake's state as :func:`render_state` draws it -- the session tree with
each session's status, the open permission and question requests, the last requests
received. One renderer, bounded (each section is capped), so that every failure reads
the same and a fake holding thousands of sessions still fails in a few dozen lines.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from .session_data import FakeSession, PendingRequest, RecordedRequest
from .state import FakeState

SHOWN_SESSIONS = 20
"""At most this many sessions in a failure message (the rest counted)."""
SHOWN_PENDING = 10
"""At most this many open permission/question requests in a failure message."""
SHOWN_REQUESTS = 10
"""At most this many requests (the newest) in a failure message."""
_SHOWN_BODY = 120
"""At most this many characters of a request body or a predicate's source."""


def render_state(state: FakeState, requests: Sequence[RecordedRequest]) -> str:
    """The fake's state as a failure message shows it: sessions, open requests, requests.

    Sessions are drawn as trees (root first, children indented in creation order), each
    with its status and what its run is doing (``hanging``, ``asking``, prompts
    ``queued``); a session deleted while busy is listed after them.
    """
    lines = ["the fake's state:"]
    sessions = list(_tree_order(state))
    lines.append(f"  sessions ({len(sessions)}):" if sessions else "  sessions: none")
    for depth, session, deleted in sessions[:SHOWN_SESSIONS]:
        lines.append("    " + "  " * depth + _session_line(session, deleted))
    if len(sessions) > SHOWN_SESSIONS:
        lines.append(f"    … {len(sessions) - SHOWN_SESSIONS} more")
    pending = list(state.requests_pending.items())
    lines.append(f"  pending requests ({len(pending)}):" if pending else "  pending requests: none")
    for request_id, request in pending[:SHOWN_PENDING]:
        lines.append(f"    {_pending_line(request_id, request)}")
    if len(pending) > SHOWN_PENDING:
        lines.append(f"    … {len(pending) - SHOWN_PENDING} more")
    lines.extend("  " + line for line in render_requests(requests, "last requests"))
    return "\n".join(lines)


def render_requests(requests: Sequence[RecordedRequest], title: str) -> list[str]:
    """``title`` and the newest :data:`SHOWN_REQUESTS` of ``requests``, oldest first."""
    if not requests:
        return [f"{title}: none"]
    shown = requests[-SHOWN_REQUESTS:]
    count = (
        f"{len(requests)}" if len(shown) == len(requests) else f"{len(shown)} of {len(requests)}"
    )
    return [f"{title} ({count}, oldest first):", *(f"  {request_line(r)}" for r in shown)]


def request_line(request: RecordedRequest, *, body: bool = False) -> str:
    """``POST /session/ses_…/abort -> 200`` (``in flight``, or ``no response`` when a hook
    raised), with the body (shortened) if ``body``."""
    if request.status is not None:
        outcome = str(request.status)
    else:
        outcome = "in flight" if request.ended_at is None else "no response"
    line = f"{request.method} {request.path} -> {outcome}"
    if body and request.body is not None:
        line += f" body={_shortened(repr(request.body))}"
    return line


def describe_predicate(predicate: Callable[..., Any]) -> str:
    """A predicate as a failure message names it: a function's name, a lambda's source."""
    name = getattr(predicate, "__name__", None)
    if not isinstance(name, str):
        return _shortened(repr(predicate))
    if name != "<lambda>":
        return name
    try:
        source = inspect.getsource(predicate)
    except (OSError, TypeError):
        return name
    return _shortened(_lambda_expression(source)) or name


def calls_mismatch(
    method: str,
    path_pattern: str,
    expected: str,
    matched: Sequence[RecordedRequest],
    requests: Sequence[RecordedRequest],
) -> AssertionError:
    """The failure of a request assertion: what was expected, what matched, what was sent."""
    wanted = f"{method.upper()} {path_pattern}"
    lines = [f"expected {expected} {wanted}, got {len(matched)}"]
    lines.extend(f"  {request_line(r, body=True)}" for r in matched[-SHOWN_REQUESTS:])
    lines.extend(render_requests(requests, "the fake received"))
    return AssertionError("\n".join(lines))


def _tree_order(state: FakeState) -> Iterator[tuple[int, FakeSession, bool]]:
    sessions = state.sessions
    stack = [
        (0, session)
        for session in reversed(sessions.values())
        if session.parent_id is None or session.parent_id not in sessions
    ]
    while stack:
        depth, session = stack.pop()
        yield depth, session, False
        children = [sessions[c] for c in session.children if c in sessions]
        stack.extend((depth + 1, child) for child in reversed(children))
    for session in state.deleted.values():
        yield 0, session, True


def _session_line(session: FakeSession, deleted: bool) -> str:
    notes = [str(session.status.get("type", "?"))]
    run = session._run
    if run is not None and run.parked:
        notes.append("hanging")
    if session.pending_requests:
        notes.append("asking " + ", ".join(session.pending_requests))
    if session.queued_prompts:
        notes.append(f"{session.queued_prompts} queued")
    if deleted:
        notes.append("deleted")
    return f"{session.id} {', '.join(notes)}"


def _pending_line(request_id: str, request: PendingRequest) -> str:
    payload = request.payload
    if request.kind == "permission":
        what = f"{payload.get('permission')} {payload.get('patterns')}"
    else:
        questions = payload.get("questions")
        headers = [q.get("header") for q in questions if isinstance(q, dict)] if questions else []
        what = ", ".join(str(h) for h in headers)
    return f"{request.kind} {request_id} of {request.session_id}: {_shortened(what)}"


def _lambda_expression(source: str) -> str:
    """``lambda: ...`` cut out of the source it was written in (lines joined): the longest
    piece from ``lambda`` to a comma, a closing bracket or the end that parses as a lambda
    (a comma inside it, ``lambda a, b: ...`` or a string, stays in)."""
    start = source.find("lambda")
    if start < 0:
        return ""
    text = " ".join(source[start:].split())
    ends = [index for index, char in enumerate(text) if char in ",)]}"]
    for end in reversed([*ends, len(text)]):
        try:
            expression = ast.parse(text[:end], mode="eval")
        except SyntaxError:
            continue
        if isinstance(expression.body, ast.Lambda):
            # Lines joined, the brackets a formatter opened for them close up again.
            return text[:end].strip().replace("( ", "(").replace(" )", ")")
    return ""


def _shortened(text: str) -> str:
    return text if len(text) <= _SHOWN_BODY else text[: _SHOWN_BODY - 1] + "…"
