"""Windows on a real server: a test that asserts something does not happen checks it at
every round of a polling loop until a deadline, so a failure is seen when it happens and
reported with how long the condition held. Also the reads of the server's tree that
those checks and the stop tests compare against (``tree_of``), the wait for a model
call that hangs (``a_hang_open``) and for the model calls a stop closed
(``model_calls_closed``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from adapter import OpenCodeClient
from adapter.testing import ScriptedModelServer

#: Seconds between two checks of a window's condition.
INTERVAL = 0.05


async def holds_for(seconds: float, condition: Callable[[], bool], what: str) -> None:
    """Check ``condition`` every :data:`INTERVAL` for ``seconds`` (first at once, last at
    the deadline); fail with ``what`` the first time it is false. ``condition`` may also
    raise ``AssertionError`` itself."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    deadline = start + seconds
    while True:
        assert condition(), f"{what}: false after {loop.time() - start:.2f} s of {seconds} s"
        if loop.time() >= deadline:
            return
        await asyncio.sleep(min(INTERVAL, max(0.0, deadline - loop.time())))


async def tree_of(client: OpenCodeClient, root: str) -> list[str]:
    """Every session reachable from ``root``, read from the server (``/children``, level
    by level): ``root`` first."""
    seen = [root]
    for sid in seen:
        seen.extend(c.id for c in await client.children(sid) if c.id not in seen)
    return seen


async def a_hang_open(model: ScriptedModelServer, script: str, timeout: float = 30) -> None:
    """Until ``model`` holds an open request of ``script`` at one of its ``Hang`` steps:
    the session is in the model call a stop will find running."""
    await model.wait_for_async(
        lambda requests: [
            r for r in requests if r.open and r.kind == "hang" and r.script == script
        ],
        timeout,
    )


async def model_calls_closed(
    model: ScriptedModelServer, session_ids: Iterable[str], timeout: float = 5
) -> None:
    """Until ``model`` holds no open request of ``session_ids``. A stop returns once the
    server says the sessions are idle; the model server notices the closed connections
    on its own thread, a moment later under load."""
    wanted = set(session_ids)
    await model.wait_for_async(
        lambda requests: not [r for r in requests if r.open and r.session_id in wanted],
        timeout,
    )


async def bash_printed(
    client: OpenCodeClient, session_id: str, text: str, *, timeout: float = 10.0
) -> None:
    """Poll the stored messages of ``session_id`` until a running ``bash`` part's output
    (``metadata.output``, which OpenCode stores as the command prints) holds ``text``:
    the process runs, so a stop now kills it rather than racing its start."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        for message in await client.messages(session_id):
            for part in message.parts:
                state = part.state
                if part.tool == "bash" and state is not None:
                    output = state.metadata.get("output")
                    if isinstance(output, str) and text in output:
                        return
        if loop.time() >= deadline:
            raise AssertionError(f"no bash part of {session_id} printed {text!r} in {timeout} s")
        await asyncio.sleep(INTERVAL)


async def text_part_stored(
    client: OpenCodeClient, session_id: str, step: int, *, timeout: float = 10.0
) -> None:
    """Poll until the assistant message of model step ``step`` (0-based) of ``session_id``
    has a text part: OpenCode stores a streaming text part at its start (and its end), so
    the step's text has begun streaming."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        messages = await client.messages(session_id)
        answers = [m for m in messages if m.info.role == "assistant"]
        if len(answers) > step and any(p.type == "text" for p in answers[step].parts):
            return
        if loop.time() >= deadline:
            raise AssertionError(f"no text part of {session_id} began in {timeout} s")
        await asyncio.sleep(INTERVAL)
