"""Hostile request bodies and thread ids: refused with a clear status, nothing reaches the adapter.

``docs/web.md``, "Bodies and thread ids": 413 above ``MAX_BODY_BYTES`` (declared or
streamed), 422 for nesting past ``MAX_JSON_DEPTH`` (checked before parsing, without
recursion), 422 for a lone UTF-16 surrogate in any string (keys included), and one
thread id grammar for the body's ``thread_id`` and every path.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from adapter import OpenCodeAdapter
from adapter.testing.fake import FakeOpenCodeServer, Text
from tests.adapter_support import Recorder
from tests.web.app_driver import MAX_BODY_BYTES, MAX_JSON_DEPTH, THREAD_ROUTES
from tests.web.conftest import AskColor
from tests.web.test_api import error_of, expect_invalid

JSON = {"content-type": "application/json"}


def prompts(fake: FakeOpenCodeServer) -> int:
    return len([r for r in fake.requests if r.path.endswith("/prompt_async")])


def nested(depth: int) -> bytes:
    """A JSON value that is ``depth`` arrays deep (``[[...]]``)."""
    return b"[" * depth + b"]" * depth


# --------------------------------------------------------------------------- size


async def test_a_declared_body_over_the_limit_is_413_too_large(
    app_client: httpx.AsyncClient, fake: FakeOpenCodeServer
) -> None:
    await app_client.post("/threads", json={"thread_id": "t"})
    huge = b'{"text": "' + b"x" * MAX_BODY_BYTES + b'"}'
    response = await app_client.post("/threads/t/turns", content=huge, headers=JSON)
    assert response.status_code == 413, response.text
    error = error_of(response)
    assert error["type"] == "too_large" and str(MAX_BODY_BYTES) in error["message"]
    assert prompts(fake) == 0


async def test_a_streamed_body_over_the_limit_is_413_too_large(
    app_client: httpx.AsyncClient, oc: OpenCodeAdapter
) -> None:
    async def chunks() -> AsyncIterator[bytes]:  # chunked: no content-length to refuse early
        yield b'{"title": "'
        for _ in range(MAX_BODY_BYTES // 65536 + 1):
            yield b"x" * 65536
        yield b'"}'

    response = await app_client.post("/threads", content=chunks(), headers=JSON)
    assert "content-length" not in response.request.headers
    assert response.status_code == 413 and error_of(response)["type"] == "too_large"
    assert oc.list_sessions() == []


async def test_a_body_at_the_limit_is_read(
    app_client: httpx.AsyncClient, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("big", [Text("ok")])
    await app_client.post("/threads", json={"thread_id": "t"})
    head, tail = b'{"text": "[[script:big]] ', b'"}'
    body = head + b"x" * (MAX_BODY_BYTES - len(head) - len(tail)) + tail
    assert len(body) == MAX_BODY_BYTES
    response = await app_client.post("/threads/t/turns", content=body, headers=JSON)
    assert response.status_code == 202, response.text
    await rec.wait_for("turn.completed")


# --------------------------------------------------------------------------- depth


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH, 1000, 1_000_000])
async def test_nesting_past_the_depth_is_422_and_checked_before_parsing(
    app_client: httpx.AsyncClient, fake: FakeOpenCodeServer, depth: int
) -> None:
    """The object itself is one level: ``{"text": <depth arrays>}`` is ``depth + 1`` deep.
    A million levels used to be a 500 (``RecursionError`` in ``json.loads``)."""
    await app_client.post("/threads", json={"thread_id": "t"})
    body = b'{"text": ' + nested(depth) + b"}"
    response = await app_client.post("/threads/t/turns", content=body, headers=JSON)
    message = await expect_invalid(response, "body")
    assert f"nested deeper than {MAX_JSON_DEPTH}" in message
    assert prompts(fake) == 0


async def test_nesting_at_the_depth_is_parsed(app_client: httpx.AsyncClient) -> None:
    await app_client.post("/threads", json={"thread_id": "t"})
    body = b'{"text": ' + nested(MAX_JSON_DEPTH - 1) + b"}"
    response = await app_client.post("/threads/t/turns", content=body, headers=JSON)
    assert "text must be a string" in await expect_invalid(response, "text")


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 1_000_000,  # never closed
        b"{" * 500_000,
        b'{"a": ' * 200_000,
        b"]" * 1000 + b"[" * 1000,
    ],
)
async def test_deep_or_unbalanced_garbage_is_422(
    app_client: httpx.AsyncClient, body: bytes
) -> None:
    await expect_invalid(await app_client.post("/threads", content=body, headers=JSON), "body")


async def test_brackets_inside_strings_are_text_not_nesting(
    app_client: httpx.AsyncClient, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("brackets", [Text("ok")])
    await app_client.post("/threads", json={"thread_id": "t"})
    text = "[[script:brackets]] " + "[{" * 5000 + '\\"[' * 100 + "}]" * 7
    response = await app_client.post("/threads/t/turns", json={"text": text})
    assert response.status_code == 202, response.text
    await rec.wait_for("turn.completed")
    [user] = [
        m
        for s in fake.sessions.values()
        for m in s.messages
        if m.role == "user" and "[[script:brackets]]" in str(m.to_json())
    ]
    assert text in str(user.to_json()["parts"][0]["text"])


# --------------------------------------------------------------------------- surrogates


@pytest.mark.parametrize(
    ("route", "body", "field"),
    [
        ("/threads", rb'{"title": "cut \ud800 here"}', "title"),
        ("/threads", rb'{"thread_id": "t\udfff"}', "thread_id"),
        ("/threads", rb'{"\ud83d": "key"}', "body"),
        ("/threads", rb'{"resume": {"schema": 1, "session_id": "ses_\udc00"}}', "resume"),
        ("/threads", rb'{"title": "\ude00\ud83d"}', "title"),  # a pair the wrong way round
        ("/threads/t/turns", rb'{"text": "hello \ud800"}', "text"),
        ("/threads/t/turns", rb'{"text": "ok", "agent": "\udbff"}', "agent"),
    ],
)
async def test_a_lone_surrogate_in_any_string_is_422(
    app_client: httpx.AsyncClient,
    oc: OpenCodeAdapter,
    fake: FakeOpenCodeServer,
    route: str,
    body: bytes,
    field: str,
) -> None:
    await app_client.post("/threads", json={"thread_id": "t"})
    response = await app_client.post(route, content=body, headers=JSON)
    assert "surrogate" in await expect_invalid(response, field)
    assert [i.thread_id for i in oc.list_sessions()] == ["t"]
    assert prompts(fake) == 0


async def test_a_lone_surrogate_in_an_answer_is_422_and_the_question_stays_open(
    app_client: httpx.AsyncClient, ask_color: AskColor
) -> None:
    path = await ask_color("thanks")
    for body in (rb'{"answers": {"Color": ["bl\ud800ue"]}}', rb'{"answers": {"\udc00": "red"}}'):
        response = await app_client.post(path, content=body, headers=JSON)
        assert "surrogate" in await expect_invalid(response, "answers")
    ok = await app_client.post(path, json={"answers": {"Color": "blue"}})
    assert ok.status_code == 200


async def test_a_surrogate_pair_and_raw_utf8_are_fine_but_encoded_surrogates_are_not(
    app_client: httpx.AsyncClient, oc: OpenCodeAdapter
) -> None:
    pair = await app_client.post("/threads", content=rb'{"title": "\ud83d\ude00"}', headers=JSON)
    assert pair.status_code == 201, pair.text
    raw = await app_client.post("/threads", content='{"title": "😀 é"}'.encode(), headers=JSON)
    assert raw.status_code == 201, raw.text
    # a surrogate written as UTF-8 bytes (CESU-style) is not UTF-8 at all
    cesu = await app_client.post("/threads", content=b'{"title": "\xed\xa0\x80"}', headers=JSON)
    await expect_invalid(cesu, "body")
    assert len(oc.list_sessions()) == 2


@pytest.mark.parametrize(
    "body", [b'{"text": NaN}', b'{"text": Infinity}', b'{"text": -Infinity}', b'{"text": 1e999}']
)
async def test_non_json_numbers_are_not_accepted_as_json(
    app_client: httpx.AsyncClient, body: bytes
) -> None:
    await app_client.post("/threads", json={"thread_id": "t"})
    response = await app_client.post("/threads/t/turns", content=body, headers=JSON)
    assert response.status_code == 422 and error_of(response)["type"] == "invalid_input"


async def test_a_huge_integer_is_422_not_500(app_client: httpx.AsyncClient) -> None:
    await app_client.post("/threads", json={"thread_id": "t"})
    body = b'{"text": ' + b"9" * 100_000 + b"}"
    response = await app_client.post("/threads/t/turns", content=body, headers=JSON)
    assert response.status_code == 422 and error_of(response)["type"] == "invalid_input"


# --------------------------------------------------------------------------- thread ids

BAD_IDS = [".", "..", "a/b", "a\\b", "tab\there", "nul\x00", "del\x7f", "c1\x85", "line\u2028"]
GOOD_IDS = ["...", ".a", "a..b", "%2e%2e", "a b", "日本語", "t?x#y&z=1", "😀", "x" * 200]


@pytest.mark.parametrize("thread_id", [*BAD_IDS, "x" * 201])
async def test_a_thread_id_outside_the_grammar_is_422(
    app_client: httpx.AsyncClient, oc: OpenCodeAdapter, thread_id: str
) -> None:
    response = await app_client.post("/threads", json={"thread_id": thread_id})
    await expect_invalid(response, "thread_id")
    assert oc.list_sessions() == []


@pytest.mark.parametrize("thread_id", GOOD_IDS)
async def test_every_id_of_the_grammar_is_reachable_by_the_pages_urls(
    app_client: httpx.AsyncClient, thread_id: str
) -> None:
    """The page builds ``threads/${encodeURIComponent(id)}/...``: what ``quote(safe=...)``
    below does; a dot segment is the only thing such a URL could lose."""
    made = await app_client.post("/threads", json={"thread_id": thread_id})
    assert made.status_code == 201, made.text
    segment = quote(thread_id, safe="-_.!~*'()")
    one = await app_client.get(f"/threads/{segment}")
    assert one.status_code == 200 and one.json()["thread_id"] == thread_id
    stopped = await app_client.post(f"/threads/{segment}/stop")
    assert stopped.status_code == 200 and stopped.json()["turn_id"] is None
    tree = await app_client.get(f"/threads/{segment}/tree")
    assert tree.status_code == 200 and tree.json()["thread_id"] == thread_id


@pytest.mark.parametrize(("method", "suffix", "body"), THREAD_ROUTES)
@pytest.mark.parametrize("segment", ["%2E", "%2e%2E", "a%5Cb", "tab%09", "x" * 201])
async def test_a_path_id_outside_the_grammar_is_422_on_every_route(
    app_client: httpx.AsyncClient,
    oc: OpenCodeAdapter,
    fake: FakeOpenCodeServer,
    method: str,
    suffix: str,
    body: dict[str, Any] | None,
    segment: str,
) -> None:
    """Even when the host made such a thread through the adapter directly: the web API
    addresses only ids of its grammar (the listing still shows the thread)."""
    for thread_id in (".", "..", "a\\b", "tab\t", "x" * 201):
        await oc.start_session(thread_id)
    async with asyncio.timeout(5):  # an events route that accepted the id would stream on
        response = await app_client.request(method, f"/threads/{segment}{suffix}", json=body)
    assert "thread_id must" in await expect_invalid(response, "thread_id")
    assert prompts(fake) == 0
    assert len((await app_client.get("/threads")).json()) == 5
