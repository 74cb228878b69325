"""The context limit of each model a server serves, read once and kept.

Why its own module: a turn's context meter (``TurnUsage.context_limit``) needs the
``limit.context`` of the model each root step used, and the usage is computed for
every finished step, synchronously. Asking ``GET /config/providers`` per step (or
per event) would cost a request each time for an answer that changes only when
the server's configuration does. :class:`ContextLimits` keeps what one read
answered, per client: the list is read before a client's first turn is sent
(again before a later turn when that read failed, or when the turn names a model
the list lacked), and :meth:`ContextLimits.get` answers from what is kept.

A limit is never worth a failed turn: a read that fails or outlives the request
timeout leaves the limits unknown (``None``). A limit of 0 is unknown too: that is
how models.dev marks a model whose limit it does not know, and OpenCode's own UI
then shows no percentage.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from .._exceptions import OpenCodeError
from .._logging import get_logger
from ._inventory import ModelInfo

__all__ = ["ContextLimits"]

_log = get_logger("adapter.client")

#: At most this many models are kept per client (a server listing more is unusual;
#: a hostile answer cannot grow the cache without end).
MAX_MODELS = 1024


class ContextLimits:
    """``(provider id, model id) -> limit.context`` of one server, as last read."""

    def __init__(
        self,
        read: Callable[[], Awaitable[tuple[ModelInfo, ...]]],
        timeout: float,
        *,
        max_models: int = MAX_MODELS,
    ) -> None:
        self._read = read
        self._timeout = timeout
        self._max = max_models
        self._limits: dict[tuple[str, str], int | None] = {}
        self._loaded = False
        #: Models a turn named that the last read did not list: read again once each.
        self._asked: set[tuple[str, str]] = set()
        self._lock = asyncio.Lock()

    def get(self, provider_id: str, model_id: str) -> int | None:
        """The model's context limit as kept; ``None`` when unknown."""
        return self._limits.get((provider_id, model_id))

    async def ensure(self, model: tuple[str, str] | None = None) -> None:
        """Read the list unless it is kept and lists ``model`` (or was read again for it).

        Concurrent callers share one read. Never raises for the server's sake."""
        if self._fresh(model):
            return
        async with self._lock:
            if self._fresh(model):
                return
            if model is not None and len(self._asked) < self._max:
                self._asked.add(model)
            try:
                async with asyncio.timeout(self._timeout):
                    models = await self._read()
            except (OpenCodeError, TimeoutError) as exc:
                _log.warning("adapter.context_limits_unread", error=str(exc)[:200])
                return
            self._keep(models)

    def _fresh(self, model: tuple[str, str] | None) -> bool:
        if not self._loaded:
            return False
        return model is None or model in self._limits or model in self._asked

    def _keep(self, models: tuple[ModelInfo, ...]) -> None:
        limits: dict[tuple[str, str], int | None] = {}
        for info in models[: self._max]:
            provider_id, _, model_id = info.id.partition("/")
            limits[(provider_id, model_id)] = info.context_limit or None
        self._limits = limits
        self._loaded = True
