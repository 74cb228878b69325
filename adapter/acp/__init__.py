"""An Agent Client Protocol (ACP) agent over :class:`~adapter.OpenCodeAdapter`.

Editors and agent hosts that speak ACP (JSON-RPC over stdio) drive OpenCode through
it, and get what ``opencode acp`` does not give them: Cancel stops the whole session
tree and answers ``cancelled`` every time, subagents' tool calls are visible, and a
subagent's permission request reaches the client. ``opencode-tree acp`` runs it over
stdio (``docs/acp.md``). Needs the ``acp`` extra (``agent-client-protocol``).
"""

from __future__ import annotations

from typing import Any, cast

import acp

from adapter import OpenCodeAdapter

from ._agent import OpenCodeTreeAgent

__all__ = ["OpenCodeTreeAgent", "run_acp"]


async def run_acp(
    adapter: OpenCodeAdapter, input_stream: Any = None, output_stream: Any = None
) -> None:
    """Serve ACP over the given streams (default: this process's stdin/stdout) until the
    client disconnects. ``adapter`` must be entered; the caller closes it afterwards.

    ``input_stream`` is the writer towards the client and ``output_stream`` the reader
    from it, as :func:`acp.run_agent` names them."""
    agent = OpenCodeTreeAgent(adapter)
    try:
        # The methods it leaves out (modes, config options...) answer "method not found"
        # through the SDK's router, which is what the protocol asks of an agent.
        # session/resume is routed by the SDK only with its unstable methods enabled.
        await acp.run_agent(
            cast(acp.Agent, agent), input_stream, output_stream, use_unstable_protocol=True
        )
    finally:
        await agent.aclose()
