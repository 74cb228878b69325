"""Run a real ``opencode serve`` process, isolated and offline, for tests.

`RealOpenCodeServer` is a synchronous context manager (so it fits session-scoped
pytest fixtures and can be used from async code too). It starts the OpenCode
binary (see :func:`adapter._server._binary.find_opencode_binary`) with:

* a free loopback port it picks itself (never 4096, never ``--port 0``),
* a private temporary ``HOME`` and XDG config/data/cache/state directories,
* environment variables that keep it offline (no model list fetch, no
  auto-update, no sharing, no LSP downloads, no default plugins, and an npm
  registry on a dead loopback port so its background plugin install fails fast),
* an ``opencode.json`` whose only provider, ``fake``, points at a given
  OpenAI-compatible base URL (typically a
  :class:`~adapter.testing.model.ScriptedModelServer`),
* optionally basic-auth protection (``OPENCODE_SERVER_PASSWORD``),
* a private, empty project directory as working directory (:attr:`directory`),
* its own process group, which is terminated (SIGTERM, then SIGKILL) on exit.

Older releases (the release matrix, ``make test-matrix``) reject parts of that
setup, so the binary's ``--version`` decides two details, both measured: the
``--pure`` flag exists from 1.14 on (1.3.2 and 1.0.185 exit with a usage error),
and ``subagent_depth`` is a config key from 1.18 on (1.17.19 and older refuse to
start with "Unrecognized key: subagent_depth"; nesting is allowed there anyway).
"""

from __future__ import annotations

import base64
import contextlib
import copy
import functools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import httpx

from .._base._closing import Closing
from .._server._binary import (
    OPENCODE_DEFAULT_PORT,
    PINNED_VERSION,
    find_opencode_binary,
    find_project_root,
    free_port,
)
from .._server._releases import Version, parse_version
from ._started import started

__all__ = [
    "DEFAULT_USERNAME",
    "OFFLINE_ENV",
    "PINNED_VERSION",
    "RealOpenCodeServer",
    "binary_version",
    "find_opencode_binary",
    "find_project_root",
    "free_port",
    "opencode_config",
]

#: Basic-auth user name OpenCode expects unless OPENCODE_SERVER_USERNAME is set.
DEFAULT_USERNAME: Final = "opencode"
#: Environment that keeps an OpenCode server from reaching the network.
OFFLINE_ENV: Final[Mapping[str, str]] = {
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_DISABLE_AUTOCOMPACT": "1",
    # OpenCode installs its plugin package in the background; point npm at a closed
    # loopback port so that attempt fails immediately instead of hanging.
    "npm_config_registry": "http://127.0.0.1:9/",
    "NO_PROXY": "127.0.0.1,localhost",
    "no_proxy": "127.0.0.1,localhost",
}

_READY_LINE: Final = "opencode server listening on"
_DROPPED_ENV_PREFIXES: Final = ("OPENCODE_", "XDG_")
_DROPPED_ENV_KEYS: Final = frozenset(
    {"http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"}
)
#: First release line whose ``serve`` knows ``--pure`` (the registry has nothing
#: between 1.3.2, which lacks it, and 1.14.34).
_PURE_FLAG_SINCE: Final = Version(1, 14, 0)
#: First release line whose config schema accepts ``subagent_depth`` (1.17.19 rejects it).
_SUBAGENT_DEPTH_SINCE: Final = Version(1, 18, 0)


# ------------------------------------------------------------------ helpers


def _offline_environment(dirs: Mapping[str, str]) -> dict[str, str]:
    """This process's environment without OpenCode/XDG/proxy settings, kept offline,
    with ``dirs`` (``HOME``, ``XDG_*_HOME``...) pointing at private folders."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(_DROPPED_ENV_PREFIXES) and key not in _DROPPED_ENV_KEYS
    }
    env.update(OFFLINE_ENV)
    env.update(dirs)
    return env


@functools.cache
def _cached_binary_version(binary: Path, mtime_ns: int) -> str:
    with tempfile.TemporaryDirectory(prefix="opencode-version-") as sandbox:
        dirs = {"HOME": sandbox}
        for name in ("CONFIG", "DATA", "CACHE", "STATE"):
            dirs[f"XDG_{name}_HOME"] = str(Path(sandbox) / name.lower())
        result = subprocess.run(
            [str(binary), "--version"],
            env=_offline_environment(dirs),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    return result.stdout.strip()


def binary_version(binary: str | os.PathLike[str]) -> str:
    """What ``binary --version`` prints (cached per file), run with a throwaway HOME.

    Even ``--version`` makes OpenCode create its config/data/cache/state folders,
    hence the sandbox. An empty string if it printed nothing.
    """
    path = Path(binary).resolve()
    return _cached_binary_version(path, path.stat().st_mtime_ns)


def _deep_merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _deep_merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def opencode_config(
    model_base_url: str,
    *,
    subagent_depth: int = 3,
    overrides: Mapping[str, Any] | None = None,
    version: str | None = None,
) -> dict[str, Any]:
    """Build an ``opencode.json`` using only the ``fake/fake-model`` provider at ``model_base_url``.

    Everything is permitted (tools, tasks, edits, external directories), nested
    subagents are allowed down to ``subagent_depth``, and snapshots, sharing and
    auto-update are off. ``overrides`` is deep-merged into the result. ``version``
    (the server's release, default: current) drops the keys an older release's
    schema rejects.
    """
    config: dict[str, Any] = {
        "$schema": "https://opencode.ai/config.json",
        "model": "fake/fake-model",
        "small_model": "fake/fake-model",
        "enabled_providers": ["fake"],
        "autoupdate": False,
        "share": "disabled",
        "snapshot": False,
        "subagent_depth": subagent_depth,
        "permission": {
            "*": "allow",
            "task": "allow",
            "bash": "allow",
            "edit": "allow",
            "external_directory": "allow",
            "doom_loop": "allow",
        },
        "provider": {
            "fake": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Fake",
                "options": {"baseURL": model_base_url, "apiKey": "test-key"},
                "models": {
                    "fake-model": {
                        "name": "Fake model",
                        "tool_call": True,
                        "limit": {"context": 128000, "output": 4096},
                    }
                },
            }
        },
    }
    release = parse_version(version)
    if release is not None and release < _SUBAGENT_DEPTH_SINCE:
        del config["subagent_depth"]
    if overrides:
        _deep_merge(config, overrides)
    return config


# ------------------------------------------------------------------ server


class RealOpenCodeServer(Closing):
    """A real ``opencode serve`` in a sandbox; a synchronous context manager.

    :meth:`start` blocks for the server's cold start (a few seconds). From async
    code that must keep its loop responsive, run it as
    ``await asyncio.to_thread(server.start)``; the server itself is independent of
    any event loop.

    Args:
        model_base_url: OpenAI-compatible base URL for the ``fake`` provider,
            e.g. ``ScriptedModelServer.base_url``.
        binary: Path of the OpenCode executable (default: :func:`find_opencode_binary`).
        password: If set, the server requires HTTP basic auth with this password.
        username: Basic-auth user name (OpenCode's default is ``opencode``).
        port: Port to listen on (default: a free one; 4096 is refused).
        startup_timeout: Seconds to wait for readiness before failing.
        shutdown_grace: Seconds between SIGTERM and SIGKILL on exit.
        subagent_depth: Allowed nesting depth of ``task`` subagents.
        config_overrides: Deep-merged into the generated ``opencode.json``.
        extra_env: Extra environment variables for the process.
        log_level: OpenCode log level printed to the captured log.
        keep_temp: Keep the temporary directories after exit (for debugging).
    """

    def __init__(
        self,
        model_base_url: str,
        *,
        binary: str | os.PathLike[str] | None = None,
        password: str | None = None,
        username: str = DEFAULT_USERNAME,
        port: int | None = None,
        startup_timeout: float = 30.0,
        shutdown_grace: float = 5.0,
        subagent_depth: int = 3,
        config_overrides: Mapping[str, Any] | None = None,
        extra_env: Mapping[str, str] | None = None,
        log_level: str = "INFO",
        keep_temp: bool = False,
    ) -> None:
        if port is not None and (port == OPENCODE_DEFAULT_PORT or port <= 0):
            raise ValueError(f"refusing port {port}: pick a concrete port other than 4096")
        self.binary = find_opencode_binary(binary)
        #: What the binary's ``--version`` printed, e.g. ``"1.18.34"``.
        self.version = binary_version(self.binary)
        self.model_base_url = model_base_url
        self.password = password
        self.username = username
        self.startup_timeout = startup_timeout
        self.shutdown_grace = shutdown_grace
        self.config = opencode_config(
            model_base_url,
            subagent_depth=subagent_depth,
            overrides=config_overrides,
            version=self.version,
        )
        self._requested_port = port
        self._extra_env = dict(extra_env or {})
        self._log_level = log_level
        self._keep_temp = keep_temp
        self._port: int | None = None
        self._root: Path | None = None
        self._dirs: dict[str, str] | None = None
        self._directory: Path | None = None
        self._log_path: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._pid: int | None = None
        self._spawned_at = 0.0
        self._final_log = ""
        #: Whether stdout carried the "listening" line by the time health answered.
        self.listening_line_seen = False
        #: Seconds from spawning the process until it answered ``/global/health``.
        self.startup_seconds: float | None = None
        #: ``time.monotonic()`` when the server became ready.
        self.ready_at: float | None = None

    # ------------------------------------------------------------ properties

    @property
    def port(self) -> int:
        """The port the server listens on."""
        return started(self._port, self)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (no trailing slash)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def directory(self) -> Path:
        """The server's working (project) directory, a private temp dir."""
        return started(self._directory, self)

    @property
    def pid(self) -> int:
        """Process id (also the process group id) of the server; kept after close."""
        return started(self._pid, self)

    @property
    def returncode(self) -> int | None:
        """Exit code of the process, ``None`` while it runs."""
        return None if self._process is None else self._process.poll()

    @property
    def auth(self) -> tuple[str, str] | None:
        """``(username, password)`` for ``httpx`` basic auth, or ``None`` without a password."""
        return None if self.password is None else (self.username, self.password)

    def auth_headers(self) -> dict[str, str]:
        """``{"Authorization": "Basic …"}`` if a password is set, else ``{}``."""
        if self.password is None:
            return {}
        token = base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
        return {"Authorization": f"Basic {token}"}

    def log_text(self, max_chars: int | None = None) -> str:
        """The captured stdout/stderr of the server (the last ``max_chars`` if given)."""
        if self._log_path is not None and self._log_path.exists():
            text = self._log_path.read_text(encoding="utf-8", errors="replace")
        else:
            text = self._final_log
        return text if max_chars is None else text[-max_chars:]

    # ------------------------------------------------------------ lifecycle

    def __enter__(self) -> RealOpenCodeServer:
        return self.start()

    def start(self) -> RealOpenCodeServer:
        """Spawn the server and wait until it is ready. Returns ``self``.

        Raises:
            RuntimeError: the process exited or did not become ready in time; the
                message includes the tail of its log. Everything is cleaned up.
        """
        if self._process is not None:
            raise RuntimeError("RealOpenCodeServer already started")
        try:
            self._spawn()
            self._wait_ready()
        except BaseException:
            self.close()
            raise
        return self

    def kill(self) -> None:
        """``SIGKILL`` the server's process group at once and wait for it, as a crash
        would; its storage, sandbox and port are kept for :meth:`restart`."""
        process = self._process
        if process is None:
            raise RuntimeError("RealOpenCodeServer is not running")
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(5.0)

    def restart(self) -> RealOpenCodeServer:
        """Start the server again, after :meth:`kill` (or a crash), on the same storage,
        sandbox and port, as a supervisor restarting it would; blocks until it is ready.
        OpenCode keeps its sessions on disk: they are there again, their runs gone."""
        process = self._process
        if process is None or self._root is None:
            raise RuntimeError("RealOpenCodeServer is not started")
        if process.poll() is None:
            self._terminate(process)
        self._process = None
        try:
            self._spawn(self._port)
            self._wait_ready()
        except BaseException:
            self.close()
            raise
        return self

    def _prepare_dirs(self) -> dict[str, str]:
        if self._dirs is not None:  # a restart: the same storage
            return self._dirs
        root = Path(tempfile.mkdtemp(prefix="opencode-real-")).resolve()
        self._root = root
        dirs = {
            "HOME": root / "home",
            "XDG_CONFIG_HOME": root / "xdg" / "config",
            "XDG_DATA_HOME": root / "xdg" / "data",
            "XDG_CACHE_HOME": root / "xdg" / "cache",
            "XDG_STATE_HOME": root / "xdg" / "state",
            "TMPDIR": root / "tmp",
        }
        for path in dirs.values():
            path.mkdir(parents=True, exist_ok=True)
        self._directory = root / "project"
        self._directory.mkdir()
        config_dir = dirs["XDG_CONFIG_HOME"] / "opencode"
        config_dir.mkdir(parents=True)
        (config_dir / "opencode.json").write_text(json.dumps(self.config, indent=2), "utf-8")
        self._log_path = root / "server.log"
        self._dirs = {key: str(path) for key, path in dirs.items()}
        return self._dirs

    def _environment(self, dirs: Mapping[str, str]) -> dict[str, str]:
        env = _offline_environment(dirs)
        if self.password is not None:
            env["OPENCODE_SERVER_PASSWORD"] = self.password
            env["OPENCODE_SERVER_USERNAME"] = self.username
        env.update(self._extra_env)
        return env

    def _spawn(self, port: int | None = None) -> None:
        dirs = self._prepare_dirs()
        self._port = port or self._requested_port or free_port()
        argv = [
            str(self.binary),
            "serve",
            "--hostname",
            "127.0.0.1",
            "--port",
            str(self._port),
            *self._pure_flag(),
            "--print-logs",
            "--log-level",
            self._log_level,
        ]
        assert self._log_path is not None
        with self._log_path.open("ab") as log:  # a restart's log follows the first
            self._spawned_at = time.monotonic()
            self._process = subprocess.Popen(
                argv,
                cwd=self.directory,
                env=self._environment(dirs),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            self._pid = self._process.pid

    def _pure_flag(self) -> list[str]:
        release = parse_version(self.version)
        return [] if release is not None and release < _PURE_FLAG_SINCE else ["--pure"]

    def _wait_ready(self) -> None:
        assert self._process is not None
        deadline = self._spawned_at + self.startup_timeout
        health = f"{self.base_url}/global/health"
        with httpx.Client(timeout=2.0, trust_env=False, headers=self.auth_headers()) as client:
            while True:
                code = self._process.poll()
                if code is not None:
                    raise RuntimeError(
                        f"opencode serve exited with code {code} before it was ready"
                        f" (port {self._port}).\n--- log tail ---\n{self.log_text(4000)}"
                    )
                # The "listening" line on stdout comes first; /global/health is the
                # authoritative check (it also proves the password works).
                with contextlib.suppress(httpx.HTTPError, ValueError):
                    response = client.get(health)
                    if response.status_code == 200 and response.json().get("healthy"):
                        self.ready_at = time.monotonic()
                        self.startup_seconds = self.ready_at - self._spawned_at
                        self.listening_line_seen = _READY_LINE in self.log_text()
                        return
                    if response.status_code == 401:
                        raise RuntimeError(
                            "opencode serve answered 401 to the readiness check: password"
                            " mismatch?\n--- log tail ---\n" + self.log_text(4000)
                        )
                if time.monotonic() >= deadline:
                    raise RuntimeError(
                        f"opencode serve did not become ready within {self.startup_timeout} s"
                        f" (port {self._port}).\n--- log tail ---\n{self.log_text(4000)}"
                    )
                time.sleep(0.05)

    def close(self) -> None:
        """Terminate the process group (SIGTERM, then SIGKILL) and remove temp dirs.

        Idempotent.
        """
        process, self._process = self._process, None
        if process is not None:
            self._terminate(process)
        root, self._root, self._dirs = self._root, None, None
        if root is not None and not self._keep_temp:
            # keep log_text() working after close: read the log before deleting it
            self._final_log = self.log_text()
            self._log_path = None
            shutil.rmtree(root, ignore_errors=True)

    def _terminate(self, process: subprocess.Popen[bytes]) -> None:
        pgid = process.pid  # start_new_session=True: the leader's pid is the group id
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(self.shutdown_grace)
        # Kill whatever is left in the group (the leader, or helpers it spawned).
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(5.0)
