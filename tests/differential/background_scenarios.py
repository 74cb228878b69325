"""The differential scenarios of background subagents.

Why a module of their own: :mod:`.scenarios` is the list of every scenario; these are
spliced into it where they run (``BACKGROUND_SCENARIOS``) so that list stays readable.
"""

from __future__ import annotations

from .language import (
    Call,
    CallBash,
    CallTask,
    Fails,
    Hangs,
    Prompt,
    Say,
    Scenario,
    Settle,
    WaitFor,
    WaitIdle,
    WaitModelCall,
)
from .order import Before, Constraint, Never, Occurs, On
from .vocabulary import idle, text_done, titled, tool, user

BACKGROUND_STARTED = On(
    "message.part.updated",
    "root",
    {"part.tool": "task", "part.state.status": "completed", "part.state.metadata.background": True},
)
"""The root's background ``task`` call, completed at once (``metadata.jobId`` = the child)."""

SYNTHETIC_RESULT = On("message.part.updated", "root", {"part.synthetic": True})
"""The synthetic user message that brings a background child's end to the root."""


def background_child_stopped(name: str, abort: str, constraints: list[Constraint]) -> Scenario:
    """The root launched a background child and went idle; ``abort`` (a path) stops the
    child's hanging model call. The root never hears of the child's end."""
    return Scenario(
        name,
        [
            titled("root"),
            Prompt("root", "main"),
            WaitIdle("root"),
            WaitModelCall("root/0"),
            Call("POST", abort),
            WaitIdle("root/0"),
            Settle(),
        ],
        scripts={
            "main": [CallTask("bg work", "child", background=True), Say("launched")],
            "child": [Hangs()],
        },
        constraints=[*constraints, Never(SYNTHETIC_RESULT)],
        background_subagents=True,
    )


BACKGROUND_SCENARIOS: list[Scenario] = [
    # Measured on 1.18.34 with OPENCODE_EXPERIMENTAL_BACKGROUND_SUBAGENTS=true: the task
    # part completes at once, the root answers and idles while the child works; the
    # child's end writes a synthetic user message into the root and runs it again.
    Scenario(
        "background_task_result_runs_the_parent_again",
        [
            titled("root"),
            Prompt("root", "main"),
            WaitFor(tool("root", "task", "completed")),
            WaitIdle("root/0"),
            WaitFor(text_done("root", "root ran on the result")),
            WaitIdle("root"),
        ],
        scripts={
            "main": [
                CallTask("bg work", "child", background=True),
                Say("root answered at once"),
                Say("root ran on the result"),
            ],
            "child": [CallBash("sleep 1; echo hi", "hi\n", seconds=1.0), Say("child done")],
        },
        constraints=[
            Occurs(BACKGROUND_STARTED),
            Before(text_done("root", "root answered at once"), idle("root/0")),
            Before(idle("root"), idle("root/0")),
            Before(idle("root/0"), SYNTHETIC_RESULT),
            Before(SYNTHETIC_RESULT, text_done("root", "root ran on the result")),
            Occurs(user("root"), 2, 2),
            Occurs(idle("root"), 2, 2),
        ],
        background_subagents=True,
    ),
    Scenario(
        "background_task_failure_runs_the_parent_again",
        [
            titled("root"),
            Prompt("root", "main"),
            WaitIdle("root/0"),
            WaitFor(text_done("root", "root saw the failure")),
            WaitIdle("root"),
        ],
        scripts={
            "main": [
                CallTask("bg work", "child", background=True),
                Say("root answered at once"),
                Say("root saw the failure"),
            ],
            "child": [Fails(400, "invalid_request_error", "the child's request was bad")],
        },
        constraints=[
            Before(idle("root/0"), SYNTHETIC_RESULT),
            Before(SYNTHETIC_RESULT, text_done("root", "root saw the failure")),
        ],
        background_subagents=True,
    ),
    # A background child aborted alone (the root idle): no message, no run of the root;
    # the child says idle three times (once more than a foreground child).
    background_child_stopped(
        "background_task_stopped_alone",
        "/session/{root/0}/abort",
        [
            Before(idle("root"), On("session.error", "root/0")),
            Occurs(On("session.error", "root/0", {"error.name": "MessageAbortedError"}), 1, 1),
            Occurs(idle("root/0"), 3, 3),
            Occurs(idle("root"), 1, 1),
        ],
    ),
    # The idle root's abort stops its background child first; nothing runs again.
    background_child_stopped(
        "background_task_stopped_with_the_idle_parent",
        "/session/{root}/abort",
        [
            Before(On("session.error", "root/0"), idle("root"), then_nth=2),
            Occurs(idle("root/0"), 2, 2),
            Never(On("session.error", "root")),
        ],
    ),
    # Without the flag (the shared server): the call fails and no child is created.
    Scenario(
        "background_task_without_the_flag",
        [titled("root"), Prompt("root", "main"), WaitIdle("root")],
        scripts={
            "main": [CallTask("bg work", "child", background=True), Say("no background")],
            "child": [Say("never")],
        },
        constraints=[
            Occurs(tool("root", "task", "error")),
            Occurs(On("session.created"), 1, 1),
        ],
    ),
]
