"""The differential suite's own machinery, checked with deliberately wrong inputs.

The real-server suite (``tests/real/test_differential.py``) is only as good as its
normaliser, schema validation, order checker and comparison; these tests show each
one catches what it must and forgives only what the registry says.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from adapter.testing import fake
from adapter.testing import model as scripted
from tests.differential.compare import compare, milestones
from tests.differential.driver import Exchange, FakeTarget, Recording, conversations, record_both
from tests.differential.language import (
    CONTINUATION_TEXT,
    CallBash,
    CallTask,
    Command,
    Overflows,
    Prompt,
    Say,
    Scenario,
    Turn,
    WaitIdle,
    fake_scripts,
    model_steps,
)
from tests.differential.normalise import MISSING, Normaliser, diff
from tests.differential.order import (
    ANY,
    Before,
    CreatedFirst,
    InOrder,
    Never,
    Occurs,
    On,
    PartsAfterMessage,
)
from tests.differential.scenarios import BY_NAME
from tests.differential.schema import spec

SES_A = "ses_dd3439dcdffeS13fl3y3DRCWj0"
SES_B = "ses_dd3439ea0ffeSMm62uTUuhbqc7"
MSG_A = "msg_22cbc64c9001XrJ2IHEAGZE7UG"
MSG_B = "msg_22cbc6dad001wIEdSwupjsCRu4"


def session(sid: str, directory: str, created: int, **extra: Any) -> dict[str, Any]:
    return {
        "id": sid,
        "slug": f"slug-{created}",
        "projectID": "global",
        "directory": directory,
        "title": "t",
        "version": "1.18.34",
        "time": {"created": created, "updated": created + 5},
        **extra,
    }


# --------------------------------------------------------------------------- normaliser


def test_normaliser_maps_ids_clocks_and_directories_to_the_same_placeholders() -> None:
    fake = Normaliser({SES_A: "<ses:root>"}, ["/home/user/project"])
    real = Normaliser({SES_B: "<ses:root>"}, ["/tmp/opencode-real-x/project"])
    body_fake = session(SES_A, "/home/user/project", 1)
    body_fake["note"] = f"task_id: {SES_A} and {MSG_A} in /home/user/project/a"
    body_real = session(SES_B, "/tmp/opencode-real-x/project", 999)
    body_real["note"] = f"task_id: {SES_B} and {MSG_B} in /tmp/opencode-real-x/project/a"
    assert diff(fake(body_fake), real(body_real)) == []
    assert fake(body_fake)["note"] == "task_id: <ses:root> and <msg#1> in <dir>/a"


def test_normaliser_keeps_real_differences() -> None:
    fake = Normaliser({SES_A: "<ses:root>"})
    real = Normaliser({SES_B: "<ses:root>"})
    body_fake = session(SES_A, "/d", 1, title="one")
    body_real = session(SES_B, "/d", 2, title="two", parentID=SES_B)
    found = {(d.path, d.fake, d.real) for d in diff(fake(body_fake), real(body_real))}
    assert found == {("title", "one", "two"), ("parentID", MISSING, "<ses:root>")}


def test_unknown_ids_are_numbered_by_first_appearance() -> None:
    norm = Normaliser()
    assert norm(["per_22cb7a0b2001sKIBLso1nIHoJ4", "per_22cb7a0b2001sKIBLso1nIHoJ5"]) == [
        "<per#1>",
        "<per#2>",
    ]
    assert norm({"callID": "call_1_0"}) == {"callID": "<call#1>"}


def test_usage_figures_keep_their_shape() -> None:
    norm = Normaliser()
    tokens: dict[str, Any] = {
        "tokens": {"input": 3, "output": 1, "cache": {"read": 0, "write": 0}},
        "cost": 0,
    }
    assert norm(tokens) == {
        "tokens": {"input": "<n>", "output": "<n>", "cache": {"read": "<n>", "write": "<n>"}},
        "cost": "<n>",
    }
    without_total = diff(norm(tokens), norm({**tokens, "tokens": {**tokens["tokens"], "total": 4}}))
    assert [d.path for d in without_total] == ["tokens.total"]


def test_diff_reports_list_length_and_type_changes() -> None:
    found = diff({"a": [1, 2], "b": 1}, {"a": [1], "b": "1"})
    assert {(d.path, d.fake, d.real) for d in found} == {("a[1]", 2, MISSING), ("b", 1, "1")}


# --------------------------------------------------------------------------- order


def ev(type_: str, **props: Any) -> dict[str, Any]:
    return {"id": "evt_1", "type": type_, "properties": props}


IDS = {"root": SES_A, "child": SES_B}
STREAM = [
    ev("session.created", sessionID=SES_A, info={"id": SES_A}),
    ev("message.updated", sessionID=SES_A, info={"id": MSG_A, "role": "user"}),
    ev("session.status", sessionID=SES_A, status={"type": "busy"}),
    ev("message.part.updated", sessionID=SES_A, part={"messageID": MSG_A, "sessionID": SES_A}),
    ev("session.idle", sessionID=SES_A),
]


def test_before_holds_and_fails_when_the_order_is_reversed() -> None:
    rule = Before(On("message.updated", "root", {"info.role": "user"}), On("session.idle", "root"))
    assert list(rule.violations(STREAM, IDS)) == []
    assert "after" in next(iter(rule.violations(list(reversed(STREAM)), IDS)))


def test_before_fails_when_either_event_is_missing_or_belongs_to_another_session() -> None:
    rule = Before(On("session.status", "child"), On("session.idle", "root"))
    assert ["only 0" in v for v in rule.violations(STREAM, IDS)] == [True]
    second = Before(On("session.status", "root"), On("session.idle", "root"), then_nth=2)
    assert len(list(second.violations(STREAM, IDS))) == 1


def test_where_matches_values_any_and_absent() -> None:
    assert not list(
        Occurs(On("session.status", "root", {"status.type": "busy"})).violations(STREAM, IDS)
    )
    assert list(
        Occurs(On("session.status", "root", {"status.type": "idle"})).violations(STREAM, IDS)
    )
    assert not list(Occurs(On("message.updated", where={"info.id": ANY})).violations(STREAM, IDS))
    assert list(Never(On("session.idle")).violations(STREAM, IDS))


def test_created_first_and_parts_after_message_catch_early_events() -> None:
    assert not list(CreatedFirst("root").violations(STREAM, IDS))
    early = [STREAM[2], *STREAM]
    assert "session.status" in next(iter(CreatedFirst("root").violations(early, IDS)))
    assert not list(PartsAfterMessage().violations(STREAM, IDS))
    orphan = [STREAM[0], STREAM[3], STREAM[1]]
    assert list(PartsAfterMessage().violations(orphan, IDS))


# --------------------------------------------------------------------------- schema


def test_schema_accepts_real_bodies_and_rejects_wrong_ones() -> None:
    api = spec()
    good = session(SES_A, "/d", 1, path="d")
    assert api.validate_response("GET", f"/session/{SES_A}", 200, good) == []
    bad = {**good, "time": {"created": "yesterday"}}
    errors = api.validate_response("GET", f"/session/{SES_A}", 200, bad)
    assert any("time" in e for e in errors), errors
    assert api.validate_response("POST", f"/session/{SES_A}/abort", 200, "true")
    not_found = {"name": "NotFoundError", "data": {"message": "Session not found: x"}}
    assert api.validate_response("GET", f"/session/{SES_A}?x=1", 404, not_found) == []
    assert api.validate_response("GET", "/session/status", 418, {})  # undocumented status


def test_schema_checks_events_by_their_type() -> None:
    api = spec()
    assert (
        api.validate_event(
            {"id": "evt_1", "type": "session.idle", "properties": {"sessionID": SES_A}}
        )
        == []
    )
    assert api.validate_event({"id": "evt_1", "type": "session.idle", "properties": {}})
    assert api.validate_event({"id": "evt_1", "type": "no.such.event", "properties": {}})


# --------------------------------------------------------------------------- compare


def recording(target: str, sid: str, directory: str, created: int) -> Recording:
    body = session(sid, directory, created)
    rec = Recording(target, directory, ids={"root": sid})

    def copy_of() -> dict[str, Any]:
        return copy.deepcopy(body)

    rec.exchanges = [
        Exchange("POST /session (root)", "POST", "/session", 200, copy_of(), True, "scenario"),
        Exchange("GET /session/{root}", "GET", f"/session/{sid}", 200, copy_of(), True, "state"),
    ]
    rec.events = [ev("session.created", sessionID=sid, info=copy_of())]
    rec.state = {"sessions": {"root": copy_of()}, "messages": {"root": []}, "status": {}}
    return rec


def test_compare_forgives_the_registry_and_nothing_else() -> None:
    scenario = Scenario("synthetic", [])
    fake = recording("fake", SES_A, "/home/user/project", 1)
    real = recording("real", SES_B, "/tmp/x/project", 2)
    assert compare(scenario, fake, real) == []

    broken = copy.deepcopy(fake)
    broken.exchanges[0].status = 201
    broken.state["sessions"]["root"]["title"] = "other"
    broken.events.append(
        ev("session.updated", sessionID=SES_A, info=fake.state["sessions"]["root"])
    )
    broken.events.insert(0, ev("session.status", sessionID=SES_A, status={"type": "busy"}))
    found = compare(scenario, broken, real)
    kinds = sorted({d.kind for d in found})
    assert kinds == ["event-types", "order", "schema", "state", "status"], [str(d) for d in found]


SES_A2 = "ses_dd3439dcdffeS13fl3y3DRCWj1"
SES_B2 = "ses_dd3439ea0ffeSMm62uTUuhbqc8"


def with_listing(rec: Recording, child: str, order: list[int], updated: list[int]) -> Recording:
    """``rec`` plus a child session and a scenario ``GET /session`` listing of both,
    in ``order`` (indexes into [root, child]) with the given ``time.updated``."""
    root = rec.state["sessions"]["root"]
    kid = session(child, rec.directory, root["time"]["created"] + 1, parentID=root["id"])
    rec.ids["child"] = child
    rec.state["sessions"]["child"] = copy.deepcopy(kid)
    rec.state["messages"]["child"] = []
    rec.events.append(ev("session.created", sessionID=child, info=copy.deepcopy(kid)))
    both = [copy.deepcopy(root), copy.deepcopy(kid)]
    for item, stamp in zip(both, updated, strict=True):
        item["time"]["updated"] = stamp
    listing = [both[i] for i in order]
    rec.exchanges.append(
        Exchange("GET /session", "GET", "/session", 200, listing, True, "scenario")
    )
    return rec


def test_session_listings_compare_as_sets_and_each_order_is_checked_on_its_own() -> None:
    scenario = Scenario("synthetic", [])
    # A timestamp tie: the two targets may list root and child either way round.
    fake = with_listing(recording("fake", SES_A, "/p", 1), SES_A2, [1, 0], [9, 9])
    real = with_listing(recording("real", SES_B, "/q", 2), SES_B2, [0, 1], [9, 9])
    assert [str(d) for d in compare(scenario, fake, real)] == []

    # The fake lists the older session first: caught, even though the set matches.
    fake = with_listing(recording("fake", SES_A, "/p", 1), SES_A2, [0, 1], [5, 9])
    real = with_listing(recording("real", SES_B, "/q", 2), SES_B2, [1, 0], [5, 9])
    found = compare(scenario, fake, real)
    assert [(d.kind, d.where) for d in found] == [("order", "fake: GET /session (#1)")]

    # Children are listed in creation order: there, the order itself must match.
    fake = with_listing(recording("fake", SES_A, "/p", 1), SES_A2, [1, 0], [9, 9])
    real = with_listing(recording("real", SES_B, "/q", 2), SES_B2, [0, 1], [9, 9])
    for rec in (fake, real):
        rec.exchanges[-1].path = f"/session/{rec.ids['root']}/children"
    assert {d.kind for d in compare(scenario, fake, real)} == {"body"}

    # A session missing from one listing is still a body difference.
    fake = with_listing(recording("fake", SES_A, "/p", 1), SES_A2, [1], [5, 9])
    real = with_listing(recording("real", SES_B, "/q", 2), SES_B2, [1, 0], [5, 9])
    assert {d.kind for d in compare(scenario, fake, real)} == {"body"}


def test_compare_validates_both_targets_bodies() -> None:
    scenario = Scenario("synthetic", [])
    fake = recording("fake", SES_A, "/home/user/project", 1)
    real = recording("real", SES_B, "/tmp/x/project", 2)
    del fake.exchanges[0].body["projectID"]
    found = [d for d in compare(scenario, fake, real) if d.kind == "schema"]
    assert len(found) == 1 and "fake" in found[0].where and "projectID" in found[0].where


# --------------------------------------------------------------------------- language & driver


def test_scripts_must_end_where_the_model_stops() -> None:
    with pytest.raises(ValueError, match="must end"):
        Scenario("bad", [], scripts={"main": [CallBash("ls", "")]})


def test_an_overflow_needs_auto_compaction_and_the_real_continuation_after_it() -> None:
    with pytest.raises(ValueError, match="auto_compaction"):
        Scenario("bad", [], scripts={"main": [Overflows("big"), Say(CONTINUATION_TEXT)]})
    with pytest.raises(ValueError, match="must end Overflows"):
        Scenario(
            "bad",
            [],
            scripts={"main": [Overflows("big"), Say("something else")]},
            auto_compaction=True,
        )
    Scenario(
        "good",
        [],
        scripts={"main": [Overflows("big"), Say(CONTINUATION_TEXT)]},
        auto_compaction=True,
    )


def test_later_prompts_continue_the_first_prompts_model_conversation() -> None:
    scenario = Scenario(
        "chat",
        [Prompt("s", "one"), Prompt("s", "two"), Prompt("s", "three", fresh_history=True)],
        scripts={"one": [Say("1")], "two": [Say("2")], "three": [Say("3")]},
    )
    names = {"one": "n1", "two": "n2", "three": "n3"}
    assert conversations(scenario, names) == {
        "n1": [Say("1"), Say("2")],
        "n3": [Say("3")],
    }


def test_a_background_call_gives_the_fake_a_script_per_run_of_the_parent() -> None:
    """The real conversation goes on after a background child's result; the fake runs
    the turns after the parent's answer as the call's ``result_script``."""
    names = {"main": "run-main", "child": "run-child"}
    turns: list[Turn] = [
        CallTask("bg", "child", background=True),
        Say("at once"),
        Say("on the result"),
    ]
    scripts = fake_scripts("run-main", turns, names)
    assert list(scripts) == ["run-main", "run-main~1"]
    task, answer = scripts["run-main"]
    assert isinstance(task, fake.Task) and task.background
    assert (task.script, task.result_script) == ("run-child", "run-main~1")
    assert answer == fake.Text("at once")
    assert scripts["run-main~1"] == [fake.Text("on the result")]
    first = model_steps(turns, names)[0]
    assert isinstance(first, scripted.ToolCalls)
    assert first.calls[0].arguments["background"] is True
    assert fake_scripts("run-main", [CallTask("fg", "child"), Say("done")], names).keys() == {
        "run-main"
    }


@pytest.mark.parametrize(
    "name",
    [
        "text_turn",
        "bash_tool_turn",
        "abort_hanging_model_call",
        "permission_replied_once",
        "abort_during_retries",
        "auto_compaction_mid_run",
        "background_task_stopped_alone",
        "another_client_prompts_a_watched_session",
        "busy_tree_found_at_attach",
    ],
)
async def test_the_driver_is_deterministic_fake_against_fake(name: str) -> None:
    """Two fakes playing the same scenario differ in nothing: the driver, its waits and
    the normalisation add no divergence of their own."""
    background = BY_NAME[name].background_subagents
    one = FakeTarget(background_subagents=background)
    two = FakeTarget(background_subagents=background)
    two.name = "real"
    try:
        rec_one, rec_two = await record_both(BY_NAME[name], one, two)
    finally:
        await one.aclose()
        await two.aclose()
    assert rec_one.problems == [] and rec_two.problems == []
    assert len(rec_one.events) > 1 and rec_one.state["messages"]
    assert compare(BY_NAME[name], rec_one, rec_two) == []


def test_wait_idle_of_an_explicit_session_follows_its_prompt() -> None:
    """Otherwise the wait would be satisfied by nothing the scenario caused."""
    for scenario in BY_NAME.values():
        prompted: set[str] = set()
        for action in scenario.actions:
            if isinstance(action, Prompt | Command):
                prompted.add(action.session)
            if isinstance(action, WaitIdle) and "/" not in action.session:
                assert action.session in prompted, scenario.name


def test_a_union_error_names_the_variant_the_value_meant() -> None:
    state = {"status": "error", "input": {}, "error": "x", "time": {"start": 1, "end": 2}}
    part = {"type": "tool", "tool": "bash", "callID": "c", "id": "prt_1", "sessionID": SES_A}
    part["messageID"] = MSG_A
    event: dict[str, Any] = {
        "type": "message.part.updated",
        "properties": {"sessionID": SES_A, "time": 1},
    }
    event["id"] = "evt_1"
    event["properties"]["part"] = {**part, "state": {**state, "title": "kept by the real server"}}
    assert spec().validate_event(event) == []  # SPEC_PATCHES: the real server sends it
    event["properties"]["part"] = {**part, "state": {**state, "bogus": 1}}
    (error,) = spec().validate_event(event)
    assert "at .properties.part" in error and ".state" in error and "'bogus'" in error


def test_in_order_follows_one_run_from_its_nth_start() -> None:
    def ev(kind: str, status: str | None = None) -> dict[str, Any]:
        props: dict[str, Any] = {"sessionID": SES_A}
        if status is not None:
            props["status"] = {"type": status}
        return {"type": kind, "properties": props}

    ids = {"root": SES_A}
    start = On("session.compacted", "root")
    busy = On("session.status", "root", {"status.type": "busy"})
    idle = On("session.idle", "root")
    events = [ev("session.compacted"), ev("session.status", "busy"), ev("session.idle")]
    events += [ev("session.compacted"), ev("session.idle"), ev("session.status", "busy")]
    assert list(InOrder((start, busy, idle)).violations(events, ids)) == []
    # The second run's busy comes after its idle: found only because it starts at #2.
    (second,) = InOrder((start, busy, idle), nth=2).violations(events, ids)
    assert "no 'session.idle[root]' after #5" in second
    (third,) = InOrder((start, busy), nth=3).violations(events, ids)
    assert "only 2" in third


async def on_two_fakes(scenario: Scenario) -> tuple[Recording, Recording]:
    """``scenario`` recorded on two fakes at once, the second one standing for the real
    server (its target is named ``real``)."""
    one, two = FakeTarget(), FakeTarget()
    two.name = "real"
    try:
        return await record_both(scenario, one, two)
    finally:
        await one.aclose()
        await two.aclose()


async def test_milestones_tell_a_run_and_differ_where_the_run_did() -> None:
    """A compared run: the same scenario on two fakes has equal milestones; a run whose
    events changed shows the difference as a ``run`` divergence."""
    scenario = BY_NAME["another_client_prompts_a_watched_session"]
    rec_one, rec_two = await on_two_fakes(scenario)
    told = milestones(rec_one, "root")
    assert told == milestones(rec_two, "root")
    first_user = told.index("message.updated user")
    assert told.index("session.status busy") > first_user
    assert told.count("session.idle") == 2 and told[-1] == "session.idle"
    # Drop the second run's first busy on one side: the run comparison catches it.
    busies = [i for i, e in enumerate(rec_two.events) if e["type"] == "session.status"]
    users = [
        i
        for i, e in enumerate(rec_two.events)
        if e["type"] == "message.updated" and e["properties"]["info"]["role"] == "user"
    ]
    del rec_two.events[next(i for i in busies if i > users[1])]
    kinds = {d.kind for d in compare(scenario, rec_one, rec_two)}
    assert "run" in kinds


async def test_an_answer_whose_first_update_already_says_finished_reads_as_announced() -> None:
    """The real server writes a message as it is when the stream sends its update: under
    load an answer's first ``message.updated`` already says finished, before its parts
    (measured on 1.17.19 and 1.18.3). The run must read as the fake's; a run whose answer
    is never announced before its parts must still differ."""
    scenario = BY_NAME["another_client_prompts_a_fresh_session"]
    rec_one, rec_two = await on_two_fakes(scenario)
    root = rec_two.ids["root"]
    updates = [
        (i, e["properties"]["info"])
        for i, e in enumerate(rec_two.events)
        if e["type"] == "message.updated"
        and e["properties"]["info"]["role"] == "assistant"
        and e["properties"]["info"]["sessionID"] == root
    ]
    answer = updates[-1][1]
    first = next(i for i, info in updates if info["id"] == answer["id"])
    late_written = copy.deepcopy(rec_two.events[first])
    late_written["properties"]["info"] = copy.deepcopy(answer)  # finish=stop, completed
    rec_two.events[first] = late_written
    assert milestones(rec_two, "root") == milestones(rec_one, "root")
    assert "run" not in {d.kind for d in compare(scenario, rec_one, rec_two)}

    del rec_two.events[first]  # the answer's parts now come before any update of it
    assert milestones(rec_two, "root") != milestones(rec_one, "root")
