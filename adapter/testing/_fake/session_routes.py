"""The session routes: sessions, their messages and prompts, revert, fork, move, abort.

Why a module: these are the routes a client drives a conversation through, and each
reproduces the real server's answers and events, as measured (the validation
messages of a prompt, a revert applied by the next prompt, a fork's copied messages,
a blocking ``summarize``). :class:`SessionRoutes` registers them in the route table;
what they change goes through :class:`~.state.FakeState` and the runner.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from urllib.parse import parse_qs

import httpx

from .http import Router
from .id_minting import IdMinter
from .model_input import convert_parts
from .runner import ScriptRunner
from .session_data import FakeMessage, FakeSession, Settings
from .state import FakeState
from .steps import Fail
from .wire import (
    JSON,
    HttpError,
    expected_prefix,
    invalid,
    js,
    json_response,
    not_found,
    now_ms,
    resolve_directory,
)

_PART_TYPES = ("text", "file", "agent", "subtask")
_PART_UNION = (
    'Expected { readonly "type": "text", ... } | { readonly "type": "file", ... } | '
    '{ readonly "type": "agent", ... } | { readonly "type": "subtask", ... }'
)


def _bare_bad_request() -> httpx.Response:
    return json_response(400, {"_tag": "BadRequest"})


def _busy_error(session: FakeSession) -> httpx.Response:
    return json_response(
        409,
        {
            "_tag": "SessionBusyError",
            "sessionID": session.id,
            "message": f"Session is busy: {session.id}",
        },
    )


def _invalid_prompt(body: JSON) -> httpx.Response | None:
    """The real server's 400 for an invalid prompt body (measured), else None."""
    if "parts" not in body:
        return invalid("Missing key", "parts")
    parts = body["parts"]
    if not isinstance(parts, list):
        return invalid(f"Expected array, got {js(parts)}", "parts")
    for index, part in enumerate(parts):
        if not isinstance(part, dict) or part.get("type") not in _PART_TYPES:
            return invalid(f"{_PART_UNION}, got {js(part)}", "parts", index)
        if part["type"] == "text":
            if "text" not in part:
                return invalid("Missing key", "parts", index, "text")
            if not isinstance(part["text"], str):
                got = f"Expected string, got {js(part['text'])}"
                return invalid(got, "parts", index, "text")
        if part["type"] == "file":
            for key in ("mime", "url"):
                if key not in part:
                    return invalid("Missing key", "parts", index, key)
                if not isinstance(part[key], str):
                    got = f"Expected string, got {js(part[key])}"
                    return invalid(got, "parts", index, key)
    for key in ("system", "variant"):
        value = body.get(key)
        if value is not None and not isinstance(value, str):
            return invalid(f"Expected string | null, got {js(value)}", key)
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, dict):
            return invalid(f"Expected object, got {js(tools)}", "tools")
        for name, enabled in tools.items():
            if not isinstance(enabled, bool):
                return invalid(f"Expected boolean, got {js(enabled)}", "tools", name)
    if "messageID" in body:
        bad_id = expected_prefix(body["messageID"], "msg", "messageID", kind="Payload")
        if bad_id is not None:
            return bad_id
    model = body.get("model")
    if model is not None and not isinstance(model, dict):
        return invalid(f"Expected object | null, got {js(model)}", "model")
    agent = body.get("agent")
    if agent is not None and not isinstance(agent, str):
        return invalid(f"Expected string | null, got {js(agent)}", "agent")
    return None


@dataclass(eq=False)
class SessionRoutes:
    """The handlers of ``/session...`` and ``/experimental/control-plane/move-session``
    (added to the router's table on creation)."""

    _router: Router
    _state: FakeState
    _runner: ScriptRunner
    _ids: IdMinter
    _settings: Settings

    def __post_init__(self) -> None:
        router, state = self._router, self._state
        self._emit = state.bus.emit
        self._body = router.body
        table = router.table
        table.add("POST", "/session", self._post_session)
        table.add("GET", "/session", self._list_sessions)
        table.add("POST", "/experimental/control-plane/move-session", self._move_session)
        table.add("POST", "/session/{id}/abort", self._abort)
        table.add("GET", "/session/{id}/message/{messageID}", self._get_message)
        for method, pattern, handler in (
            ("GET", "/session/{id}", self._get_session),
            ("PATCH", "/session/{id}", self._patch_session),
            ("DELETE", "/session/{id}", self._delete_session),
            ("GET", "/session/{id}/children", self._children),
            ("GET", "/session/{id}/message", self._list_messages),
            ("POST", "/session/{id}/message", self._prompt_and_wait),
            ("POST", "/session/{id}/prompt_async", self._prompt_async),
            ("POST", "/session/{id}/revert", self._revert),
            ("POST", "/session/{id}/unrevert", self._unrevert),
            ("POST", "/session/{id}/summarize", self._summarize),
            ("POST", "/session/{id}/fork", self._fork_session),
        ):
            table.add(method, pattern, router.of_session(state.sessions, handler))

    async def _lenient_body(self, request: httpx.Request) -> JSON | None:
        """The body of a route that answers a bare ``400 {"_tag": "BadRequest"}`` to any
        invalid one, malformed JSON included (measured), instead of the usual answers;
        ``None`` for such a body."""
        try:
            return await self._body(request)
        except HttpError:
            return None

    async def _abort(self, request: httpx.Request, params: tuple[str, ...]) -> httpx.Response:
        """Measured: ``true`` even for an unknown session; a session deleted while busy
        is still aborted."""
        session_id = params[0]
        if not session_id.startswith("ses"):
            return self._router.unexpected_error()
        session = self._state.find(session_id)
        if session is not None:
            session.abort_count += 1
            await self._runner.abort_session(session)
        return json_response(200, True)

    async def _get_message(self, request: httpx.Request, params: tuple[str, ...]) -> httpx.Response:
        session_id, message_id = params
        if not session_id.startswith("ses"):
            return self._router.unexpected_error()
        # Measured: the message id is validated, and looked up, before the session.
        bad_id = expected_prefix(message_id, "msg", "messageID", kind="Params")
        if bad_id is not None:
            return bad_id
        session = self._state.sessions.get(session_id)
        message = session._messages.get(message_id) if session is not None else None
        if message is None:
            return not_found(f"Message not found: {message_id}")
        return json_response(200, message.to_json())

    async def _get_session(self, request: httpx.Request, session: FakeSession) -> httpx.Response:
        return json_response(200, session.info)

    async def _children(self, request: httpx.Request, session: FakeSession) -> httpx.Response:
        sessions = self._state.sessions
        return json_response(200, [sessions[c].info for c in session._children])

    async def _prompt_and_wait(
        self, request: httpx.Request, session: FakeSession
    ) -> httpx.Response:
        return await self._prompt(request, session, wait=True)

    async def _prompt_async(self, request: httpx.Request, session: FakeSession) -> httpx.Response:
        return await self._prompt(request, session, wait=False)

    async def _post_session(
        self, request: httpx.Request, params: tuple[str, ...]
    ) -> httpx.Response:
        # Measured: this route answers any invalid body (malformed JSON included) with a
        # bare ``400 {"_tag": "BadRequest"}``, and an unknown ``parentID`` is accepted.
        body = await self._lenient_body(request)
        if body is None:
            return _bare_bad_request()
        parent_id = body.get("parentID")
        title = body.get("title")
        if parent_id is not None and (
            not isinstance(parent_id, str) or not parent_id.startswith("ses")
        ):
            return _bare_bad_request()
        if title is not None and not isinstance(title, str):
            return _bare_bad_request()
        permission = body.get("permission")
        if permission is not None and not isinstance(permission, list):
            return _bare_bad_request()
        # Measured: the session (a child by ``parentID`` too) gets the request's directory.
        directory = self._router.request_directory(request)
        session = self._state.create_session(parent_id, title, directory, permission=permission)
        return json_response(200, session.info)

    async def _list_sessions(
        self, request: httpx.Request, params: tuple[str, ...]
    ) -> httpx.Response:
        query = parse_qs(request.url.query.decode())
        roots = query.get("roots", ["false"])[0] == "true"
        # Measured: sessions of every directory, unless ``?directory=`` names one (the
        # header does not filter).
        only = query.get("directory", [""])[0]
        directory = resolve_directory(only, self._settings.directory) if only else None
        infos = [
            s.info
            for s in self._state.sessions.values()
            if not (roots and s.parent_id is not None)
            and (directory is None or s.directory == directory)
        ]
        # Measured: most recently updated first; on a tie the newer session first
        # (ids sort that way: they count down).
        infos.sort(key=lambda info: (-info["time"]["updated"], info["id"]))
        return json_response(200, infos)

    async def _list_messages(self, request: httpx.Request, session: FakeSession) -> httpx.Response:
        messages = session._messages.values()
        limit = parse_qs(request.url.query.decode()).get("limit")
        if limit and not limit[0].isdigit():
            return invalid("Expected an integer, got NaN", "limit", kind="Query")
        if limit:
            count = int(limit[0])
            all_messages = list(messages)
            return json_response(
                200, [m.to_json() for m in all_messages[max(0, len(all_messages) - count) :]]
            )
        return json_response(200, [m.to_json() for m in messages])

    async def _prompt(
        self, request: httpx.Request, session: FakeSession, *, wait: bool
    ) -> httpx.Response:
        if not await request.aread():
            return invalid("Expected object, got undefined")
        body = await self._body(request)
        rejected = _invalid_prompt(body)
        if rejected is not None:
            return rejected
        raw_parts = body["parts"]
        text = "".join(
            str(p.get("text", ""))
            for p in raw_parts
            if isinstance(p, dict) and p.get("type") == "text"
        )
        raw_model = body.get("model")
        model: JSON = raw_model if isinstance(raw_model, dict) else {}
        message_id = body.get("messageID")
        agent = body.get("agent")
        converted = convert_parts(raw_parts, modalities=self._settings.model_modalities)
        if converted.dropped:
            # Measured: an image the server cannot decode: 204 (400 on /message), nothing
            # stored, no run.
            return httpx.Response(204) if not wait else json_response(400, {"_tag": "BadRequest"})
        script: str | None = None
        if converted.failure is not None:
            script = f"__unsupported__:{converted.failure}"
            self._runner.scripts[script] = (Fail(name="UnknownError", message=converted.failure),)
        prompt = self._runner.enqueue_prompt(
            session,
            text,
            message_id=message_id,
            script=script,
            agent=agent if isinstance(agent, str) else "build",
            provider_id=model.get("providerID"),
            model_id=model.get("modelID"),
            want_result=wait,
            parts=converted.stored,
            options={k: body.get(k) for k in ("system", "tools", "variant")},
            content=converted.content,
        )
        if not wait:
            return httpx.Response(204)
        assert prompt.future is not None
        result = await asyncio.shield(prompt.future)
        if result.outcome == "vanished":
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
        message = session._messages.get(result.message_id or "")
        if message is None:
            message = session._messages.get(prompt.user_message_id)
        return json_response(200, message.to_json() if message else {"info": {}, "parts": []})

    async def _revert(self, request: httpx.Request, session: FakeSession) -> httpx.Response:
        """Mark messages reverted (measured): they stay stored until the next prompt."""
        body = await self._body(request)
        message_id = body.get("messageID")
        part_id = body.get("partID")
        if not isinstance(message_id, str):
            return invalid("Missing key", "messageID")
        if session.busy:
            return _busy_error(session)
        revert: JSON | None = None
        last_user: str | None = None
        for message in session._messages.values():
            if message.role == "user":
                last_user = message.id
            before: list[str] = []
            for part in message._parts.values():
                if (message.id == message_id and part_id is None) or part["id"] == part_id:
                    # Like OpenCode: a part with no text or tool before it in its message
                    # reverts the whole turn, from the user message that started it.
                    if any(t in ("text", "tool") for t in before):
                        revert = {"messageID": message.id, "partID": part["id"]}
                    else:
                        revert = {"messageID": last_user or message.id}
                    break
                before.append(part["type"])
            if revert is not None:
                break
        if revert is None:
            return json_response(200, session.info)  # unknown message: nothing changes
        self._emit("session.diff", {"sessionID": session.id, "diff": []})
        self._state.touch(session, revert=revert)
        return json_response(200, session.info)

    async def _unrevert(self, request: httpx.Request, session: FakeSession) -> httpx.Response:
        if session.busy:
            return _busy_error(session)
        if "revert" in session.info:
            self._state.touch(session, revert=None)
        return json_response(200, session.info)

    async def _patch_session(self, request: httpx.Request, session: FakeSession) -> httpx.Response:
        """``title``, ``time.archived``, ``permission`` (appended), ``metadata``; other
        fields are ignored. Measured: emits ``session.updated`` and leaves ``time.updated``
        alone."""
        body = await self._body(request)
        info = dict(session.info)
        title = body.get("title")
        if title is not None:
            if not isinstance(title, str):
                return invalid("title must be a string")
            info["title"] = title
        times = body.get("time")
        if isinstance(times, dict) and isinstance(times.get("archived"), int | float):
            info["time"] = {**info["time"], "archived": times["archived"]}
        if isinstance(body.get("permission"), list):
            # Measured: the rules are appended to the session's (the last match wins).
            info["permission"] = [*(info.get("permission") or []), *body["permission"]]
        if "metadata" in body:
            info["metadata"] = body["metadata"]
        session.info = info
        self._emit("session.updated", {"sessionID": session.id, "info": info})
        return json_response(200, info)

    async def _delete_session(self, request: httpx.Request, session: FakeSession) -> httpx.Response:
        """Delete a session and its subtree, children first (measured: ``session.deleted``
        per session, depth first in creation order, then ``200 true``). A busy session
        keeps running; it can still be aborted, and its pending requests stay listed."""
        order: list[FakeSession] = []

        def walk(node: FakeSession) -> None:
            for child_id in node._children:
                child = self._state.sessions.get(child_id)
                if child is not None:
                    walk(child)
            order.append(node)

        walk(session)
        for node in order:
            del self._state.sessions[node.id]
            parent = self._state.sessions.get(node.parent_id) if node.parent_id else None
            if parent is not None:
                parent._children.pop(node.id, None)
            if node.busy:
                self._state.deleted[node.id] = node
            self._emit("session.deleted", {"sessionID": node.id, "info": node.info})
        return json_response(200, True)

    async def _fork_session(self, request: httpx.Request, session: FakeSession) -> httpx.Response:
        """``POST /session/{id}/fork {messageID?}`` (measured on 1.18.34).

        A new root session (no ``parentID``) in the *original's* directory, whatever
        directory the request names, titled ``"<title> (fork #1)"`` (``#n+1`` for a
        fork of ``#n``), without the original's permission rules, usage or model; every
        message before ``messageID`` (all of them when it names none of the session's)
        copied with new, later ids, parts and ``parentID`` following. Events: its
        ``session.created``, then ``message.updated`` and the parts of each copy.
        Malformed JSON, a non-object body or a ``messageID`` without ``msg`` is a bare
        ``400 {"_tag": "BadRequest"}``; other keys are ignored."""
        body = await self._lenient_body(request)
        if body is None:
            return _bare_bad_request()
        until = body.get("messageID")
        if until is not None and (not isinstance(until, str) or not until.startswith("msg")):
            return _bare_bad_request()
        match = re.fullmatch(r"(.+) \(fork #(\d+)\)", session.title)
        title = f"{match[1]} (fork #{int(match[2]) + 1})" if match else f"{session.title} (fork #1)"
        fork = self._state.create_session(None, title, session.directory)
        new_ids: dict[str, str] = {}
        for message in session.messages:
            if message.id == until:
                break
            new_ids[message.id] = self._ids.new("msg")
            info = {**message.info, "id": new_ids[message.id], "sessionID": fork.id}
            if "parentID" in info:
                info["parentID"] = new_ids.get(info["parentID"], info["parentID"])
            copy = FakeMessage(info)
            self._state.store_message(fork, copy, info)
            for part in message.parts:
                ids = {"id": self._ids.new("prt"), "sessionID": fork.id, "messageID": copy.id}
                self._state.store_part(copy, {**part, **ids})
        return json_response(200, fork.info)

    async def _move_session(
        self, request: httpx.Request, params: tuple[str, ...]
    ) -> httpx.Response:
        """``POST /experimental/control-plane/move-session {sessionID, destination:
        {directory}, moveChanges?}`` (measured on 1.18.34): 204 and no event; the
        session's directory becomes the one given, as given (not normalised), so its
        later events go to that directory's streams; ``time.updated`` moves. An unknown
        session is a 400 ``MoveSessionError``. The fake has one project, so it never
        answers the real one's "Destination directory belongs to another project"
        (a hook can)."""
        body = await self._body(request)
        destination = body.get("destination")
        if not isinstance(destination, dict):
            return invalid("Missing key", "destination")
        directory = destination.get("directory")
        if not isinstance(directory, str):
            return invalid("Missing key", "destination", "directory")
        session = self._state.sessions.get(str(body.get("sessionID")))
        if session is None:
            message = f"Session not found: {body.get('sessionID')}"
            return json_response(400, {"name": "MoveSessionError", "data": {"message": message}})
        info = {**session.info, "directory": directory, "path": directory.lstrip("/")}
        info["time"] = {**info["time"], "updated": now_ms()}
        session.info = info
        self._state.directory_of[session.id] = directory
        self._state.bus.notify()
        return httpx.Response(204)

    async def _summarize(self, request: httpx.Request, session: FakeSession) -> httpx.Response:
        """Compact the session (measured): a user message with a ``compaction`` part
        is stored at once; the summary turn runs after the current run (the request
        blocks until then) and answers ``true``, also when an abort dropped it."""
        body = await self._body(request)
        provider_id, model_id = body.get("providerID"), body.get("modelID")
        if not isinstance(provider_id, str) or not isinstance(model_id, str):
            return invalid("providerID and modelID are required")
        auto = body.get("auto", False)
        prompt = self._runner.enqueue_prompt(
            session,
            "",
            agent=str(session.info.get("agent", "build")),
            provider_id=provider_id,
            model_id=model_id,
            want_result=True,
            compaction=bool(auto),
        )
        assert prompt.future is not None
        result = await asyncio.shield(prompt.future)
        if result.outcome == "vanished":
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
        return json_response(200, True)
