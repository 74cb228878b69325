"""The context meter: ``TurnUsage.context_tokens`` and ``TurnUsage.context_limit``.

OpenCode's own UI (the TUI's session header and sidebar) shows how full the context is
from the session's last assistant message whose ``tokens.output`` is above zero: input +
output + reasoning + cache read + cache write of that message, against the
``limit.context`` of its ``providerID``/``modelID`` in ``GET /config/providers``. The
adapter counts the root's messages of the turn the same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import httpx

from adapter import Message, ModelCost, ModelInfo, OpenCodeAdapter, TurnUsage
from adapter._client._context_limits import ContextLimits
from adapter._turns._usage_meter import UsageMeter
from adapter.testing.fake import FakeOpenCodeServer, Hang, Task, Text, Tool
from tests.adapter_support import Recorder, a_step_finished, start_scripted_turn

T = "thread-1"
ROOT = "ses_root"
CHILD = "ses_child"


def stored(
    session_id: str,
    message_id: str,
    tokens: Mapping[str, Any],
    *,
    model: tuple[str, str] = ("fake", "fake-model"),
    finish: str | None = "stop",
) -> Message:
    info: dict[str, Any] = {
        "id": message_id,
        "sessionID": session_id,
        "role": "assistant",
        "parentID": "msg_user",
        "time": {"created": 1},
        "providerID": model[0],
        "modelID": model[1],
        "tokens": tokens,
        "cost": 0,
    }
    if finish is not None:
        info["finish"] = finish
    return Message.parse({"info": info, "parts": []})


def tokens(i: int, o: int, r: int = 0, cr: int = 0, cw: int = 0) -> dict[str, Any]:
    return {"input": i, "output": o, "reasoning": r, "cache": {"read": cr, "write": cw}}


LIMITS = {("fake", "fake-model"): 128000, ("other", "big"): 1_000_000}


def meter() -> UsageMeter:
    return UsageMeter(ROOT, context_limit=lambda p, m: LIMITS.get((p, m)))


def test_the_meter_is_the_roots_latest_step_with_output_summed_as_opencodes_ui_does() -> None:
    usage = meter()
    usage.stored(
        [
            stored(ROOT, "msg_a1", tokens(100, 20)),
            stored(ROOT, "msg_a2", tokens(300, 40, 5, 60, 7), model=("other", "big")),
            # A subagent's context is its own: never the root's meter.
            stored(CHILD, "msg_a3", tokens(9000, 900)),
            # A step cut short: no output, so OpenCode's UI skips it (and so do we).
            stored(ROOT, "msg_a4", tokens(0, 0), finish=None),
        ]
    )
    total = usage.total()
    assert total.context_tokens == 300 + 40 + 5 + 60 + 7
    assert total.context_limit == 1_000_000  # the model that step used
    assert total.input_tokens == 100 + 300 + 9000  # the sums are unchanged


def test_the_meter_is_empty_before_a_root_step_finished() -> None:
    usage = meter()
    usage.stored([stored(CHILD, "msg_a1", tokens(10, 5)), stored(ROOT, "msg_a2", tokens(0, 0))])
    assert (usage.total().context_tokens, usage.total().context_limit) == (None, None)


def test_an_unlisted_model_has_no_limit_but_its_tokens_count() -> None:
    usage = meter()
    usage.stored([stored(ROOT, "msg_a1", tokens(10, 5), model=("gone", "model"))])
    assert (usage.total().context_tokens, usage.total().context_limit) == (15, None)


def test_the_meter_counts_only_the_turns_root_messages() -> None:
    usage = meter()
    usage.stored([stored(ROOT, "msg_a1", tokens(10, 5)), stored(ROOT, "msg_a2", tokens(70, 7))])
    assert usage.total(lambda sid, mid, parent: mid != "msg_a2").context_tokens == 15


def test_the_meter_round_trips_and_older_records_read_back_without_it() -> None:
    usage = TurnUsage(input_tokens=10, output_tokens=5, context_tokens=15, context_limit=128000)
    data = usage.to_dict()
    assert (data["context_tokens"], data["context_limit"]) == (15, 128000)
    assert TurnUsage.from_dict(data) == usage
    del data["context_tokens"], data["context_limit"]
    assert TurnUsage.from_dict(data) == TurnUsage(input_tokens=10, output_tokens=5)
    bad = TurnUsage.from_dict({"context_tokens": "many", "context_limit": True})
    assert (bad.context_tokens, bad.context_limit) == (None, None)


async def root_meter(fake: FakeOpenCodeServer, root: str) -> int | None:
    """What OpenCode's UI shows for ``root``: its last assistant message with output."""
    async with httpx.AsyncClient(transport=fake.transport, base_url=fake.base_url) as http:
        messages = (await http.get(f"/session/{root}/message")).json()
    infos = [m["info"] for m in messages if m["info"]["role"] == "assistant"]
    last = [i for i in infos if i["tokens"]["output"] > 0][-1:]
    if not last:
        return None
    t = last[0]["tokens"]
    return int(t["input"] + t["output"] + t["reasoning"] + t["cache"]["read"] + t["cache"]["write"])


def provider_reads(fake: FakeOpenCodeServer) -> int:
    return sum(1 for r in fake.requests if r.path == "/config/providers")


async def test_a_completed_turn_reports_the_meter_and_the_configured_limit(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.inventory.context_limit = 64000
    info, _ = await start_scripted_turn(
        oc, fake, T, "tree", [Task("explore", "child"), Text("root done")]
    )
    fake.script("child", [Tool("read", {"filePath": "/x"}, output="x"), Text("child done")])
    done = await rec.wait_for("turn.completed")
    assert done.usage.context_tokens == await root_meter(fake, info.session_id) == 15
    assert done.usage.context_limit == 64000
    reports = rec.of("turn.usage", T)
    assert reports[-1].usage == done.usage
    assert all(r.usage.context_limit == 64000 for r in reports if r.usage.context_tokens)


async def test_the_limits_are_read_once_per_client_not_per_turn_or_event(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    await start_scripted_turn(oc, fake, T, "two", [Tool("read", {"filePath": "/x"}), Text("a")])
    first = await rec.wait_for("turn.completed")
    fake.script("ok", [Text("b")])
    await oc.start_session("thread-2")
    await oc.send_turn("thread-2", "more [[script:ok]]")
    second = await rec.wait_for("turn.completed", lambda e: e is not first)
    assert first.usage.context_limit == second.usage.context_limit == 128000
    assert provider_reads(fake) == 1


async def test_a_failed_limits_read_leaves_the_limit_unknown_and_the_turn_unharmed(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.fail("GET", "/config/providers", status=500, times=None)
    await start_scripted_turn(oc, fake, T, "one", [Text("fine")])
    done = await rec.wait_for("turn.completed")
    assert done.state == "completed"
    assert (done.usage.context_tokens, done.usage.context_limit) == (15, None)


async def test_the_meter_is_the_roots_even_when_only_a_subagent_finished_steps(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.script("child", [Tool("read", {"filePath": "/x"}, output="x"), Hang()])
    info, _ = await start_scripted_turn(oc, fake, T, "root", [Task("explore", "child")])
    child = await rec.wait_for("child.started")
    await a_step_finished(fake, child.session_id)
    result = await oc.interrupt_turn(T)
    assert result.usage.by_session[child.session_id].output_tokens == 5
    assert info.session_id not in result.usage.by_session or (
        result.usage.by_session[info.session_id].output_tokens == 0
    )
    assert (result.usage.context_tokens, result.usage.context_limit) == (None, None)


async def test_a_zero_limit_is_unknown_as_opencodes_ui_reads_it(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    fake.inventory.context_limit = 0  # models.dev's "not known"; the UI shows no percentage
    await start_scripted_turn(oc, fake, T, "one", [Text("fine")])
    done = await rec.wait_for("turn.completed")
    assert (done.usage.context_tokens, done.usage.context_limit) == (15, None)


async def test_the_limits_are_read_once_more_for_a_named_model_the_list_lacked() -> None:
    reads: list[int] = []

    async def read() -> tuple[ModelInfo, ...]:
        reads.append(1)
        return (ModelInfo("fake/fake-model", "Fake", 128000, 4096, ("text",), ModelCost()),)

    limits = ContextLimits(read, timeout=1.0)
    assert limits.get("fake", "fake-model") is None  # nothing read yet
    await asyncio.gather(limits.ensure(), limits.ensure(("fake", "fake-model")))
    assert (len(reads), limits.get("fake", "fake-model")) == (1, 128000)
    await limits.ensure(("other", "new"))  # not listed: read again, once
    await limits.ensure(("other", "new"))
    assert (len(reads), limits.get("other", "new")) == (2, None)


async def test_a_limits_read_that_hangs_is_bounded_and_retried_later() -> None:
    gate = asyncio.Event()
    reads: list[int] = []

    async def read() -> tuple[ModelInfo, ...]:
        reads.append(1)
        await gate.wait()
        return ()

    limits = ContextLimits(read, timeout=0.05)
    await limits.ensure()  # times out, never raises
    assert limits.get("fake", "fake-model") is None
    gate.set()
    await limits.ensure()  # read again (the last read failed), now answered
    await limits.ensure()  # kept: no read
    assert len(reads) == 2
