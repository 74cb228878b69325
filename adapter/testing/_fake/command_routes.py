"""``POST /session/{id}/command``: a slash command run as a prompt, answered at its end.

Why a module: the real server's command route differs from a prompt's in what it
takes (a command name, its ``arguments`` as one string, ``model`` as
``"provider/model"``) and in when it answers: only once the run has ended, with the
assistant message that ended it (measured on 1.18.34 and 1.14.48 to 1.18.3). Here the
command's ``template`` (from the fake's ``inventory.commands``) with ``$ARGUMENTS``
replaced runs through the script runner as a prompt's text would; the user message
takes ``messageID`` when given. Measured answers copied: a body without ``command``
or ``arguments``, a ``messageID`` without ``msg``, a ``model`` that is not a string
are 400s; an unknown command or agent is a bare 500 with a ``session.error`` that
names the known ones, and nothing runs; the end of the run is followed by
``command.executed`` (``messageID``: the answer's id). Not copied: a ``subtask``
command (or one whose agent is a subagent) runs as a ``task`` child on the real
server; the fake runs it in the session itself.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import httpx

from .http import Router
from .inventory_routes import FakeInventory
from .runner import ScriptRunner
from .session_data import FakeSession
from .state import FakeState
from .wire import JSON, expected_prefix, invalid, js, json_response


@dataclass(eq=False)
class CommandRoutes:
    """The handler of ``POST /session/{id}/command`` (added to the router's table on
    creation)."""

    _router: Router
    _state: FakeState
    _runner: ScriptRunner
    _inventory: FakeInventory

    def __post_init__(self) -> None:
        route = self._router.of_session(self._state.sessions, self._command)
        self._router.table.add("POST", "/session/{id}/command", route)

    async def _command(self, request: httpx.Request, session: FakeSession) -> httpx.Response:
        body = await self._router.body(request)
        rejected = _invalid_command(body)
        if rejected is not None:
            return rejected
        name, arguments = body["command"], body["arguments"]
        command = next((c for c in self._inventory.commands if c.get("name") == name), None)
        agent = body.get("agent")
        if command is None:
            known = ", ".join(str(c.get("name")) for c in self._inventory.commands)
            return self._fails(session, f'Command not found: "{name}". Available commands: {known}')
        agents = [str(a.get("name")) for a in self._inventory.agents]
        if agent is not None and agent not in agents:
            listed = ", ".join(a for a in agents if a in ("build", "explore", "general", "plan"))
            return self._fails(session, f'Agent not found: "{agent}". Available agents: {listed}')
        template = str(command.get("template") or "")
        text = template.replace("$ARGUMENTS", arguments) if "$ARGUMENTS" in template else template
        provider_id, _, model_id = str(body.get("model") or "").partition("/")
        prompt = self._runner.enqueue_prompt(
            session,
            text,
            message_id=body.get("messageID"),
            agent=agent or "build",
            provider_id=provider_id or None,
            model_id=model_id or None,
            want_result=True,
        )
        assert prompt.future is not None
        result = await asyncio.shield(prompt.future)
        if result.outcome == "vanished":
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
        message = session._messages.get(result.message_id or "")
        answer: JSON = message.to_json() if message else {"info": {}, "parts": []}
        executed = {"name": name, "sessionID": session.id, "arguments": arguments}
        self._state.bus.emit("command.executed", executed | {"messageID": result.message_id})
        return json_response(200, answer)

    def _fails(self, session: FakeSession, message: str) -> httpx.Response:
        """Measured: a bare 500, the reason only in a ``session.error``."""
        error = {"name": "UnknownError", "data": {"message": message}}
        self._state.bus.emit("session.error", {"sessionID": session.id, "error": error})
        return self._router.unexpected_error()


def _invalid_command(body: JSON) -> httpx.Response | None:
    """The real server's 400 for an invalid command body (measured on 1.18.34), else None."""
    for key in ("command", "arguments"):
        if key not in body:
            return invalid("Missing key", key)
        if not isinstance(body[key], str):
            return invalid(f"Expected string, got {js(body[key])}", key)
    if "messageID" in body:
        bad_id = expected_prefix(body["messageID"], "msg", "messageID", kind="Payload")
        if bad_id is not None:
            return bad_id
    for key in ("model", "agent"):
        value = body.get(key)
        if value is not None and not isinstance(value, str):
            return invalid(f"Expected string | null, got {js(value)}", key)
    return None
