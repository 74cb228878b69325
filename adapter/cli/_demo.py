"""``opencode-tree demo``: the whole story in one run.

A real ``opencode serve`` (or, without Node.js, the in-process fake) runs a
turn whose root finishes a tool call, then spawns subagents three levels
deep; two more children are created through the API, and an unrelated
session works beside them. Every one of them is busy (hanging model calls)
when Stop is pressed. Then the demo proves, from the server's own state,
that the whole tree stopped, that nothing else was touched, that no model
request started afterwards, and that the finished work was kept.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
from rich.live import Live
from rich.panel import Panel

from .._adapter import OpenCodeAdapter
from .._client import OpenCodeClient
from .._server._binary import PINNED_VERSION, find_opencode_binary, find_project_root
from .._types._records import InterruptResult
from ..testing import RealOpenCodeServer
from ..testing.fake import FakeOpenCodeServer
from ..testing.fake import Hang as FakeHang
from ..testing.fake import Task as FakeTask
from ..testing.fake import Text as FakeText
from ..testing.fake import Tool as FakeTool
from ..testing.model import (
    Hang,
    ScriptedModelServer,
    ToolCall,
    ToolCalls,
    script_marker,
    task_call,
)
from ._commands import _report_json, read_tree
from ._render import Out, partial_lines, report_tree, session_tree

__all__ = ["demo_command"]

QUIET = 1.5  # seconds after Stop during which no model request of the tree may start
THREAD = "demo"
FINISHED_OUTPUT = "build artefacts ready"


class _RecordingTransport(httpx.AsyncBaseTransport):
    """Records every path the adapter requests, to prove what it never touched."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.paths: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@dataclass
class _Backend:
    """Where the story runs: a real ``opencode serve`` driven by the scripted ``model``,
    or the in-process ``fake`` (``banner`` says why it stands in)."""

    base_url: str
    directory: str | None
    transport: _RecordingTransport
    model: ScriptedModelServer | None = None
    fake: FakeOpenCodeServer | None = None
    banner: str | None = None

    @property
    def kind(self) -> str:
        return "real" if self.fake is None else "fake"


def _real_binary_available(out: Out) -> tuple[bool, str | None]:
    try:
        find_opencode_binary()
        return True, None
    except FileNotFoundError:
        pass
    root = find_project_root()
    if shutil.which("npm") and root is not None and (root / "scripts/install-opencode.sh").exists():
        out.line("installing the pinned OpenCode server with npm (make opencode)…", style="dim")
        done = subprocess.run(
            ["bash", str(root / "scripts/install-opencode.sh")],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode == 0:
            return True, None
        return False, f"installing OpenCode failed: {done.stderr.strip()[-300:]}"
    if not shutil.which("npm") or not shutil.which("node"):
        return False, (
            "Node.js and npm were not found, so the real OpenCode server cannot be installed. "
            "Install them (e.g. `apt-get install nodejs npm`, Node.js 20 or newer) "
            "and run `make opencode`."
        )
    return False, "the OpenCode binary was not found: run `make opencode` or set OPENCODE_BIN"


@contextlib.asynccontextmanager
async def _backend(args: argparse.Namespace, out: Out) -> AsyncIterator[_Backend]:
    available, why = (False, "--fake was given") if args.fake else _real_binary_available(out)
    if available:
        # The scripted model answers any request past its script with this text: in a
        # nested tree OpenCode starts one more root step while the root abort lands.
        with ScriptedModelServer(default_text="(a step OpenCode started while stopping)") as model:
            server = RealOpenCodeServer(model.base_url)
            await asyncio.to_thread(server.start)
            try:
                yield _Backend(
                    server.base_url,
                    str(server.directory),
                    _RecordingTransport(httpx.AsyncHTTPTransport()),
                    model=model,
                )
            finally:
                await asyncio.to_thread(server.close)
        return
    fake = FakeOpenCodeServer(latency=0.002, seed=1)
    banner = (
        f"{why}\nFalling back to the in-process FAKE OpenCode server: the story below is "
        "simulated, not a real server."
    )
    try:
        yield _Backend(
            fake.base_url,
            None,
            _RecordingTransport(fake.transport),
            fake=fake,
            banner=banner,
        )
    finally:
        await fake.aclose()


async def demo_command(args: argparse.Namespace, out: Out) -> int:
    started = time.monotonic()
    async with _backend(args, out) as backend:
        if backend.banner:
            if out.rich and not args.json:
                out.err.print(Panel(backend.banner, title="FAKE SERVER", style="bold yellow"))
            else:
                out.err.print(f"FAKE SERVER: {backend.banner}", markup=False)
        result = await _story(backend, args, out)
    result["timing"]["total_s"] = round(time.monotonic() - started, 2)
    if args.json:
        out.json(result)
    else:
        _print_story(result, out)
    return 0 if result["proof"]["ok"] else 1


async def _story(backend: _Backend, args: argparse.Namespace, out: Out) -> dict[str, Any]:
    setup = OpenCodeClient(
        backend.base_url,
        directory=backend.directory,
        transport=backend.fake.transport if backend.fake else None,
    )
    async with (
        setup,
        OpenCodeAdapter(
            backend.base_url, directory=backend.directory, transport=backend.transport
        ) as oc,
    ):
        info = await oc.start_session(THREAD, title="demo: fix the build")
        root = info.session_id
        unrelated = await setup.create_session(title="someone else's session")
        kinds: dict[str, str] = {root: "root", unrelated.id: "unrelated"}
        await _start_work(backend, oc, setup, root, unrelated.id, kinds)
        await _show_until_busy(backend, setup, root, kinds, out, quiet=args.json)
        before_stop = time.monotonic()
        backend.transport.paths.clear()
        result = await oc.interrupt_turn(THREAD)
        returned = time.monotonic()
        interrupt_ms = (returned - before_stop) * 1000
        await asyncio.sleep(QUIET)
        proof = await _proof(backend, setup, result, root, unrelated.id, returned)
        sessions, _ = await read_tree(setup, root)
        titles = {sid: title for sid, (_, title) in sessions.items()}
        for sid in sessions:
            kinds.setdefault(sid, "subagent")
        await setup.abort(unrelated.id)  # tidy up what the demo itself started
    assert result.stop is not None
    return {
        "backend": backend.kind,
        "opencode_version": PINNED_VERSION,
        "root_session_id": root,
        "unrelated_session_id": unrelated.id,
        "tree": [
            {
                **row,
                "title": titles.get(row["session_id"], ""),
                "kind": kinds.get(row["session_id"], "subagent"),
            }
            for row in _report_json(result.stop, None)["sessions"]
        ],
        "stop": {k: v for k, v in _report_json(result.stop, None).items() if k != "sessions"},
        "stop_text": result.stop.tree_lines(),
        "summary": result.stop.summary(),
        "partial": result.partial.to_dict(),
        "partial_lines": partial_lines(result.partial),
        "proof": proof,
        "timing": {"interrupt_ms": round(interrupt_ms, 1)},
    }


async def _start_work(
    backend: _Backend,
    oc: OpenCodeAdapter,
    setup: OpenCodeClient,
    root: str,
    unrelated: str,
    kinds: dict[str, str],
) -> None:
    if backend.model is not None:
        model = backend.model
        model.script("demo-l3", [Hang(text_before="still thinking at level 3")])
        model.script("demo-l2", [ToolCalls([task_call("level 3 research", "demo-l3")])])
        model.script("demo-l1", [ToolCalls([task_call("level 2 analysis", "demo-l2")])])
        model.script(
            "demo-root",
            [
                ToolCalls(
                    [
                        ToolCall(
                            "bash", {"command": f"echo {FINISHED_OUTPUT}", "description": "build"}
                        )
                    ]
                ),
                ToolCalls([task_call("level 1 investigation", "demo-l1")]),
            ],
        )
        model.script("demo-hang", [Hang()])
        await oc.send_turn(THREAD, "Fix the build. " + script_marker("demo-root"))
        # Wait until the root's first tool finished and its subagent chain is running.
        await model.wait_for_async(
            lambda reqs: [r for r in reqs if r.script == "demo-l3" and r.open], timeout=60
        )
        for i in (1, 2):
            kid = await setup.create_session(title=f"API child {i}", parent_id=root)
            kinds[kid.id] = "api-child"
            await setup.prompt_async(kid.id, "help out " + script_marker("demo-hang"))
        await setup.prompt_async(unrelated, "unrelated work " + script_marker("demo-hang"))
        await model.wait_for_async(
            lambda reqs: len([r for r in reqs if r.script == "demo-hang" and r.open]) >= 3,
            timeout=60,
        )
        return
    fake = backend.fake
    assert fake is not None
    fake.script("demo-l3", [FakeText("still thinking at level 3"), FakeHang()])
    fake.script("demo-l2", [FakeTask("level 3 research", "demo-l3")])
    fake.script("demo-l1", [FakeTask("level 2 analysis", "demo-l2")])
    fake.script(
        "demo-root",
        [
            FakeTool("bash", {"command": f"echo {FINISHED_OUTPUT}"}, output=f"{FINISHED_OUTPUT}\n"),
            FakeTask("level 1 investigation", "demo-l1"),
        ],
    )
    await oc.send_turn(THREAD, "Fix the build. [[script:demo-root]]")
    await fake.wait_until(
        lambda: sum(1 for s in fake.sessions.values() if s.busy and s.parent_id) >= 3, timeout=10
    )
    for i in (1, 2):
        fake_kid = fake.add_session(parent_id=root, title=f"API child {i}", busy=True)
        kinds[fake_kid] = "api-child"
    fake.set_busy(unrelated, True)


async def _show_until_busy(
    backend: _Backend,
    client: OpenCodeClient,
    root: str,
    kinds: dict[str, str],
    out: Out,
    *,
    quiet: bool,
) -> None:
    sessions, statuses = await read_tree(client, root)
    if quiet:
        return
    out.line(
        "The turn is running: the root finished a tool call; subagents three levels deep "
        "and two API children are working.",
        style="bold",
    )
    if out.rich:
        with Live(
            session_tree(root, sessions, statuses)[0], console=out.console, refresh_per_second=8
        ) as live:
            for _ in range(6):
                await asyncio.sleep(0.25)
                sessions, statuses = await read_tree(client, root)
                live.update(session_tree(root, sessions, statuses)[0])
    else:
        out.tree(*session_tree(root, sessions, statuses))
    out.line("⏹  pressing Stop (interrupt_turn)…", style="bold yellow")


async def _proof(
    backend: _Backend,
    client: OpenCodeClient,
    result: InterruptResult,
    root: str,
    unrelated: str,
    returned: float,
) -> dict[str, Any]:
    assert result.stop is not None
    tree = list(result.stop.session_ids)
    server_tree = [root]
    for sid in server_tree:
        server_tree.extend(c.id for c in await client.children(sid) if c.id not in server_tree)
    busy = {sid for sid, st in (await client.status()).items() if st.is_busy}
    touched = {p for p in backend.transport.paths if unrelated in p}
    if backend.model is not None:
        late = backend.model.requests_after(returned, session_ids=tree)
        open_unrelated = backend.model.open_requests(session_ids=[unrelated])
        after_stop = len(late)
        unrelated_working = unrelated in busy and bool(open_unrelated)
    else:
        after_stop = sum(1 for sid in tree if backend.fake and backend.fake.sessions[sid].busy)
        unrelated_working = unrelated in busy
    finished = [
        c for c in result.partial.completed_calls if c.output and FINISHED_OUTPUT in c.output
    ]
    proof = {
        "tree_sessions": len(tree),
        "server_tree_matches": sorted(server_tree) == sorted(tree),
        "all_tree_idle": not (busy & set(tree)),
        "unrelated_still_working": unrelated_working,
        "unrelated_never_requested": not touched,
        "model_requests_after_stop": after_stop,
        "finished_tool_output_kept": bool(finished),
        "interrupted_calls": len(result.partial.interrupted_calls),
        "stop_ok": result.stop.ok,
    }
    proof["ok"] = bool(
        proof["server_tree_matches"]
        and proof["all_tree_idle"]
        and proof["unrelated_still_working"]
        and proof["unrelated_never_requested"]
        and after_stop == 0
        and proof["finished_tool_output_kept"]
        and proof["interrupted_calls"] > 0
        and proof["stop_ok"]
        and len(tree) >= 6
    )
    return proof


def _print_story(result: dict[str, Any], out: Out) -> None:
    from .._stop._stop_tree import SessionStop, StopReport

    out.line("")
    out.line(
        f"Stopped in {result['timing']['interrupt_ms']:.0f} ms. "
        "The tree, each session's outcome and timing:",
        style="bold",
    )
    titles = {
        row["session_id"]: row["title"] + (f" ({row['kind']})" if row["kind"] != "subagent" else "")
        for row in result["tree"]
    }
    report = StopReport(
        root_id=result["root_session_id"],
        sessions=tuple(
            SessionStop(
                session_id=row["session_id"],
                parent_id=row["parent_id"],
                depth=row["depth"],
                outcome=row["outcome"],
                started=None if row["started_ms"] is None else row["started_ms"] / 1000,
                ended=None if row["ended_ms"] is None else row["ended_ms"] / 1000,
            )
            for row in result["tree"]
        ),
        max_in_flight=result["stop"]["max_in_flight"],
        verify_rounds=result["stop"]["verify_rounds"],
        elapsed=result["stop"]["elapsed_ms"] / 1000,
        requests=result["stop"]["requests"],
        concurrency=result["stop"]["concurrency"],
    )
    out.tree(*report_tree(report, titles))
    out.line(result["summary"])
    out.line("")
    out.line("What the turn had produced (kept, not thrown away):", style="bold")
    for line in result["partial_lines"]:
        out.line("  " + line)
    p = result["proof"]
    out.line("")
    verdict = "PROOF" if p["ok"] else "PROOF FAILED"
    out.line(
        f"{verdict} (read from the server): {p['tree_sessions']} tree sessions, "
        f"all idle: {p['all_tree_idle']}; unrelated session still working: "
        f"{p['unrelated_still_working']}, never requested: {p['unrelated_never_requested']}; "
        f"model requests after Stop: {p['model_requests_after_stop']}; finished tool output "
        f"kept: {p['finished_tool_output_kept']}; interrupted calls: {p['interrupted_calls']}",
        style="bold green" if p["ok"] else "bold red",
    )
