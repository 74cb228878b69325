"""What the threads of one directory hear of its event stream.

Why its own module: the pump (:mod:`adapter._stream._pump`) knows no thread; it reports
to the :class:`~adapter._stream._pump.StreamSink` it was given. This is that sink: it
hands each event to the translation, warns the directory's threads of an
outage or of skipped events, ends their running turns when the server is
unreachable (a turn cannot wait for an answer from a server that is gone; the
thread stays, and goes on when the server is back), and brings their requests
and turns up to date when the stream is back. It sits above the concepts it calls (requests, turns),
so no concept module calls back into the facade for it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .._client import OpenCodeClient
from .._client._native import NativeEvent
from .._requests._pending import Requests
from .._threads._registry import ThreadRegistry
from .._turns._lifecycle import SERVER_UNREACHABLE, TurnEnding
from .._turns._running import Turns
from .._types._events import RuntimeWarningEvent

__all__ = ["UNREACHABLE_ERROR", "PumpSink"]

#: The ``error_name`` of a turn ended because its server stopped listening.
UNREACHABLE_ERROR = SERVER_UNREACHABLE


@dataclass(frozen=True, slots=True)
class PumpSink:
    """The :class:`~adapter._stream._pump.StreamSink` of one directory's pump."""

    core: ThreadRegistry
    directory: str | None
    client: OpenCodeClient
    #: The translation (or the native recorder in front of it), called as it is.
    handle: Callable[[NativeEvent], None]
    requests: Requests
    turns: Turns

    def running(self) -> bool:
        return not self.core.closed and not self.core.server_dead

    @property
    def unreachable_after(self) -> float:
        return self.core.timeouts.unreachable

    def lost(self, error: Exception) -> None:
        self._warn(f"event stream lost, reconnecting: {error}")

    def skipped(self, kind: str, count: int, reason: str) -> None:
        """Native events the pump could not read or translate (``docs/reliability.md``)."""
        plural = "event" if count == 1 else "events"
        message = f"skipped {count} native {plural} of type {kind!r}: {reason}"
        self._warn(message, error_name="NativeEventError")

    def unreachable(self, seconds: float) -> None:
        """Every connection was refused for ``seconds``: each running turn of the
        directory ends ``failed`` now, with what it produced (its events stay told).
        Once only per turn (``end_turn`` refuses a second ending), so its own settle
        and watchdog, cancelled with it, cannot end it again."""
        message = (
            f"the OpenCode server is unreachable: it refused every connection for {seconds:.1f} s"
        )
        for thread in self.core.threads_in(self.directory):
            turn = thread.turn
            if turn is None or thread.closing:
                continue
            thread.lifecycle.end_turn(
                turn, TurnEnding("failed", error=message, error_name=UNREACHABLE_ERROR)
            )

    def restored(self) -> None:
        """The stream has no replay: requests and turns are brought up to date."""
        core = self.core
        core.tasks.spawn(self.requests.recover(self.client, after_outage=True), name="recover")
        for thread in core.threads_in(self.directory):
            self.turns.after_outage(thread)

    def _warn(self, message: str, error_name: str | None = None) -> None:
        for thread in self.core.threads_in(self.directory):
            self.core.emit(
                RuntimeWarningEvent(
                    thread_id=thread.thread_id,
                    turn_id=thread.lifecycle.turn_id,
                    message=message,
                    error_name=error_name,
                )
            )
