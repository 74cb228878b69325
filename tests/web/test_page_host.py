"""The page's host features in headless Chromium, on the fake: a Stop on one subagent's
row, the context meter and the turn's tree-wide cost, and the plan beside the transcript.

The parallel scenario is ``tests/test_stop_subagent.py``'s: ``alpha`` hangs, ``beta``
waits on a permission request the page answers after the stop, so "beta still runs"
is a fact of the test. Every page fails its test on a script error or on anything the
Content Security Policy blocked (``tests/web/test_page.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from playwright.async_api import Browser, Page

from adapter import OpenCodeAdapter
from adapter.testing.fake import FakeOpenCodeServer, Task, Text, Tool
from adapter.web import create_app
from tests.adapter_support import Recorder, SentBodies
from tests.test_stop_subagent import aborted, script_parallel
from tests.web.browser_support import chromium, serving
from tests.web.test_page import TURN_COMPLETED, open_page

HOSTILE = '<img src=x onerror="window.pwned=1">'


# Records each cost the page shows, with the turn's state at that moment.
WATCH_COST = """() => {
  window.costs = [];
  const cost = document.getElementById("turn-cost");
  new MutationObserver(() => window.costs.push(
    [document.getElementById("turn-state").textContent, cost.dataset.cost || "0"]
  )).observe(cost, {childList: true, characterData: true, subtree: true});
}"""


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with chromium() as b:
        yield b


def row(page: Page, description: str) -> str:
    return f'#subagents li[data-description="{description}"]'


async def test_one_subagent_is_stopped_from_its_row_and_the_rest_goes_on(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, browser: Browser
) -> None:
    script_parallel(fake, depth=1)
    info = await oc.start_session("tp")
    async with serving(create_app(oc, ping=0)) as url:
        page, errors = await open_page(browser, f"{url}?thread=tp")
        await page.fill("#prompt", "go [[script:root]]")
        await page.click("#send")
        alpha, beta = row(page, "alpha"), row(page, "beta")
        await page.wait_for_selector(f'{alpha}[data-state="running"] button:enabled')
        await page.wait_for_selector(f'{beta}[data-state="running"] button:enabled')
        await page.wait_for_selector("[data-request-id]")  # beta waits on the page
        alpha_id = await page.get_attribute(alpha, "data-session-id")
        beta_id = await page.get_attribute(beta, "data-session-id")
        assert alpha_id is not None and beta_id is not None
        await page.click(f"{alpha} button")
        await page.wait_for_selector(f'{alpha}[data-state="stopped"]', timeout=15_000)
        assert set(aborted(fake)) == {alpha_id}
        assert fake.sessions[info.session_id].busy and fake.sessions[beta_id].busy
        assert await page.get_attribute(beta, "data-state") == "running"
        assert await page.locator(f"{beta} button").is_enabled()
        assert await page.locator(f"{alpha} button").is_disabled()
        assert await page.text_content("#turn-state") == "running"
        assert await page.locator("#stop").is_enabled()  # the turn's Stop, beside the rows
        badge = f'.session[data-session-id="{alpha_id}"] > .session-head > .session-state'
        assert await page.text_content(badge) == "stopped"
        await page.click('[data-request-id] button[data-decision="accept"]')
        await page.wait_for_function(TURN_COMPLETED)
        assert await page.get_attribute(beta, "data-state") == "completed"
        assert await page.locator("#subagents button:enabled").count() == 0
        assert set(aborted(fake)) == {alpha_id}
        assert not errors, errors


async def test_the_meter_the_cost_and_the_plan_follow_the_turn(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder, browser: Browser
) -> None:
    fake.inventory.context_limit = 64000
    fake.model_cost = {"input": 1000.0, "output": 2000.0}
    todos = [
        {"content": f"look around {HOSTILE}", "status": "in_progress", "priority": "high"},
        {"content": "write it", "status": "pending", "priority": "low"},
    ]
    done = [dict(todos[0], status="completed"), dict(todos[1], status="in_progress")]
    fake.script("kid", [Tool("read", {"filePath": "/x"}, output="x"), Text("kid done")])
    fake.script(
        "plan",
        [
            Tool("todowrite", {"todos": todos}),
            Task("explore", "kid"),
            Tool("todowrite", {"todos": done}),
            Text("all done"),
        ],
    )
    await oc.start_session("tm")
    async with serving(create_app(oc, ping=0)) as url:
        page, errors = await open_page(browser, f"{url}?thread=tm")
        assert await page.is_hidden("#plan")
        await page.evaluate(WATCH_COST)
        await page.fill("#prompt", "go [[script:plan]]")
        await page.click("#send")
        await page.wait_for_selector('#plan li[data-status="in_progress"]')
        await page.wait_for_function(TURN_COMPLETED)
        items = page.locator("#plan li")
        assert await items.count() == 2
        assert [await items.nth(i).get_attribute("data-status") for i in range(2)] == [
            "completed",
            "in_progress",
        ]
        assert HOSTILE in await items.nth(0).inner_text()
        assert await page.locator("#plan img").count() == 0
        meter = page.locator("#context-meter")
        usage = (await rec.wait_for("turn.completed")).usage
        assert usage.context_tokens and usage.context_limit == 64000 and usage.cost > 0
        assert usage.subagents == 1  # the cost is the tree's, the child's included
        assert await meter.get_attribute("data-tokens") == str(usage.context_tokens)
        assert await meter.get_attribute("data-limit") == "64000"
        percent = round(usage.context_tokens / 64000 * 100)
        assert f"/ 64,000 ({percent}%)" in (await meter.text_content() or "")
        cost = page.locator("#turn-cost")
        assert float(await cost.get_attribute("data-cost") or "nan") == pytest.approx(usage.cost)
        assert (await cost.text_content() or "").startswith("$")
        # Live: a cost was shown while the turn still ran, before its final figures.
        seen = await page.evaluate("() => window.costs")
        assert any(state == "running" and float(c) > 0 for state, c in seen), seen
        assert await page.evaluate("() => window.pwned") is None
        assert not errors, errors


async def test_the_pickers_come_from_the_inventory_and_a_slash_command_runs(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, browser: Browser
) -> None:
    commands = SentBodies(fake, "/session/{id}/command")
    prompts = SentBodies(fake, "/session/{id}/prompt_async")
    fake.script("cmd", [Text("initialised")])
    fake.script("hi", [Text("a plain prompt")])
    await oc.start_session("tc")
    async with serving(create_app(oc, ping=0)) as url:
        page, errors = await open_page(browser, f"{url}?thread=tc")
        models = await page.eval_on_selector_all(
            "#model-select option", "options => options.map(o => o.value)"
        )
        assert models == ["", "fake/fake-model"]
        agents = await page.eval_on_selector_all(
            "#agent-select option", "options => options.map(o => o.value)"
        )
        assert {"build", "plan"} <= set(agents) and "explore" not in agents
        await page.select_option("#agent-select", "plan")
        await page.fill("#prompt", "/in")
        await page.dispatch_event("#prompt", "input")
        await page.wait_for_selector('#commands-hint [data-command="init"]')
        assert await page.locator('#commands-hint [data-command="review"]').count() == 0
        await page.fill("#prompt", "/init [[script:cmd]]")
        await page.click("#send")
        await page.wait_for_selector("text=initialised")
        await page.wait_for_function(TURN_COMPLETED)
        assert [(c["command"], c["arguments"], c.get("agent")) for c in commands] == [
            ("init", "[[script:cmd]]", "plan")
        ]
        # A path is no command: it is sent as a prompt.
        await page.fill("#prompt", "/etc/hosts is wrong [[script:hi]]")
        await page.click("#send")
        await page.wait_for_selector("text=a plain prompt")
        assert len(commands) == 1 and len(prompts) == 1 and prompts[0]["agent"] == "plan"
        assert not errors, errors


async def test_fork_opens_a_new_thread_on_the_fork_and_the_source_stays(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, browser: Browser
) -> None:
    fake.script("hi", [Text("the first answer")])
    source = await oc.start_session("tf")
    async with serving(create_app(oc, ping=0)) as url:
        page, errors = await open_page(browser, f"{url}?thread=tf")
        await page.fill("#prompt", "[[script:hi]]")
        await page.click("#send")
        await page.wait_for_function(TURN_COMPLETED)
        await page.click("#fork-thread")
        await page.wait_for_function(
            "() => document.getElementById('thread-id').textContent.startsWith('t_')"
        )
        forked = await page.text_content("#thread-id")
        assert forked and "?thread=t_" in page.url
        info = oc.session_info(forked)
        assert info.session_id != source.session_id
        assert oc.session_info("tf").session_id == source.session_id
        # The thread list is redrawn from GET /threads after the switch: wait for it.
        option = f'#thread-select option[value="{forked}"]'
        await page.wait_for_selector(option, state="attached")
        assert await page.locator(option).count() == 1
        assert not errors, errors
