"""The ACP agent under a hostile or broken client: every line is answered or dropped, and
the agent goes on until EOF.

Two levels: the line check and the transport alone (fast, with a hypothesis fuzz of
arbitrary byte lines), then the real ``opencode-tree acp`` command as a subprocess on the
fake server (``python -m tests.acp.client_side``), fed each hostile line on its stdin.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import tracemalloc
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from acp import text_block
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapter import MAX_PROMPT_BYTES, OpenCodeAdapter
from adapter._base._unicode import has_surrogates, surrogate_path
from adapter.acp._inbound import (
    MAX_DEPTH,
    MAX_LINE_BYTES,
    MAX_VALUES,
    Accept,
    Drop,
    Refuse,
    check_line,
)
from adapter.acp._outbound import encode_message
from adapter.acp._transport import CheckedTransport
from adapter.testing.fake import FakeOpenCodeServer, Permission, Text, Tool
from tests.acp.client_side import connected

ROOT = Path(__file__).resolve().parents[2]
INIT = b'{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":1}}'


def deep(levels: int, inner: bytes = b"1") -> bytes:
    return b'{"a":' * levels + inner + b"}" * levels


def request(body: bytes, rid: bytes = b"5") -> bytes:
    return b'{"jsonrpc":"2.0","id":' + rid + b',"method":"initialize","params":' + body + b"}"


# (line, outcome): ("refuse", code, id) is an error answer, "drop" no answer at all.
HOSTILE: dict[str, tuple[bytes, Any]] = {
    "batch": (b"[1,2,3]", ("refuse", -32600, None)),
    "batch of requests": (b"[" + INIT % 1 + b"]", ("refuse", -32600, None)),
    "string": (b'"hello"', ("refuse", -32600, None)),
    "number": (b"42", ("refuse", -32600, None)),
    "null": (b"null", ("refuse", -32600, None)),
    "true": (b"true", ("refuse", -32600, None)),
    "empty object": (b"{}", ("refuse", -32600, None)),
    "malformed": (b"{bad", ("refuse", -32700, None)),
    "truncated request": (INIT[:30], ("refuse", -32700, None)),
    "NaN": (
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":NaN}',
        ("refuse", -32700, None),
    ),
    "not UTF-8": (b'{"a":"\xff\xfe"}', ("refuse", -32700, None)),
    "CESU surrogate bytes": (b'{"a":"\xed\xa0\x80"}', ("refuse", -32700, None)),
    "NUL": (b"\x00", ("refuse", -32700, None)),
    "BOM": (b"\xef\xbb\xbf" + INIT % 1, ("refuse", -32700, None)),
    "nested past the parser": (b"[" * 100_000, ("refuse", -32600, None)),
    "nested params": (request(deep(MAX_DEPTH + 5)), ("refuse", -32600, 5)),
    "too many values": (request(b"[" + b"[]," * MAX_VALUES + b"0]"), ("refuse", -32600, None)),
    "method not a string": (b'{"jsonrpc":"2.0","id":9,"method":5}', ("refuse", -32600, 9)),
    "id a list": (b'{"jsonrpc":"2.0","id":[1],"method":"initialize"}', ("refuse", -32600, None)),
    "id a float": (b'{"jsonrpc":"2.0","id":1e400,"method":"initialize"}', ("refuse", -32600, None)),
    "lone surrogate in params": (
        request(b'{"protocolVersion":1,"x":"\\ud800"}', b"3"),
        ("refuse", -32602, 3),
    ),
    "lone surrogate in id": (
        request(b'{"protocolVersion":1}', b'"\\udc00"'),
        ("refuse", -32600, None),
    ),
    "response with an error that is no object": (b'{"jsonrpc":"2.0","id":0,"error":5}', "drop"),
    "response with a list id": (b'{"jsonrpc":"2.0","id":[0],"result":{}}', "drop"),
    "notification with a lone surrogate": (
        b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"\\ud800"}}',
        "drop",
    ),
    "blank": (b"   \t\r", None),
}


def outcome(verdict: Accept | Refuse | Drop | None) -> Any:
    if isinstance(verdict, Refuse):
        return ("refuse", verdict.response["error"]["code"], verdict.response["id"])
    if isinstance(verdict, Drop):
        return "drop"
    return "accept" if isinstance(verdict, Accept) else None


# -- the line check alone ------------------------------------------------------------------


@pytest.mark.parametrize(("line", "expected"), list(HOSTILE.values()), ids=list(HOSTILE))
def test_each_hostile_line_is_refused_or_dropped(line: bytes, expected: Any) -> None:
    assert outcome(check_line(line)) == expected


def test_well_formed_messages_pass_as_they_are() -> None:
    message = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
    verdict = check_line(json.dumps(message).encode() + b"\r")
    assert isinstance(verdict, Accept) and verdict.message == message
    pair = check_line(request(b'{"text":"\\ud83d\\ude00"}'))  # a pair is one character
    assert isinstance(pair, Accept) and pair.message["params"]["text"] == "\U0001f600"
    nested = check_line(request(deep(MAX_DEPTH - 3)))  # the message and params are 2 levels
    assert isinstance(nested, Accept)
    commas = b'{"text":"' + b'1,2,[3],{4},\\"5\\",' * MAX_VALUES + b'"}'  # one string
    assert isinstance(check_line(request(commas)), Accept)
    response = check_line(b'{"jsonrpc":"2.0","id":0,"result":{"outcome":{"x":"\\ud800"}}}')
    assert isinstance(response, Accept)  # a response is made well formed, not refused
    assert response.message["result"]["outcome"]["x"] == "\ufffd"


def test_an_error_answer_names_the_cause() -> None:
    verdict = check_line(b"[1,2,3]")
    assert isinstance(verdict, Refuse)
    error = verdict.response["error"]
    assert verdict.response["jsonrpc"] == "2.0"
    assert error["message"] == "Invalid request" and "batch" in error["data"]["details"]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
messages = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.just("2.0") | st.text(max_size=3),
        "id": st.none() | st.integers() | st.text(max_size=5) | json_values,
        "method": st.sampled_from(["initialize", "session/new", "_x"]) | json_values,
        "params": json_values,
        "result": json_values,
        "error": json_values,
    },
)
lines = (
    st.binary(max_size=300)
    | messages.map(lambda m: json.dumps(m).encode())
    | json_values.map(lambda v: json.dumps(v, ensure_ascii=False).encode("utf-8", "surrogatepass"))
).map(lambda b: b.replace(b"\n", b" "))


@settings(max_examples=400, deadline=None)
@given(lines)
def test_the_check_never_raises_and_passes_on_only_objects(line: bytes) -> None:
    verdict = check_line(line)
    if isinstance(verdict, Accept):
        assert isinstance(verdict.message, dict)
        encoded = json.dumps(verdict.message, ensure_ascii=False, allow_nan=False)
        assert not has_surrogates(encoded)
        method, rid = verdict.message.get("method"), verdict.message.get("id")
        assert method is None or isinstance(method, str)
        assert rid is None or type(rid) in (int, str)
    elif isinstance(verdict, Refuse):
        answer = json.loads(encode_message(verdict.response).decode("utf-8"))
        assert answer["error"]["code"] in (-32700, -32600, -32602)
        assert answer["id"] is None or type(answer["id"]) in (int, str)


# -- the transport alone -------------------------------------------------------------------


@dataclass
class Sink:
    """A StreamWriter stand-in recording what the transport writes."""

    data: bytearray = field(default_factory=bytearray)

    def write(self, chunk: bytes) -> None:
        self.data += chunk

    async def drain(self) -> None:
        await asyncio.sleep(0)

    def lines(self) -> list[Any]:
        return [json.loads(line.decode("utf-8")) for line in bytes(self.data).splitlines()]


def transport_over(data: bytes, **kwargs: Any) -> tuple[CheckedTransport, Sink]:
    reader = asyncio.StreamReader(limit=16)  # far below any line: the SDK's limit is moot
    reader.feed_data(data)
    reader.feed_eof()
    sink = Sink()
    return CheckedTransport(reader, sink, **kwargs), sink


async def received(transport: CheckedTransport) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while (message := await transport.receive()) is not None:
        out.append(message)
    return out


async def test_the_transport_answers_bad_lines_and_passes_good_ones_in_order() -> None:
    stream = b"\n".join([b"[1,2,3]", INIT % 1, b"null", b"", b"{bad", INIT % 2]) + b"\n"
    transport, sink = transport_over(stream + b'{"jsonrpc":"2.0","id":3,"method":"x"}')
    assert [m["id"] for m in await received(transport)] == [1, 2, 3]  # last line without \n
    assert [(a["id"], a["error"]["code"]) for a in sink.lines()] == [
        (None, -32600),
        (None, -32600),
        (None, -32700),
    ]


async def test_a_line_longer_than_the_bound_is_answered_and_the_next_one_read() -> None:
    long_line = b'{"x":"' + b"a" * 5000 + b'"}'
    transport, sink = transport_over(long_line + b"\n" + INIT % 7 + b"\n", max_line_bytes=1024)
    assert [m["id"] for m in await received(transport)] == [7]
    [answer] = sink.lines()
    assert answer["id"] is None and answer["error"]["code"] == -32600
    assert "1024 bytes" in answer["error"]["data"]["details"]


def test_the_default_bound_takes_the_largest_prompt_the_adapter_accepts() -> None:
    assert MAX_LINE_BYTES > MAX_PROMPT_BYTES * 4 // 3 + 1024 * 1024  # base64 and the envelope


class EndlessLine:
    """A reader producing one line of ``size`` bytes, chunk by chunk, then a request."""

    def __init__(self, size: int) -> None:
        self.left = size
        self.tail = b"\n" + INIT % 8 + b"\n"

    async def read(self, n: int) -> bytes:
        if self.left > 0:
            chunk = min(n, self.left)
            self.left -= chunk
            return b"x" * chunk
        tail, self.tail = self.tail, b""
        return tail


async def test_an_over_long_line_is_discarded_as_it_comes_never_held_whole() -> None:
    sink = Sink()
    transport = CheckedTransport(EndlessLine(64 * 1024 * 1024), sink, max_line_bytes=256 * 1024)  # type: ignore[arg-type]
    tracemalloc.start()
    try:
        messages = await received(transport)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [m["id"] for m in messages] == [8]
    assert [a["error"]["code"] for a in sink.lines()] == [-32600]
    assert peak < 2 * 1024 * 1024  # the 64 MiB line never was in memory


class Broken:
    async def read(self, n: int) -> bytes:
        raise ConnectionResetError("the client went away")


async def test_a_reader_that_fails_is_the_end_of_input_not_a_crash() -> None:
    transport = CheckedTransport(Broken(), Sink())  # type: ignore[arg-type]
    assert await transport.receive() is None


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(lines, max_size=8), st.integers(min_value=1, max_value=64))
def test_any_byte_stream_yields_only_objects_and_well_formed_answers(
    chunks: list[bytes], limit: int
) -> None:
    async def run() -> None:
        transport, sink = transport_over(b"\n".join(chunks), max_line_bytes=limit * 8)
        for message in await received(transport):
            assert isinstance(message, dict)
        for answer in sink.lines():
            assert answer["jsonrpc"] == "2.0" and "error" in answer

    asyncio.run(run())


def test_what_leaves_the_agent_is_well_formed_json() -> None:
    message = {"a": "x\ud800", "\udc00k": ["\ud83d", "\ud83d\ude00"], "n": float("nan")}
    line = encode_message(message)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    decoded = json.loads(line.decode("utf-8"))
    assert decoded == {"a": "x\ufffd", "\ufffdk": ["\ufffd", "\U0001f600"], "n": None}


# -- server data with lone surrogates reaches the client well formed -----------------------


async def test_updates_built_from_server_text_with_lone_surrogates_are_well_formed_json(
    fake: FakeOpenCodeServer,
) -> None:
    fake.script(
        "odd",
        [
            Tool("bash", {"command": "ls \ud800", "\udc00key": ["\ud800"]}, output="out \udc00"),
            Text("half \ud800 of a pair"),
        ],
    )
    async with (
        OpenCodeAdapter(fake.base_url, transport=fake.transport) as oc,
        connected(oc) as harness,
    ):
        sid = await harness.new_session()
        answer = await asyncio.wait_for(
            harness.conn.prompt(session_id=sid, prompt=[text_block("go [[script:odd]]")]), 10
        )
        assert answer.stop_reason == "end_turn"
        raw = harness.raw_lines()
    assert harness.client.text() == "half \ufffd of a pair"
    [call] = harness.client.calls().values()
    assert call["status"] == "completed" and call["raw_output"] == "out \ufffd"
    for line in raw:
        text = line.decode("utf-8")  # strict: no surrogate bytes
        assert "\\ud8" not in text.lower() and "\\udc" not in text.lower()
        assert surrogate_path(json.loads(text)) is None


async def test_a_permission_and_a_plan_with_lone_surrogates_reach_the_client(
    fake: FakeOpenCodeServer,
) -> None:
    """A key holding a lone half made pydantic's dump of the update raise: the plan was
    lost and the permission request never asked (the turn hung)."""
    todos = [{"content": "step \ud800", "status": "pending", "priority": "high", "\udc00": 1}]
    fake.script(
        "asks",
        [
            Tool("todowrite", {"todos": todos, "\ud800": "x"}, output="ok"),
            Permission("bash", patterns=("rm \ud800",), metadata={"\udc00": "k"}),
            Text("done"),
        ],
    )
    async with (
        OpenCodeAdapter(fake.base_url, transport=fake.transport) as oc,
        connected(oc) as harness,
    ):
        sid = await harness.new_session()
        running = asyncio.create_task(
            harness.conn.prompt(session_id=sid, prompt=[text_block("go [[script:asks]]")])
        )
        ask = await asyncio.wait_for(harness.client.asks.get(), 10)
        assert ask.tool_call.title == "bash: rm \ufffd"
        ask.choose("accept")
        assert (await asyncio.wait_for(running, 10)).stop_reason == "end_turn"
        raw = harness.raw_lines()
    [plan] = [u for _, u in harness.client.updates if u.session_update == "plan"]
    assert [e.content for e in plan.entries] == ["step \ufffd"]
    for line in raw:
        assert surrogate_path(json.loads(line.decode("utf-8"))) is None


# -- the real command, a subprocess on the fake server ----------------------------------------


class Agent:
    """``opencode-tree acp`` on the fake server, spoken to line by line."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.next_id = 100

    async def send(self, line: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + b"\n")
        await self.process.stdin.drain()

    async def answer(self) -> dict[str, Any]:
        """The next response (a session's ``session/update`` notifications, such as
        ``available_commands_update`` after ``session/new``, are skipped)."""
        assert self.process.stdout is not None
        while True:
            async with asyncio.timeout(30):
                line = await self.process.stdout.readline()
            assert line.endswith(b"\n"), line
            message: dict[str, Any] = json.loads(line.decode("utf-8"))
            if message.get("method") != "session/update":
                return message

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        payload = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        await self.send(json.dumps(payload).encode())
        answer = await self.answer()
        assert answer["id"] == self.next_id, answer
        return answer

    async def still_works(self, cwd: str) -> None:
        init = await self.call("initialize", {"protocolVersion": 1})
        assert init["result"]["agentInfo"]["name"] == "opencode-tree"
        new = await self.call("session/new", {"cwd": cwd, "mcpServers": []})
        assert new["result"]["sessionId"].startswith("ses")

    async def end(self) -> tuple[int, str]:
        assert self.process.stdin is not None and self.process.stderr is not None
        self.process.stdin.close()
        async with asyncio.timeout(30):
            stderr = await self.process.stderr.read()
            code = await self.process.wait()
        return code, stderr.decode("utf-8", "replace")


@pytest.fixture
async def agent() -> AsyncIterator[Agent]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.acp.client_side",
        "acp",
        "--url",
        FakeOpenCodeServer.base_url,
        cwd=ROOT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        limit=1024 * 1024,
    )
    try:
        yield Agent(process)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


SUBPROCESS_CASES = {
    **HOSTILE,
    "longer than the bound": (b'{"x":"' + b"a" * MAX_LINE_BYTES + b'"}', ("refuse", -32600, None)),
}


@pytest.mark.parametrize(
    ("line", "expected"), list(SUBPROCESS_CASES.values()), ids=list(SUBPROCESS_CASES)
)
async def test_the_agent_answers_or_drops_each_hostile_line_and_goes_on_until_eof(
    agent: Agent, line: bytes, expected: Any, tmp_path: Path
) -> None:
    await agent.still_works(str(tmp_path))
    await agent.send(line)
    if isinstance(expected, tuple):
        answer = await agent.answer()
        assert (answer["error"]["code"], answer["id"]) == expected[1:], answer
        assert answer["jsonrpc"] == "2.0" and answer["error"]["data"]["details"]
    # A dropped line has no answer: the next one read is initialize's.
    await agent.still_works(str(tmp_path))
    await agent.send(line)  # twice: a bad line leaves no state behind
    if isinstance(expected, tuple):
        assert (await agent.answer())["error"]["code"] == expected[1]
    await agent.still_works(str(tmp_path))
    code, stderr = await agent.end()
    assert code == 0, stderr
    assert "Traceback" not in stderr, stderr
    if expected == "drop":
        assert "acp.line_dropped" in stderr
    elif expected is not None:
        assert "acp.line_refused" in stderr


async def test_a_client_that_closes_mid_line_ends_the_agent_cleanly(agent: Agent) -> None:
    await agent.send(INIT % 1)
    assert (await agent.answer())["id"] == 1
    assert agent.process.stdin is not None
    agent.process.stdin.write(b'{"jsonrpc":"2.0","id":2,"meth')  # no newline: EOF cuts it
    code, stderr = await agent.end()
    assert code == 0 and "Traceback" not in stderr, stderr


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
async def test_a_shutdown_signal_closes_the_adapter_and_exits_cleanly(
    agent: Agent, signum: int, tmp_path: Path
) -> None:
    """A host that stops the agent with a signal rather than EOF: the adapter is closed
    (with its own ``opencode serve``, which SIGTERM's default action left running)."""
    await agent.still_works(str(tmp_path))
    agent.process.send_signal(signum)
    assert agent.process.stderr is not None
    async with asyncio.timeout(30):
        stderr = (await agent.process.stderr.read()).decode("utf-8", "replace")
        code = await agent.process.wait()
    assert code == 0, stderr
    assert "Traceback" not in stderr, stderr
    assert "acp.signal" in stderr and "acp.closed" in stderr
