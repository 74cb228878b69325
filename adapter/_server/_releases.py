"""Which OpenCode releases the adapter was tested against, and how to compare versions.

The adapter talks to whatever ``opencode serve`` a user runs, but its behaviour
is only measured on the releases of the release matrix (``make test-matrix``,
listed in ``tests/real/releases.toml``; ``docs/compatibility.md`` has the
results). :data:`TESTED_OLDEST` and :data:`TESTED_NEWEST` bound that range; a
test keeps them equal to the oldest and newest supported release of the matrix. A server
outside it may still work, so the adapter only warns (see
:func:`untested_version_warning`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final, NamedTuple

from .._exceptions import NotFoundError, OpenCodeError, ProtocolError
from .._logging import get_logger

if TYPE_CHECKING:
    from .._client import OpenCodeClient

__all__ = [
    "TESTED_NEWEST",
    "TESTED_OLDEST",
    "ServerVersionCheck",
    "Version",
    "is_tested_version",
    "parse_version",
    "unreadable_version_warning",
    "untested_version_warning",
]

_log = get_logger("adapter")


class Version(NamedTuple):
    """A release number ``major.minor.patch``; tuples order releases correctly."""

    major: int
    minor: int
    patch: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"


# A leading "v" and a build/pre-release suffix are tolerated (``v1.18.34``,
# ``1.18.34-dev``): the number is what decides the range.
_VERSION: Final = re.compile(r"v?(\d+)\.(\d+)\.(\d+)(?:[-+][0-9A-Za-z.+-]*)?")

#: The oldest release the matrix runs and whose stop contract holds (1.14.48 runs too,
#: but its event stream carries no session events, so it is warned about).
TESTED_OLDEST: Final = Version(1, 15, 13)
#: The newest release the matrix runs; also the release the project is pinned to.
TESTED_NEWEST: Final = Version(1, 18, 34)


def parse_version(text: object) -> Version | None:
    """``Version`` for a string like ``"1.18.34"``; ``None`` for anything else."""
    if not isinstance(text, str):
        return None
    match = _VERSION.fullmatch(text.strip())
    if match is None:
        return None
    major, minor, patch = (int(group) for group in match.groups())
    return Version(major, minor, patch)


def is_tested_version(text: object) -> bool:
    """Whether ``text`` names a release inside the tested range (bounds included)."""
    version = parse_version(text)
    return version is not None and TESTED_OLDEST <= version <= TESTED_NEWEST


def untested_version_warning(text: object) -> str | None:
    """The warning for a server reporting version ``text``, or ``None`` when it is tested.

    A missing or unparsable version is a warning too: the adapter cannot tell
    whether it knows that server.
    """
    tested = f"tested with OpenCode {TESTED_OLDEST} to {TESTED_NEWEST}"
    if text is None:
        return f"the OpenCode server did not report its version; the adapter is {tested}"
    version = parse_version(text)
    if version is None:
        return (
            f"the OpenCode server reports an unparsable version {text!r}; the adapter is {tested}"
        )
    if TESTED_OLDEST <= version <= TESTED_NEWEST:
        return None
    relation = "older" if version < TESTED_OLDEST else "newer"
    return (
        f"OpenCode {version} is {relation} than the tested range; the adapter is {tested}"
        " (see docs/compatibility.md)"
    )


def unreadable_version_warning(error: str) -> str:
    """The warning for a server whose version could not be read (``error`` says why)."""
    return (
        f"could not read the OpenCode server's version ({error}); the adapter is tested with"
        f" OpenCode {TESTED_OLDEST} to {TESTED_NEWEST} (see docs/compatibility.md)"
    )


class ServerVersionCheck:
    """The server's version, read once per adapter, and the warning a host gets about it.

    Read before a start creates anything, so a cancelled start leaves no thread
    behind; the warning goes out with the first thread that starts
    (:meth:`take_warning`). A server that answers without a usable version (no
    field, a malformed body, no health route) is warned about too. A failed request
    (transport error, 5xx, 401) changes nothing about the connect: the next connect
    asks again, and the first such failure is warned about once (OpenCode 1.0.185
    answers its health route with a 500 offline: a host must not be left guessing).
    """

    def __init__(self) -> None:
        #: What the server reported (``None``: not read yet, or no usable version).
        self.version: str | None = None
        self._checked = False
        self._failure_warned = False
        self._warning: str | None = None

    @property
    def needed(self) -> bool:
        """Whether the next connect should ask."""
        return not self._checked

    async def check(self, client: OpenCodeClient) -> None:
        self._checked = True
        try:
            version = (await client.health()).version
        except (ProtocolError, NotFoundError) as exc:
            _log.warning("adapter.version_unreadable", error=str(exc))
            version = None
        except OpenCodeError as exc:
            self._checked = False
            _log.warning("adapter.version_unknown", error=str(exc))
            if not self._failure_warned:
                self._failure_warned = True
                self._warning = unreadable_version_warning(str(exc))
            return
        except BaseException:  # a cancelled start: the next connect asks again
            self._checked = False
            raise
        self.version = version
        self._warning = untested_version_warning(version)
        if self._warning is not None:
            _log.warning("adapter.untested_server", version=version)

    def take_warning(self) -> str | None:
        """The warning for the next thread that starts, once."""
        warning, self._warning = self._warning, None
        return warning
