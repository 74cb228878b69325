"""Which operations of the real server's API the fake answers, and that docs/testing.md says so.

The fake emulates a subset of OpenCode 1.18.34's 188 operations. A user writing a
contract test must know which: an operation the fake does not route answers a plain
``404 Not Found`` (where the real server would answer). This test asks the fake every
operation of the real server's OpenAPI spec (``tests/fixtures/openapi-1.18.34.json``)
and checks that the set it routes is exactly the list in ``docs/testing.md``, so the
document cannot drift from the code.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import httpx

from adapter.testing.fake import FakeOpenCodeServer

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "tests" / "fixtures" / "openapi-1.18.34.json"
DOC = ROOT / "docs" / "testing.md"
METHODS = ("get", "post", "put", "patch", "delete")
# A row of the coverage table in docs/testing.md: | `METHOD /path` | ... |
DOC_ROW = re.compile(r"^\| `(GET|POST|PUT|PATCH|DELETE) (/[^`]*)` \|")
PLACEHOLDERS = {
    "messageID": "msg_fakecoverage0000000000000",
    "partID": "prt_fakecoverage0000000000000",
    "requestID": "per_fakecoverage0000000000000",
    "permissionID": "per_fakecoverage0000000000000",
}


def spec_operations() -> list[tuple[str, str]]:
    spec: dict[str, Any] = json.loads(SPEC.read_text(encoding="utf-8"))
    return [
        (method.upper(), path)
        for path, item in spec["paths"].items()
        for method in item
        if method in METHODS
    ]


def documented_operations() -> set[tuple[str, str]]:
    rows = (DOC_ROW.match(line) for line in DOC.read_text(encoding="utf-8").splitlines())
    return {(m.group(1), m.group(2)) for m in rows if m}


def fill(template: str, ids: dict[str, str]) -> str:
    """``template`` with each ``{name}`` replaced by its id (``x`` for other parameters)."""
    return re.sub(r"\{(\w+)\}", lambda m: ids.get(m.group(1), "x"), template)


def unrouted(response: httpx.Response) -> bool:
    """The fake's answer to a route it does not know (the real server serves its web UI)."""
    return response.status_code == 404 and response.content == b"404 Not Found"


async def routed_operations() -> set[tuple[str, str]]:
    routed: set[tuple[str, str]] = set()
    async with FakeOpenCodeServer() as fake, fake.client() as client:
        for method, template in spec_operations():
            # A session of its own per operation: DELETE and abort must not affect the next.
            session = (await client.post("/session", json={"title": "coverage"})).json()
            path = fill(template, {**PLACEHOLDERS, "sessionID": session["id"]})
            body: dict[str, Any] | None = None if method in ("GET", "DELETE") else {}
            request = client.build_request(method, path, json=body)
            response = await asyncio.wait_for(client.send(request, stream=True), 5)
            await response.aclose()
            if not unrouted(response):
                routed.add((method, template))
    return routed


async def test_the_fake_routes_exactly_the_operations_docs_testing_lists() -> None:
    routed = await routed_operations()
    documented = documented_operations()
    assert routed == documented, (
        f"routed but not in docs/testing.md: {sorted(routed - documented)}; "
        f"listed in docs/testing.md but not routed: {sorted(documented - routed)}"
    )


async def test_every_listed_operation_is_an_operation_of_the_real_server() -> None:
    assert documented_operations() <= set(spec_operations())
    assert len(spec_operations()) == 188
