"""Permission and question requests of a thread's tree: opened, answered, withdrawn.

A request of any session of the tree reaches the host on its thread
(``request.opened`` / ``user-input.requested``) and ends once
(``request.resolved`` / ``user-input.resolved``): answered here or elsewhere,
or ``cancelled`` when a stop or the thread's end made it moot. Measured on
OpenCode 1.18.34: a request of an aborted run stays listed by
``GET /permission`` (a *ghost*; a reply "succeeds" and runs nothing), so

* a request stopped by us is also rejected on the server, so it does not linger;
* recovery (on resume, after a reconnect) announces only *live* requests, those
  whose asking tool call is still pending or running;
* a request seen answered is never announced again (a bounded memory of ids).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from .._client import OpenCodeClient
from .._client._native import (
    PermissionAsked,
    PermissionReplied,
    QuestionAsked,
    QuestionRejected,
    QuestionReplied,
    parse_native,
)
from .._client._responses import PendingRequest
from .._exceptions import NotFoundError, OpenCodeError, UnknownRequestError
from .._logging import get_logger
from .._stream._vocabulary import DECISION_FOR_REPLY, permission_reply_for
from .._threads._registry import ThreadRegistry
from .._threads._thread_state import OpenRequest, ThreadState
from .._types._events import (
    RequestOpened,
    RequestResolved,
    UserInputRequested,
    UserInputResolved,
)
from ._answers import Answers, wire_answers

__all__ = ["RequestRouter", "Requests"]

_log = get_logger("adapter.requests")


class RequestRouter(Protocol):
    """Finds the thread of a request whose session no thread owns yet (ownership)."""

    def route_request(self, event: PermissionAsked | QuestionAsked) -> None: ...


class Requests:
    def __init__(self, core: ThreadRegistry, router: RequestRouter) -> None:
        self._registry = core
        self._router = router

    # -- from the stream ----------------------------------------------------------

    def opened(self, thread: ThreadState, event: PermissionAsked | QuestionAsked) -> None:
        request_id = event.request_id
        pending = thread.requests.pending
        if request_id in pending or request_id in self._registry.answered:
            return  # a duplicate, one recovered already, or answered while recovering
        common = _announced(thread, event)
        opened: RequestOpened | UserInputRequested
        if isinstance(event, PermissionAsked):
            opened = RequestOpened(**common, permission=event.permission, patterns=event.patterns)
            request = OpenRequest(
                "permission", request_id, event.session_id, opened, call_id=event.tool_call_id
            )
        else:
            opened = UserInputRequested(**common, questions=event.questions)
            request = OpenRequest(
                "question",
                request_id,
                event.session_id,
                opened,
                event.questions,
                _asking_call(event),
            )
        pending[request_id] = request
        self._registry.emit(opened)

    def resolved(
        self, thread: ThreadState, event: PermissionReplied | QuestionReplied | QuestionRejected
    ) -> None:
        self._registry.answered.add(event.request_id)
        if thread.requests.pending.pop(event.request_id, None) is None:
            return
        common = _announced(thread, event)
        if isinstance(event, PermissionReplied):
            decision = DECISION_FOR_REPLY.get(event.reply, "decline") if event.reply else None
            self._registry.emit(RequestResolved(**common, decision=decision))
        else:
            replied = isinstance(event, QuestionReplied)
            answers = event.answers if isinstance(event, QuestionReplied) else ()
            decision = "answered" if replied else "rejected"
            self._registry.emit(UserInputResolved(**common, decision=decision, answers=answers))

    @staticmethod
    def open_in(thread: ThreadState) -> list[RequestOpened | UserInputRequested]:
        """The tree's open requests, each as the event that announced it, oldest first
        (``pending`` keeps the order they were opened in)."""
        return [request.announced for request in thread.requests.pending.values()]

    # -- withdrawn ----------------------------------------------------------------

    def cancel(
        self, thread: ThreadState, request_id: str, turn_id: str | None
    ) -> OpenRequest | None:
        """Forget an open request nobody can answer any more, and say so (``cancelled``)."""
        pending = thread.requests.pending.pop(request_id, None)
        if pending is None:
            return None
        self._registry.answered.add(request_id)
        event_type = RequestResolved if pending.kind == "permission" else UserInputResolved
        self._registry.emit(
            event_type(
                thread_id=thread.thread_id,
                turn_id=turn_id,
                request_id=request_id,
                session_id=pending.session_id,
                decision="cancelled",
            )
        )
        return pending

    def tool_ended(self, thread: ThreadState, session_id: str, call_id: str) -> None:
        """The tool call that asked an open request has ended: the request is moot.

        Answered requests are resolved before their tool goes on: measured on 1.18.34
        (3 of 3 each), ``permission.replied`` comes before the call's next update for
        ``once`` and for ``reject``. So a request still open when its call ends was
        never answered: its run was aborted (elsewhere), and the call ended ``error``
        "Tool execution aborted" (3 of 3) while OpenCode keeps listing the request.
        The host must not keep showing it."""
        for request_id, pending in list(thread.requests.pending.items()):
            if pending.call_id == call_id and pending.session_id == session_id:
                self.cancel(thread, request_id, thread.lifecycle.turn_id)

    def cancel_in(
        self, thread: ThreadState, sessions: Iterable[str], turn_id: str | None
    ) -> list[OpenRequest]:
        """Cancel the open requests of these (stopped) sessions; returns them."""
        stopped = set(sessions)
        cancelled: list[OpenRequest] = []
        for request_id, pending in list(thread.requests.pending.items()):
            if pending.session_id in stopped:
                request = self.cancel(thread, request_id, turn_id)
                if request is not None:
                    cancelled.append(request)
        return cancelled

    async def reject_on_server(
        self, client: OpenCodeClient, requests: Sequence[OpenRequest], timeout: float
    ) -> None:
        """Withdraw stopped requests on the server too (best effort, bounded): OpenCode
        would otherwise keep listing them after the abort."""
        if not requests:
            return

        async def reject(request: OpenRequest) -> None:
            try:
                if request.kind == "permission":
                    await client.permission_reply(request.request_id, "reject")
                else:
                    await client.question_reject(request.request_id)
            except OpenCodeError as exc:
                _log.info(
                    "adapter.request_reject_failed", request_id=request.request_id, error=str(exc)
                )

        try:
            async with asyncio.timeout(timeout):
                await asyncio.gather(*(reject(r) for r in requests))
        except TimeoutError:
            _log.warning("adapter.request_reject_timeout", count=len(requests))

    # -- recovery -------------------------------------------------------------------

    async def recover(self, client: OpenCodeClient, *, after_outage: bool = False) -> None:
        """Announce requests the event stream did not deliver (raised before we
        connected, or during an outage), for every thread they belong to; a ghost a
        thread still holds open is resolved ``cancelled``.

        ``after_outage``: the stream was down, so an answer or a server restart may
        have gone unheard; a request held open before the listing and missing from it
        is gone (a restarted server forgets its requests, measured on 1.18.34) and is
        resolved ``cancelled`` too, unless its ``replied`` event came meanwhile. Not
        on a resume: there the stream was up, and a listing that races a reply would
        turn that reply into a cancellation for no reason."""
        core = self._registry
        held_before = [
            (held, request_id)
            for held in (core.threads.values() if after_outage else ())
            if held.client is client
            for request_id in held.requests.pending
        ]
        try:
            listed = await client.pending_requests()
        except OpenCodeError as exc:
            _log.warning("adapter.recover_requests_failed", error=str(exc))
            return
        listed_ids = {r.id for r in listed}
        candidates = [
            r
            for r in listed
            if r.id not in core.answered
            and (r.session_id in core.owner or r.session_id not in core.strangers)
        ]
        permits = asyncio.Semaphore(4)

        async def check(request: PendingRequest) -> bool:
            async with permits:
                return await request_is_live(client, request)

        live = await asyncio.gather(*(check(r) for r in candidates))
        for held, request_id in held_before:
            # Open before the listing was asked, and not in it: gone on the server.
            if request_id not in listed_ids and not held.closing:
                self.cancel(held, request_id, held.lifecycle.turn_id)
        for request, is_live in zip(candidates, live, strict=True):
            thread = core.owner.get(request.session_id)
            if not is_live:
                if thread is not None:
                    self.cancel(thread, request.id, thread.lifecycle.turn_id)
                continue
            try:
                event = parse_native(
                    {"type": f"{request.kind}.asked", "properties": dict(request.raw)}
                )
            except OpenCodeError as exc:
                _log.warning(
                    "adapter.recover_request_malformed", request_id=request.id, error=str(exc)
                )
                continue
            if not isinstance(event, PermissionAsked | QuestionAsked):
                continue
            if thread is not None:
                self.opened(thread, event)
            elif not core.closed:
                self._router.route_request(event)

    # -- answers from the host ----------------------------------------------------------

    async def respond(self, thread: ThreadState, request_id: str, decision: str) -> None:
        reply = permission_reply_for(decision)
        self._held(thread, request_id, "permission")
        await self._send(thread, request_id, thread.client.permission_reply(request_id, reply))

    async def answer(self, thread: ThreadState, request_id: str, answers: Answers) -> None:
        pending = self._held(thread, request_id, "question")
        ordered = wire_answers(pending.questions, answers)  # nothing sent if they don't fit
        await self._send(thread, request_id, thread.client.question_reply(request_id, ordered))

    async def reject(self, thread: ThreadState, request_id: str) -> None:
        """Decline a question request: the asking tool call fails and its run stops
        (measured on 1.18.34; ``question.rejected`` then resolves it here)."""
        self._held(thread, request_id, "question")
        await self._send(thread, request_id, thread.client.question_reject(request_id))

    @staticmethod
    def _held(thread: ThreadState, request_id: str, kind: str) -> OpenRequest:
        """The thread's open request of this kind, else :class:`UnknownRequestError`."""
        pending = thread.requests.pending.get(request_id)
        if pending is None or pending.kind != kind:
            raise UnknownRequestError(thread.thread_id, request_id)
        return pending

    @staticmethod
    async def _send(thread: ThreadState, request_id: str, reply: Awaitable[object]) -> None:
        """Send the host's reply; a request the server no longer has is forgotten."""
        try:
            await reply
        except NotFoundError:
            thread.requests.pending.pop(request_id, None)
            raise UnknownRequestError(thread.thread_id, request_id) from None


def _announced(
    thread: ThreadState,
    event: PermissionAsked | QuestionAsked | PermissionReplied | QuestionReplied | QuestionRejected,
) -> dict[str, Any]:
    """What every request event of the thread says: whose, which, and the native event."""
    return {
        "thread_id": thread.thread_id,
        "turn_id": thread.lifecycle.turn_id,
        "request_id": event.request_id,
        "session_id": event.session_id,
        "raw": event.raw,
    }


def _asking_call(event: QuestionAsked) -> str | None:
    """The ``callID`` of the tool call that asked a question, when the server says."""
    properties = event.raw.get("properties")
    tool = properties.get("tool") if isinstance(properties, Mapping) else None
    call_id = tool.get("callID") if isinstance(tool, Mapping) else None
    return call_id if isinstance(call_id, str) else None


async def request_is_live(client: OpenCodeClient, request: PendingRequest) -> bool:
    """Whether a listed request still blocks a run, by the rule measured on 1.18.34:
    while a request is live, the tool call that asked it is ``pending`` or ``running``;
    once its run was aborted, that part has ended (``error``, interrupted) although the
    request is still listed. A request without a tool call is live while its session
    is busy. When the server cannot tell, the request counts as live: a host had
    better see a dead request than miss one that blocks its turn."""
    tool = request.raw.get("tool")
    message_id = tool.get("messageID") if isinstance(tool, Mapping) else None
    call_id = tool.get("callID") if isinstance(tool, Mapping) else None
    try:
        if isinstance(message_id, str) and isinstance(call_id, str):
            message = await client.message(request.session_id, message_id)
            return any(
                p.call_id == call_id
                and p.state is not None
                and p.state.status in ("pending", "running")
                for p in message.parts
            )
        status = (await client.status()).get(request.session_id)
        return status is not None and status.is_busy
    except NotFoundError:
        return False  # its message or session is gone (deleted): nothing waits on it
    except (OpenCodeError, ValueError) as exc:
        _log.warning("adapter.request_check_failed", request_id=request.id, error=str(exc))
        return True
