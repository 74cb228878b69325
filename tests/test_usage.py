"""Usage and cost across the tree: ``turn.usage``, and ``usage`` on a turn's ending.

The expected figures are read back from the (fake) server the way a host would
have to without the adapter: every assistant message of every session of the tree.
"""

from __future__ import annotations

import itertools

import httpx
import pytest

from adapter import (
    OpenCodeAdapter,
    PartialResult,
    SessionInfo,
    SessionUsage,
    Timeouts,
    TurnUsage,
    TurnUsageUpdated,
)
from adapter._turns._usage_meter import UsageFeed
from adapter.testing.fake import Fail, FakeOpenCodeServer, Hang, Task, Text, Tool
from tests.adapter_support import Recorder, a_step_finished, start_scripted_turn

T = "thread-1"
#: Per million tokens; a fake step (10 input, 5 output tokens) then costs 0.02.
PRICE = {"input": 1000.0, "output": 2000.0}
STEP = SessionUsage(input_tokens=10, output_tokens=5, cost=0.02)
#: The context meter after a root step: its 15 tokens of the fake model's 128000.
METER = (15, 128000)


@pytest.fixture(autouse=True)
def priced_model(fake: FakeOpenCodeServer) -> None:
    """The fake's model costs ``PRICE`` in every test."""
    fake.model_cost = PRICE


@pytest.fixture
def timeouts() -> Timeouts:
    return Timeouts(abort=2.0, tree=2.0)


async def stored_usage(fake: FakeOpenCodeServer, root: str) -> dict[str, SessionUsage]:
    """Each session of the tree -> the sum of its stored assistant messages' figures."""
    found: dict[str, SessionUsage] = {}
    async with httpx.AsyncClient(transport=fake.transport, base_url=fake.base_url) as http:
        todo = [root]
        while todo:
            sid = todo.pop()
            total = SessionUsage()
            for message in (await http.get(f"/session/{sid}/message")).json():
                info = message["info"]
                if info["role"] != "assistant":
                    continue
                tokens = info["tokens"]
                total += SessionUsage(
                    tokens["input"],
                    tokens["output"],
                    tokens["reasoning"],
                    tokens["cache"]["read"],
                    tokens["cache"]["write"],
                    info["cost"],
                )
            found[sid] = total
            todo += [c["id"] for c in (await http.get(f"/session/{sid}/children")).json()]
    return found


def assert_figures(usage: TurnUsage, expected: dict[str, SessionUsage]) -> None:
    assert set(usage.by_session) == set(expected)
    for sid, session in expected.items():
        got = usage.by_session[sid]
        assert got.cost == pytest.approx(session.cost)
        assert (got.input_tokens, got.output_tokens) == (
            session.input_tokens,
            session.output_tokens,
        )
    total = sum(expected.values(), SessionUsage())
    assert (usage.input_tokens, usage.output_tokens) == (total.input_tokens, total.output_tokens)
    assert usage.cost == pytest.approx(total.cost)


def nested_scripts(fake: FakeOpenCodeServer) -> None:
    """Root (2 steps) -> child (3 steps) -> grandchild (2 steps)."""
    fake.script("grandchild", [Tool("bash", {"command": "ls"}, output="a\n"), Text("gc done")])
    fake.script(
        "child",
        [
            Tool("read", {"filePath": "/x"}, output="x"),
            Text("looking deeper"),
            Task("deeper", "grandchild"),
            Text("child done"),
        ],
    )
    fake.script("root", [Task("explore", "child"), Text("root done")])


async def nested_turn(oc: OpenCodeAdapter, fake: FakeOpenCodeServer) -> SessionInfo:
    """Thread ``T`` started and running a turn of the nested scripts; its session."""
    nested_scripts(fake)
    info = await oc.start_session(T)
    await oc.send_turn(T, "go [[script:root]]")
    return info


async def test_a_completed_tree_reports_the_sum_of_every_session(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    info = await nested_turn(oc, fake)
    done = await rec.wait_for("turn.completed")
    usage = done.usage
    assert isinstance(usage, TurnUsage)

    expected = await stored_usage(fake, info.session_id)
    assert len(expected) == 3
    assert_figures(usage, expected)
    # Root 2 steps, child 3, grandchild 2: priced by the configured model cost.
    assert usage.by_session[info.session_id] == SessionUsage(20, 10, cost=0.04)
    assert sorted(s.output_tokens for s in usage.by_session.values()) == [10, 10, 15]
    assert usage.cost == pytest.approx(7 * 0.02)
    assert usage.total_tokens == 7 * 15
    assert usage.subagents == 2
    assert usage.complete is True
    assert next(iter(usage.by_session)) == info.session_id  # the root first
    # The last live report is the final figure.
    assert rec.of("turn.usage", T)[-1].usage == usage


async def test_a_second_turn_counts_only_its_own_messages(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    info = await nested_turn(oc, fake)
    await rec.wait_for("turn.completed")
    await oc.send_turn(T, "just answer")  # the default script: one step
    first = rec.of("turn.completed")[0]
    second = await rec.wait_for("turn.completed", lambda e: e is not first)
    assert second.usage == TurnUsage.of_sessions(
        info.session_id, {info.session_id: STEP}, complete=True, context=METER
    )
    assert second.usage.subagents == 0


async def test_an_interrupted_tree_counts_its_children_and_is_incomplete(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    # Each session finishes one step, then its next step is cut short by the stop.
    fake.script("grandchild", [Tool("bash", {"command": "ls"}, output="a\n"), Hang()])
    fake.script(
        "child", [Tool("read", {"filePath": "/x"}, output="x"), Text("t"), Task("d", "grandchild")]
    )
    fake.script(
        "root", [Tool("read", {"filePath": "/y"}, output="y"), Text("t"), Task("e", "child")]
    )
    info = await oc.start_session(T)
    await oc.send_turn(T, "go [[script:root]]")
    grandchild = await rec.wait_for("child.started", lambda e: e.parent_id != info.session_id)
    await a_step_finished(fake, grandchild.session_id)
    result = await oc.interrupt_turn(T)
    aborted = await rec.wait_for("turn.aborted")

    usage = result.usage
    assert usage is result.partial.usage
    assert aborted.usage == usage
    assert usage.complete is False
    assert usage.subagents == 2
    expected = await stored_usage(fake, info.session_id)
    assert_figures(usage, expected)
    assert all(s == STEP for s in usage.by_session.values())
    assert usage.cost == pytest.approx(3 * 0.02)
    assert rec.of("turn.usage", T)[-1].usage == usage


async def test_a_failed_step_makes_the_usage_incomplete(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    info, _ = await start_scripted_turn(
        oc, fake, T, "broken", [Tool("read", {"filePath": "/y"}, output="y"), Fail()]
    )
    done = await rec.wait_for("turn.completed")
    assert done.state == "failed"
    assert done.usage == TurnUsage.of_sessions(
        info.session_id, {info.session_id: STEP}, complete=False, context=METER
    )


async def test_live_reports_are_throttled_and_end_with_the_final_figures(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    # Twelve steps, finished within a few milliseconds of each other.
    steps: list[Tool | Text] = []
    for i in range(11):
        steps += [Tool("read", {"filePath": f"/{i}"}, output="x"), Text(f"step {i}")]
    fake.script("many", steps)
    await oc.start_session(T)
    await oc.send_turn(T, "go [[script:many]]")
    done = await rec.wait_for("turn.completed")
    reports = rec.of("turn.usage", T)
    assert done.usage.cost == pytest.approx(12 * 0.02)
    assert 1 <= len(reports) < 12
    assert reports[-1].usage == done.usage
    assert all(isinstance(r, TurnUsageUpdated) and r.turn_id == done.turn_id for r in reports)
    # At most one per 250 ms; only the final one (sent with the ending) may come sooner.
    gaps = [b.created_at - a.created_at for a, b in itertools.pairwise(reports[:-1])]
    assert all(gap >= 0.24 for gap in gaps)
    outputs = [r.usage.output_tokens for r in reports]
    assert outputs == sorted(outputs)


async def test_slow_steps_are_each_reported_live(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script(
        "slow",
        [
            Tool("bash", {"command": "a"}, output="a\n", duration=0.3),
            Tool("bash", {"command": "b"}, output="b\n", duration=0.3),
            Text("checked"),
            Tool("bash", {"command": "c"}, output="c\n", duration=0.3),
            Text("done"),
        ],
    )
    await oc.start_session(T)
    await oc.send_turn(T, "go [[script:slow]]")
    done = await rec.wait_for("turn.completed")
    reports = rec.of("turn.usage", T)
    # Steps 300 ms apart: each finished step is reported while the turn runs.
    assert [r.usage.output_tokens for r in reports] == [5, 10, 15]
    assert reports[-1].usage == done.usage
    assert done.usage.complete is True


async def test_the_partial_result_round_trips_its_usage(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    await start_scripted_turn(
        oc, fake, T, "stuck", [Tool("read", {"filePath": "/y"}, output="y"), Hang()]
    )
    await fake.wait_for_event(
        "message.updated", lambda e: e["properties"]["info"].get("finish") is not None, since=0
    )
    result = await oc.interrupt_turn(T)
    aborted = await rec.wait_for("turn.aborted")
    assert result.usage.output_tokens == 5
    # The context meter of the last finished root step (see tests/test_context_meter.py).
    assert (result.usage.context_tokens, result.usage.context_limit) == METER
    assert aborted.usage == result.usage
    again = PartialResult.from_dict(result.partial.to_dict())
    assert again.usage == result.usage
    # A stored result from before usage existed reads back with none.
    older = result.partial.to_dict()
    del older["usage"]
    assert PartialResult.from_dict(older).usage == TurnUsage()


async def test_the_feed_sends_nothing_for_a_turn_that_spent_nothing() -> None:
    sent: list[TurnUsage] = []
    feed = UsageFeed(TurnUsage, sent.append)
    feed.close(TurnUsage())
    assert sent == []
