"""Property-based fuzz of the web API's bodies and headers.

Random methods, known and unknown paths (thread ids with dots, separators, controls,
lone surrogates), query strings, content types, header values, and bodies: random
bytes, JSON of any shape with wrong types, unknown fields, lone surrogates, huge
numbers, ``NaN``, deep nesting past ``MAX_JSON_DEPTH``, a million brackets. Each
request goes through ``httpx.ASGITransport`` to the app over an adapter of the fake
server, bounded by ``asyncio.timeout``.

The properties: no answer is a 500; every answer is JSON in the error shape
(``{"error": {"type", "message"}}``) or a route's success shape (the page, a file, a
``HEAD``, the event stream and Starlette's trailing-slash redirect aside); nothing
hangs; and afterwards the adapter still completes a turn. Hypothesis drives a
synchronous test; the app, the adapter and the fake live on one event loop in a
thread of their own for the whole run, so state accumulates across examples as it
would on a server. ``-s`` prints the figure of requests tried and their statuses.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapter import OpenCodeAdapter, Timeouts
from adapter.testing.fake import FakeOpenCodeServer, Text
from adapter.web import create_app
from tests.web.app_driver import MAX_JSON_DEPTH

T = TypeVar("T")
THREAD = "fz"
EXAMPLES = 800
#: Seconds one request may take; the fake answers in milliseconds.
BOUND = 10.0


@dataclass
class Served:
    """The app on a loop of its own; :meth:`run` runs a coroutine there and waits."""

    loop: asyncio.AbstractEventLoop
    oc: OpenCodeAdapter
    fake: FakeOpenCodeServer
    http: httpx.AsyncClient
    statuses: Counter[int] = field(default_factory=Counter)

    def run(self, make: Callable[[], Awaitable[T]]) -> T:
        async def bounded() -> T:
            async with asyncio.timeout(BOUND):
                return await make()

        return asyncio.run_coroutine_threadsafe(bounded(), self.loop).result(BOUND + 5)


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    async def start() -> Served:
        fake = FakeOpenCodeServer(seed=21)
        oc = OpenCodeAdapter(
            fake.base_url, transport=fake.transport, timeouts=Timeouts(abort=2.0, tree=2.0)
        )
        await oc.__aenter__()
        await oc.start_session(THREAD)
        http = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=create_app(oc, ping=0)), base_url="http://app"
        )
        return Served(loop, oc, fake, http)

    state = asyncio.run_coroutine_threadsafe(start(), loop).result(30)
    yield state

    async def stop() -> None:
        await state.http.aclose()
        await state.oc.__aexit__(None, None, None)
        await state.fake.aclose()

    asyncio.run_coroutine_threadsafe(stop(), loop).result(30)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


# --------------------------------------------------------------------------- strategies

texts = st.text(max_size=30)  # any code point, lone surrogates included


def mostly(common: st.SearchStrategy[T], rare: st.SearchStrategy[T]) -> st.SearchStrategy[T]:
    """``common`` nine times in ten, ``rare`` otherwise (``one_of`` would draw each
    branch about as often, and a random Host is refused before any route runs)."""
    # 5: hypothesis favours the ends of a range (0 and 9) well beyond one in ten
    return st.tuples(st.integers(0, 9), common, rare).map(lambda t: t[2] if t[0] == 5 else t[1])


ids = st.one_of(
    st.sampled_from([THREAD, ".", "..", "%2e", "a/b", "a\\b", "x" * 201, "t\ud800", "\u2028"]),
    texts.filter(bool),
)


def segment(value: str) -> str:
    """A path segment as a client writes it: UTF-8 (lone surrogates as their three
    bytes, what a broken client might send), percent-encoded but for the page's safe
    characters, so dot segments survive as dots."""
    return quote(value.encode("utf-8", "surrogatepass"), safe="-_.!~*'()")


THREAD_SUFFIXES = ["", "/turns", "/stop", "/events", "/tree", "/requests/per_1", "/x"]
THREAD_SUFFIXES += ["/fork", "/commands", "/subagents/ses_child/stop"]
OTHER_PATHS = ["/", "/static/app.js", "/static/host.js", "/static/../pyproject.toml", "/threads/"]
OTHER_PATHS += ["//", "/inventory"]

paths = st.one_of(
    st.just("/threads"),
    st.builds(
        lambda thread_id, rest: f"/threads/{segment(thread_id)}{rest}",
        ids,
        st.sampled_from(THREAD_SUFFIXES),
    ),
    st.builds(lambda rid: f"/threads/{THREAD}/requests/{segment(rid)}", texts.filter(bool)),
    st.builds(lambda sid: f"/threads/{THREAD}/subagents/{segment(sid)}/stop", texts),
    st.sampled_from(OTHER_PATHS),
    st.builds(lambda p: "/" + "/".join(segment(s) for s in p), st.lists(texts, max_size=4)),
)
queries = st.one_of(
    st.just(""),
    st.builds(
        lambda k, v: f"?{k}={segment(v)}",
        st.sampled_from(["after", "replay", "token", "x"]),
        texts,
    ),
)
methods = mostly(
    st.sampled_from(["POST", "POST", "POST", "POST", "GET", "GET", "HEAD", "DELETE"]),
    st.sampled_from(["PUT", "PATCH", "OPTIONS"])
    | st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZ", min_size=1, max_size=8),
)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
)
FIELDS = [
    "thread_id",
    "title",
    "resume",
    "text",
    "model",
    "agent",
    "decision",
    "answers",
    "name",
    "arguments",
]
FIELDS += ["reject"]


def dumped(value: Any) -> bytes:
    # ensure_ascii: a lone surrogate is written as the escape "\ud800", as OpenCode does
    return json.dumps(value).encode()


bodies = st.one_of(
    st.none(),
    st.binary(max_size=64),
    st.builds(dumped, json_values),
    st.builds(dumped, st.dictionaries(st.sampled_from(FIELDS) | texts, json_values, max_size=4)),
    st.builds(
        lambda depth, opener: opener[0] * depth + b"1" + opener[1] * depth,
        st.integers(MAX_JSON_DEPTH - 2, 3000),
        st.sampled_from([(b"[", b"]"), (b'{"a":', b"}")]),
    ),
    st.sampled_from(
        [
            b"[" * 1_000_000,
            b'{"text": ' + b"9" * 5000 + b"}",
            b'{"text": NaN}',
            b'{"text": 1e999}',
            b'{"text": "\\ud800"}',
            b'{"\\udfff": 1}',
            b'{"thread_id": ".."}',
            b'{"text": "hi", "text": 3}',
            b'{"title": "\xed\xa0\x80"}',
        ]
    ),
)
content_types = mostly(
    st.sampled_from(["application/json", "application/json; charset=utf-8"]),
    st.none()
    | st.sampled_from(
        [
            "application/json",
            "application/json; charset=utf-8",
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "",
        ]
    )
    | texts,
)
#: Mostly the served host or a loopback name, as a browser on this machine sends (the
#: guard's own fuzz, tests/web/test_guard.py, covers the rest).
hosts = mostly(st.sampled_from(["app", "127.0.0.1:8765", "localhost", "[::1]:1"]), texts)
header_names = st.sampled_from(
    ["origin", "last-event-id", "authorization", "accept", "content-length", "x-anything"]
)
header_values = st.one_of(
    texts, st.sampled_from(["http://app", "http://127.0.0.1:8765", "Bearer x", "evt_1", "-1"])
)


def header_value(value: str) -> bytes:
    return value.encode("utf-8", "surrogatepass").replace(b"\r", b"").replace(b"\n", b"")


@dataclass(frozen=True)
class Attempt:
    method: str
    url: str
    headers: list[tuple[bytes, bytes]]
    body: bytes | None


attempts = st.builds(
    lambda method, path, query, host, ctype, extra, body: Attempt(
        method,
        path + query,
        [(b"host", header_value(host))]
        + ([] if ctype is None else [(b"content-type", header_value(ctype))])
        + [(k.encode(), header_value(v)) for k, v in extra],
        body,
    ),
    methods,
    paths,
    queries,
    hosts,
    content_types,
    mostly(
        st.lists(
            st.tuples(header_names.filter(lambda n: n != "origin"), header_values), max_size=2
        ),
        st.lists(st.tuples(header_names, header_values), max_size=2),
    ),
    bodies,
)


# --------------------------------------------------------------------------- the property

JSON_ROUTES_OK = (200, 201, 202)


def check(attempt: Attempt, response: httpx.Response) -> None:
    status = response.status_code
    assert status != 500, (attempt, response.text[:300])
    kind = response.headers.get("content-type", "")
    if attempt.method == "HEAD" or status in (307, 308):
        return  # no body: headers only, or Starlette's trailing-slash redirect
    if status == 200 and not kind.startswith("application/json"):
        # the page, a static file or an event stream: only on a GET of those routes
        assert attempt.method == "GET", (attempt, status, kind)
        assert kind.startswith(("text/html", "text/css", "text/javascript", "text/event-")) or (
            "javascript" in kind
        ), (attempt, kind)
        return
    assert kind.startswith("application/json"), (attempt, status, kind)
    body = json.loads(response.content.decode("utf-8"))  # strict UTF-8, valid JSON
    if status >= 400:
        error = body["error"]
        assert isinstance(error["type"], str) and isinstance(error["message"], str), body
    else:
        assert status in JSON_ROUTES_OK and isinstance(body, dict | list), (attempt, body)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(attempt=attempts)
def test_no_request_gets_a_500_a_malformed_answer_or_a_hang(
    served: Served, attempt: Attempt
) -> None:
    method = attempt.method
    if method == "GET" and attempt.url.split("?")[0] == f"/threads/{THREAD}/events":
        method = "HEAD"  # a GET of a live thread's events streams for ever, by design

    async def send() -> httpx.Response:
        request = served.http.build_request(
            method, httpx.URL("http://app" + attempt.url), content=attempt.body
        )
        # exactly the drawn headers (httpx would add its own Host, Content-Type, ...),
        # plus the body's true length unless a drawn (possibly false) one is there
        headers = list(attempt.headers)
        if attempt.body is not None and all(k != b"content-length" for k, _ in headers):
            headers.append((b"content-length", str(len(attempt.body)).encode()))
        request.headers = httpx.Headers(headers)
        return await served.http.send(request)

    response = served.run(send)
    served.statuses[response.status_code] += 1
    check(Attempt(method, attempt.url, attempt.headers, attempt.body), response)


def test_the_adapter_completes_a_turn_after_the_fuzz(served: Served) -> None:
    """Runs after the fuzz (same module, same app): the figure, then a whole turn."""
    tried = sum(served.statuses.values())
    figure = f"web fuzz: {tried} requests, statuses {dict(sorted(served.statuses.items()))}"
    print(figure)
    # (0 when this test runs alone, e.g. with -k)
    assert tried == 0 or tried >= EXAMPLES, figure
    assert 500 not in served.statuses, figure
    served.fake.script("after", [Text("still here")])

    async def turn() -> dict[str, Any]:
        sent = await served.http.post(f"/threads/{THREAD}/turns", json={"text": "[[script:after]]"})
        assert sent.status_code == 202, sent.text
        turn_id = sent.json()["turn_id"]
        async with served.oc.events(THREAD, replay=True) as stream:
            async for event in stream:
                if event.type == "turn.completed" and event.turn_id == turn_id:
                    return event.to_dict()
        raise AssertionError("the stream ended before the turn completed")

    done = served.run(turn)
    assert done["state"] == "completed", (figure, done)
