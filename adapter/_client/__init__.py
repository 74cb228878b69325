"""One OpenCode server over HTTP: ``OpenCodeClient`` and its endpoints (``_endpoints``), one
request described and attempted, its errors mapped (``_calls``), the one backoff policy of
every retry and reconnection (``_retry``: tenacity, jittered), the base URL (``_base_url``),
the typed views of its responses (``_responses``), the ``GET /event`` connection
(``_sse_connection``) and the SSE payloads read off it into raw events (``_sse_payloads``),
those events parsed once into typed native records (``_native``), and what the server offers
a host, its models, agents, commands, skills and MCP servers, read at once (``_inventory``),
each model's context limit, read once per client for the turns' context meter
(``_context_limits``), and an MCP server a host adds, its config checked first (``_mcp``).
None of it is the canonical ``EventStream`` a host subscribes to: that is ``_stream/_hub``.

The same as the package's paragraph in ``docs/architecture.md`` (a test compares them).
"""

from ._endpoints import DEFAULT_MAX_RESPONSE_BYTES, OpenCodeClient, PermissionReply
from ._sse_payloads import RawEvent

__all__ = ["DEFAULT_MAX_RESPONSE_BYTES", "OpenCodeClient", "PermissionReply", "RawEvent"]
