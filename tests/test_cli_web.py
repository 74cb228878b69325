"""``opencode-tree web``: its options, checked before anything starts, and the app it serves.

uvicorn itself is replaced by a stand-in (``_serve``) that talks to the app it was
given through ``httpx.ASGITransport``; the browser test (``tests/web/test_browser.py``)
serves the same app with uvicorn for real.
"""

from __future__ import annotations

import argparse
import re
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapter import InvalidInputError
from adapter.cli import _web, amain
from adapter.cli._web import Terminated
from adapter.testing import free_port
from adapter.testing.fake import FakeOpenCodeServer


@pytest.fixture(autouse=True)
def private_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The default thread store in this test's own directory, never the user's."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("OPENCODE_TREE_STORE", raising=False)
    return tmp_path / "state" / "opencode-tree" / "threads.sqlite3"


@pytest.fixture
def fake_options() -> dict[str, Any]:
    return {"seed": 5}


def web_args(**overrides: Any) -> argparse.Namespace:
    values: dict[str, Any] = {
        "host": "127.0.0.1",
        "port": 8765,
        "token_env": None,
        "no_token": False,
        "allow_host": [],
        "try_out": False,
        "url": None,
        "workers": 1,
        "store": None,
        "no_store": False,
    }
    values.update(overrides)
    return argparse.Namespace(**values)


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "0.0.0.0", "192.168.1.5", "example.com"])
def test_a_token_is_made_by_default_and_the_url_carries_it_in_the_fragment(host: str) -> None:
    settings = _web.listen_settings(web_args(host=host))
    token = settings.token
    assert token is not None and re.fullmatch(r"[A-Za-z0-9_-]{43,}", token), token
    assert settings.url.endswith(f":8765/#token={token}")
    assert _web.listen_settings(web_args(host=host)).token != token  # a fresh one each run


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_no_token_is_allowed_on_loopback(host: str) -> None:
    settings = _web.listen_settings(web_args(host=host, no_token=True))
    assert settings.token is None
    assert settings.url.endswith(":8765/")
    assert "#token" not in settings.url


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.5", "::", "example.com"])
def test_no_token_beyond_loopback_is_refused(host: str) -> None:
    with pytest.raises(InvalidInputError, match=f"refusing to listen on {host} without a token"):
        _web.listen_settings(web_args(host=host, no_token=True))


def test_a_token_from_the_environment_is_used_as_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WEB_TOKEN", "s3cret")
    settings = _web.listen_settings(web_args(host="192.168.1.5", token_env="WEB_TOKEN"))
    assert settings.token == "s3cret"
    assert settings.url == "http://192.168.1.5:8765/#token=s3cret"
    assert _web.listen_settings(web_args(host="::1", port=9, no_token=True)).url == (
        "http://[::1]:9/"
    )


@pytest.mark.parametrize(("host", "shown"), [("0.0.0.0", "127.0.0.1"), ("::", "[::1]")])
def test_listening_on_every_address_prints_the_loopback_url(host: str, shown: str) -> None:
    """``http://0.0.0.0:8765/`` is no address a browser should open (and its Host is
    refused): the URL printed names loopback, which the app always accepts."""
    settings = _web.listen_settings(web_args(host=host))
    assert settings.url == f"http://{shown}:8765/#token={settings.token}"


def test_port_zero_picks_a_free_port() -> None:
    assert 0 < _web.listen_settings(web_args(port=0)).port <= 65535


async def test_bad_options_are_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("UNSET_TOKEN", raising=False)
    cases = {
        ("web", "--host", "0.0.0.0", "--no-token", "--url", "http://127.0.0.1:9"): (
            "refusing to listen on 0.0.0.0 without a token"
        ),
        ("web", "--no-token", "--token-env", "T", "--url", "http://127.0.0.1:9"): (
            "--no-token and --token-env"
        ),
        ("web", "--allow-host", "http://a.example", "--url", "http://127.0.0.1:9"): (
            "--allow-host: 'http://a.example' is not a host name"
        ),
        ("web", "--token-env", "UNSET_TOKEN", "--url", "http://127.0.0.1:9"): (
            "--token-env names UNSET_TOKEN, which is not set"
        ),
        ("web", "--port", "70000", "--url", "http://127.0.0.1:9"): "--port must be 0..65535",
        ("web", "--try", "--url", "http://127.0.0.1:9"): "--try runs its own OpenCode server",
    }
    for argv, message in cases.items():
        assert await amain(list(argv)) == 2, argv
        err = capsys.readouterr().err
        assert message in err, err
        assert len(err.strip().splitlines()) == 1, err


async def serve_and_probe(
    fake: FakeOpenCodeServer, monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> dict[str, Any]:
    """Run ``opencode-tree web`` with ``argv``; uvicorn's stand-in probes the app it got."""
    seen: dict[str, Any] = {}

    async def serve(app: Any, settings: _web.ListenSettings, announce: Callable[[], None]) -> None:
        seen["settings"] = settings
        announce()  # uvicorn listens: the URL is printed
        bearer = {"Authorization": f"Bearer {settings.token}"}
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8123"
        ) as http:
            seen["page"] = (await http.get("/")).text
            seen["anonymous"] = (await http.get("/threads")).status_code
            created = await http.post("/threads", json={"thread_id": "t1"}, headers=bearer)
            seen["created"] = created.status_code
            seen["threads"] = (await http.get("/threads", headers=bearer)).json()
            rebound = {"Host": "evil.example:8123", **bearer}
            seen["rebound"] = (await http.get("/threads", headers=rebound)).status_code
            named = {"Host": "mybox.lan:8123", **bearer}
            seen["named"] = (await http.get("/threads", headers=named)).status_code

    monkeypatch.setattr(_web, "_serve", serve)
    argv = ["web", "--url", fake.base_url, "--port", "8123", *argv]
    assert await amain(argv, transport=fake.transport) == 0
    return seen


async def test_serves_the_app_with_a_fresh_token_printed_once(
    fake: FakeOpenCodeServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = await serve_and_probe(fake, monkeypatch, [])
    token = seen["settings"].token
    out = capsys.readouterr().out
    assert out.count(token) == 1
    assert f"http://127.0.0.1:8123/#token={token}" in out
    assert 'id="stop"' in seen["page"]
    assert seen["anonymous"] == 401
    assert seen["created"] == 201
    assert [t["thread_id"] for t in seen["threads"]] == ["t1"]
    assert seen["rebound"] == 403 and seen["named"] == 403


async def test_serves_the_app_with_the_token_from_the_environment_and_allowed_hosts(
    fake: FakeOpenCodeServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WEB_TOKEN", "tok-123")
    seen = await serve_and_probe(
        fake, monkeypatch, ["--token-env", "WEB_TOKEN", "--allow-host", "MyBox.lan"]
    )
    assert "http://127.0.0.1:8123/#token=tok-123" in capsys.readouterr().out
    assert seen["settings"].port == 8123 and seen["settings"].token == "tok-123"
    assert (seen["anonymous"], seen["created"], seen["rebound"]) == (401, 201, 403)
    assert seen["named"] == 200


async def test_no_token_serves_the_app_open_on_loopback(
    fake: FakeOpenCodeServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = await serve_and_probe(fake, monkeypatch, ["--no-token"])
    assert "#token" not in capsys.readouterr().out
    assert seen["settings"].token is None
    assert (seen["anonymous"], seen["created"], seen["rebound"]) == (200, 201, 403)


def test_try_scripts_spawn_a_nested_tree_and_repeat() -> None:
    class Recorder:
        def __init__(self) -> None:
            self.scripts: dict[str, list[Any]] = {}

        def script(self, name: str, steps: list[Any]) -> None:
            self.scripts[name] = list(steps)

    model = Recorder()
    _web.try_scripts(model)  # type: ignore[arg-type]
    root = model.scripts[_web.TRY_SCRIPT]
    tools = [[c.name for c in step.calls] for step in root]
    assert tools[:4] == [["bash"], ["task"], ["bash"], ["task"]]
    # task -> a subagent whose own task -> a subagent whose model call hangs
    mid = root[1].calls[0].arguments["prompt"]
    assert f"[[script:{_web.TRY_SCRIPT}-mid]]" in mid
    assert model.scripts[f"{_web.TRY_SCRIPT}-mid"][0].calls[0].name == "task"
    assert type(model.scripts[f"{_web.TRY_SCRIPT}-leaf"][0]).__name__ == "Hang"


async def test_the_url_is_announced_once_the_port_listens() -> None:
    # A client that reads the URL and connects at once must not be refused (a real test
    # of `make web` was, once, when the URL came before uvicorn had bound its socket).
    port = free_port()
    settings = _web.ListenSettings(host="127.0.0.1", port=port, token=None)
    connected: list[bool] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        pass

    def announce() -> None:
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            connected.append(True)
        raise Terminated("done")  # stands for the user's Ctrl-C / SIGTERM

    with pytest.raises(Terminated):
        await _web._serve(app, settings, announce)
    assert connected == [True]
