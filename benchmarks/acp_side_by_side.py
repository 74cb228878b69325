"""``opencode acp`` and ``opencode-tree acp`` side by side, on the same scenarios.

Both agents are driven by the ACP SDK's client over stdio, against the pinned OpenCode
with the scripted model (the same sandbox: config, data, model server):

- ``opencode acp --cwd DIR --pure``, OpenCode's own agent (its own in-process server);
- ``python -m adapter acp --url URL``, this project's agent over a ``opencode serve``.

Scenarios, each run ``--runs`` times per agent:

- ``cancel``: root -> ``task`` -> ``task`` -> a model call that hangs; ``session/cancel``
  once the grandchild's call is open. Recorded: the prompt's answer (``cancelled`` is
  the only one the protocol allows), seconds from the cancel to the answer, model
  requests of the run still open 1 s after the answer (the tree was not stopped) and
  those that started after the answer, ``session/update``s after the answer, and
  whether the text of the model step OpenCode starts during an abort reached the client.
- ``permission``: root -> ``task`` -> ``task`` -> ``bash`` under ``permission: {bash:
  "ask"}`` for subagents. Recorded: whether ``session/request_permission`` reached the
  client within ``--wait`` seconds (then it is allowed) and how the prompt ended (a
  prompt with no request is cancelled after the wait).
- ``visibility`` (from the permission runs that finished): whether the client saw the
  grandchild's ``bash`` call as a tool call.
- ``api_children``: the root's model call hangs and two children created through the HTTP
  API (``POST /session`` with ``parentID``, then a prompt; ``opencode acp`` serves its API
  with ``--port``) hang too; ``session/cancel``. Recorded: whether a child was still busy
  (``/session/status``) or still had an open model request 1 s after the answer.
- ``withdraw``: the root itself asks before ``bash`` (a second server whose config asks
  for every agent); once ``session/request_permission`` reached the client, the prompt is
  cancelled and the client answers the request ``cancelled``, as ACP asks of a client.
  Recorded: whether the request was still pending on the OpenCode server 1 s after the
  prompt's answer (never withdrawn there).

    .venv/bin/python benchmarks/acp_side_by_side.py [--runs 5] [--wait 20]

Prints a table and writes ``benchmarks/results/acp_side_by_side.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import acp
from acp import text_block
from acp.connection import StreamEvent
from acp.core import ClientSideConnection

from adapter import OpenCodeClient
from adapter.testing import RealOpenCodeServer, ScriptedModelServer, free_port
from adapter.testing.model import Hang, Text, ToolCall, ToolCalls, script_marker, task_call
from benchmarks._common import machine, quiet_logging, table, write_json
from tests.acp.client_side import RecordingClient

ASK_BASH = {"agent": {"general": {"permission": {"bash": "ask"}}}}
ASK_BASH_ROOT = {"permission": {"bash": "ask"}}
AFTER = 1.0
AGENTS = ("opencode acp", "opencode-tree acp")


@dataclass
class Run:
    agent: str
    scenario: str
    answer: str | None = None
    error: str | None = None
    seconds: float | None = None
    open_after: int = 0
    started_after: int = 0
    updates_after: int = 0
    asked: bool = False
    grandchild_call_seen: bool = False
    children_running: bool = False
    pending_after: int = 0
    notes: list[str] = field(default_factory=list)


# (agent, server, model, a name unique to the run) -> what the run saw
Scenario = Callable[[str, RealOpenCodeServer, ScriptedModelServer, str], Awaitable[Run]]


def server_env(server: RealOpenCodeServer) -> dict[str, str]:
    """The sandbox environment the server runs in (HOME, XDG dirs, offline settings)."""
    raw = Path(f"/proc/{server.pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)


@asynccontextmanager
async def connect(
    name: str, server: RealOpenCodeServer, *, api: list[str] | None = None
) -> AsyncIterator[tuple[ClientSideConnection, RecordingClient, list[StreamEvent]]]:
    """The agent as a subprocess; ``api`` gets the base URL of the server it works on."""
    client = RecordingClient()
    wire: list[StreamEvent] = []
    if name == "opencode acp":
        port = free_port()
        command = [str(server.binary), "acp", "--cwd", str(server.directory), "--pure"]
        command += ["--port", str(port)]
        env = server_env(server)
        base = f"http://127.0.0.1:{port}"
    else:
        command = [sys.executable, "-m", "adapter", "acp", "--url", server.base_url]
        command += ["--directory", str(server.directory)]
        env = None
        base = server.base_url
    if api is not None:
        api.append(base)
    async with acp.spawn_agent_process(
        cast(acp.Client, client), command[0], *command[1:], env=env, observers=[wire.append]
    ) as (conn, _process):
        await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        yield conn, client, wire


def updates_after_answer(wire: list[StreamEvent], sid: str) -> int:
    answers = [i for i, e in enumerate(wire) if "stopReason" in str(e.message.get("result"))]
    if not answers:
        return 0
    return sum(
        1
        for e in wire[answers[-1] + 1 :]
        if e.message.get("method") == "session/update"
        and e.message.get("params", {}).get("sessionId") == sid
    )


async def start_prompt(
    conn: ClientSideConnection, server: RealOpenCodeServer, name: str
) -> tuple[str, asyncio.Task[acp.PromptResponse]]:
    """A new ACP session and its prompt, running: the prompt names the model's script."""
    sid = (await conn.new_session(cwd=str(server.directory), mcp_servers=[])).session_id
    prompt = asyncio.create_task(
        conn.prompt(session_id=sid, prompt=[text_block("go " + script_marker(name))])
    )
    return sid, prompt


async def answer(run: Run, prompt: asyncio.Task[acp.PromptResponse], timeout: float) -> None:
    """The prompt's stop reason into ``run.answer``, or what it raised into ``run.error``."""
    try:
        response = await asyncio.wait_for(prompt, timeout)
        run.answer = response.stop_reason
    except Exception as exc:
        run.error = f"{type(exc).__name__}: {exc}"


async def cancel_run(
    agent: str, server: RealOpenCodeServer, model: ScriptedModelServer, name: str
) -> Run:
    run = Run(agent, "cancel")
    leaf, mid = f"{name}-leaf", f"{name}-mid"
    extra = Text(f"EXTRA {name}")
    model.script(leaf, [Hang()])
    model.script(mid, [ToolCalls([task_call("mid", leaf)]), extra])
    model.script(name, [ToolCalls([task_call("top", mid)]), extra])
    scripts = {name, mid, leaf}
    async with connect(agent, server) as (conn, client, wire):
        sid, prompt = await start_prompt(conn, server, name)
        await model.wait_for_async(
            lambda reqs: any(r.script == leaf and r.open for r in reqs), timeout=60
        )
        cancelled_at = time.monotonic()
        await conn.cancel(session_id=sid)
        await answer(run, prompt, 30)
        answered = time.monotonic()
        run.seconds = answered - cancelled_at
        await asyncio.sleep(AFTER)
        mine = [r for r in model.requests if r.script in scripts]
        run.open_after = sum(1 for r in mine if r.open)
        run.started_after = sum(1 for r in mine if r.started_at > answered)
        run.updates_after = updates_after_answer(wire, sid)
        if f"EXTRA {name}" in client.text():
            run.notes.append("extra step's text reached the client")
    return run


async def permission_run(
    agent: str, server: RealOpenCodeServer, model: ScriptedModelServer, name: str, wait: float
) -> Run:
    run = Run(agent, "permission")
    leaf, mid = f"{name}-leaf", f"{name}-mid"
    command = f"echo deep-{name}"
    model.script(
        leaf,
        [
            ToolCalls([ToolCall("bash", {"command": command, "description": "e"})]),
            Text("leaf done"),
        ],
    )
    model.script(mid, [ToolCalls([task_call("mid", leaf)]), Text("mid done")])
    model.script(name, [ToolCalls([task_call("top", mid)]), Text("root done")])
    async with connect(agent, server) as (conn, client, _wire):
        sid, prompt = await start_prompt(conn, server, name)
        started = time.monotonic()
        try:
            ask = await asyncio.wait_for(client.asks.get(), wait)
            run.asked = True
            allow = next(o for o in ask.options if o.kind == "allow_once")
            ask.choose(allow.option_id)
        except TimeoutError:
            await conn.cancel(session_id=sid)
        await answer(run, prompt, 60)
        run.seconds = time.monotonic() - started
        run.grandchild_call_seen = any(
            command in str(getattr(u, "raw_input", "")) or command in str(getattr(u, "title", ""))
            for _, u in client.updates
        )
    return run


async def api_children_run(
    agent: str, server: RealOpenCodeServer, model: ScriptedModelServer, name: str
) -> Run:
    run = Run(agent, "api_children")
    model.script(name, [Hang()])
    api: list[str] = []
    async with connect(agent, server, api=api) as (conn, _client, _wire):
        sid, prompt = await start_prompt(conn, server, name)
        async with OpenCodeClient(api[0], directory=str(server.directory)) as oc:
            kids: list[str] = []
            for i in range(2):
                kid = await oc.create_session(title=f"kid {i}", parent_id=sid)
                await oc.prompt_async(kid.id, "work " + script_marker(name))
                kids.append(kid.id)
            await model.wait_for_async(
                lambda reqs: len({r.session_id for r in reqs if r.script == name and r.open}) >= 3,
                timeout=60,
            )
            cancelled_at = time.monotonic()
            await conn.cancel(session_id=sid)
            await answer(run, prompt, 30)
            run.seconds = time.monotonic() - cancelled_at
            await asyncio.sleep(AFTER)
            busy = set(await oc.status()) & set(kids)
            still = {r.session_id for r in model.requests if r.script == name and r.open}
            run.children_running = bool(busy or still & set(kids))
            for kid_id in kids:  # leave nothing running for the next run
                await oc.abort(kid_id)
    return run


async def withdraw_run(
    agent: str, server: RealOpenCodeServer, model: ScriptedModelServer, name: str, wait: float
) -> Run:
    run = Run(agent, "withdraw")
    bash = ToolCall("bash", {"command": f"echo root-{name}", "description": "e"})
    model.script(name, [ToolCalls([bash]), Text("root done")])
    api: list[str] = []
    async with connect(agent, server, api=api) as (conn, client, _wire):
        sid, prompt = await start_prompt(conn, server, name)
        try:
            ask = await asyncio.wait_for(client.asks.get(), wait)
            run.asked = True
        except TimeoutError:
            ask = None
        await conn.cancel(session_id=sid)
        if ask is not None:
            ask.cancelled()  # ACP: the client answers its pending requests `cancelled`
        await answer(run, prompt, 30)
        await asyncio.sleep(AFTER)
        async with OpenCodeClient(api[0], directory=str(server.directory)) as oc:
            run.pending_after = sum(1 for r in await oc.pending_requests() if r.session_id == sid)
    return run


def _answers(runs: list[Run]) -> str:
    """How the prompts ended, e.g. ``end_turn 4, cancelled 1`` (a prompt whose permission
    request never came was cancelled after ``--wait``)."""
    counts: dict[str, int] = {}
    for r in runs:
        key = r.answer or "error"
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))


async def on_one_server(
    overrides: dict[str, Any], scenarios: Sequence[tuple[str, Scenario]], runs: int
) -> tuple[list[Run], str | None]:
    """Each scenario ``runs`` times per agent, interleaved, on one fresh server and model."""
    out: list[Run] = []
    with (
        ScriptedModelServer() as model,
        RealOpenCodeServer(model.base_url, config_overrides=overrides) as server,
    ):
        for agent in AGENTS:
            tag = "oc" if agent == "opencode acp" else "tree"
            for i in range(runs):
                for prefix, scenario in scenarios:
                    out.append(await scenario(agent, server, model, f"{prefix}-{tag}-{i}"))
        return out, server.version


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--wait", type=float, default=20.0)
    args = parser.parse_args()
    quiet_logging()
    # A subagent's bash asks on the first server; the root's own bash on the second.
    runs, version = await on_one_server(
        ASK_BASH,
        [("cancel", cancel_run), ("perm", functools.partial(permission_run, wait=args.wait))],
        args.runs,
    )
    more, _ = await on_one_server(
        ASK_BASH_ROOT,
        [("api", api_children_run), ("withdraw", functools.partial(withdraw_run, wait=args.wait))],
        args.runs,
    )
    runs += more
    rows = []
    for agent in AGENTS:
        cancel = [r for r in runs if r.agent == agent and r.scenario == "cancel"]
        perm = [r for r in runs if r.agent == agent and r.scenario == "permission"]
        api = [r for r in runs if r.agent == agent and r.scenario == "api_children"]
        wd = [r for r in runs if r.agent == agent and r.scenario == "withdraw"]
        secs = sorted(r.seconds for r in cancel if r.seconds is not None)
        rows.append(
            [
                agent,
                f"{sum(r.answer == 'cancelled' for r in cancel)}/{len(cancel)}",
                f"{secs[len(secs) // 2]:.2f}" if secs else None,
                f"{sum(r.open_after > 0 for r in cancel)}/{len(cancel)}",
                f"{sum(r.started_after > 0 for r in cancel)}/{len(cancel)}",
                f"{sum(r.updates_after > 0 for r in cancel)}/{len(cancel)}",
                f"{sum(bool(r.notes) for r in cancel)}/{len(cancel)}",
                f"{sum(r.asked for r in perm)}/{len(perm)}",
                _answers(perm),
                f"{sum(r.grandchild_call_seen for r in perm)}/{len(perm)}",
                f"{sum(r.children_running for r in api)}/{len(api)}",
                f"{sum(r.asked for r in wd)}/{len(wd)}",
                f"{sum(r.pending_after > 0 for r in wd)}/{len(wd)}",
            ]
        )
    headers = [
        "agent",
        "cancel → cancelled",
        "median s to answer",
        "tree still running",
        "model request after answer",
        "updates after answer",
        "extra step's text shown",
        "grandchild permission asked",
        "permission prompt's answers",
        "grandchild call visible",
        "API children running after cancel",
        "root permission asked",
        "request pending on the server after",
    ]
    print(f"OpenCode {version}, {args.runs} runs per scenario and agent\n")
    print(table(headers, rows))
    data: dict[str, Any] = {
        "machine": machine(),
        "opencode": version,
        "runs": [asdict(r) for r in runs],
        "table": {"headers": headers, "rows": rows},
    }
    print(f"\nwrote {write_json('acp_side_by_side', data)}")


if __name__ == "__main__":
    asyncio.run(main())
