"""SSEDataDecoder: the data of each server-sent event, as ``httpx-sse`` reads it.

The client used ``httpx-sse`` until issue 12; its own decoder must find exactly
the same events in any stream, however the bytes are cut into chunks.
"""

from __future__ import annotations

import itertools

import pytest
from httpx_sse._decoders import SSEDecoder, SSELineDecoder
from hypothesis import given, settings
from hypothesis import strategies as st

from adapter import ProtocolError
from adapter._sse import SSEDataDecoder


def reference(stream: bytes) -> list[str]:
    """What ``httpx-sse`` (with the client's skip of empty data) yields for ``stream``."""
    lines = SSELineDecoder()
    events = SSEDecoder()
    text = stream.decode("utf-8", "replace")
    found: list[str] = []
    for line in [*(lines.decode(text) if text else []), *lines.flush()]:
        sse = events.decode(line.rstrip("\n"))
        if sse is not None and sse.data:
            found.append(sse.data)
    return found


def decoded(chunks: list[bytes], limit: int = 1 << 20) -> list[str]:
    decoder = SSEDataDecoder(limit)
    out: list[bytes] = []
    for chunk in chunks:
        out += decoder.feed(chunk)
    out += decoder.close()
    return [data.decode("utf-8", "replace") for data in out]


def cut(stream: bytes, points: list[int]) -> list[bytes]:
    bounds = sorted({0, len(stream), *(p % (len(stream) + 1) for p in points)})
    return [stream[a:b] for a, b in itertools.pairwise(bounds)]


_PIECES = [
    b"data:",
    b"data: ",
    b"data",
    b'{"type":"x"}',
    b"event: e",
    b"id: 1",
    b"retry: 5",
    b": comment",
    b":",
    b" ",
    b"x",
    "é€😀".encode(),
    b"\xff",
    b"\n",
    b"\r",
    b"\r\n",
    b"\n\n",
]


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.sampled_from(_PIECES), max_size=40),
    st.lists(st.integers(min_value=0, max_value=400), max_size=8),
)
def test_any_stream_cut_anywhere_reads_as_httpx_sse_reads_it(
    pieces: list[bytes], points: list[int]
) -> None:
    stream = b"".join(pieces)
    assert decoded(cut(stream, points)) == reference(stream)


def test_opencode_events_one_per_data_line() -> None:
    stream = b'data: {"a":1}\n\ndata:{"b":2}\n\n\n\ndata: {"c":3}\n\ndata: {"cut'
    for size in range(1, len(stream) + 1):
        chunks = [stream[i : i + size] for i in range(0, len(stream), size)]
        assert decoded(chunks) == ['{"a":1}', '{"b":2}', '{"c":3}']


def test_several_data_lines_are_joined_and_empty_events_left_out() -> None:
    stream = b"data: one\ndata:  two\n: note\nid: 7\n\nevent: x\n\ndata:\n\ndata\r\ndata: z\r\r"
    assert decoded([stream]) == ["one\n two", "\nz"] == reference(stream)


def test_a_stream_ending_in_a_carriage_return_ends_its_event() -> None:
    assert decoded([b"data: a\r", b"\r"]) == ["a"]
    assert decoded([b"data: a\n\r"]) == ["a"] == reference(b"data: a\n\r")


def test_an_event_that_never_ends_is_refused_at_the_limit() -> None:
    decoder = SSEDataDecoder(1024)
    decoder.feed(b"data: " + b"x" * 4000)
    with pytest.raises(ProtocolError, match="exceeds 1024 bytes"):
        decoder.feed(b"x" * 4000)
    many_lines = SSEDataDecoder(1024)
    with pytest.raises(ProtocolError):
        for _ in range(1000):
            many_lines.feed(b"data: short line\n")
