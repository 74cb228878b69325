"""``turn.diff.updated``: the files a turn changed reach the host.

Measured on ``opencode serve`` 1.18.34 with snapshots on in a git project
(``tests/fixtures/events-diff-1.18.34.jsonl``): ``session.diff`` is always ``[]`` during
a run (after each step and after the idle); it carries files only for a revert (what
the revert undoes). The turn's changes are on its user message instead:
``message.updated`` of the root's user message, ``info.summary.diffs`` =
``[{file, patch, additions, deletions, status}]``, the whole turn's changes so far
(subagents' included), recomputed after each step and once more just after the
idle, unchanged updates repeated. The adapter sends a turn's files when they change.
"""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any

from adapter import AnyEvent, FileDiff, OpenCodeAdapter, TurnDiffUpdated
from adapter._stream._turn_diff import MAX_DIFF_FILES, MAX_PATCH_CHARS, file_diffs
from adapter.testing.fake import FakeOpenCodeServer, Hang, Text, Tool
from tests.adapter_support import Recorder, start_scripted_turn

T = "thread"
FIXTURE = Path(__file__).parent / "fixtures" / "events-diff-1.18.34.jsonl"


def recorded() -> list[dict[str, Any]]:
    with FIXTURE.open(encoding="utf-8") as handle:
        return [json.loads(line)["event"] for line in handle if line.strip()]


def user_summaries() -> list[dict[str, Any]]:
    return [
        e
        for e in recorded()
        if e["type"] == "message.updated"
        and e["properties"]["info"]["role"] == "user"
        and isinstance(e["properties"]["info"].get("summary"), dict)
    ]


def test_the_recorded_turn_diffs_parse_into_files() -> None:
    parsed = [file_diffs(e["properties"]["info"]) for e in user_summaries()]
    assert all(p is not None for p in parsed)
    widest = max((p for p in parsed if p is not None), key=lambda p: len(p[0]))
    files, omitted = widest
    assert omitted == 0
    assert [(f.path, f.status, f.additions, f.deletions) for f in files] == [
        ("bashed.txt", "added", 1, 0),
        ("gone.txt", "deleted", 0, 1),
        ("keep.txt", "modified", 2, 1),
        ("new.txt", "added", 2, 0),
    ]
    keep = files[2]
    assert keep.patch is not None and "+TWO" in keep.patch and not keep.patch_omitted


def test_session_diff_is_empty_during_a_run_and_names_files_only_for_a_revert() -> None:
    # The measurement the design rests on: session.diff cannot be the turn's diff.
    diffs = [e["properties"]["diff"] for e in recorded() if e["type"] == "session.diff"]
    assert diffs[-1] and all(d == [] for d in diffs[:-1])


def info_with(diffs: object) -> dict[str, Any]:
    return {"id": "msg_x", "role": "user", "summary": {"diffs": diffs}}


def read_diffs(info: dict[str, Any]) -> tuple[tuple[FileDiff, ...], int]:
    """``file_diffs`` of a message that has a diff summary (never ``None`` then)."""
    read = file_diffs(info)
    assert read is not None
    return read


def test_a_missing_or_malformed_diff_is_none_and_bad_entries_are_counted() -> None:
    assert file_diffs({"role": "user"}) is None
    assert file_diffs({"role": "user", "summary": True}) is None
    assert file_diffs(info_with("not a list")) is None
    good = {"file": "a", "additions": 1, "deletions": 0, "status": "added", "patch": "p"}
    files, omitted = read_diffs(info_with([good, "x", {"file": 3}, {**good, "additions": -1}]))
    assert [f.path for f in files] == ["a"] and omitted == 3


def test_huge_patches_are_dropped_with_a_note_and_the_files_are_capped() -> None:
    huge = {"file": "big", "additions": 9, "deletions": 0, "patch": "x" * (MAX_PATCH_CHARS + 1)}
    (big,), _ = read_diffs(info_with([huge]))
    assert (big.patch, big.patch_omitted, big.additions) == (None, True, 9)
    many = [{"file": f"f{i}", "additions": 1, "deletions": 0} for i in range(MAX_DIFF_FILES + 5)]
    files, omitted = read_diffs(info_with(many))
    assert (len(files), omitted) == (MAX_DIFF_FILES, 5)


def test_the_event_class_is_in_the_union_and_serialises() -> None:
    assert TurnDiffUpdated in typing.get_args(AnyEvent)
    event = TurnDiffUpdated(
        thread_id=T, turn_id="turn_1", files=(FileDiff("a.txt", "added", 2, 0, "@@"),)
    )
    assert event.type == "turn.diff.updated"
    data = event.to_dict()
    assert data["files"] == [
        {
            "path": "a.txt",
            "status": "added",
            "additions": 2,
            "deletions": 0,
            "patch": "@@",
            "patch_omitted": False,
        }
    ]
    assert data["omitted_files"] == 0
    json.dumps(data)


def root_user_message(fake: FakeOpenCodeServer, session_id: str) -> dict[str, Any]:
    return next(
        e["properties"]["info"]
        for e in reversed(fake.events)
        if e["type"] == "message.updated"
        and e["properties"]["info"]["sessionID"] == session_id
        and e["properties"]["info"]["role"] == "user"
    )


def summarised(info: dict[str, Any], diffs: list[dict[str, Any]]) -> dict[str, Any]:
    return {"sessionID": info["sessionID"], "info": {**info, "summary": {"diffs": diffs}}}


A = {"file": "a.txt", "patch": "+a", "additions": 1, "deletions": 0, "status": "added"}
B = {"file": "b.txt", "patch": "-b", "additions": 0, "deletions": 1, "status": "deleted"}


async def test_a_turns_changed_files_are_sent_once_per_change_also_after_its_end(
    fake: FakeOpenCodeServer,
) -> None:
    fake.script("root", [Tool("bash", {"command": "true"}, output="ok"), Text("done")])
    async with OpenCodeAdapter(fake.base_url, transport=fake.transport) as oc:
        rec = Recorder(oc)
        root = (await oc.start_session(T)).session_id
        hold = fake.hold_run_end(root)
        turn = await oc.send_turn(T, "go [[script:root]]")
        await hold.wait_started()
        info = root_user_message(fake, root)
        for changed in ([], [A], [A], [A, B]):  # the empty start and a repeat are not sent
            fake.emit("message.updated", summarised(info, changed))
        fake.emit("session.diff", {"sessionID": root, "diff": []})
        hold.release()
        await rec.wait_for("turn.completed")
        # OpenCode's last computation comes just after the idle: still the turn's.
        fake.emit("message.updated", summarised(info, [A, B]))
        fake.emit("message.updated", summarised(info, [B]))
        last = await rec.wait_for(
            "turn.diff.updated", lambda e: len(e.files) == 1 and e.files[0].path == "b.txt"
        )
        replayed = [e async for e in _replay(oc)]
        await rec.close()
    diffs = rec.of("turn.diff.updated")
    assert [[f.path for f in d.files] for d in diffs] == [["a.txt"], ["a.txt", "b.txt"], ["b.txt"]]
    assert {d.turn_id for d in diffs} == {turn.turn_id}
    assert diffs[-1] is last and all(d.raw is None for d in diffs)
    assert diffs[1].files[1] == FileDiff("b.txt", "deleted", 0, 1, "-b")
    types = rec.types(T)
    assert types.index("turn.diff.updated") < types.index("turn.completed")
    assert [e.event_id for e in replayed if e.type == "turn.diff.updated"] == [
        d.event_id for d in diffs
    ]


async def test_a_user_message_of_no_turn_is_not_sent(
    oc: OpenCodeAdapter, fake: FakeOpenCodeServer, rec: Recorder
) -> None:
    session, _ = await start_scripted_turn(oc, fake, T, "root", [Text("done")])
    await rec.wait_for("turn.completed")
    info = root_user_message(fake, session.session_id)
    stranger = {**info, "id": "msg_" + "0" * 26}
    fake.emit("message.updated", summarised(stranger, [A]))
    fake.emit("message.updated", summarised(info, [B]))
    await rec.wait_for("turn.diff.updated")
    assert [[f.path for f in d.files] for d in rec.of("turn.diff.updated")] == [["b.txt"]]


async def test_a_steered_turn_sends_the_union_of_its_prompts_diffs(
    fake: FakeOpenCodeServer,
) -> None:
    # Measured on 1.18.34: a steer's prompt gets its own summary (the steps answering
    # it), and the first prompt's summary keeps what its own steps changed.
    fake.script("long", [Text("working"), Hang()])
    one = {"file": "one.txt", "patch": "+1", "additions": 3, "deletions": 0, "status": "added"}
    again = {**one, "patch": "+2", "additions": 1, "deletions": 1, "status": "modified"}
    async with OpenCodeAdapter(fake.base_url, transport=fake.transport) as oc:
        rec = Recorder(oc)
        root = (await oc.start_session(T)).session_id
        first = await oc.send_turn(T, "start [[script:long]]")
        prompt = root_user_message(fake, root)
        await oc.send_turn(T, "also do this")
        steer = root_user_message(fake, root)  # the fake echoes a steer as it admits it
        assert steer["id"] != prompt["id"]
        fake.emit("message.updated", summarised(prompt, [one]))
        fake.emit("message.updated", summarised(steer, [again, B]))
        await rec.wait_for("turn.diff.updated", lambda e: len(e.files) == 2)
        await rec.close()
    diffs = rec.of("turn.diff.updated")
    assert {d.turn_id for d in diffs} == {first.turn_id}
    assert diffs[-1].files == (
        FileDiff("b.txt", "deleted", 0, 1, "-b"),
        FileDiff("one.txt", "added", 4, 1, "+1+2"),
    )


async def _replay(oc: OpenCodeAdapter) -> Any:
    stream = oc.events(T, replay=True)
    try:
        seen = 0
        while True:
            event = await anext(stream)
            yield event
            seen += event.type == "turn.diff.updated"
            if seen == 3:
                return
    finally:
        await stream.aclose()


async def test_the_fakes_write_and_edit_tools_change_files_when_snapshots_are_on(
    fake: FakeOpenCodeServer,
) -> None:
    fake.snapshot = True
    new = f"{fake.directory}/new.txt"
    fake.script(
        "root",
        [
            Tool("write", {"filePath": new, "content": "a\nb\n"}),
            Tool("edit", {"filePath": new, "oldString": "b", "newString": "B\nc"}),
            Text("done"),
        ],
    )
    fake.script("talk", [Text("nothing changed")])
    async with OpenCodeAdapter(fake.base_url, transport=fake.transport) as oc:
        rec = Recorder(oc)
        await oc.start_session(T)
        first = await oc.send_turn(T, "go [[script:root]]")
        await rec.wait_for("turn.completed")
        second = await oc.send_turn(T, "go [[script:talk]]")
        await rec.wait_for("turn.completed", lambda e: e.turn_id == second.turn_id)
        await rec.close()
    diffs = rec.of("turn.diff.updated")
    assert {d.turn_id for d in diffs} == {first.turn_id}
    # The fake's consecutive tools are one model step: one diff, the file as it ends.
    assert [(f.path, f.status, f.additions, f.deletions) for d in diffs for f in d.files] == [
        ("new.txt", "added", 3, 0)
    ]
    assert diffs[-1].files[0].patch is not None and "+B" in diffs[-1].files[0].patch
    native = [e["properties"]["diff"] for e in fake.events if e["type"] == "session.diff"]
    assert native and all(d == [] for d in native), "session.diff stays [] as on 1.18.34"


async def test_a_diff_the_stream_missed_in_an_outage_is_read_back_with_the_turn(
    fake: FakeOpenCodeServer,
) -> None:
    """The run writes a file and ends while the event stream is down: the diff summary is
    only stored. The reconcile after the outage reads the prompt back and sends its diff."""
    fake.snapshot = True
    write = Tool("write", {"filePath": "a.txt", "content": "one\ntwo\n"}, duration=0.1)
    fake.script("root", [Text("before the drop"), write, Text(" end")])
    async with OpenCodeAdapter(fake.base_url, transport=fake.transport) as oc:
        rec = Recorder(oc)
        root = (await oc.start_session(T)).session_id
        turn = await oc.send_turn(T, "go [[script:root]]")
        await rec.wait_for("content.delta")
        reconnect = fake.hold("GET", "/event")
        fake.drop_event_streams()
        await fake.wait_until(lambda: not fake.sessions[root].busy, timeout=3)
        assert rec.of("turn.diff.updated") == [], "the diff was sent while the stream was down"
        reconnect.release()
        done = await rec.wait_for("turn.completed", timeout=5)
        diff = await rec.wait_for("turn.diff.updated", timeout=5)
        await rec.close()
    assert done.turn_id == diff.turn_id == turn.turn_id
    assert [(f.path, f.status, f.additions) for f in diff.files] == [("a.txt", "added", 2)]
