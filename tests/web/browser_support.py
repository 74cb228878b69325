"""Serving an app with uvicorn on a free loopback port, and a headless Chromium page.

Chromium is Debian's package (``make test`` installs it when ``/usr/bin/chromium`` is
missing); Playwright drives it through ``executable_path``, as browser downloads are
impossible here. The page's Content Security Policy refuses ``eval``: wait with
``wait_for_function("() => ...")`` (a function), never with a bare expression.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import uvicorn
from playwright.async_api import Browser, ConsoleMessage, Page, async_playwright, expect

from adapter.testing import free_port

CHROMIUM = "/usr/bin/chromium"

# The tests' retrying assertions (``expect``) wait for what the page draws from a later
# stream frame or fetch answer than the one they waited for. Playwright's 5 s default is
# short on a loaded 2-core CI machine (the suite's own waits for a stop allow 15 s):
# every module that drives a page imports this one, so it is set here, once.
expect.set_options(timeout=15_000)


@contextlib.asynccontextmanager
async def serving(app: Any) -> AsyncIterator[str]:
    """uvicorn serving ``app`` on this event loop; yields the page's URL."""
    config = uvicorn.Config(
        app, host="127.0.0.1", port=free_port(), log_level="warning", lifespan="off"
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        async with asyncio.timeout(10):
            while not server.started:
                assert not task.done(), "uvicorn did not start"
                await asyncio.sleep(0.02)
        yield f"http://127.0.0.1:{config.port}/"
    finally:
        server.should_exit = True
        await task


@contextlib.asynccontextmanager
async def chromium() -> AsyncIterator[Browser]:
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM)
        try:
            yield browser
        finally:
            await browser.close()


def blocked(message: ConsoleMessage) -> list[str]:
    """What the page's Content Security Policy refused, as Chromium reports it on the
    console (``page.on("console", lambda m: errors.extend(blocked(m)))``)."""
    text = message.text
    return [text] if message.type == "error" and "Content Security Policy" in text else []


@contextlib.asynccontextmanager
async def watched_page(tmp_path: Path, width: int = 1000) -> AsyncIterator[tuple[Page, list[str]]]:
    """A page of a fresh Chromium, ``width`` pixels wide, and the errors it reports
    (script errors, anything the Content Security Policy blocked); a failure saves
    ``failure.png`` in ``tmp_path``."""
    async with chromium() as browser:
        page = await browser.new_page(viewport={"width": width, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda message: errors.extend(blocked(message)))
        try:
            yield page, errors
        except BaseException:
            await page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
            raise
