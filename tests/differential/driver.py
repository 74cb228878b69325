"""The scenario driver: run one neutral scenario on a target over plain HTTP, record it.

The differential suite proves ``FakeOpenCodeServer`` against a real ``opencode
serve``: users write contract tests against the fake and most of this project's
tests use it, so where it differs from the real server those tests prove nothing.
Each scenario (:mod:`.scenarios`) is written once in a neutral language
(:mod:`.language`) and run on both targets — the fake through its transport, a
real server driven by the scripted model — by this driver, which records:

* every request of the scenario: its status and JSON body;
* the whole ``/event`` stream of the scenario's directory (subscribed before it starts),
  and of each other directory the scenario names (:data:`.language.Directory`);
* the state afterwards: the scenario's sessions and their tree, ``/session/status``,
  stored messages and parts, pending ``/permission`` and ``/question`` requests.

:mod:`.compare` then checks, per scenario, that status codes are equal, that every
JSON body and event of *both* targets validates against the real server's OpenAPI
spec, that the normalised bodies and state are equal, that the same event types
occur, and that the event-order constraints the adapter relies on hold on both.
Known, harmless differences live in one registry (:mod:`.divergences`).
``python -m tests.differential --report`` prints every divergence per scenario.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
import time
import urllib.parse
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

from adapter.testing import FakeOpenCodeServer, RealOpenCodeServer, ScriptedModelServer

from .attach import attach
from .language import (
    COMMANDS,
    Attach,
    Call,
    Command,
    Create,
    Fork,
    Prompt,
    Scenario,
    Settle,
    Turn,
    WaitFor,
    WaitIdle,
    WaitModelCall,
    directories,
    fake_scripts,
    model_steps,
)
from .order import On, event_sessions

JSON = dict[str, Any]

QUIET = 0.3
"""Seconds without a new event after which a target counts as settled."""
WAIT = 15.0
"""Upper bound of every wait (generous: a first prompt on a fresh server takes ~2 s)."""
HTTP_TIMEOUT = 30.0
DIRECTORY_HEADER = "x-opencode-directory"
MAIN = "main"
"""The name of the target's own directory's stream in :attr:`Recording.streams`."""


@dataclass
class Exchange:
    """One recorded request: ``label`` is its method and templated path (same on both targets)."""

    label: str
    method: str
    path: str
    status: int
    body: Any
    json: bool
    phase: str
    """``"scenario"`` (an action) or ``"state"`` (the snapshot after it)."""


@dataclass
class Recording:
    """Everything one target did in one scenario."""

    target: str
    directory: str
    directories: dict[str, str] = field(default_factory=dict)
    """Other directory name → its path on this target (see :data:`.language.Directory`)."""
    ids: dict[str, str] = field(default_factory=dict)
    """alias → session id, for every session of the scenario (explicit and derived)."""
    exchanges: list[Exchange] = field(default_factory=list)
    events: list[JSON] = field(default_factory=list)
    """Every stream's events, in arrival order (one stream unless other directories)."""
    streams: dict[str, list[JSON]] = field(default_factory=dict)
    """Stream name (:data:`MAIN` or another directory's name) → its events."""
    state: JSON = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    """Driver-level failures (a wait that timed out), reported as divergences."""
    seconds: float = 0.0


class Target(Protocol):
    """One side of the comparison."""

    name: str
    directory: str

    def client(self) -> httpx.AsyncClient: ...

    def other_directory(self, name: str) -> str:
        """A path for the other directory ``name``, fresh for each call (scenario)."""

    def install(self, scripts: Mapping[str, Sequence[Turn]], names: Mapping[str, str]) -> None:
        """Register the fake's scripts (run names) before the scenario."""

    def install_conversation(
        self, name: str, turns: Sequence[Turn], names: Mapping[str, str]
    ) -> None:
        """Register one model conversation (the real server's way to script prompts)."""

    async def wait_model_call(self, session_id: str, log: EventLog) -> None: ...

    async def aclose(self) -> None: ...


class FakeTarget:
    """A fresh :class:`FakeOpenCodeServer` for one scenario."""

    name = "fake"

    def __init__(self, *, background_subagents: bool = False) -> None:
        self.server = FakeOpenCodeServer(background_subagents=background_subagents)
        self.directory = self.server.directory

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            transport=self.server.transport,
            base_url=self.server.base_url,
            timeout=HTTP_TIMEOUT,
            headers={"x-opencode-directory": self.directory},
        )

    def other_directory(self, name: str) -> str:
        return f"/home/user/{name}"

    def install(self, scripts: Mapping[str, Sequence[Turn]], names: Mapping[str, str]) -> None:
        for local, turns in scripts.items():
            for name, steps in fake_scripts(names[local], turns, names).items():
                self.server.script(name, steps)

    def install_conversation(
        self, name: str, turns: Sequence[Turn], names: Mapping[str, str]
    ) -> None:
        """The fake runs each prompt's own script: nothing to do."""

    async def wait_model_call(self, session_id: str, log: EventLog) -> None:
        # The fake "calls the model" as soon as the assistant message exists.
        assistant = On("message.updated", where={"info.role": "assistant"})
        await log.wait(
            lambda events: any(
                assistant.matches(e, {}) and session_id in event_sessions(e) for e in events
            ),
            f"the assistant message of {session_id}",
        )
        # ... and its run is then in the turn's ``Hang`` step, the model call in flight.
        await self.server.wait_hanging(session_id, timeout=WAIT)

    async def aclose(self) -> None:
        await self.server.aclose()


class RealTarget:
    """A real ``opencode serve`` whose model is a :class:`ScriptedModelServer` (shared)."""

    name = "real"

    def __init__(self, server: RealOpenCodeServer, model: ScriptedModelServer) -> None:
        self.server = server
        self.model = model
        self.directory = str(server.directory)

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.server.base_url,
            auth=self.server.auth,
            timeout=HTTP_TIMEOUT,
            trust_env=False,
            headers={"x-opencode-directory": self.directory},
        )

    def other_directory(self, name: str) -> str:
        # Beside the project, in the server's private root (removed when it closes).
        path = self.server.directory.parent / f"{name}-{uuid.uuid4().hex[:6]}"
        path.mkdir()
        return str(path)

    def install(self, scripts: Mapping[str, Sequence[Turn]], names: Mapping[str, str]) -> None:
        for local, turns in scripts.items():
            self.model.script(names[local], model_steps(turns, names))

    def install_conversation(
        self, name: str, turns: Sequence[Turn], names: Mapping[str, str]
    ) -> None:
        self.model.script(name, model_steps(turns, names))

    async def wait_model_call(self, session_id: str, log: EventLog) -> None:
        # A hanging model has started its stream (the scripted model sends its first chunk,
        # as any provider does): wait until OpenCode has taken it in, marked by the step's
        # ``step-start`` part. Without this an abort races the first chunk and the stored
        # message has a step-start or not by luck.
        await self.model.wait_for_async(
            lambda reqs: [r for r in reqs if r.session_id == session_id and r.open],
            timeout=WAIT,
        )
        step_start = On("message.part.updated", where={"part.type": "step-start"})
        await log.wait(
            lambda events: any(
                step_start.matches(e, {}) and session_id in event_sessions(e) for e in events
            ),
            f"the step-start of {session_id}'s hanging model call",
        )

    async def aclose(self) -> None:
        """The servers are shared (session fixtures): nothing to close."""


class EventLog:
    """Reads the ``/event`` stream of the client's directory, and of each of ``others``
    (name → path), into lists; waits on all of them."""

    def __init__(self, client: httpx.AsyncClient, others: Mapping[str, str] | None = None) -> None:
        self._client = client
        self._others = dict(others or {})
        self.events: list[JSON] = []
        self.streams: dict[str, list[JSON]] = {MAIN: [], **{name: [] for name in self._others}}
        self.last_at = time.monotonic()
        self._changed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self.error: BaseException | None = None

    async def start(self) -> None:
        """Subscribe and wait for each ``server.connected`` (so nothing later is missed)."""
        self._tasks = [asyncio.create_task(self._read(name)) for name in self.streams]
        await self.wait(
            lambda _events: all(
                any(e.get("type") == "server.connected" for e in stream)
                for stream in self.streams.values()
            ),
            "server.connected",
        )

    async def _read(self, name: str) -> None:
        headers = {} if name == MAIN else {DIRECTORY_HEADER: self._others[name]}
        stream = self.streams[name]
        try:
            async with self._client.stream(
                "GET", "/event", headers=headers, timeout=None
            ) as response:
                async for line in response.aiter_lines():
                    if line.startswith("data:"):
                        with contextlib.suppress(ValueError):
                            event = json.loads(line[5:].strip())
                            if isinstance(event, dict):
                                stream.append(event)
                                self.events.append(event)
                                self.last_at = time.monotonic()
                                self._changed.set()
        except (httpx.HTTPError, asyncio.CancelledError) as exc:
            if not isinstance(exc, asyncio.CancelledError):
                self.error = exc
                self._changed.set()
            raise

    async def wait(self, predicate: Callable[[list[JSON]], bool], what: str) -> None:
        """Wait until ``predicate(events)``; ``TimeoutError`` naming ``what`` after :data:`WAIT`."""
        try:
            async with asyncio.timeout(WAIT):
                while not predicate(self.events):
                    self._changed.clear()
                    if self.error is not None:
                        raise RuntimeError(f"event stream failed: {self.error!r}")
                    await self._changed.wait()
        except TimeoutError:
            raise TimeoutError(f"no {what} within {WAIT} s") from None

    async def quiet(self, seconds: float = QUIET) -> None:
        """Wait until no event arrived for ``seconds``."""
        async with asyncio.timeout(WAIT):
            while (left := self.last_at + seconds - time.monotonic()) > 0:
                await asyncio.sleep(left)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, httpx.HTTPError):
                await task


def run_names(scenario: Scenario, tag: str) -> dict[str, str]:
    """Script names unique to one run (the scripted model is shared by every test)."""
    stem = re.sub(r"[^A-Za-z0-9_.-]", "-", scenario.name)
    return {local: f"{stem}-{tag}-{local}" for local in scenario.scripts}


def conversations(scenario: Scenario, names: Mapping[str, str]) -> dict[str, list[Turn]]:
    """The real model's script per conversation: a session's prompts continue its first
    prompt's script (the scripted model selects by the first user message) unless
    ``fresh_history``."""
    started: dict[str, str] = {}
    turns: dict[str, list[Turn]] = {}
    for action in scenario.actions:
        if not isinstance(action, Prompt | Command):
            continue
        own = list(scenario.scripts[action.script])
        name = names[action.script]
        if action.session not in started or getattr(action, "fresh_history", False):
            if name in turns:
                raise ValueError(f"{scenario.name}: script {action.script!r} starts two chats")
            started[action.session] = name
            turns[name] = own
        else:
            turns[started[action.session]].extend(own)
    return turns


class _Run:
    """One scenario on one target."""

    def __init__(self, scenario: Scenario, target: Target, names: Mapping[str, str]) -> None:
        self.scenario = scenario
        self.target = target
        self.names = names
        self.rec = Recording(target.name, target.directory)
        self.rec.directories = {
            name: target.other_directory(name) for name in directories(scenario.actions)
        }
        self.explicit: dict[str, str] = {}
        self.created_in: dict[str, str | None] = {}
        """alias → the other directory it was created in (``None``: the target's own)."""
        self.marks: dict[str, int] = {}
        self.log: EventLog

    # ---------------------------------------------------------------- aliases

    def children_from_events(self, parent_id: str) -> list[str]:
        found = []
        for event in self.log.events:
            if event.get("type") == "session.created":
                info = event.get("properties", {}).get("info", {})
                if info.get("parentID") == parent_id and info.get("id") not in found:
                    found.append(info["id"])
        return found

    def resolve(self, alias: str) -> str:
        """The session id of ``alias``: explicit, or ``parent/N`` (Nth child created)."""
        if alias in self.explicit:
            return self.explicit[alias]
        parent, _, index = alias.rpartition("/")
        if parent and index.isdigit():
            children = self.children_from_events(self.resolve(parent))
            if int(index) < len(children):
                return children[int(index)]
        raise KeyError(f"no session {alias!r} (yet) on {self.target.name}")

    def ids(self) -> dict[str, str]:
        """alias → id for every session known from actions and ``session.created`` events."""
        out = dict(self.explicit)
        queue = list(out.items())
        while queue:
            alias, sid = queue.pop(0)
            for index, child in enumerate(self.children_from_events(sid)):
                if child not in out.values():
                    out[f"{alias}/{index}"] = child
                    queue.append((f"{alias}/{index}", child))
        return out

    def path_of(self, name: str | None) -> str | None:
        """The path of the other directory ``name`` (keeping a trailing ``/``)."""
        if name is None:
            return None
        return self.rec.directories[name.rstrip("/")] + ("/" if name.endswith("/") else "")

    def directory_of(self, alias: str) -> str | None:
        """The directory a session was created in; a derived (task) child is in its parent's."""
        if alias in self.created_in:
            return self.created_in[alias]
        parent = alias.rpartition("/")[0]
        return self.directory_of(parent) if parent else None

    async def wait_session(self, alias: str) -> str:
        await self.log.wait(lambda _events: self._known(alias), f"session {alias}")
        return self.resolve(alias)

    def _known(self, alias: str) -> bool:
        try:
            self.resolve(alias)
        except KeyError:
            return False
        return True

    # ---------------------------------------------------------------- requests

    async def request(
        self,
        client: httpx.AsyncClient,
        method: str,
        path: str,
        body: Any,
        label: str,
        phase: str,
        directory: str | None = None,
    ) -> Exchange:
        kwargs: dict[str, Any] = {} if body is None else {"json": body}
        where = self.path_of(directory)
        if where is not None:
            kwargs["headers"] = {DIRECTORY_HEADER: where}
        response = await client.request(method, path, **kwargs)
        raw = await response.aread()
        is_json = "json" in response.headers.get("content-type", "")
        value: Any = raw.decode("utf-8", "replace") if raw else None
        if raw and is_json:
            try:
                value = json.loads(raw)
            except ValueError:
                is_json = False
        exchange = Exchange(label, method, path, response.status_code, value, is_json, phase)
        self.rec.exchanges.append(exchange)
        return exchange

    async def expand(self, client: httpx.AsyncClient, template: str) -> str:
        """Resolve ``{alias}``, ``{msg:alias:N}``, ``{permission:alias}``, ``{question:alias}``."""
        out = template
        for token in re.findall(r"\{([^{}]+)\}", template):
            kind, _, rest = token.partition(":")
            if not rest:
                value = await self.wait_session(token)
            elif kind == "msg":
                alias, _, index = rest.rpartition(":")
                sid = self.resolve(alias)
                messages = (await client.get(f"/session/{sid}/message")).json()
                value = messages[int(index)]["info"]["id"]
            elif kind in ("permission", "question"):
                sid = self.resolve(rest)
                where = self.path_of(self.directory_of(rest))
                headers = {} if where is None else {DIRECTORY_HEADER: where}
                pending = (await client.get(f"/{kind}", headers=headers)).json()
                value = next(p["id"] for p in pending if p.get("sessionID") == sid)
            elif kind == "dir":
                value = urllib.parse.quote(self.path_of(rest) or "", safe="")
            else:
                raise ValueError(f"unknown template {{{token}}}")
            out = out.replace("{" + token + "}", value)
        return out

    async def expand_body(self, client: httpx.AsyncClient, body: Any) -> Any:
        if isinstance(body, str):
            return await self.expand(client, body)
        if isinstance(body, Mapping):
            return {k: await self.expand_body(client, v) for k, v in body.items()}
        if isinstance(body, list):
            return [await self.expand_body(client, v) for v in body]
        return body

    # ---------------------------------------------------------------- actions

    async def perform(self, client: httpx.AsyncClient, action: Any) -> None:
        if isinstance(action, Create):
            body: JSON = {}
            if action.title is not None:
                body["title"] = action.title
            if action.parent is not None:
                body["parentID"] = await self.wait_session(action.parent)
            if action.ask_bash:
                body["permission"] = [{"permission": "bash", "pattern": "*", "action": "ask"}]
            label = f"POST /session ({action.alias})"
            exchange = await self.request(
                client, "POST", "/session", body, label, "scenario", action.directory
            )
            if exchange.status == 200 and isinstance(exchange.body, dict):
                self.explicit[action.alias] = str(exchange.body["id"])
                self.created_in[action.alias] = action.directory
        elif isinstance(action, Prompt):
            sid = await self.wait_session(action.session)
            self.marks[action.session] = len(self.log.events)
            marker = f"[[script:{self.names[action.script]}]]"
            body = {"parts": [{"type": "text", "text": f"go {marker}"}]}
            route = "message" if action.blocking else "prompt_async"
            label = f"POST /session/{{{action.session}}}/{route}"
            path = f"/session/{sid}/{route}"
            if action.by_another_client:
                async with self.target.client() as other:
                    label += " by another client"
                    await self.request(
                        other, "POST", path, body, label, "scenario", action.directory
                    )
            else:
                await self.request(client, "POST", path, body, label, "scenario", action.directory)
        elif isinstance(action, Command):
            sid = await self.wait_session(action.session)
            self.marks[action.session] = len(self.log.events)
            arguments = f"[[script:{self.names[action.script]}]]"
            body = {"command": action.command, "arguments": arguments}
            label = f"POST /session/{{{action.session}}}/command"
            await self.request(client, "POST", f"/session/{sid}/command", body, label, "scenario")
        elif isinstance(action, Call):
            path = await self.expand(client, action.path)
            body = await self.expand_body(client, action.body)
            label = f"{action.method} {action.path}"
            if action.directory is not None:
                label += f" in {action.directory}"
            await self.request(
                client, action.method, path, body, label, "scenario", action.directory
            )
        elif isinstance(action, Fork):
            sid = await self.wait_session(action.source)
            before = action.before
            body = {} if before is None else {"messageID": f"{{msg:{action.source}:{before}}}"}
            label = f"POST /session/{{{action.source}}}/fork ({action.alias})"
            path = f"/session/{sid}/fork"
            body = await self.expand_body(client, body)
            exchange = await self.request(client, "POST", path, body, label, "scenario", None)
            if exchange.status == 200 and isinstance(exchange.body, dict):
                self.explicit[action.alias] = str(exchange.body["id"])
                self.created_in[action.alias] = self.directory_of(action.source)
        elif isinstance(action, WaitIdle):
            await self.wait_idle(action.session)
        elif isinstance(action, WaitFor):
            on: On = action.event
            if on.session is not None:
                await self.wait_session(on.session)
            await self.log.wait(
                lambda events: any(on.matches(e, self.ids()) for e in events), str(on)
            )
        elif isinstance(action, WaitModelCall):
            sid = await self.wait_session(action.session)
            await self.target.wait_model_call(sid, self.log)
        elif isinstance(action, Settle):
            await self.log.quiet()
        elif isinstance(action, Attach):
            sid = await self.wait_session(action.session)
            async with self.target.client() as reader:
                await attach(reader, action.session, sid, self.request)
        else:
            raise TypeError(f"not an action: {action!r}")

    async def wait_idle(self, alias: str) -> None:
        sid = await self.wait_session(alias)
        mark = self.marks.get(alias, 0)

        def idle_now(events: list[JSON]) -> bool:
            statuses = [
                e
                for e in events[mark:]
                if e.get("type") in ("session.status", "session.idle")
                and e.get("properties", {}).get("sessionID") == sid
            ]
            return bool(statuses) and statuses[-1].get("type") == "session.idle"

        while True:
            await self.log.wait(idle_now, f"session.idle of {alias}")
            await self.log.quiet()
            if idle_now(self.log.events):
                return

    # ---------------------------------------------------------------- state

    async def snapshot(self, client: httpx.AsyncClient) -> None:
        ids = self.ids()
        state: JSON = {"sessions": {}, "children": {}, "messages": {}}

        async def get(path: str, label: str) -> Exchange:
            return await self.request(client, "GET", path, None, label, "state")

        listing = await get("/session", "GET /session")
        if isinstance(listing.body, list):
            state["listed"], state["listed_order"] = _listing(listing.body, ids)
        else:
            state["listed"] = f"<{listing.status}>"
        queue = list(ids.items())
        seen = set()
        while queue:
            alias, sid = queue.pop(0)
            if sid in seen:
                continue
            seen.add(sid)
            info = await get(f"/session/{sid}", f"GET /session/{{{alias}}}")
            state["sessions"][alias] = info.body if info.status == 200 else f"<{info.status}>"
            children = await get(f"/session/{sid}/children", f"GET /session/{{{alias}}}/children")
            if children.status == 200 and isinstance(children.body, list):
                state["children"][alias] = [c.get("id") for c in children.body]
                for child in sorted(
                    children.body, key=lambda c: c.get("time", {}).get("created", 0)
                ):
                    if child.get("id") not in ids.values():
                        siblings = [a for a in ids if a.rpartition("/")[0] == alias]
                        derived = f"{alias}/{len(siblings)}"
                        ids[derived] = child["id"]
                        queue.append((derived, child["id"]))
            else:
                state["children"][alias] = f"<{children.status}>"
            messages = await get(f"/session/{sid}/message", f"GET /session/{{{alias}}}/message")
            ok = messages.status == 200 and isinstance(messages.body, list)
            state["messages"][alias] = messages.body if ok else f"<{messages.status}>"
        tree = set(ids.values())
        status = await get("/session/status", "GET /session/status")
        body = status.body if isinstance(status.body, dict) else {}
        state["status"] = {alias: body.get(sid, "<not listed>") for alias, sid in ids.items()}
        for kind in ("permission", "question"):
            pending = await get(f"/{kind}", f"GET /{kind}")
            items = pending.body if isinstance(pending.body, list) else []
            state[kind] = [p for p in items if p.get("sessionID") in tree]
        for name in self.rec.directories:
            # What the other directory's requests see (they are scoped on the real server).
            where = {DIRECTORY_HEADER: self.rec.directories[name]}
            scoped_state: JSON = {}
            for route in ("/session/status", "/permission", "/question"):
                label = f"GET {route} in {name}"
                response = await client.get(route, headers=where)
                value = response.json() if response.status_code == 200 else None
                self.rec.exchanges.append(
                    Exchange(label, "GET", route, response.status_code, value, True, "state")
                )
                if isinstance(value, dict):
                    found: Any = sorted(a for a, sid in ids.items() if sid in value)
                elif isinstance(value, list):
                    found = sorted(
                        a for a, sid in ids.items() for p in value if p.get("sessionID") == sid
                    )
                else:
                    found = f"<{response.status_code}>"
                scoped_state[route] = found
            state[f"in {name}"] = scoped_state
        self.rec.ids = ids
        self.rec.state = state

    # ---------------------------------------------------------------- run

    async def run(self) -> Recording:
        started = time.monotonic()
        async with self.target.client() as client:
            self.log = EventLog(client, self.rec.directories)
            await self.log.start()
            try:
                for index, action in enumerate(self.scenario.actions):
                    try:
                        await self.perform(client, action)
                    except (TimeoutError, KeyError, StopIteration, httpx.HTTPError) as exc:
                        self.rec.problems.append(f"action #{index} {action}: {exc!r}")
                        break
                with contextlib.suppress(TimeoutError):
                    await self.log.quiet()
                await self.snapshot(client)
            finally:
                await self.log.stop()
        self.rec.events = list(self.log.events)
        self.rec.streams = {name: list(events) for name, events in self.log.streams.items()}
        self.rec.seconds = time.monotonic() - started
        return self.rec


async def record(
    scenario: Scenario, target: Target, names: Mapping[str, str] | None = None
) -> Recording:
    """Run ``scenario`` on ``target`` and return what was recorded."""
    names = names or run_names(scenario, uuid.uuid4().hex[:6])
    if scenario.commands and isinstance(target, FakeTarget):
        target.server.inventory.commands[2:2] = [
            {"name": name, **command} for name, command in COMMANDS.items()
        ]
    target.install(scenario.scripts, names)
    for name, turns in conversations(scenario, names).items():
        target.install_conversation(name, turns, names)
    return await _Run(scenario, target, names).run()


async def record_both(
    scenario: Scenario, fake: Target, real: Target
) -> tuple[Recording, Recording]:
    """Run ``scenario`` on both targets at once (same script names), fake first in the pair."""
    names = run_names(scenario, uuid.uuid4().hex[:6])
    runs: list[Awaitable[Recording]] = [
        record(scenario, fake, names),
        record(scenario, real, names),
    ]
    fake_rec, real_rec = await asyncio.gather(*runs)
    return fake_rec, real_rec


def _listing(body: list[Any], ids: Mapping[str, str]) -> tuple[list[str], str]:
    """The scenario's sessions in a ``GET /session`` body, and whether it keeps the rule.

    Which of two sessions a turn touched last is timing on the real server (a task
    child's last ``session.updated`` can land after or before its parent's), so the
    sessions are compared as a set (by alias) and the order is checked on each target
    against the measured rule instead: newest ``time.updated`` first, and on a tie the
    newer session first.
    """
    alias_of = {sid: alias for alias, sid in ids.items()}
    mine = [s for s in body if isinstance(s, dict) and s.get("id") in alias_of]
    keys = [
        (s.get("time", {}).get("updated", 0), s.get("time", {}).get("created", 0)) for s in mine
    ]
    ordered = all(earlier >= later for earlier, later in itertools.pairwise(keys))
    order = (
        "newest time.updated first"
        if ordered
        else f"not by time.updated: {[alias_of[s['id']] for s in mine]}"
    )
    return sorted(alias_of[s["id"]] for s in mine), order
