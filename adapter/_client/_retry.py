"""The one backoff of the adapter, and the retry policy of idempotent requests.

Why its own module: the client retries idempotent requests and the event pump
reconnects its stream, and both wait the same way between tries. The shape of
that wait (:class:`Backoff`, built of tenacity's wait strategies) and its
parameters live here, once: the client's :class:`RetryPolicy` and the pump's
:data:`RECONNECT_BACKOFF` differ only in their numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    stop_never,
    wait_exponential,
    wait_random_exponential,
)
from tenacity.wait import wait_base

from .._exceptions import InvalidInputError

__all__ = ["RECONNECT_BACKOFF", "Backoff", "RetryPolicy", "is_transient_status"]


@dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential backoff with equal jitter.

    The n-th step is ``first_wait * 2 ** (n - 1)``, capped at ``max_wait``; the wait
    after the n-th failed try is drawn uniformly from ``[step / 2, step]``. Jittered
    everywhere, the cap included, so a fleet of clients does not retry (or
    reconnect) in lock-step; never shorter than half its step, so the waits
    always grow while the tries keep failing.
    """

    first_wait: float
    max_wait: float

    def wait(self) -> wait_base:
        """The wait as a tenacity strategy (tenacity's ``attempt_number`` is n)."""
        half_first, half_max = self.first_wait / 2, self.max_wait / 2
        return wait_exponential(multiplier=half_first, max=half_max) + wait_random_exponential(
            multiplier=half_first, max=half_max
        )

    def retrying(
        self,
        retry: Callable[[BaseException], bool],
        *,
        attempts: int | None = None,
        before_sleep: Callable[[RetryCallState], None] | None = None,
    ) -> AsyncRetrying:
        """Tenacity retrying with this backoff: ``retry`` says which exceptions are
        tried again, up to ``attempts`` tries in all (``None``: without end); the
        last exception is re-raised as it is."""
        kwargs: dict[str, Any] = {"before_sleep": before_sleep} if before_sleep else {}
        return AsyncRetrying(
            wait=self.wait(),
            stop=stop_never if attempts is None else stop_after_attempt(attempts),
            retry=retry_if_exception(retry),
            reraise=True,
            **kwargs,
        )


#: The event pump's reconnections (docs/reliability.md, "The event stream").
RECONNECT_BACKOFF = Backoff(first_wait=0.1, max_wait=5.0)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How idempotent requests are retried on transient faults.

    Transient means: the connection could not be made or broke, the read timed
    out, or the server answered 5xx or 429. ``attempts`` counts the first try.
    The waits between tries are the adapter's one :class:`Backoff`: growing
    exponentially from ``initial_wait`` up to ``max_wait``, with jitter, so a
    fleet of clients does not retry in lock-step.
    """

    attempts: int = 4
    initial_wait: float = 0.05
    max_wait: float = 1.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise InvalidInputError("attempts must be at least 1")
        if self.initial_wait < 0 or self.max_wait < 0:
            raise InvalidInputError("waits must not be negative")

    @property
    def backoff(self) -> Backoff:
        return Backoff(self.initial_wait, self.max_wait)


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
