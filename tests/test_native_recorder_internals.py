"""The native recorder's wiring and backlog (``tests/test_native_recorder.py`` checks what
a recorder receives): off by default, the pump calls the translator itself, with no
wrapper and no queue; a recorder that blocks slows no thread, and its backlog stays
within its byte bound, the dropped records counted.

A test of internals: the recording (``oc._recording``, its ``peak_bytes`` and
``dropped``) and the pump's handler (``oc._pumps``, ``oc._translator``) have no public
view.
"""

from __future__ import annotations

import asyncio

from adapter import NativeRecord, NativeRecordGap, OpenCodeAdapter
from adapter.testing.fake import FakeOpenCodeServer, Text
from tests.adapter_support import Recorder
from tests.test_native_recorder import A, B, adapter_on, run_turn


async def test_the_recorder_is_off_by_default_and_costs_no_task(
    fake: FakeOpenCodeServer, oc: OpenCodeAdapter, rec: Recorder
) -> None:
    await oc.start_session(A)
    await run_turn(oc, rec, A, "hello")
    assert not [t for t in asyncio.all_tasks() if "native-recorder" in t.get_name()]
    # The recorder's wiring: the pump calls the translator itself, no wrapper, no queue.
    assert oc._recording is None
    assert oc._pumps[None]._on_event == oc._translator.handle


async def test_a_blocking_recorder_slows_no_thread_and_its_backlog_stays_bounded(
    fake: FakeOpenCodeServer,
) -> None:
    release = asyncio.Event()
    got: list[NativeRecord | NativeRecordGap] = []

    async def stuck(item: NativeRecord | NativeRecordGap) -> None:
        await release.wait()
        got.append(item)

    bound = 8 * 1024
    fake.script("long", [Text("word " * 400, chunks=80)])
    async with adapter_on(fake, native_recorder=stuck, native_recorder_bytes=bound) as oc:
        rec = Recorder(oc)
        await oc.start_session(A)
        await oc.start_session(B)
        async with asyncio.timeout(5):  # both turns end while the recorder is stuck
            await asyncio.gather(
                run_turn(oc, rec, A, "[[script:long]]"), run_turn(oc, rec, B, "[[script:long]]")
            )
        recording = oc._recording
        assert recording is not None
        assert 0 < recording.peak_bytes <= bound
        assert recording.dropped > 0
        release.set()
        await rec.close()
    # Each thread whose records were dropped hears how many, where they are missing.
    gaps = [item for item in got if isinstance(item, NativeRecordGap)]
    assert {gap.thread_id for gap in gaps} == {A, B}
    assert sum(gap.dropped for gap in gaps) == recording.dropped
