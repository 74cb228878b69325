"""The page: its security headers, and its other paths in headless Chromium.

The real-server browser test (``test_browser.py``) covers a Stop that works; these
cover what it cannot provoke: a Stop that fails (the clicking tab and a second tab
that learns it from the stream), a page opened with a token, answering a permission
request with its buttons, and server text that looks like HTML. uvicorn serves the
app on 127.0.0.1; Chromium is Debian's (``tests/web/browser_support.py``). Every
page fails its test on a script error or on anything the Content Security Policy
blocked (the page must need nothing the policy forbids).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import httpx
import pytest
from playwright.async_api import Browser, Page, expect
from starlette.applications import Starlette

from adapter import OpenCodeAdapter
from adapter.testing.fake import FakeOpenCodeServer, Hang, Permission, Task, Text, Tool
from adapter.web import create_app
from tests.adapter_support import refuse
from tests.web.app_driver import SseClient
from tests.web.browser_support import blocked, chromium, serving

HOSTILE = '<img src=x onerror="window.pwned=1">'
# A function, not an expression: Playwright evaluates an expression with eval(),
# which the page's Content Security Policy refuses.
TURN_COMPLETED = "() => document.getElementById('turn-state').textContent === 'completed'"

# --------------------------------------------------------------------------- headers

EVERY_RESPONSE = {
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cross-origin-resource-policy": "same-origin",
}


def directives(policy: str) -> dict[str, list[str]]:
    parsed: dict[str, list[str]] = {}
    for directive in policy.split(";"):
        name, *sources = directive.split()
        assert name not in parsed, policy
        parsed[name] = sources
    return parsed


def assert_secure(headers: httpx.Headers | dict[str, str], what: str) -> None:
    for name, value in EVERY_RESPONSE.items():
        assert headers.get(name) == value, (what, name, headers)
    policy = directives(headers["content-security-policy"])
    assert policy["default-src"] == ["'none'"], policy
    assert policy["script-src"] == ["'self'"] and policy["style-src"] == ["'self'"], policy
    assert policy["connect-src"] == ["'self'"] and policy["img-src"] == ["'self'", "data:"]
    assert policy["frame-ancestors"] == ["'none'"] and policy["base-uri"] == ["'none'"]
    assert policy["form-action"] == ["'none'"], policy
    # No remote origin, no scheme wildcard, nothing inline or evaluated.
    sources = [s for values in policy.values() for s in values]
    assert all(s in ("'self'", "'none'", "data:") for s in sources), sources


async def test_the_page_and_its_files_carry_the_security_headers(
    app_client: httpx.AsyncClient,
) -> None:
    for path, media in [
        ("/", "text/html"),
        ("/static/app.js", "text/javascript"),
        ("/static/host.js", "text/javascript"),
        ("/static/style.css", "text/css"),
    ]:
        response = await app_client.get(path)
        assert response.status_code == 200 and response.headers["content-type"].startswith(media)
        assert_secure(response.headers, path)
    page = (await app_client.get("/")).text
    assert "<script>" not in page and "<style" not in page and " style=" not in page
    assert not re.search(r"\son[a-z]+\s*=", page, re.IGNORECASE)  # no inline handler


async def test_every_answer_carries_them_errors_and_the_stream_included(
    oc: OpenCodeAdapter,
) -> None:
    app: Starlette = create_app(oc, token="tok", ping=0)
    bearer = {"Authorization": "Bearer tok"}
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://app"
    ) as http:
        answers = {
            "created": await http.post("/threads", json={"thread_id": "t"}, headers=bearer),
            "listed": await http.get("/threads", headers=bearer),
            "401": await http.get("/threads"),
            "404": await http.get("/nothing", headers=bearer),
            "422": await http.post("/threads/t/turns", json={}, headers=bearer),
            "403 host": await http.get("/", headers={"Host": "evil.example"}),
            "403 origin": await http.get("/", headers={"Origin": "https://evil.example"}),
            "415": await http.post(
                "/threads", content=b"x", headers={"Content-Type": "text/plain"}
            ),
        }
    assert [a.status_code for a in answers.values()] == [201, 200, 401, 404, 422, 403, 403, 415]
    for what, answer in answers.items():
        assert_secure(answer.headers, what)
    sse = SseClient(app, "/threads/t/events?token=tok")
    try:
        assert await sse.started() == 200
        assert_secure(sse.headers, "events")
    finally:
        await sse.aclose()


# --------------------------------------------------------------------------- in Chromium


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with chromium() as b:
        yield b


async def open_page(browser: Browser, url: str) -> tuple[Page, list[str]]:
    page = await browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda message: errors.extend(blocked(message)))
    await page.goto(url)
    await page.wait_for_selector("body[data-ready=true]")
    return page, errors


async def test_a_failed_stop_says_so_in_this_tab_and_in_another(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, browser: Browser
) -> None:
    fake.script("refused-child", [Hang()])
    fake.script(
        "refused",
        [
            Tool("bash", {"command": "echo hi"}, output="hi\n"),
            Task("explore", "refused-child"),
            Hang(),  # the refused root goes on once its child was stopped
        ],
    )
    info = await oc.start_session("t1")
    async with serving(create_app(oc, ping=0)) as url:
        page, errors = await open_page(browser, f"{url}?thread=t1")
        other, other_errors = await open_page(browser, f"{url}?thread=t1")
        await page.fill("#prompt", "[[script:refused]]")
        await page.click("#send")
        await page.wait_for_selector(".session.child")
        await other.wait_for_selector(".session.child")
        refusal = refuse(fake, "POST", f"/session/{info.session_id}/abort", "refused", times=None)
        await page.click("#stop")
        for tab in (page, other):
            status = tab.locator('#stop-status[data-state="failed"]')
            await status.wait_for(timeout=15_000)
            assert (await status.text_content() or "").startswith("Stop failed: ")
            root_row = tab.locator(f'#stop-report tr[data-stop-session="{info.session_id}"]')
            assert await root_row.get_attribute("data-outcome") == "failed"
            assert "refused" in (await root_row.inner_text())
            # Nothing that finished is cleared, and Stop can be pressed again.
            assert "hi" in await tab.locator('.tool[data-tool="bash"] .tool-detail').inner_text()
            assert await tab.locator("#stop").is_enabled()
        refusal.remove()
        await other.click("#stop")
        for tab in (page, other):
            await tab.wait_for_selector('#stop-status[data-state="stopped"]', timeout=15_000)
        # turn.aborted says "stopped"; the report comes after it (turn.stopped, or the
        # answer to the click): retried, not read once.
        await expect(other.locator("#stop-report tr[data-stop-session]")).to_have_count(2)
        assert not errors and not other_errors, errors + other_errors


async def test_the_token_from_the_fragment_is_sent_kept_and_out_of_the_address_bar(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, browser: Browser
) -> None:
    fake.script("hello", [Text("hello from the agent")])
    async with serving(create_app(oc, token="tok-9", ping=0)) as url:
        page, _ = await open_page(browser, url)
        assert "unauthorized" in (await page.text_content("#errors") or "")

        page, errors = await open_page(browser, f"{url}#token=tok-9")
        # Read, kept for this tab, and gone from the address bar and the history entry.
        assert "token" not in page.url and "tok-9" not in page.url
        assert await page.evaluate("() => location.hash") == ""
        assert await page.evaluate("() => sessionStorage.getItem('opencode-tree.token')") == (
            "tok-9"
        )
        await page.click("#new-thread")
        await page.wait_for_function("() => document.getElementById('thread-id').textContent")
        await page.fill("#prompt", "[[script:hello]]")
        await page.click("#send")
        await page.wait_for_selector("text=hello from the agent")  # over EventSource ?token=
        await page.wait_for_function(TURN_COMPLETED)
        assert "?thread=t_" in page.url and "tok-9" not in page.url
        # A reload has no fragment any more: the kept token still opens the thread.
        await page.reload()
        await page.wait_for_selector("body[data-ready=true]")
        await page.wait_for_selector("text=hello from the agent")
        assert await page.text_content("#errors") == ""
        # Another tab of the same browser has to be given the token again.
        other, _ = await open_page(browser, url)
        assert "unauthorized" in (await other.text_content("#errors") or "")
        assert not errors, errors


async def test_a_page_without_a_token_works_against_a_server_that_needs_none(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, browser: Browser
) -> None:
    fake.script("hello", [Text("hello without a token")])
    async with serving(create_app(oc, ping=0)) as url:
        page, errors = await open_page(browser, url)
        await page.fill("#prompt", "[[script:hello]]")
        await page.click("#send")
        await page.wait_for_selector("text=hello without a token")
        await page.wait_for_function(TURN_COMPLETED)
        assert await page.evaluate("() => sessionStorage.length") == 0
        assert not errors, errors


async def test_a_permission_request_is_answered_with_its_buttons_and_html_stays_text(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, browser: Browser
) -> None:
    fake.script(
        "asks",
        [
            Permission(
                "bash",
                patterns=["echo hostile"],
                tool=Tool("bash", {"command": "echo hostile"}, output=HOSTILE),
            ),
            Text(f"done {HOSTILE}"),
        ],
    )
    await oc.start_session("t2")
    async with serving(create_app(oc, ping=0)) as url:
        page, errors = await open_page(browser, f"{url}?thread=t2")
        await page.fill("#prompt", "[[script:asks]]")
        await page.click("#send")
        request = page.locator("[data-request-id]")
        await request.wait_for(timeout=10_000)
        assert "Permission: bash echo hostile" in await request.inner_text()
        await request.locator('button[data-decision="accept"]').click()
        await request.wait_for(state="detached", timeout=10_000)
        await page.wait_for_function(TURN_COMPLETED)
        detail = page.locator('.tool[data-tool="bash"] .tool-detail')
        assert await detail.text_content() == HOSTILE
        assert HOSTILE in await page.locator("#transcript").inner_text()
        assert await page.locator("#transcript img").count() == 0
        assert await page.evaluate("() => window.pwned") is None
        assert not errors, errors


async def test_a_page_opened_mid_turn_draws_the_turn_so_far_and_the_other_tabs_stop(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, browser: Browser
) -> None:
    fake.script("late-child", [Hang()])
    fake.script(
        "late",
        [
            Tool("bash", {"command": "echo early"}, output="early output\n"),
            Task("dig", "late-child"),
        ],
    )
    await oc.start_session("t3")
    async with serving(create_app(oc, ping=0)) as url:
        page, errors = await open_page(browser, f"{url}?thread=t3")
        await page.fill("#prompt", "[[script:late]]")
        await page.click("#send")
        await page.wait_for_selector(".session.child")
        # Opened after the tool call finished and the subagent started: replayed.
        late, late_errors = await open_page(browser, f"{url}?thread=t3")
        await late.wait_for_selector(".session.child")
        detail = late.locator('.tool[data-tool="bash"] .tool-detail')
        assert "early output" in (await detail.text_content() or "")
        assert await late.locator("#stop").is_enabled()
        await page.click("#stop")
        # The late tab never made the call: the stream's turn.stopped brings the report.
        await late.wait_for_selector('#stop-status[data-state="stopped"]', timeout=15_000)
        # turn.aborted said "stopped"; the report is drawn from turn.stopped, which follows.
        rows = late.locator("#stop-report tr[data-stop-session]")
        await expect(rows).to_have_count(2)
        assert {await rows.nth(i).get_attribute("data-outcome") for i in range(2)} == {"aborted"}
        # A reload after the stop shows the same: the turn, its output and the report.
        await late.reload()
        await late.wait_for_selector('#stop-status[data-state="stopped"]', timeout=15_000)
        await expect(late.locator("#stop-report tr[data-stop-session]")).to_have_count(2)
        assert "early output" in await late.locator("#transcript").inner_text()
        assert not errors and not late_errors, errors + late_errors
