"""What the model server records of each request it answers.

Why a module: tests read the recording (:class:`ModelRequest`) from another thread
than the server's, so a record is immutable: the server replaces it under its lock
when the response ends, and a reader's list never changes under it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .steps import RequestKind


@dataclass(frozen=True)
class ModelRequest:
    """An immutable snapshot of one recorded request.

    Attributes:
        index: Position of the request in arrival order (0-based).
        path: The HTTP request target.
        session_id: Value of the ``x-opencode-session-id`` header, if any; older
            releases send the session id only as ``x-session-id`` (1.18.3) or
            ``x-session-affinity`` (1.15.13, 1.14.48); 1.3.2 sends none.
        script: Script name from the first user message's marker, if any.
        step: Index of the step selected (the number of assistant messages in the
            request); ``None`` for title and malformed requests.
        is_title: The request had no ``tools`` (OpenCode's title generation).
        kind: How the request was answered.
        tool_names: Names of the tools called in the answer, if any.
        started_at: ``time.monotonic()`` when the request had been read.
        ended_at: ``time.monotonic()`` when the response ended, ``None`` while open.
        disconnected: The client dropped the connection before the response ended.
        body: The parsed JSON request body (shared, do not mutate).
    """

    index: int
    path: str
    session_id: str | None
    script: str | None
    step: int | None
    is_title: bool
    kind: RequestKind
    tool_names: tuple[str, ...]
    started_at: float
    ended_at: float | None
    disconnected: bool
    body: Mapping[str, Any] = field(repr=False)

    @property
    def open(self) -> bool:
        """Whether the response is still in progress."""
        return self.ended_at is None

    def describe(self) -> str:
        """One line for error messages."""
        state = "open" if self.open else ("disconnected" if self.disconnected else "done")
        return (
            f"#{self.index} session={self.session_id} script={self.script} step={self.step}"
            f" kind={self.kind} {state}"
        )
