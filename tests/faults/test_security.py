"""The server password: never in logs, reprs or exceptions; never sent where it was not given."""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
import json
import logging
import os
import re
import subprocess
import sys
import traceback
from collections.abc import Callable, Iterator
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
    configure_logging,
)

# A test of internals here: the library's own loggers (``adapter._logging``) write the
# lines whose tracebacks and surrogates are checked; no public name makes one.
from adapter._logging import get_logger
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


# -- tracebacks in logs never print local variables -----------------------------------------

LOCAL_SECRET = "s3cret-value"


def _fails_holding_a_secret() -> None:
    api_key = LOCAL_SECRET  # a frame local that a locals-printing traceback would show
    raise RuntimeError(f"failed after {len(api_key)} characters")


class StrictStream(io.TextIOWrapper):
    """A strict UTF-8 text stream (a lone surrogate raises), as a pipe or file can be."""

    def __init__(self, *, tty: bool = False) -> None:
        super().__init__(io.BytesIO(), encoding="utf-8", errors="strict", write_through=True)
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty

    def text(self) -> str:
        """What was written, without the terminal's colour codes."""
        buffer = self.buffer
        assert isinstance(buffer, io.BytesIO)
        return re.sub(r"\x1b\[[0-9;]*m", "", buffer.getvalue().decode("utf-8"))


def _acp_logging(stream: StrictStream, fmt: str) -> None:
    from adapter.cli._acp import _log_to

    _log_to(stream, argparse.Namespace(log_format=fmt, verbose=True))


LOG_SETUPS: dict[str, Callable[[StrictStream], None]] = {
    "console": lambda s: configure_logging(format="console", level="DEBUG", file=s),
    "console-tty": lambda s: configure_logging(format="console", level="DEBUG", file=s),
    "json": lambda s: configure_logging(format="json", level="DEBUG", file=s),
    "acp-console": lambda s: _acp_logging(s, "console"),
    "acp-json": lambda s: _acp_logging(s, "json"),
}


@pytest.fixture
def root_handlers() -> Iterator[None]:
    """The ACP command adds a standard-library handler: removed after the test."""
    before = list(logging.getLogger().handlers)
    level = logging.getLogger().level
    yield
    logging.getLogger().handlers[:] = before
    logging.getLogger().setLevel(level)


@pytest.mark.parametrize("setup", list(LOG_SETUPS))
def test_a_logged_traceback_never_prints_local_variables(setup: str, root_handlers: None) -> None:
    stream = StrictStream(tty=setup.endswith("tty"))
    LOG_SETUPS[setup](stream)
    log = get_logger("adapter.test")
    try:
        _fails_holding_a_secret()
    except RuntimeError as exc:
        log.exception("failed.exception")
        log.error("failed.exc_info", exc_info=True)
        log.error("failed.exc_info_object", exc_info=exc)
    text = stream.text()
    assert text.count("_fails_holding_a_secret") >= 3, text
    assert "failed after 12 characters" in text
    assert LOCAL_SECRET not in text


class ReprQuotesTheServer:
    def __repr__(self) -> str:
        return "<session titled c\udc00d>"


@pytest.mark.parametrize("setup", list(LOG_SETUPS))
def test_a_log_line_with_lone_surrogates_is_written(setup: str, root_handlers: None) -> None:
    stream = StrictStream(tty=setup.endswith("tty"))
    LOG_SETUPS[setup](stream)
    log = get_logger("adapter.test")
    log.warning(
        "title\ud800",
        title="a\ud800b",
        nested={"k\udfff": ["x\ud83d", 1]},
        thing=ReprQuotesTheServer(),
    )
    try:
        raise ValueError("bad \udc80 input")
    except ValueError:
        log.exception("failed")
    text = stream.text()
    if "json" in setup:
        first, second = (json.loads(line) for line in text.splitlines())
        assert first["title"] == "a\ufffdb" and first["event"] == "title\ufffd"
        assert first["nested"] == {"k\ufffd": ["x\ufffd", 1]}
        assert first["thing"] == "<session titled c\ufffdd>"
        assert "\\ud" not in text, "no lone surrogate escape in the JSON either"
        assert second["event"] == "failed" and "bad \ufffd input" in json.dumps(
            second["exception"], ensure_ascii=False
        )
    else:
        assert "a\ufffdb" in text and "bad \ufffd input" in text
        assert "k\ufffd" in text and "x\ufffd" in text and "c\ufffdd" in text


@pytest.mark.parametrize("fmt", ["console", "json"])
def test_the_acp_commands_standard_library_log_lines_are_well_formed(
    fmt: str, root_handlers: None
) -> None:
    """The ACP SDK logs through the standard library, to the same stream as structlog."""
    stream = StrictStream()
    _acp_logging(stream, fmt)
    sdk = logging.getLogger("acp.connection")
    sdk.warning("received %s", "a\ud800b")
    try:
        _fails_holding_a_secret()
    except RuntimeError:
        sdk.exception("handler failed on \udfff")
    text = stream.text()
    assert "received a\ufffdb" in text and "handler failed on \ufffd" in text
    assert "_fails_holding_a_secret" in text and LOCAL_SECRET not in text


def test_no_library_log_call_hands_structlog_a_live_exception() -> None:
    """A host may render the library's records with its own structlog
    ``ProcessorFormatter``, whose default console renderer's rich tracebacks print
    every frame's locals. So the library logs an exception as text
    (Python's formatted traceback), never as ``exc_info`` or through ``.exception()``."""
    import ast

    offenders: list[str] = []
    import adapter

    for path in sorted(Path(adapter.__file__).parent.rglob("*.py")):
        if "testing" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            logger = ast.unparse(node.func.value)
            is_log = logger.endswith(("_log", "log", "logger"))
            if is_log and (
                node.func.attr == "exception" or any(k.arg == "exc_info" for k in node.keywords)
            ):
                offenders.append(f"{path}:{node.lineno}: {ast.unparse(node)[:80]}")
    assert offenders == [], (
        "log the formatted traceback instead, as adapter/web/_errors.py does: "
        'error_type=type(exc).__name__, traceback="".join(traceback.format_exception(exc))'
    )
