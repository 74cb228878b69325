"""A host module for ``uvicorn --workers N`` in ``test_workers_real.py``.

``uvicorn tests.web.workers_host:app --workers 4`` imports this module in each worker
process; each builds, in its lifespan, what a deployed backend's worker holds: its own
``OpenCodeAdapter`` (``on_close="detach"``) on the OpenCode server at
``WORKERS_BASE_URL`` (in ``WORKERS_DIRECTORY``), its own connection to the thread store
``WORKERS_STORE``, and ``create_app(oc, store=store)``. Every answer says which
process gave it (``x-worker-pid``), so the test can tell the workers apart.
"""

from __future__ import annotations

import contextlib
import os

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from adapter import OpenCodeAdapter
from adapter.web import create_app, open_store


class Host:
    def __init__(self) -> None:
        self._app: ASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            assert self._app is not None, "the lifespan has not run"
            pid = str(os.getpid()).encode()

            async def said_by(message: Message) -> None:
                if message["type"] == "http.response.start":
                    message = {**message, "headers": [*message["headers"], (b"x-worker-pid", pid)]}
                await send(message)

            await self._app(scope, receive, said_by)
            return
        async with contextlib.AsyncExitStack() as stack:
            await receive()  # lifespan.startup
            oc = OpenCodeAdapter(
                os.environ["WORKERS_BASE_URL"],
                directory=os.environ["WORKERS_DIRECTORY"],
                on_close="detach",
            )
            await stack.enter_async_context(oc)
            store = await stack.enter_async_context(await open_store(os.environ["WORKERS_STORE"]))
            self._app = create_app(oc, store=store, ping=0)
            await send({"type": "lifespan.startup.complete"})
            await receive()  # lifespan.shutdown
        await send({"type": "lifespan.shutdown.complete"})


app = Host()
