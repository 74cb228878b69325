"""Benchmark the ACP agent's checked input and well-formed output: what the guards cost.

What the line check (:mod:`adapter.acp._inbound`, :mod:`adapter.acp._transport`) and
the outbound encoder (:mod:`adapter.acp._outbound`) cost, against the SDK's own stdio
reader (``acp._transport.NdjsonTransport``) where there is one to compare:

* **Small lines**: ``--lines`` ``initialize`` requests read through each transport
  from an in-memory ``asyncio.StreamReader``: messages per second.
* **Big lines**: one ``session/prompt`` carrying the largest image the adapter takes
  (``MAX_PROMPT_BYTES`` of base64, 26.7 MiB), a prompt text full of commas and
  brackets, and hostile lines at the bound (32 MiB arrays of zeros, of ``[]``, of
  ``"a"``): time to check each, and the peak memory traced while doing so (a second
  run: tracing slows allocation down).
* **Over-long line**: a 256 MiB line (bound 32 MiB) produced chunk by chunk: the time
  to discard it and answer, and the peak memory traced (the line is never held).
* **Output**: ``encode_message`` of a 64 KiB ``tool_call_update`` without and with a lone
  surrogate: microseconds per message.

Figures go to stdout; nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import time
import tracemalloc
from typing import Any

from acp._transport import NdjsonTransport

from adapter import MAX_PROMPT_BYTES
from adapter.acp._inbound import check_line
from adapter.acp._outbound import encode_message
from adapter.acp._transport import CheckedTransport

MiB = 1024 * 1024
INIT = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'


class _Sink:
    def write(self, data: bytes) -> None:
        pass

    async def drain(self) -> None:
        pass


class _Sender:
    async def send(self, message: dict[str, Any]) -> None:
        pass

    async def close(self) -> None:
        pass


def _reader(data: bytes) -> asyncio.StreamReader:
    reader = asyncio.StreamReader(limit=64 * MiB)
    reader.feed_data(data)
    reader.feed_eof()
    return reader


async def _drain(transport: Any) -> int:
    count = 0
    while await transport.receive() is not None:
        count += 1
    return count


async def small_lines(n: int) -> None:
    data = INIT * n
    for name, make in (
        ("sdk NdjsonTransport", lambda: NdjsonTransport(_reader(data), _Sender())),  # type: ignore[arg-type]
        ("CheckedTransport", lambda: CheckedTransport(_reader(data), _Sink())),
    ):
        transport = make()
        start = time.perf_counter()
        count = await _drain(transport)
        took = time.perf_counter() - start
        print(f"  {name:22} {count} lines in {took:.3f} s: {count / took:,.0f} messages/s")


def _timed_check(name: str, line: bytes) -> None:
    start = time.perf_counter()
    verdict = check_line(line)
    took = time.perf_counter() - start
    tracemalloc.start()  # a second run: tracing slows allocation down
    check_line(line)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(
        f"  {name:34} {len(line) / MiB:5.1f} MiB: {took:.3f} s, "
        f"peak {peak / MiB:6.1f} MiB traced, {type(verdict).__name__}"
    )


def big_lines() -> None:
    image = base64.b64encode(b"\x89PNG" * (MAX_PROMPT_BYTES // 4)).decode()
    prompt = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "session/prompt",
        "params": {
            "sessionId": "ses_x",
            "prompt": [{"type": "image", "mimeType": "image/png", "data": image}],
        },
    }
    _timed_check("largest prompt (image, base64)", json.dumps(prompt).encode())
    head = b'{"jsonrpc":"2.0","id":4,"method":"x","params":'
    wide = head + b"[" + b"0," * (16 * MiB - 40) + b"0]}"
    _timed_check("32 MiB array of zeros", wide)
    nested = head + b"[" + b"[]," * (32 * MiB // 3 - 30) + b"[]]}"
    _timed_check("32 MiB of [[],[],...]", nested)
    strings = head + b"[" + b'"a",' * (8 * MiB - 30) + b'"a"]}'
    _timed_check('32 MiB of ["a","a",...]', strings)
    text = {"t": "1,2,[3],{4}," * (2 * MiB)}  # a text full of JSON's punctuation: one value
    _timed_check("text full of commas and brackets", head + json.dumps(text).encode() + b"}")


class _Endless:
    def __init__(self, size: int) -> None:
        self.left = size
        self.tail = b"\n" + INIT

    async def read(self, n: int = -1) -> bytes:
        if self.left > 0:
            chunk = min(n, self.left)
            self.left -= chunk
            return b"x" * chunk
        tail, self.tail = self.tail, b""
        return tail


async def over_long(size: int) -> None:
    transport = CheckedTransport(_Endless(size), _Sink())
    tracemalloc.start()
    start = time.perf_counter()
    count = await _drain(transport)
    took = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(
        f"  a {size // MiB} MiB line, bound 32 MiB: discarded and answered in {took:.3f} s, "
        f"peak {peak / MiB:.2f} MiB traced, {count} message after it"
    )


def output(repeat: int) -> None:
    text = "x" * (64 * 1024)
    for name, body in (("no surrogate", text), ("one lone surrogate", text + "\ud800")):
        message = {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {
                "sessionId": "ses_x",
                "update": {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": "c1",
                    "rawOutput": body,
                    "content": [{"type": "content", "content": {"type": "text", "text": body}}],
                },
            },
        }
        start = time.perf_counter()
        for _ in range(repeat):
            encode_message(message)
        took = (time.perf_counter() - start) / repeat
        print(f"  encode 64 KiB update, {name:18}: {took * 1e6:7.1f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--over-long-mib", type=int, default=256)
    args = parser.parse_args()
    print("small lines (initialize):")
    asyncio.run(small_lines(args.lines))
    print("big lines (check_line alone):")
    big_lines()
    print("over-long line (CheckedTransport):")
    asyncio.run(over_long(args.over_long_mib * MiB))
    print("output (encode_message):")
    output(200)


if __name__ == "__main__":
    main()
