"""``open_store``: the forms a host configures, the default place, and the refusals
(which never repeat a URL: it may hold a password)."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapter import InvalidInputError
from adapter.web import default_store_path, open_store
from adapter.web._store import SqliteThreadStore  # the SQLite backend itself: no public name


@pytest.mark.parametrize("form", ["path", "pathlike", "url", "relative"])
async def test_a_path_or_an_sqlite_url_opens_that_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, form: str
) -> None:
    path = tmp_path / "threads.sqlite3"
    monkeypatch.chdir(tmp_path)
    targets: dict[str, str | Path] = {
        "path": str(path),
        "pathlike": path,
        "url": f"sqlite:///{path}",  # sqlite:////abs/path
        "relative": "sqlite:///threads.sqlite3",
    }
    async with await open_store(targets[form]) as store:
        assert isinstance(store, SqliteThreadStore)
        assert store.path == path
    assert path.is_file()


async def test_no_target_is_the_default_file_under_xdg_state_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    expected = tmp_path / "state" / "opencode-tree" / "threads.sqlite3"
    assert default_store_path() == expected
    async with await open_store() as store:
        assert isinstance(store, SqliteThreadStore) and store.path == expected
    monkeypatch.setenv("XDG_STATE_HOME", "relative/ignored")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_store_path() == tmp_path / ".local/state/opencode-tree/threads.sqlite3"


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("mysql://root:pw-s3cret@db/threads", "unsupported thread store scheme 'mysql'"),
        ("https://user:pw-s3cret@example.com/x", "unsupported thread store scheme 'https'"),
        ("sqlite://host/threads.db", "sqlite:///relative/path"),
        ("sqlite:///threads.db?mode=ro", "no query"),
        ("sqlite:///:memory:", "in-memory"),
        ("", "must be a file path"),
        ("   ", "must be a file path"),
    ],
)
async def test_anything_else_is_refused_without_repeating_it(target: str, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message) as caught:
        await open_store(target)
    assert "s3cret" not in str(caught.value)


def test_the_store_is_public_in_adapter_web() -> None:
    import adapter.web as web

    for name in ("open_store", "ThreadStore", "ThreadRecord", "StoreUnavailableError"):
        assert name in web.__all__ and hasattr(web, name)
    assert web.open_store.__module__ == "adapter.web"
