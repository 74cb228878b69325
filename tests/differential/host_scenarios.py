"""The differential scenarios of what a host does beside turns: fork a thread, add an MCP
server (``fork_thread`` and ``add_mcp_server``).

Why a module of their own: :mod:`.scenarios` is the list of every scenario, and these
are spliced into it where they run (``HOST_SCENARIOS``) so that list stays readable.
"""

from __future__ import annotations

from .language import (
    Call,
    Create,
    Fork,
    Hangs,
    Prompt,
    Say,
    Scenario,
    Settle,
    WaitIdle,
    WaitModelCall,
)

_MCP_OFF = {"name": "off", "config": {"type": "local", "command": ["true"], "enabled": False}}

HOST_SCENARIOS: list[Scenario] = [
    # What fork_thread rests on: a fork before a message copies the messages stored
    # before it (a fork of that fork is titled "(fork #2)"); a fork while the source runs
    # copies its unfinished step as stored, and the source runs on until aborted.
    Scenario(
        "fork_before_a_message_and_while_running",
        [
            Create("orig", "diff orig"),
            Prompt("orig", "one", blocking=True),
            Prompt("orig", "two", blocking=True),
            Fork("cut", "orig", before=2),
            Fork("cut_again", "cut"),
            Prompt("orig", "hang"),
            WaitModelCall("orig"),
            Settle(),  # measured: a fork at once after it once lacked the step-start part
            Fork("running", "orig"),
            Call("GET", "/session/status"),
            Call("POST", "/session/{orig}/abort"),
            WaitIdle("orig"),
        ],
        scripts={"one": [Say("one")], "two": [Say("two")], "hang": [Hangs()]},
    ),
    # An MCP server added over POST /mcp lives in its directory's instance: listed there,
    # not in another directory. (A config without command is a 400 the spec does not
    # describe: tests/test_mcp.py pins the fake's against the measured body.)
    Scenario(
        "mcp_added_in_one_directory",
        [
            Call("POST", "/mcp", _MCP_OFF, directory="second"),
            Call("GET", "/mcp", directory="second"),
            Call("GET", "/mcp"),
        ],
    ),
]
"""Spliced into :data:`.scenarios.SCENARIOS`, in this order."""
