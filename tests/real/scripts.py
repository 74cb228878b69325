"""Model scripts that more than one real-server test plays."""

from __future__ import annotations

from adapter.testing import ScriptedModelServer
from adapter.testing.model import Hang, Text, ToolCalls, task_call


def script_two_subagents(model: ScriptedModelServer, name: str, beta_words: int) -> None:
    """Scripts ``name``: a root that calls two subagents at once, ``alpha`` (script
    ``<name>-a``, which hangs) and ``beta`` (``<name>-b``, which streams ``beta_words``
    words in 5-character chunks every 0.1 s: ``beta_words / 10`` seconds), then answers
    "the root's answer"."""
    model.script(f"{name}-a", [Hang()])
    model.script(f"{name}-b", [Text("beta " * beta_words, chunk_size=5, delay=0.1)])
    model.script(
        name,
        [
            ToolCalls([task_call("alpha", f"{name}-a"), task_call("beta", f"{name}-b")]),
            Text("the root's answer"),
        ],
    )
