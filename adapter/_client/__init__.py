"""The client of one OpenCode server: its endpoints, its request machinery, its event stream.

:class:`OpenCodeClient` (:mod:`._endpoints`) is the surface; :mod:`._calls` makes,
bounds and retries each request; :mod:`._event_stream` opens ``GET /event``.
"""

from ._endpoints import DEFAULT_MAX_RESPONSE_BYTES, OpenCodeClient, PermissionReply
from ._event_wire import RawEvent

__all__ = ["DEFAULT_MAX_RESPONSE_BYTES", "OpenCodeClient", "PermissionReply", "RawEvent"]
