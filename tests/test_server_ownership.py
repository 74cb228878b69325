"""Who owns the OpenCode server process (B1, B24).

With a ``base_url`` the adapter connects to a server somebody else runs: it never
starts a local ``opencode serve`` and never stops one. Without it, the adapter
starts its own and stops it on close. ``ServerProcess`` (what ``__aenter__`` would
construct) is replaced by a spy here, so a spawn attempt is seen directly, not
inferred from a test that could not have spawned anything anyway.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

import adapter._adapter as adapter_module
from adapter import OpenCodeAdapter, OpenCodeClient, Timeouts
from adapter.testing.fake import FakeOpenCodeServer, Text
from tests.adapter_support import Recorder, start_scripted_turn

T = "thread-1"


@dataclass
class Spawns:
    """What the adapter asked of every ``ServerProcess`` it made."""

    made: list[SpyServer] = field(default_factory=list)

    @property
    def calls(self) -> list[str]:
        return [call for server in self.made for call in server.calls]


class SpyServer:
    """Stands in for ``ServerProcess``: records ``start``/``stop`` and spawns nothing."""

    def __init__(self, spawns: Spawns, binary: str, **options: object) -> None:
        self.binary = binary
        self.options = options
        self.base_url = "http://127.0.0.1:9"  # never used: no session is started on it
        self.returncode: int | None = None
        self.exited = asyncio.Event()
        self.calls: list[str] = []
        spawns.made.append(self)

    async def start(self) -> None:
        self.calls.append("start")

    async def stop(self) -> None:
        self.calls.append("stop")
        self.returncode = 0
        self.exited.set()


@pytest.fixture
def spawns(monkeypatch: pytest.MonkeyPatch) -> Iterator[Spawns]:
    """Every ``ServerProcess`` the adapter constructs during the test, as spies."""
    record = Spawns()
    monkeypatch.setattr(
        adapter_module,
        "ServerProcess",
        lambda binary, **options: SpyServer(record, binary, **options),
    )
    yield record


async def test_without_a_base_url_the_adapter_starts_its_own_server_and_stops_it(
    spawns: Spawns,
) -> None:
    """The control: the spy sees the owned path, so its silence below means something."""
    oc = OpenCodeAdapter(binary="opencode-stand-in")
    async with oc:
        assert [s.binary for s in spawns.made] == ["opencode-stand-in"]
        assert spawns.calls == ["start"]
        assert oc.base_url == spawns.made[0].base_url
    assert spawns.calls == ["start", "stop"]


async def test_a_configured_base_url_never_spawns_a_local_server(
    fake: FakeOpenCodeServer, spawns: Spawns
) -> None:
    async with OpenCodeAdapter(
        fake.base_url, transport=fake.transport, timeouts=Timeouts(connect=2.0)
    ) as oc:
        rec = Recorder(oc)
        await start_scripted_turn(oc, fake, T, "ok", [Text("answered")])
        await rec.wait_for("turn.completed")
        await oc.stop_session(T)
        await rec.close()
        assert oc.base_url == fake.base_url
    assert spawns.made == []


async def test_a_configured_server_is_never_stopped_and_keeps_answering_after_close(
    fake: FakeOpenCodeServer, spawns: Spawns
) -> None:
    oc = OpenCodeAdapter(fake.base_url, transport=fake.transport, timeouts=Timeouts(connect=2.0))
    async with oc:
        first = await oc.start_session(T)
        await oc.start_session("thread-2")
        await oc.stop_session(T)  # a session stop …
    # … and the close (which stops "thread-2") asked no server process to stop.
    assert spawns.calls == []
    assert not fake.closed
    async with OpenCodeClient(fake.base_url, transport=fake.transport) as client:
        assert (await client.health()).version
        assert (await client.get_session(first.session_id)).id == first.session_id
    async with OpenCodeAdapter(
        fake.base_url, transport=fake.transport, timeouts=Timeouts(connect=2.0)
    ) as again:
        rec = Recorder(again)
        await start_scripted_turn(again, fake, T, "ok", [Text("still here")])
        done = await rec.wait_for("turn.completed")
        await rec.close()
    assert done.thread_id == T
    assert spawns.made == []
