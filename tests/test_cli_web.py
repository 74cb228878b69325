"""``opencode-tree web``: its options, checked before anything starts, and the app it serves.

uvicorn itself is replaced by a stand-in (``_serve``) that talks to the app it was
given through ``httpx.ASGITransport``; the browser test (``tests/web/test_browser.py``)
serves the same app with uvicorn for real.
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from adapter import InvalidInputError
from adapter.cli import _web, amain
from adapter.testing.fake import FakeOpenCodeServer


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenCodeServer]:
    server = FakeOpenCodeServer(seed=5)
    yield server
    await server.aclose()


def web_args(**overrides: Any) -> argparse.Namespace:
    values: dict[str, Any] = {
        "host": "127.0.0.1",
        "port": 8765,
        "token_env": None,
        "try_out": False,
        "url": None,
    }
    values.update(overrides)
    return argparse.Namespace(**values)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_loopback_needs_no_token(host: str) -> None:
    settings = _web.listen_settings(web_args(host=host))
    assert settings.token is None
    assert settings.url.endswith(":8765/")
    assert "#token" not in settings.url


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.5", "::", "example.com"])
def test_beyond_loopback_without_a_token_is_refused(host: str) -> None:
    with pytest.raises(InvalidInputError, match=f"refusing to listen on {host} without a token"):
        _web.listen_settings(web_args(host=host))


def test_beyond_loopback_with_a_token_is_served_and_the_url_carries_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WEB_TOKEN", "s3cret")
    settings = _web.listen_settings(web_args(host="0.0.0.0", token_env="WEB_TOKEN"))
    assert settings.token == "s3cret"
    assert settings.url == "http://0.0.0.0:8765/#token=s3cret"
    assert _web.listen_settings(web_args(host="::1", port=9)).url == "http://[::1]:9/"


def test_port_zero_picks_a_free_port() -> None:
    assert 0 < _web.listen_settings(web_args(port=0)).port <= 65535


async def test_bad_options_are_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("UNSET_TOKEN", raising=False)
    cases = {
        ("web", "--host", "0.0.0.0", "--url", "http://127.0.0.1:9"): "without a token",
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


async def test_serves_the_app_with_the_token(
    fake: FakeOpenCodeServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WEB_TOKEN", "tok-123")
    seen: dict[str, Any] = {}

    async def serve(app: Any, settings: _web.ListenSettings) -> None:
        seen["settings"] = settings
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://app"
        ) as http:
            seen["page"] = (await http.get("/")).text
            seen["anonymous"] = (await http.get("/threads")).status_code
            headers = {"Authorization": "Bearer tok-123"}
            created = await http.post("/threads", json={"thread_id": "t1"}, headers=headers)
            seen["created"] = created.status_code
            seen["threads"] = (await http.get("/threads", headers=headers)).json()

    monkeypatch.setattr(_web, "_serve", serve)
    argv = ["web", "--url", fake.base_url, "--port", "8123", "--token-env", "WEB_TOKEN"]
    assert await amain(argv, transport=fake.transport) == 0
    out = capsys.readouterr().out
    assert "http://127.0.0.1:8123/#token=tok-123" in out
    assert seen["settings"].port == 8123
    assert 'id="stop"' in seen["page"]
    assert seen["anonymous"] == 401
    assert seen["created"] == 201
    assert [t["thread_id"] for t in seen["threads"]] == ["t1"]


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
