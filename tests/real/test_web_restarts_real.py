"""``opencode-tree web`` restarted under running turns, over a real ``opencode serve``
(a ``kill -9`` mid-turn, a rolling restart while 5 turns run).

Each backend is the command as a host runs it (``--url`` of the real server, ``--store``
a SQLite file in ``tmp_path``, a fixed token from ``--token-env``, a fixed port), in a
process group of its own; the next one runs on the same store and port.

* ``kill -9``: the page (Debian's Chromium, driven by Playwright) follows a turn whose
  root ran ``bash``, then streams its answer slowly before calling a subagent whose
  model call never ends. While the answer streams, the backend's group is SIGKILLed
  and a new one started. The page must reconnect by itself (``EventSource``), redraw
  the running turn from the new backend's gap and replay, show each text once (every
  state of the root's text a prefix of what the model streamed, the whole of it at the
  end), and its Stop must stop the tree with the pre-restart ``bash`` output kept.
* rolling restart: 5 threads each run a turn that streams its answer over a few
  seconds; the backend (2 workers) gets SIGTERM (its workers detach) mid-turns, and a
  new one adopts them. Each turn, followed through the new backend, completes (one is
  stopped through it) with its text equal to what the model streamed.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import expect

from adapter import OpenCodeClient
from adapter.testing import RealOpenCodeServer, ScriptedModelServer, free_port
from adapter.testing import model as scripted
from tests.real.web_process import follow_events, web_command
from tests.web.browser_support import watched_page

pytestmark = pytest.mark.real

BEFORE = "Checking the build before anything else. "
ECHOED = "built before the crash"
# What the root streams after its bash call: 4 characters every 0.06 s, about 4 s in all.
SLOW = "".join(f"line {i:02d} of the slow report; " for i in range(12))
# The root's whole answer as the page draws it (one text box per text part).
ANSWER = [BEFORE, SLOW]


async def open_request(
    model: ScriptedModelServer, script: str, timeout: float = 60
) -> scripted.ModelRequest:
    def found(requests: list[scripted.ModelRequest]) -> list[scripted.ModelRequest]:
        return [r for r in requests if r.script == script and r.ended_at is None]

    return (await model.wait_for_async(found, timeout=timeout))[0]


async def busy(server: RealOpenCodeServer) -> set[str]:
    async with OpenCodeClient(server.base_url, directory=str(server.directory)) as client:
        return {sid for sid, status in (await client.status()).items() if status.is_busy}


# The root's answer texts, one per text box, in the page's order.
ROOT_TEXTS = """() => Array.from(
  document.querySelectorAll('.session.root > .items > .text.answer'), (n) => n.textContent)"""

# Records every state of the root's texts (the page streams them, redraws, streams again).
WATCH_TEXTS = f"""() => {{
  window.rootTexts = [];
  new MutationObserver(() => window.rootTexts.push(({ROOT_TEXTS})()))
    .observe(document.getElementById('transcript'),
             {{childList: true, characterData: true, subtree: true}});
}}"""


def prefix_of_answer(texts: list[str]) -> bool:
    """The page's texts are the answer's so far: each box the start of its part, every box
    before the last one whole, none twice."""
    if len(texts) > len(ANSWER):
        return False
    *whole, last = texts or [""]
    return whole == ANSWER[: len(whole)] and ANSWER[len(whole)].startswith(last)


async def test_kill_9_mid_turn_the_page_reconnects_to_a_new_backend_and_stops_the_tree(
    real_server: RealOpenCodeServer,
    scripted_model: ScriptedModelServer,
    unique_name: str,
    tmp_path: Path,
) -> None:
    name, token, thread = unique_name, secrets.token_urlsafe(24), "crash"
    waiter = f"{name}-h"
    scripted_model.script(waiter, [scripted.Hang()])
    bash = scripted.ToolCall("bash", {"command": f"echo {ECHOED}", "description": "build"})
    scripted_model.script(
        name,
        [
            scripted.ToolCalls([bash], text=BEFORE),
            scripted.ToolCalls(
                [scripted.task_call("wait", waiter)], text=SLOW, chunk_size=4, delay=0.06
            ),
        ],
    )
    store, log, port = tmp_path / "threads.sqlite3", tmp_path / "web.log", free_port()
    prompt = "Build it. " + scripted.script_marker(name)
    async with watched_page(tmp_path) as (page, errors):
        async with web_command(real_server, store, port, log, token) as first:
            async with first.client() as http:
                made = await http.post("/threads", json={"thread_id": thread})
                assert made.status_code == 201, made.text
                root = made.json()["session_id"]
            await page.goto(f"{first.url}?thread={thread}#token={token}")
            await page.wait_for_function("() => document.body.dataset.ready === 'true'")
            await page.evaluate(WATCH_TEXTS)
            await page.fill("#prompt", prompt)
            await page.click("#send")
            # Some of the slow answer is on the page, not all of it: kill now.
            await page.wait_for_function(f"() => ({ROOT_TEXTS})()[1]?.length >= 40", timeout=30_000)
            before_kill: list[str] = await page.evaluate(ROOT_TEXTS)
            killed_at = time.monotonic()
            first.kill()
            await first.wait(10)
        assert before_kill[:1] == [BEFORE] and len(before_kill[1]) < len(SLOW), before_kill
        async with web_command(real_server, store, port, log, token) as second:
            gap = second.serving_at - killed_at
            await page.wait_for_function(
                "() => document.getElementById('connection').textContent.includes('expired')",
                timeout=30_000,
            )
            reconnected = time.monotonic() - second.serving_at
            waiter_sid = (await open_request(scripted_model, waiter)).session_id
            await page.wait_for_function(
                f"(answer) => JSON.stringify(({ROOT_TEXTS})()) === JSON.stringify(answer)",
                arg=ANSWER,
                timeout=30_000,
            )
            shown = time.monotonic() - second.serving_at
            status = await page.text_content("#thread-status")
            turn_state = await page.text_content("#turn-state")
            async with second.client() as http:
                listed = (await http.get("/threads")).json()
            tools = await page.locator('[data-tool="bash"]').all()
            bash_detail = await page.locator('[data-tool="bash"] .tool-detail').text_content()
            prompts = await page.locator(".user").all_text_contents()
            states: list[list[str]] = await page.evaluate("() => window.rootTexts")
            await page.click("#stop")
            await page.wait_for_selector('#stop-status[data-state="stopped"]', timeout=30_000)
            partial = await page.locator("#partial").text_content() or ""
            # turn.aborted says "stopped" (and draws the partial); the report comes after
            # it, with turn.stopped or the click's answer: its table, then its rows.
            table = page.locator('#stop-report table[data-testid="stop-table"]')
            await expect(table).to_be_attached()
            rows = await page.locator("#stop-report tr[data-stop-session]").all()
            report = {
                await r.get_attribute("data-stop-session"): await r.get_attribute("data-outcome")
                for r in rows
            }
        print(
            f"\nkill -9: a new backend served {gap:.2f} s after the kill "
            f"(its start {second.startup:.2f} s); the page reconnected {reconnected:.2f} s "
            f"after it served and showed the whole answer after {shown:.2f} s"
        )
    # Redrawn from the new backend's gap and replay: the thread running, its turn running.
    assert (status, turn_state) == ("running", "running"), (status, turn_state)
    [listed_thread] = [t for t in listed if t["thread_id"] == thread]
    assert listed_thread["status"] == "running", listed
    # Nothing missing, nothing twice: the bash call and the prompt once; every state the
    # root's texts went through (streamed, redrawn, streamed on) a prefix of the answer.
    assert len(tools) == 1 and ECHOED in (bash_detail or ""), bash_detail
    assert prompts == [prompt], prompts
    assert states and all(prefix_of_answer(s) for s in states), [
        s for s in states if not prefix_of_answer(s)
    ]
    # Stop from the page stopped the tree, and the report keeps the pre-restart output.
    assert ECHOED in partial and BEFORE.strip() in partial, partial
    assert {root, waiter_sid} <= set(report), report
    assert "failed" not in report.values(), report
    assert not await busy(real_server) & {root, waiter_sid}
    assert not errors, errors
    assert "Traceback" not in log.read_text(), log.read_text()[-3000:]


ROLLING = 5


def rolling_texts(i: int) -> tuple[str, str]:
    """Thread ``i``'s two root texts: said with its bash call, then streamed slowly."""
    slow = "".join(f"thread {i} part {k:02d}; " for k in range(14))
    return f"Thread {i} starts with a build. ", slow


def root_texts(events: list[dict[str, Any]], root: str) -> list[str]:
    """The root's answer as a host draws it: the deltas appended per item, in order."""
    texts: dict[str, str] = {}
    for e in events:
        if (
            e["type"] == "content.delta"
            and e["session_id"] == root
            and e["stream"] == "assistant_text"
        ):
            texts[e["item_id"]] = texts.get(e["item_id"], "") + e["delta"]
    return list(texts.values())


def turn_end(events: list[dict[str, Any]], turn_id: str) -> dict[str, Any] | None:
    ends = [
        e
        for e in events
        if e["type"] in ("turn.completed", "turn.aborted") and e.get("turn_id") == turn_id
    ]
    assert len(ends) <= 1, ends
    return ends[0] if ends else None


async def until(
    check: Callable[[], bool], followers: list[asyncio.Task[None]], timeout: float = 60
) -> None:
    """Waits, polling every 50 ms, until ``check()`` holds; a follower that failed (its
    stream refused, cut short) raises its error at once."""
    async with asyncio.timeout(timeout):
        while not check():
            for follower in followers:
                if follower.done() and not follower.cancelled():
                    follower.result()  # its error, if any
            await asyncio.sleep(0.05)


async def test_a_rolling_restart_while_5_turns_run_loses_no_text(
    real_server: RealOpenCodeServer,
    scripted_model: ScriptedModelServer,
    unique_name: str,
    tmp_path: Path,
) -> None:
    """SIGTERM of ``--workers 2`` while five turns stream; a new ``--workers 2`` adopts
    them. Four complete, one (whose root then waits on a subagent that never ends) is
    stopped through the new backend; each turn's text, as the new backend replays and
    streams it, is exactly what the model streamed, and nothing of it twice."""
    token = secrets.token_urlsafe(24)
    names = [f"{unique_name}-{i}" for i in range(ROLLING)]
    stopped = ROLLING - 1  # the thread whose turn is stopped, not completed
    # Its root's last step calls a task whose own task never ends. (With one level, a
    # task whose model call never ends, a worker that did not send the Stop ends the
    # turn "completed": a bug of the adapter's, reported, outside this test.)
    scripted_model.script(f"{names[stopped]}-g", [scripted.Hang()])
    scripted_model.script(
        f"{names[stopped]}-h",
        [scripted.ToolCalls([scripted.task_call("dig", f"{names[stopped]}-g")])],
    )
    for i, name in enumerate(names):
        said, slow = rolling_texts(i)
        bash = scripted.ToolCall(
            "bash", {"command": f"echo thread {i} built", "description": "build"}
        )
        last = (
            scripted.ToolCalls(
                [scripted.task_call("wait", f"{name}-h")], text=slow, chunk_size=4, delay=0.1
            )
            if i == stopped
            else scripted.Text(slow, chunk_size=4, delay=0.1)
        )  # 4 characters every 0.1 s: about 6 s
        scripted_model.script(name, [scripted.ToolCalls([bash], text=said), last])
    threads = [f"roll-{i}" for i in range(ROLLING)]
    store, log, port = tmp_path / "threads.sqlite3", tmp_path / "web.log", free_port()
    before: list[list[dict[str, Any]]] = [[] for _ in threads]
    after: list[list[dict[str, Any]]] = [[] for _ in threads]
    async with (
        web_command(real_server, store, port, log, token, workers=2) as first,
        first.client() as http,
    ):
        roots, turns = [], []
        for thread in threads:
            made = await http.post("/threads", json={"thread_id": thread})
            assert made.status_code == 201, made.text
            roots.append(made.json()["session_id"])
        followers = [
            asyncio.create_task(follow_events(http, t, into))
            for t, into in zip(threads, before, strict=True)
        ]
        for thread, name in zip(threads, names, strict=True):
            sent = await http.post(
                f"/threads/{thread}/turns", json={"text": "go " + scripted.script_marker(name)}
            )
            assert sent.status_code == 202, sent.text
            turns.append(sent.json()["turn_id"])
        # Every turn streams its slow text: restart now.
        await scripted_model.wait_for_async(
            lambda rs: {r.script for r in rs if r.step == 1 and r.open} >= set(names),
            timeout=60,
        )
        # ... and the first backend's page has shown a part of each (an open model request
        # is not yet text on a page: on a loaded machine the stream can lag behind it).
        await until(
            lambda: all(root_texts(b, r) for b, r in zip(before, roots, strict=True)), followers
        )
        terminated_at = time.monotonic()
        first.terminate()
        assert await first.wait(30) == 0, log.read_text()[-3000:]
        exited = time.monotonic() - terminated_at
        done, _ = await asyncio.wait(followers, timeout=10)
        assert len(done) == ROLLING, "a stream of the first backend outlived it"
    times: list[list[float]] = [[] for _ in threads]
    async with (
        web_command(real_server, store, port, log, token, workers=2) as second,
        second.client() as http,
    ):
        gap = second.serving_at - terminated_at
        followers = [
            asyncio.create_task(follow_events(http, t, into, at))
            for t, into, at in zip(threads, after, times, strict=True)
        ]
        await until(lambda: all(turn_end(after[i], turns[i]) for i in range(stopped)), followers)
        await open_request(scripted_model, f"{names[stopped]}-g")
        stop = await http.post(f"/threads/{threads[stopped]}/stop")
        await until(lambda: turn_end(after[stopped], turns[stopped]) is not None, followers)
        ended = time.monotonic() - second.serving_at
        listed = {t["thread_id"]: t["status"] for t in (await http.get("/threads")).json()}
        for follower in followers:
            follower.cancel()
        second.terminate()
        assert await second.wait(30) == 0, log.read_text()[-3000:]
    adopted = max(
        at[[e["type"] for e in a].index("turn.started")] - second.serving_at
        for a, at in zip(after, times, strict=True)
    )
    print(
        f"\nrolling restart of 5 turns: SIGTERM exited in {exited:.2f} s; the new backend "
        f"served {gap:.2f} s after the SIGTERM (its start {second.startup:.2f} s), had "
        f"replayed every adopted turn {adopted:.2f} s after it served, and every turn had "
        f"ended {ended:.2f} s after it served"
    )
    for i, (thread, root, turn) in enumerate(zip(threads, roots, turns, strict=True)):
        expected = list(rolling_texts(i))
        # The first backend streamed a part of each turn, each text a start of the answer's.
        seen = root_texts(before[i], root)
        assert 0 < len(seen) <= len(expected), (thread, seen)
        assert all(expected[k].startswith(s) for k, s in enumerate(seen)), (thread, seen)
        # The new backend adopted the turn (same id) and told the whole of it, once.
        started = [e for e in after[i] if e["type"] == "turn.started"]
        assert [(e["turn_id"], e["origin"]) for e in started] == [(turn, "adopted")], started
        assert root_texts(after[i], root) == expected, (thread, root_texts(after[i], root))
        end = turn_end(after[i], turn)
        assert end is not None
        if i == stopped:
            assert end["type"] == "turn.aborted", end
        else:
            assert (end["type"], end["state"]) == ("turn.completed", "completed"), end
        assert listed[thread] == "ready", listed
    assert stop.status_code == 200, stop.text
    partial = stop.json()["partial"]
    assert all(t in partial["text"] for t in rolling_texts(stopped)), partial["text"]
    built = [(c["status"], c["output"]) for c in partial["tool_calls"] if c["tool"] == "bash"]
    assert built == [("completed", f"thread {stopped} built\n")], partial["tool_calls"]
    assert not await busy(real_server) & set(roots)
    assert "Traceback" not in log.read_text(), log.read_text()[-3000:]
