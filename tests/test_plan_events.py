"""``turn.plan.updated``: the root's todo list (OpenCode's ``todo.updated``) reaches the host.

Measured on ``opencode serve`` 1.18.34 (``tests/fixtures/events-todo-1.18.34.jsonl``):
``todowrite`` sends ``todo.updated`` ``{sessionID, todos: [{content, status, priority}]}``
with the whole list each time (an empty list when cleared), between the call's
``pending`` and ``running`` parts; a subagent's list comes with the child's session id
on the same stream. The adapter shows the root's list only: a child's is not the plan
of the turn.
"""

from __future__ import annotations

import json
import typing

from adapter import AnyEvent, OpenCodeAdapter, PlanItem, TurnPlanUpdated
from adapter.testing.fake import FakeOpenCodeServer, Task, Text, Tool
from tests.adapter_support import Recorder, replayed_turn

T = "thread"
TODOS = [
    {"content": "look around", "status": "in_progress", "priority": "high"},
    {"content": "write it", "status": "pending", "priority": "low"},
]


def test_the_event_class_is_in_the_union_and_serialises() -> None:
    assert TurnPlanUpdated in typing.get_args(AnyEvent)
    event = TurnPlanUpdated(
        thread_id=T, turn_id="turn_1", todos=(PlanItem("a", "pending", "high"),)
    )
    assert event.type == "turn.plan.updated"
    data = event.to_dict()
    assert data["todos"] == [{"content": "a", "status": "pending", "priority": "high"}]
    json.dumps(data)


async def test_the_roots_todo_list_is_a_plan_event_of_the_turn_and_a_childs_is_not(
    fake: FakeOpenCodeServer,
) -> None:
    fake.script(
        "child",
        [Tool("todowrite", {"todos": [{"content": "c", "status": "pending", "priority": "low"}]})],
    )
    fake.script(
        "root",
        [
            Tool("todowrite", {"todos": TODOS}),
            Task("look", "child"),
            Tool("todowrite", {"todos": []}),
            Text("done"),
        ],
    )
    async with OpenCodeAdapter(fake.base_url, transport=fake.transport) as oc:
        rec = Recorder(oc)
        await oc.start_session(T)
        turn = await oc.send_turn(T, "go [[script:root]]")
        await rec.wait_for("turn.completed")
        plans = rec.of("turn.plan.updated")
        replayed = [e async for e in replayed_turn(oc, T)]
        await rec.close()
    assert [p.turn_id for p in plans] == [turn.turn_id, turn.turn_id]
    assert [p.todos for p in plans] == [
        tuple(PlanItem(**t) for t in TODOS),
        (),
    ]
    # The plan arrives while the todowrite call is announced, before it ends.
    types = rec.types(T)
    assert types.index("item.started") < types.index("turn.plan.updated")
    assert types.index("turn.plan.updated") < types.index("item.completed")
    assert [e.event_id for e in replayed if e.type == "turn.plan.updated"] == [
        p.event_id for p in plans
    ]


async def test_a_malformed_todo_event_is_skipped_and_the_turn_goes_on(
    fake: FakeOpenCodeServer,
) -> None:
    fake.script("root", [Tool("todowrite", {"todos": TODOS}), Text("done")])
    async with OpenCodeAdapter(fake.base_url, transport=fake.transport) as oc:
        rec = Recorder(oc)
        root = (await oc.start_session(T)).session_id
        fake.emit("todo.updated", {"sessionID": root, "todos": [{"content": 7}]})
        await oc.send_turn(T, "go [[script:root]]")
        await rec.wait_for("turn.completed")
        await rec.close()
    assert len(rec.of("turn.plan.updated")) == 1
