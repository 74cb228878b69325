"""The differential scenarios of runs this client did not start.

An adapter adopts a run it did not send: one another client prompts on a session it
watches, and a busy tree it finds when it attaches (a restart, another worker). What it
relies on, measured on 1.18.34 and pinned here on both targets:

* a run prompted by another client (``prompt_async`` without ``messageID``) streams as any
  run: the user message's ``message.updated`` before the first ``busy``, then the assistant
  message, its parts, the idle; the whole stream is compared (``compared_runs``), not only
  these orders;
* a busy tree read at attach time: ``GET /session/status`` lists all three sessions busy,
  ``/children`` names each level's subagent, and ``/message`` holds the unfinished assistant
  message with its running ``task`` part whose ``metadata.sessionId`` is the child.

Why a module of their own: :mod:`.scenarios` is the list of every scenario; these are
spliced into it where they run (``ADOPTION_SCENARIOS``) so that list stays readable.
"""

from __future__ import annotations

from .language import (
    Attach,
    Call,
    CallBash,
    CallTask,
    Hangs,
    Prompt,
    Say,
    Scenario,
    WaitIdle,
    WaitModelCall,
)
from .order import Before, InOrder, Occurs, On
from .vocabulary import busy, finished, idle, text_done, titled, tool, user


def assistant(alias: str) -> On:
    return On("message.updated", alias, {"info.role": "assistant"})


def step_start(alias: str) -> On:
    return On("message.part.updated", alias, {"part.type": "step-start"})


def run_order(alias: str, answer: str, nth: int = 1) -> InOrder:
    """The ``nth`` run of ``alias``, as measured for a run another client started: the
    prompt's echo, busy, the assistant message, its step, the answer, finished, idle."""
    return InOrder(
        (
            user(alias),
            busy(alias),
            assistant(alias),
            step_start(alias),
            text_done(alias, answer),
            finished(alias),
            On("session.status", alias, {"status.type": "idle"}),
            idle(alias),
        ),
        nth,
    )


ADOPTION_SCENARIOS: list[Scenario] = [
    # The watcher's own run, then another client's (a tool, then the answer) on the same
    # session: the second run streams as the first.
    Scenario(
        "another_client_prompts_a_watched_session",
        [
            titled("root"),
            Prompt("root", "mine"),
            WaitIdle("root"),
            Prompt("root", "theirs", by_another_client=True),
            WaitIdle("root"),
        ],
        scripts={
            "mine": [Say("my answer")],
            "theirs": [CallBash("echo theirs", "theirs\n"), Say("their answer")],
        },
        constraints=[
            run_order("root", "my answer"),
            run_order("root", "their answer", nth=2),
            Before(user("root"), tool("root", "bash", "pending"), nth=2),
            Occurs(user("root"), 2, 2),
            Occurs(idle("root"), 2, 2),
        ],
        compared_runs=("root",),
    ),
    # Another client's first prompt on a session, whose run spawns a subagent: the
    # child's run streams as the root's.
    Scenario(
        "another_client_prompts_a_fresh_session",
        [
            titled("root"),
            Prompt("root", "main", by_another_client=True),
            WaitIdle("root"),
        ],
        scripts={
            "main": [CallTask("explore", "child"), Say("root done")],
            "child": [Say("child result")],
        },
        constraints=[
            run_order("root", "root done"),
            run_order("root/0", "child result"),
            Before(idle("root/0"), tool("root", "task", "completed")),
        ],
        compared_runs=("root", "root/0"),
    ),
    # A tree another client started (root -> task child -> task grandchild whose model
    # call hangs), read as an attaching client reads it; then the grandchild is stopped
    # alone, so the child and the root finish. (A root-only abort of this tree is not
    # pinned: the real server winds the subagents down first, up to 250 ms, while the
    # root's cancelled task call lets it start one more model step; the fake interrupts
    # the root at once. See docs/interrupt.md, "A Stop that starts no extra model call".)
    Scenario(
        "busy_tree_found_at_attach",
        [
            titled("root"),
            Prompt("root", "main", by_another_client=True),
            WaitModelCall("root/0/0"),
            Attach("root"),
            Call("POST", "/session/{root/0/0}/abort"),
            WaitIdle("root"),
        ],
        scripts={
            "main": [CallTask("level one", "child"), Say("root done")],
            "child": [CallTask("level two", "grandchild"), Say("child done")],
            "grandchild": [Hangs()],
        },
        constraints=[
            Occurs(On("session.error", "root/0/0", {"error.name": "MessageAbortedError"})),
            # Measured: a task child aborted alone says idle three times (the fake said two).
            Occurs(idle("root/0/0"), 3, 3),
            Before(idle("root/0/0"), tool("root/0", "task", "error")),
            Before(tool("root/0", "task", "error"), text_done("root/0", "child done")),
            Before(idle("root/0"), tool("root", "task", "completed")),
            Before(tool("root", "task", "completed"), text_done("root", "root done")),
        ],
        compared_runs=("root", "root/0", "root/0/0"),
    ),
]
"""Spliced into :data:`.scenarios.SCENARIOS`, in this order."""
