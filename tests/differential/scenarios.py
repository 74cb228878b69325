"""The differential scenarios: each written once, run on the fake and on a real server.

A scenario's constraints are orders of events the adapter relies on; each must hold
on both targets (see :mod:`.order`). Sessions are titled so no title request runs
alongside a turn on the real server.
"""

from __future__ import annotations

from .adoption_scenarios import ADOPTION_SCENARIOS
from .background_scenarios import BACKGROUND_SCENARIOS
from .host_scenarios import HOST_SCENARIOS
from .language import (
    CONTINUATION_TEXT,
    Call,
    CallBash,
    CallQuestion,
    CallTask,
    CallTasks,
    CallTodo,
    Command,
    Create,
    Fails,
    Hangs,
    Overflows,
    Prompt,
    Say,
    Scenario,
    Settle,
    WaitFor,
    WaitIdle,
    WaitModelCall,
)
from .order import ANY, Before, Constraint, Never, Occurs, On
from .vocabulary import busy, finished, idle, text_done, titled, tool, turn_order, user

UNKNOWN_SESSION = "ses_0000000000000000000000unknown"
"""A well-formed id no server knows."""

QUESTIONS = (
    {
        "question": "Which one?",
        "header": "Pick",
        "options": [
            {"label": "A", "description": "the first"},
            {"label": "B", "description": "the second"},
        ],
    },
)


def permission_scenario(
    name: str, word: str, answer: Call, constraints: list[Constraint]
) -> Scenario:
    """The root's bash call ``echo <word>`` asks permission; ``answer`` is sent once it is
    asked, then the root goes idle."""
    return Scenario(
        name,
        [
            titled("root", ask_bash=True),
            Prompt("root", "main"),
            WaitFor(On("permission.asked", "root")),
            answer,
            WaitIdle("root"),
        ],
        scripts={"main": [CallBash(f"echo {word}", f"{word}\n", needs_permission=True), Say("ok")]},
        constraints=constraints,
    )


def question_scenario(name: str, answer: Call, constraints: list[Constraint]) -> Scenario:
    """The root asks :data:`QUESTIONS`; ``answer`` is sent once it is asked, then the root
    goes idle."""
    return Scenario(
        name,
        [
            titled("root"),
            Prompt("root", "main"),
            WaitFor(On("question.asked", "root")),
            answer,
            WaitIdle("root"),
        ],
        scripts={"main": [CallQuestion(QUESTIONS), Say("thanks")]},
        constraints=constraints,
    )


SCENARIOS: list[Scenario] = [
    # ------------------------------------------------------------------ sessions
    Scenario(
        "create_titled_session",
        [titled("root", "A titled session"), Call("GET", "/session/{root}")],
        constraints=[Occurs(On("session.created", "root"), 1, 1)],
    ),
    Scenario(
        "create_child_via_parent_id",
        [
            titled("root"),
            titled("child", parent="root"),
            Call("GET", "/session/{child}"),
            Call("GET", "/session/{root}/children"),
        ],
        constraints=[Occurs(On("session.created", "child", {"info.parentID": ANY}))],
    ),
    Scenario(
        "children_order_three",
        [
            titled("root"),
            titled("c1", parent="root"),
            titled("c2", parent="root"),
            titled("c3", parent="root"),
            Call("GET", "/session/{root}/children"),
        ],
    ),
    Scenario(
        "get_unknown_session",
        [
            Call("GET", f"/session/{UNKNOWN_SESSION}"),
            Call("GET", f"/session/{UNKNOWN_SESSION}/children"),
            Call("GET", f"/session/{UNKNOWN_SESSION}/message"),
        ],
    ),
    Scenario(
        "non_ses_id",
        [
            Call("GET", "/session/not-a-session"),
            Call("GET", "/session/not-a-session/children"),
            Call("POST", "/session/not-a-session/abort"),
        ],
    ),
    Scenario(
        "list_sessions",
        [
            titled("a"),
            titled("b"),
            titled("b_child", parent="b"),
            Call("GET", "/session?roots=true"),
        ],
    ),
    Scenario(
        "patch_title",
        [
            titled("root", "before"),
            Call("PATCH", "/session/{root}", {"title": "after"}),
            Call("GET", "/session/{root}"),
        ],
        constraints=[Occurs(On("session.updated", "root", {"info.title": "after"}))],
    ),
    Scenario(
        "delete_parent_cascades",
        [
            titled("root"),
            titled("c1", parent="root"),
            titled("c2", parent="root"),
            titled("gc", parent="c1"),
            Call("DELETE", "/session/{root}"),
            Settle(),
            Call("GET", "/session/{c1}"),
        ],
        constraints=[
            Before(On("session.deleted", "gc"), On("session.deleted", "root")),
            Before(On("session.deleted", "c1"), On("session.deleted", "root")),
            Occurs(On("session.deleted", "c2")),
        ],
    ),
    # ------------------------------------------------------------------ turns
    Scenario(
        "text_turn",
        [titled("root"), Prompt("root", "main"), WaitIdle("root")],
        scripts={"main": [Say("hello from the model")]},
        constraints=[
            *turn_order("root"),
            Occurs(On("message.part.delta", "root", {"field": "text"})),
            Before(text_done("root", "hello from the model"), idle("root")),
            Before(finished("root"), idle("root")),
        ],
    ),
    Scenario(
        "text_turn_blocking",
        [titled("root"), Prompt("root", "main", blocking=True), WaitIdle("root")],
        scripts={"main": [Say("a blocking answer")]},
        constraints=[*turn_order("root"), Before(finished("root"), idle("root"))],
    ),
    Scenario(
        "messages_with_limit",
        [
            titled("root"),
            Prompt("root", "one"),
            WaitIdle("root"),
            Prompt("root", "two"),
            WaitIdle("root"),
            Call("GET", "/session/{root}/message?limit=2"),
            Call("GET", "/session/{root}/message?limit=1"),
        ],
        scripts={"one": [Say("first answer")], "two": [Say("second answer")]},
    ),
    Scenario(
        "bash_tool_turn",
        [titled("root"), Prompt("root", "main"), WaitIdle("root")],
        scripts={"main": [CallBash("echo hi", "hi\n"), Say("ran it")]},
        constraints=[
            *turn_order("root"),
            Before(tool("root", "bash", "pending"), tool("root", "bash", "running")),
            Before(tool("root", "bash", "running"), tool("root", "bash", "completed")),
            Before(tool("root", "bash", "completed"), finished("root", "tool-calls")),
            Before(finished("root", "tool-calls"), idle("root")),
        ],
    ),
    Scenario(
        "bash_empty_stdout",
        [titled("root"), Prompt("root", "main"), WaitIdle("root")],
        scripts={"main": [CallBash("true", ""), Say("nothing printed")]},
        constraints=[Before(tool("root", "bash", "completed"), idle("root"))],
    ),
    Scenario(
        "task_child",
        [titled("root"), Prompt("root", "main"), WaitIdle("root")],
        scripts={
            "main": [CallTask("explore", "child"), Say("root done")],
            "child": [Say("child result")],
        },
        constraints=[
            *turn_order("root"),
            # The adapter adopts a child by the parentID of its session.created.
            Occurs(On("session.created", "root/0", {"info.parentID": ANY})),
            Before(On("session.created", "root/0"), tool("root", "task", "completed")),
            Before(idle("root/0"), tool("root", "task", "completed")),
            Occurs(
                On(
                    "message.part.updated",
                    "root",
                    {"part.tool": "task", "part.state.metadata.sessionId": ANY},
                )
            ),
        ],
    ),
    Scenario(
        "nested_task",
        [titled("root"), Prompt("root", "main"), WaitIdle("root")],
        scripts={
            "main": [CallTask("level one", "child"), Say("root done")],
            "child": [CallTask("level two", "grandchild"), Say("child done")],
            "grandchild": [Say("grandchild result")],
        },
        constraints=[
            Before(On("session.created", "root/0"), On("session.created", "root/0/0")),
            Occurs(On("session.created", "root/0/0", {"info.parentID": ANY})),
            Before(idle("root/0/0"), tool("root/0", "task", "completed")),
            Before(idle("root/0"), tool("root", "task", "completed")),
        ],
    ),
    Scenario(
        # Measured on 1.18.34: todowrite sends todo.updated (the whole list) between
        # its call's pending and running parts, for a subagent with the child's id.
        "todo_lists",
        [
            titled("root"),
            Prompt("root", "plan"),
            WaitIdle("root"),
            Prompt("root", "delegate"),
            WaitIdle("root"),
        ],
        scripts={
            "plan": [
                CallTodo(({"content": "look", "status": "in_progress", "priority": "high"},)),
                Say("planned"),
            ],
            "delegate": [CallTask("planner", "child"), Say("root done")],
            "child": [
                CallTodo(({"content": "step", "status": "pending", "priority": "low"},)),
                Say("child done"),
            ],
        },
        constraints=[
            Occurs(On("todo.updated", "root"), 1, 1),
            Occurs(On("todo.updated", "root/0"), 1, 1),
            Before(tool("root", "todowrite", "pending"), On("todo.updated", "root")),
            Before(On("todo.updated", "root"), tool("root", "todowrite", "running")),
        ],
    ),
    Scenario(
        "prompt_while_busy",
        [
            titled("root"),
            Prompt("root", "first"),
            WaitFor(tool("root", "bash", "running")),
            Prompt("root", "second"),
            WaitIdle("root"),
        ],
        scripts={
            "first": [CallBash("sleep 1", "", seconds=1.0), Say("first done")],
            "second": [Say("second done")],
        },
        # Measured: a prompt sent while a tool runs is merged into the running loop (the
        # model's next request sees it), not run as a second turn.
        constraints=[Occurs(user("root"), 2), Before(user("root"), busy("root"))],
    ),
    Scenario(
        "failed_model_call",
        [titled("root"), Prompt("root", "main"), WaitIdle("root")],
        scripts={"main": [Fails(400, "invalid_request_error", "the request was bad")]},
        constraints=[
            Before(user("root"), busy("root")),
            Before(On("session.error", "root", {"error.name": "APIError"}), idle("root")),
            Before(
                On("message.updated", "root", {"info.error.name": "APIError"}),
                idle("root"),
                then_nth=2,
            ),
        ],
    ),
    Scenario(
        "abort_during_retries",
        [
            titled("root"),
            Prompt("root", "main"),
            WaitFor(On("session.status", "root", {"status.type": "retry"})),
            Call("GET", "/session/status"),
            Call("POST", "/session/{root}/abort"),
            WaitIdle("root"),
        ],
        scripts={"main": [Fails(500, "server_error", "the provider is down")]},
        # Measured: the retry status is announced (and listed) while OpenCode waits; an
        # abort then ends the run with one idle pair and no session.error.
        constraints=[
            Before(On("session.status", "root", {"status.type": "retry"}), idle("root")),
            Never(On("session.error", "root")),
            Occurs(idle("root"), 1, 1),
        ],
    ),
    # ------------------------------------------------------------------ abort
    Scenario(
        "abort_idle_session",
        [titled("root"), Call("POST", "/session/{root}/abort"), Settle()],
    ),
    Scenario(
        "abort_unknown_id",
        [Call("POST", f"/session/{UNKNOWN_SESSION}/abort")],
    ),
    Scenario(
        "abort_hanging_model_call",
        [
            titled("root"),
            Prompt("root", "main"),
            WaitModelCall("root"),
            Call("POST", "/session/{root}/abort"),
            WaitIdle("root"),
        ],
        scripts={"main": [Hangs()]},
        constraints=[
            Before(
                On("session.error", "root", {"error.name": "MessageAbortedError"}), idle("root")
            ),
            Occurs(On("message.updated", "root", {"info.error.name": "MessageAbortedError"})),
        ],
    ),
    Scenario(
        "abort_running_bash",
        [
            titled("root"),
            Prompt("root", "main"),
            WaitFor(tool("root", "bash", "running")),
            Call("POST", "/session/{root}/abort"),
            WaitIdle("root"),
        ],
        scripts={"main": [CallBash("sleep 30", "", seconds=float("inf")), Say("never")]},
        constraints=[
            Before(tool("root", "bash", "running"), tool("root", "bash", "completed")),
            Occurs(On("message.updated", "root", {"info.error.name": "MessageAbortedError"})),
        ],
    ),
    Scenario(
        "abort_root_with_hanging_task_child",
        [
            titled("root"),
            Prompt("root", "main"),
            WaitModelCall("root/0"),
            Call("POST", "/session/{root}/abort"),
            WaitIdle("root"),
            WaitIdle("root/0"),
        ],
        scripts={"main": [CallTask("explore", "child"), Say("never")], "child": [Hangs()]},
        constraints=[
            Occurs(On("session.error", "root/0", {"error.name": "MessageAbortedError"})),
            Before(tool("root", "task", "running"), tool("root", "task", "error")),
        ],
    ),
    Scenario(
        "abort_task_child_only",
        [
            titled("root"),
            Prompt("root", "main"),
            WaitModelCall("root/0"),
            Call("POST", "/session/{root/0}/abort"),
            WaitIdle("root"),
        ],
        scripts={
            "main": [CallTask("explore", "child"), Say("parent goes on")],
            "child": [Hangs()],
        },
        constraints=[
            Before(idle("root/0"), tool("root", "task", "error")),
            Before(tool("root", "task", "error"), text_done("root", "parent goes on")),
        ],
    ),
    Scenario(
        # Measured on 1.18.34 (stop_subagent's case): one of two parallel task children aborted
        # alone; its call ends "Task cancelled", the sibling finishes, the root answers.
        "parallel_tasks_one_aborted",
        [
            titled("root"),
            Prompt("root", "main"),
            WaitModelCall("root/0"),
            Call("POST", "/session/{root/0}/abort"),
            WaitIdle("root"),
        ],
        scripts={
            "main": [
                CallTasks((CallTask("alpha", "stopped"), CallTask("beta", "sibling"))),
                Say("root goes on"),
            ],
            "stopped": [Hangs()],
            "sibling": [CallBash("sleep 2 && echo beta", "beta\n", seconds=2.0), Say("beta done")],
        },
        constraints=[
            Occurs(tool("root", "task", "error"), 1, 1),
            Occurs(tool("root", "task", "completed"), 1, 1),
            Before(idle("root/0"), tool("root", "task", "error")),
            Before(tool("root", "task", "error"), text_done("root/1", "beta done")),
            Before(tool("root", "task", "completed"), text_done("root", "root goes on")),
            Never(On("session.error", "root")),
        ],
    ),
    # ------------------------------------------------------------------ permission & question
    permission_scenario(
        "permission_replied_once",
        "allowed",
        Call("POST", "/permission/{permission:root}/reply", {"reply": "once"}),
        [
            Before(On("permission.asked", "root"), tool("root", "bash", "running")),
            Before(
                On("permission.replied", "root", {"reply": "once"}),
                tool("root", "bash", "completed"),
            ),
        ],
    ),
    permission_scenario(
        "permission_rejected",
        "denied",
        Call("POST", "/permission/{permission:root}/reply", {"reply": "reject"}),
        [
            Occurs(On("permission.replied", "root", {"reply": "reject"})),
            Before(On("permission.replied", "root"), tool("root", "bash", "error")),
        ],
    ),
    permission_scenario(
        "permission_pending_then_abort",
        "pending",
        Call("POST", "/session/{root}/abort"),
        [Never(On("permission.replied", "root"))],
    ),
    question_scenario(
        "question_replied",
        Call("POST", "/question/{question:root}/reply", {"answers": [["A"]]}),
        [
            Before(On("question.asked", "root"), tool("root", "question", "running")),
            Before(On("question.replied", "root"), tool("root", "question", "completed")),
        ],
    ),
    question_scenario(
        "question_rejected",
        Call("POST", "/question/{question:root}/reject"),
        [
            Occurs(On("question.rejected", "root")),
            Before(On("question.rejected", "root"), tool("root", "question", "error")),
        ],
    ),
    # ------------------------------------------------------------------ history
    Scenario(
        "revert_then_prompt",
        [
            titled("root"),
            Prompt("root", "one"),
            WaitIdle("root"),
            Call("POST", "/session/{root}/revert", {"messageID": "{msg:root:0}"}),
            Call("GET", "/session/{root}"),
            Prompt("root", "two", fresh_history=True),
            WaitIdle("root"),
        ],
        scripts={"one": [Say("first answer")], "two": [Say("after revert")]},
        constraints=[Occurs(On("session.updated", "root", {"info.revert": ANY}))],
    ),
    Scenario(
        "unrevert",
        [
            titled("root"),
            Prompt("root", "one"),
            WaitIdle("root"),
            Prompt("root", "two"),
            WaitIdle("root"),
            Call("POST", "/session/{root}/revert", {"messageID": "{msg:root:2}"}),
            Call("POST", "/session/{root}/unrevert"),
            Call("GET", "/session/{root}"),
        ],
        scripts={"one": [Say("first answer")], "two": [Say("second answer")]},
    ),
    Scenario(
        "summarize",
        [
            titled("root"),
            Prompt("root", "main"),
            WaitIdle("root"),
            Call(
                "POST",
                "/session/{root}/summarize",
                {"providerID": "fake", "modelID": "fake-model"},
            ),
            WaitIdle("root"),
        ],
        scripts={"main": [Say("something worth summarising")]},
        # The compaction request carries no tools: the scripted model answers it like a
        # title request (see the "summary text" rule in divergences.py).
        constraints=[Occurs(On("session.compacted", "root"))],
    ),
    # A summarize sent while a tool runs: the compaction message is stored at once, the
    # run ends when that tool step finishes (no further step of the agent), the summary
    # runs, then the idle. The agent's "after the tool" answer is never produced.
    Scenario(
        "summarize_during_a_tool_step",
        [
            titled("root"),
            Prompt("root", "main"),
            WaitFor(tool("root", "bash", "running")),
            Call(
                "POST",
                "/session/{root}/summarize",
                {"providerID": "fake", "modelID": "fake-model"},
            ),
            WaitIdle("root"),
        ],
        scripts={
            "main": [CallBash("sleep 1; echo slow", "slow\n", seconds=1.0), Say("after the tool")]
        },
        constraints=[
            Before(finished("root", "tool-calls"), On("session.compacted", "root")),
            Before(On("session.compacted", "root"), idle("root")),
            Never(text_done("root", "after the tool")),
        ],
    ),
    # ------------------------------------------------------------------ directories
    # A session lives in the directory of the request that created it ("second/" is
    # "second"); its events go to that directory's stream only, whichever directory a
    # later request about it names; a task child runs in its parent's directory, a child
    # created through the API in its request's. Listings span directories unless
    # ``?directory=`` names one.
    Scenario(
        "directories_sessions_and_streams",
        [
            titled("home"),
            Create("other", "diff other", directory="second"),
            Create("other_slash", "diff other slash", directory="second/"),
            Create("api_child", "diff api child", parent="home", directory="second"),
            Call("GET", "/session/{other}"),
            Prompt("other", "main"),
            WaitIdle("other"),
            Call("GET", "/session?directory={dir:second}"),
            Call("GET", "/session", directory="second"),
        ],
        scripts={"main": [CallTask("explore", "child"), Say("parent done")], "child": [Say("ok")]},
        constraints=[*turn_order("other"), *turn_order("other/0")],
    ),
    # Statuses and pending requests are those of the request's directory: a reply sent
    # in another directory does not find the request (404).
    Scenario(
        "directories_status_and_pending_requests",
        [
            titled("home"),
            Create("asker", "diff asker", ask_bash=True, directory="second"),
            Prompt("home", "hang"),
            WaitModelCall("home"),
            Prompt("asker", "ask", directory="second"),
            WaitFor(On("permission.asked", "asker")),
            Call("GET", "/session/status"),
            Call("GET", "/session/status", directory="second"),
            Call("GET", "/permission", directory="second"),
            Call("POST", "/permission/{permission:asker}/reply", {"reply": "once"}),
            Call(
                "POST",
                "/permission/{permission:asker}/reply",
                {"reply": "once"},
                directory="second",
            ),
            WaitIdle("asker"),
            Call("POST", "/session/{home}/abort", directory="second"),
            WaitIdle("home"),
        ],
        scripts={
            "hang": [Hangs()],
            "ask": [CallBash("echo asked", "asked\n", needs_permission=True), Say("ok")],
        },
        constraints=[
            Before(On("permission.replied", "asker"), tool("asker", "bash", "completed")),
            Occurs(On("session.error", "home", {"error.name": "MessageAbortedError"})),
        ],
    ),
    # A fork is a new root session in the original's directory, whichever directory the
    # request names (its events reach the original directory's stream only), holding a
    # copy of every message: session.created, then each copy's message and parts.
    Scenario(
        "fork_stays_in_the_originals_directory",
        [
            titled("orig"),
            Prompt("orig", "main", blocking=True),
            Call("POST", "/session/{orig}/fork", {}, directory="second"),
            Settle(),
        ],
        scripts={"main": [Say("remember this")]},
    ),
    # A slash command (a server configured with one): the template with its arguments is
    # the user message, run like a prompt; the request answers at the run's end, then
    # command.executed. An unknown command is a bare 500, its reason in session.error.
    Scenario(
        "command_turn",
        [
            titled("root"),
            Command("root", "main"),
            WaitIdle("root"),
            Call("POST", "/session/{root}/command", {"command": "nope", "arguments": ""}),
            Settle(),
        ],
        scripts={"main": [CallBash("echo hi", "hi\n"), Say("said hello")]},
        constraints=[
            *turn_order("root"),
            Before(finished("root"), idle("root")),
            Occurs(On("command.executed", "root"), 1, 1),
            Occurs(On("session.error", "root", {"error.name": "UnknownError"}), 1, 1),
        ],
        commands=True,
    ),
    *HOST_SCENARIOS,
    *ADOPTION_SCENARIOS,
    # Automatic compaction inside a run (a server with auto-compaction on): the summary
    # and the synthetic "continue" message, then the agent goes on in the same run.
    Scenario(
        "auto_compaction_mid_run",
        [titled("root"), Prompt("root", "main"), WaitIdle("root")],
        scripts={
            "main": [
                CallBash("echo before", "before\n"),
                Overflows("a long answer"),
                Say(CONTINUATION_TEXT),
            ]
        },
        constraints=[
            Before(On("message.part.updated", "root", {"part.type": "compaction"}), idle("root")),
            Before(
                On("message.updated", "root", {"info.summary": True}),
                On("session.compacted", "root"),
            ),
            Before(
                On("message.part.updated", "root", {"part.synthetic": True}),
                On("session.compacted", "root"),
            ),
            Before(On("session.compacted", "root"), text_done("root", CONTINUATION_TEXT)),
            Occurs(idle("root"), 1, 1),
        ],
        auto_compaction=True,
    ),
    *BACKGROUND_SCENARIOS,
]
"""Every scenario, in the order they run."""

BY_NAME = {scenario.name: scenario for scenario in SCENARIOS}
