"""The ``with`` and ``async with`` of an object that is closed by its ``close``/``aclose``.

Why its own module: the client, the event stream, the adapter, the recorders and the test
servers all leave their block the same way (close, whatever the exception), and that
protocol deserves to be written once. A class that does more on entry (starts a server)
overrides ``__enter__``/``__aenter__`` only.
"""

from __future__ import annotations

from types import TracebackType
from typing import Self

__all__ = ["AsyncClosing", "Closing"]


class Closing:
    """``with obj:`` gives ``obj`` and calls ``obj.close()`` on the way out."""

    __slots__ = ()

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncClosing:
    """``async with obj:`` gives ``obj`` and awaits ``obj.aclose()`` on the way out."""

    __slots__ = ()

    async def aclose(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
