"""An Agent Client Protocol (ACP) agent over :class:`~adapter.OpenCodeAdapter`.

Editors and agent hosts that speak ACP (JSON-RPC over stdio) drive OpenCode through
it, and get what ``opencode acp`` does not give them: Cancel stops the whole session
tree and answers ``cancelled`` every time, subagents' tool calls are visible, and a
subagent's permission request reaches the client. ``opencode-tree acp`` runs it over
stdio (``docs/acp.md``). Needs the ``acp`` extra (``agent-client-protocol``).

Every line the client sends is checked before the SDK routes it
(:mod:`adapter.acp._transport`): a bad line is answered with a JSON-RPC error or
dropped, and the agent ends only when its input does.

The modules: the agent, whose ACP sessions are adapter threads (``_agent``); the line
check before the SDK sees a line (``_inbound``) and the transport that applies it
(``_transport``); what the agent sends kept well-formed (``_outbound``); a prompt's content
blocks as prompt parts, and the ``cwd`` checks (``_content_blocks``); the models, agents and
modes a session offers (``_choices``); the MCP servers a client gives (``_mcp_servers``);
canonical events as ``session/update`` payloads (``_updates``); this process's stdin and
stdout as the transport's streams, whatever they are (``_stdio``); permission and question
requests (``_requests``); ``session/list``'s pages (``_sessions``); and the
``_opencode/stop_subagent`` extension (``_extensions``).
"""

from __future__ import annotations

from typing import Any, cast

import acp

from adapter import OpenCodeAdapter

from ._agent import OpenCodeTreeAgent
from ._extensions import STOP_SUBAGENT
from ._inbound import MAX_DEPTH, MAX_LINE_BYTES, MAX_VALUES
from ._stdio import stdio_streams
from ._transport import CHUNK_BYTES, CheckedTransport

__all__ = [
    "MAX_DEPTH",
    "MAX_LINE_BYTES",
    "MAX_VALUES",
    "STOP_SUBAGENT",
    "OpenCodeTreeAgent",
    "run_acp",
]


async def run_acp(
    adapter: OpenCodeAdapter,
    input_stream: Any = None,
    output_stream: Any = None,
    *,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> None:
    """Serve ACP over the given streams (default: this process's stdin/stdout) until the
    client disconnects. ``adapter`` must be entered; the caller closes it afterwards.

    ``input_stream`` is the writer towards the client and ``output_stream`` the reader
    from it, as :func:`acp.run_agent` names them. A line longer than ``max_line_bytes``
    is answered ``-32600`` and discarded without being held."""
    if input_stream is None and output_stream is None:
        # The reader's limit only paces the pipe: lines are framed by the transport.
        output_stream, input_stream = await stdio_streams(limit=4 * CHUNK_BYTES)
    transport = CheckedTransport(output_stream, input_stream, max_line_bytes=max_line_bytes)
    agent = OpenCodeTreeAgent(adapter)
    try:
        # The methods it leaves out (modes, config options...) answer "method not found"
        # through the SDK's router, which is what the protocol asks of an agent.
        # session/resume is routed by the SDK only with its unstable methods enabled.
        await acp.run_agent(cast(acp.Agent, agent), transport, use_unstable_protocol=True)
    finally:
        await agent.aclose()
