"""``normalise_directory`` maps every spelling the real server treats as one directory to one.

The expected values are what OpenCode 1.18.34 stored as ``Session.directory``
for a ``POST /session`` with each spelling (as ``?directory=`` and as
``x-opencode-directory``, alike), and which ``/event`` stream got the session's
events (measured 2026-11-30, see ``adapter/_server/_directories.py``):

=============================  ==================================
sent                           stored (and the stream it reached)
=============================  ==================================
``D/real``, ``D/real/``,       ``D/real``
``D/real/./``, ``D/real//``,
``D/sub/../real``, ``D/link``
``D/link/sub`` (not there)     ``D/link/sub``
``D/nope/../real``             ``D/real``
``project`` (relative)         ``<server cwd>/project``
``~/x``                        ``<server cwd>/~/x``
``""``                         the server's cwd
``"a\\x00b"``                  500 UnknownError
=============================  ==================================
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from adapter import InvalidInputError
from adapter._server._directories import normalise_directory


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """``D/real``, ``D/sub`` and ``D/link -> D/real``, with ``D`` itself free of symlinks."""
    base = tmp_path.resolve()
    (base / "real").mkdir()
    (base / "sub").mkdir()
    (base / "link").symlink_to(base / "real")
    return base


def test_none_is_the_servers_default() -> None:
    assert normalise_directory(None) is None


@pytest.mark.parametrize("suffix", ["real", "real/", "real/./", "real//", "sub/../real", "link"])
def test_spellings_of_one_directory_are_one_key(tree: Path, suffix: str) -> None:
    assert normalise_directory(f"{tree}/{suffix}") == str(tree / "real")


def test_a_symlink_is_followed_like_the_server_does(tree: Path) -> None:
    assert normalise_directory(str(tree / "link")) == normalise_directory(str(tree / "real"))
    assert normalise_directory(str(tree / "link" / ".")) == str(tree / "real")


def test_a_missing_path_is_kept_lexical_symlinks_and_all(tree: Path) -> None:
    assert normalise_directory(f"{tree}/link/sub") == f"{tree}/link/sub"
    assert normalise_directory(f"{tree}/nope/../real") == str(tree / "real")
    assert normalise_directory(f"{tree}/nope/") == f"{tree}/nope"
    assert normalise_directory(f"{tree}/link/../x") == f"{tree}/x"  # ".." before symlinks


def test_a_remote_looking_path_is_only_normalised() -> None:
    assert normalise_directory("/srv/does-not-exist//p/./q/") == "/srv/does-not-exist/p/q"
    assert normalise_directory("//srv/does-not-exist") == "/srv/does-not-exist"
    assert normalise_directory("/") == "/"


def test_a_relative_path_is_resolved_against_this_process_cwd(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tree)
    assert normalise_directory("real") == str(tree / "real")
    assert normalise_directory("./link/") == str(tree / "real")
    assert normalise_directory(".") == str(tree)
    assert normalise_directory("~/x") == f"{tree}/~/x"  # the server does not expand ~ either
    assert os.path.isabs(normalise_directory("nope") or "")


def test_non_ascii_is_kept(tree: Path) -> None:
    (tree / "é").mkdir()
    assert normalise_directory(f"{tree}/é/") == f"{tree}/é"


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ("", "must not be empty"),
        ("/p/a\x00b", "NUL"),
        (b"/p", "must be a string path, got bytes"),
        (Path("/p"), "must be a string path, got PosixPath"),
        (3, "must be a string path, got int"),
    ],
)
def test_invalid_input_is_refused(bad: object, match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        normalise_directory(bad)  # type: ignore[arg-type]
