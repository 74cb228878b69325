"""The server password: never in logs, reprs or exceptions; never sent where it was not given."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapter import (
    AuthError,
    InvalidInputError,
    OpenCodeAdapter,
    OpenCodeClient,
    OpenCodeError,
)
from adapter.cli import amain
from adapter.testing.fake import FakeOpenCodeServer, Hang, Text
from tests.faults.conftest import FAST_RETRY
from tests.faults.harness import (
    Harness,
    LoopbackServer,
    closed_port,
    read_request,
    write_stub_binary,
)

T = "thread-1"
PASSWORD = "s3cr3t-Pa55w0rd-x9"
SECRETS = (
    PASSWORD,
    base64.b64encode(f"opencode:{PASSWORD}".encode()).decode(),
    base64.b64encode(PASSWORD.encode()).decode().rstrip("="),
)


def exception_texts(exc: BaseException) -> list[str]:
    """str, repr and the formatted traceback of an exception and its whole chain."""
    texts = ["".join(traceback.format_exception(exc))]
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        texts += [str(current), repr(current)]
        for attr in ("report", "first_failure", "cause", "partial"):
            value = getattr(current, attr, None)
            if value is not None:
                texts += [str(value), repr(value)]
        current = current.__cause__ or current.__context__
    return texts


def assert_no_secret(texts: list[str]) -> None:
    for text in texts:
        for secret in SECRETS:
            assert secret not in text, f"the password leaked into: {text[:300]!r}"


async def test_the_password_never_appears_in_logs_reprs_or_exceptions(
    captured_logs: list[dict[str, Any]],
) -> None:
    fake = FakeOpenCodeServer(password=PASSWORD, seed=3)
    texts: list[str] = []
    async with Harness(fake, password=PASSWORD) as h:
        fake.script("work", [Text("hello"), Hang()])
        info = await h.oc.start_session(T)
        kid = fake.add_session(parent_id=info.session_id, busy=True)
        await h.oc.send_turn(T, "go [[script:work]]")
        await h.rec.wait_for("content.delta")
        fake.fail("GET", "/session/{id}/children", status=503, times=2)  # retries are logged
        fake.fail("POST", f"/session/{kid}/abort", status=400, times=None)
        with pytest.raises(OpenCodeError) as stop_failure:
            await h.oc.interrupt_turn(T)
        texts += exception_texts(stop_failure.value)
        fake.drop_event_streams()  # a logged outage
        await h.rec.wait_for("runtime.warning")
        texts += [repr(h.oc), repr(h.oc.list_sessions()), *map(repr, h.rec.events)]
        async with OpenCodeClient(
            fake.base_url, transport=fake.transport, password="wrong", retry=FAST_RETRY
        ) as wrong:
            with pytest.raises(AuthError) as denied:
                await wrong.health()
            texts += exception_texts(denied.value)
    async with OpenCodeClient(
        f"http://127.0.0.1:{closed_port()}", password=PASSWORD, retry=FAST_RETRY
    ) as client:
        texts.append(repr(client))
        with pytest.raises(OpenCodeError) as unreachable:
            await client.abort("ses_x")
        texts += exception_texts(unreachable.value)
    assert any(log["event"] == "opencode.retry" for log in captured_logs)
    assert any(log["event"] == "adapter.stream_lost" for log in captured_logs)
    texts += [repr(log) for log in captured_logs]
    assert_no_secret(texts)


async def test_credentials_in_a_base_url_are_refused_without_echoing_them() -> None:
    with pytest.raises(InvalidInputError) as caught:
        OpenCodeClient(f"http://opencode:{PASSWORD}@127.0.0.1:4096")
    assert_no_secret(exception_texts(caught.value))


@pytest.mark.parametrize(
    "base_url",
    [f"ftp://opencode:{PASSWORD}@127.0.0.1", f"http://opencode:{PASSWORD}@"],
    ids=["wrong-scheme", "no-host"],
)
async def test_a_malformed_base_url_with_credentials_is_refused_without_echoing_them(
    base_url: str,
) -> None:
    with pytest.raises(InvalidInputError) as caught:
        OpenCodeClient(base_url)
    assert_no_secret(exception_texts(caught.value))


async def test_an_external_server_never_receives_the_hosts_env_password(
    fake: FakeOpenCodeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENCODE_SERVER_PASSWORD", PASSWORD)
    seen: list[str | None] = []

    async def capture(request: httpx.Request) -> None:
        seen.append(request.headers.get("authorization"))

    fake.on("*", "*", capture)
    fake.script("work", [Text("hi"), Hang()])
    async with Harness(fake) as h:
        await h.oc.start_session(T)
        await h.oc.send_turn(T, "go [[script:work]]")
        await h.oc.interrupt_turn(T)
        await h.oc.read_thread(T)
        await h.oc.stop_session(T)
        async with OpenCodeClient(fake.base_url, transport=fake.transport) as client:
            await client.health()
    assert len(seen) >= 8
    assert seen == [None] * len(seen), "no Authorization without an explicit password"


async def test_an_explicit_password_is_sent_on_every_request_and_only_that_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENCODE_SERVER_PASSWORD", "from-the-environment")
    fake = FakeOpenCodeServer(password="explicit", seed=5)
    seen: list[str | None] = []

    async def capture(request: httpx.Request) -> None:
        seen.append(request.headers.get("authorization"))

    fake.on("*", "*", capture)
    async with Harness(fake, password="explicit") as h:
        await h.oc.start_session(T)
        await h.oc.interrupt_turn(T)
    expected = "Basic " + base64.b64encode(b"opencode:explicit").decode()
    assert seen and set(seen) == {expected}


async def test_an_owned_server_gets_the_password_only_when_it_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    binary = write_stub_binary(tmp_path)
    monkeypatch.setenv("OPENCODE_SERVER_PASSWORD", "from-the-environment")
    seen: list[object] = []
    for i, password in enumerate([None, PASSWORD]):
        pidfile = tmp_path / f"stub{i}.json"
        monkeypatch.setenv("FAULTS_STUB_PIDFILE", str(pidfile))
        async with OpenCodeAdapter(binary=str(binary), password=password) as oc:
            assert PASSWORD not in repr(oc)
            await oc.start_session(T)
        seen.append(json.loads(pidfile.read_text())["password"])
    assert seen == [None, PASSWORD]


async def test_the_password_is_never_sent_to_a_proxy_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        server.received.append(await read_request(reader))
        writer.write(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n")
        await writer.drain()

    async with LoopbackServer(proxy) as server:
        for name in ("NO_PROXY", "no_proxy"):
            monkeypatch.delenv(name, raising=False)
        for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY"):
            monkeypatch.setenv(name, server.url)
        async with OpenCodeClient(
            f"http://127.0.0.1:{closed_port()}", password=PASSWORD, retry=FAST_RETRY
        ) as client:
            with pytest.raises(OpenCodeError):
                await client.health()
        # a proxied attempt is read by the proxy before its 502 could fail the client
    assert server.received == [], f"the proxy got: {server.received!r}"


# -- credentials inside a base_url ---------------------------------------------------------

# Every way a secret rides in a URL. OpenCode's base URL is scheme://host[:port][/prefix]:
# nothing legitimate uses a query or a fragment (the directory goes in a header or in the
# client's own ?directory=), so any is refused, whatever its name.
HOSTILE_BASE_URLS = {
    "userinfo": f"http://opencode:{PASSWORD}@127.0.0.1:4096",
    "user-only": f"http://{PASSWORD}@127.0.0.1:4096",
    "password-only": f"http://:{PASSWORD}@127.0.0.1:4096/",
    "auth_token": f"http://127.0.0.1:4096/?auth_token={PASSWORD}",
    "token-no-slash": f"http://127.0.0.1:4096?token={PASSWORD}",
    "beside-directory": f"http://127.0.0.1:4096/?directory=/srv&password={PASSWORD}",
    "bare-query": f"http://127.0.0.1:4096/prefix?{PASSWORD}",
    "fragment": f"http://127.0.0.1:4096/#token={PASSWORD}",
    "wrong-scheme": f"ftp://opencode:{PASSWORD}@127.0.0.1",
    "wrong-scheme-query": f"ftp://127.0.0.1/?auth_token={PASSWORD}",
    "no-scheme": f"opencode:{PASSWORD}@127.0.0.1:4096",
    "no-host": f"http://opencode:{PASSWORD}@",
    "no-host-query": f"http:///?key={PASSWORD}",
}
hostile_base_urls = pytest.mark.parametrize(
    "base_url", list(HOSTILE_BASE_URLS.values()), ids=list(HOSTILE_BASE_URLS)
)


@hostile_base_urls
async def test_a_secret_in_a_base_url_is_refused_by_the_client_without_echoing_it(
    base_url: str,
) -> None:
    with pytest.raises(InvalidInputError, match="base_url") as caught:
        OpenCodeClient(base_url, transport=FakeOpenCodeServer().transport)
    assert_no_secret(exception_texts(caught.value))


@hostile_base_urls
async def test_a_secret_in_a_base_url_is_refused_by_the_adapter_without_echoing_it(
    base_url: str, fake: FakeOpenCodeServer
) -> None:
    with pytest.raises(InvalidInputError, match="base_url") as caught:
        OpenCodeAdapter(base_url, transport=fake.transport)
    assert_no_secret(exception_texts(caught.value))


def test_the_refusals_say_what_to_do_instead() -> None:
    with pytest.raises(InvalidInputError, match="password=") as userinfo:
        OpenCodeClient(HOSTILE_BASE_URLS["userinfo"])
    with pytest.raises(InvalidInputError, match="query") as query:
        OpenCodeClient(HOSTILE_BASE_URLS["auth_token"])
    with pytest.raises(InvalidInputError, match="fragment") as fragment:
        OpenCodeAdapter(HOSTILE_BASE_URLS["fragment"])
    for caught in (userinfo, query, fragment):
        assert_no_secret(exception_texts(caught.value))


async def test_a_base_url_with_a_path_prefix_is_still_accepted() -> None:
    async with OpenCodeClient("http://127.0.0.1:4096/opencode/", password=PASSWORD) as client:
        assert client.base_url == "http://127.0.0.1:4096/opencode"
        assert PASSWORD not in repr(client)
    adapter = OpenCodeAdapter("https://[::1]:4096/opencode", password=PASSWORD)
    assert PASSWORD not in repr(adapter) and "auth=basic" in repr(adapter)
    # An httpx.URL is accepted at run time, though the parameter is annotated ``str``.
    url: Any = httpx.URL("http://127.0.0.1:4096")
    async with OpenCodeClient(url) as client:
        assert client.base_url == "http://127.0.0.1:4096"
    hostile: Any = httpx.URL(HOSTILE_BASE_URLS["auth_token"])
    with pytest.raises(InvalidInputError) as parsed:
        OpenCodeClient(hostile)
    assert_no_secret(exception_texts(parsed.value))
    for not_a_url in (None, 4096, b"http://127.0.0.1:4096"):
        with pytest.raises(InvalidInputError, match="not a valid URL"):
            OpenCodeClient(not_a_url)  # type: ignore[arg-type]


@pytest.mark.parametrize("command", ["tree ses_x", "stop ses_x", "run hi", "web"])
@pytest.mark.parametrize("source", ["--url", "OPENCODE_URL"])
@hostile_base_urls
async def test_the_cli_refuses_a_secret_in_the_url_without_echoing_it(
    base_url: str,
    command: str,
    source: str,
    fake: FakeOpenCodeServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    argv = command.split()
    if source == "--url":
        argv += ["--url", base_url]
    else:
        monkeypatch.setenv("OPENCODE_URL", base_url)
    started: list[object] = []
    monkeypatch.setattr("adapter.cli._web._serve", lambda *a: started.append(a))
    code = await amain(argv, transport=fake.transport)
    captured = capsys.readouterr()
    assert code == 2 and not started and not fake.requests
    assert captured.err.startswith(f"error: {'--url' if source == '--url' else '$OPENCODE_URL'} ")
    assert_no_secret([captured.out, captured.err])


def test_the_acp_command_refuses_a_secret_in_the_url_without_echoing_it(tmp_path: Path) -> None:
    log = tmp_path / "acp.log"
    env = {**os.environ, "OPENCODE_URL": HOSTILE_BASE_URLS["auth_token"]}
    done = subprocess.run(
        [sys.executable, "-m", "adapter", "acp", "--log-file", str(log)],
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=30,
    )
    assert done.returncode == 2 and "query" in done.stderr
    assert_no_secret([done.stdout, done.stderr, log.read_text() if log.exists() else ""])
