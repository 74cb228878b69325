"""Retry policy for idempotent requests (tenacity)."""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from ._exceptions import InvalidInputError

__all__ = ["RetryPolicy", "is_transient_status"]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How idempotent requests are retried on transient faults.

    Transient means: the connection could not be made or broke, the read timed
    out, or the server answered 5xx or 429. ``attempts`` counts the first try.
    Waits grow exponentially from ``initial_wait`` up to ``max_wait`` with full
    jitter, so a fleet of clients does not retry in lock-step.
    """

    attempts: int = 4
    initial_wait: float = 0.05
    max_wait: float = 1.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise InvalidInputError("attempts must be at least 1")
        if self.initial_wait < 0 or self.max_wait < 0:
            raise InvalidInputError("waits must not be negative")


NO_RETRY = RetryPolicy(attempts=1)

TRANSIENT_TRANSPORT_ERRORS: tuple[type[Exception], ...] = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.ReadTimeout,
    httpx.ReadError,
    httpx.RemoteProtocolError,
    httpx.WriteError,
)


def is_transient_status(status: int) -> bool:
    return status == 429 or 500 <= status <= 599
