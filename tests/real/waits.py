"""Windows on a real server: a test that asserts something does not happen checks it at
every round of a polling loop until a deadline, so a failure is seen when it happens and
reported with how long the condition held."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

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
