"""Bounded copies of untrusted text and tool inputs, for the partial-result collector.

Why its own module: a runaway tool or a hostile stream must not exhaust memory, so
every string the collector keeps is cut at a byte limit (UTF-8 safe, with a visible
``…[truncated N bytes]`` marker) and every tool input is copied detached and bounded.
These are the rules of that cutting, apart from what the collector does with it.

Text is kept as OpenCode sent it, lone UTF-16 surrogate halves included
(``surrogatepass``: three bytes each), because OpenCode cuts strings by UTF-16
units and the other half of a pair may come with the next delta
(:func:`pop_high_half` lets the collector join them). Text is made well formed
(:mod:`adapter._base._unicode`) only when it leaves, by :func:`text_of`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from .._base._unicode import well_formed

__all__ = [
    "Slot",
    "bound_input",
    "cut_utf8",
    "join_bounded",
    "marker",
    "pop_high_half",
    "text_of",
    "utf8",
]

_FAST_LOADS = msgspec.json.Decoder().decode
_NAME_CAP = 256
_INPUT_MAX_KEYS = 64


def marker(dropped: int) -> str:
    return f"\n…[truncated {dropped} bytes]"


def utf8(value: str) -> bytes:
    # "surrogatepass" because JSON may carry lone surrogates, which strict UTF-8
    # refuses: each is kept (three bytes) until text_of() makes the text well formed.
    return value.encode("utf-8", "surrogatepass")


def text_of(data: bytes | bytearray) -> str:
    """Stored bytes as text that leaves the process: halves paired, lone ones U+FFFD."""
    return well_formed(data.decode("utf-8", "surrogatepass"))


def _half_at(data: bytes | bytearray, index: int, *, low: bool) -> bool:
    """Whether a surrogate half starts at ``data[index]``: in surrogatepass UTF-8 a high
    half (U+D800..U+DBFF) is ED A0..AF xx, a low one (U+DC00..U+DFFF) ED B0..BF xx."""
    if index < 0 or index + 1 >= len(data) or data[index] != 0xED:
        return False
    second = data[index + 1]
    return 0xB0 <= second <= 0xBF if low else 0xA0 <= second <= 0xAF


def pop_high_half(data: bytearray) -> str:
    """Remove a high surrogate half that ends ``data`` and return it (``""`` if none).

    OpenCode cuts by UTF-16 units: when the next piece starts with the low half,
    the caller joins the two into the one character they encode.
    """
    if len(data) >= 3 and _half_at(data, len(data) - 3, low=False):
        half = bytes(data[-3:]).decode("utf-8", "surrogatepass")
        del data[-3:]
        return half
    return ""


def cut_utf8(data: bytes, limit: int) -> bytes:
    """The longest prefix of ``data`` of at most ``limit`` bytes that ends on a character
    (and not between the two halves of a surrogate pair)."""
    if len(data) <= limit:
        return data
    cut = max(limit, 0)
    # data[cut] is the first byte dropped; if it continues a character, that
    # character straddles the cut and goes too.
    while cut > 0 and (data[cut] & 0xC0) == 0x80:
        cut -= 1
    if cut >= 3 and _half_at(data, cut, low=True) and _half_at(data, cut - 3, low=False):
        cut -= 3
    return data[:cut]


@dataclass(slots=True)
class Slot:
    """One stored string: the kept UTF-8 prefix and how many bytes were dropped."""

    data: bytearray = field(default_factory=bytearray)
    dropped: int = 0

    @property
    def full_size(self) -> int:
        return len(self.data) + self.dropped

    def render(self) -> str:
        text = text_of(self.data)
        return text + marker(self.dropped) if self.dropped else text


def join_bounded(slots: Sequence[Slot], limit: int) -> tuple[str, bool]:
    """The slots' texts joined by newlines, at most ``limit`` bytes of content.

    Markers are not content: a part cut on its own keeps its marker inline,
    and where the joined text runs out of room, one marker counts every byte
    left out from there on.
    """
    pieces: list[str] = []
    room = limit
    cut = False
    for index, slot in enumerate(slots):
        data = (b"\n" if index else b"") + bytes(slot.data)
        if len(data) <= room:
            room -= len(data)
            pieces.append(text_of(data))
            if slot.dropped:
                pieces.append(marker(slot.dropped))
                cut = True
            continue
        kept = cut_utf8(data, room)
        rest = sum(s.full_size + 1 for s in slots[index + 1 :])
        pieces.append(text_of(kept))
        pieces.append(marker(len(data) - len(kept) + slot.dropped + rest))
        return "".join(pieces), True
    return "".join(pieces), cut


def bound_input(value: Mapping[str, Any], limit: int) -> tuple[dict[str, Any], int, bool]:
    """A detached, JSON-safe copy of a tool's input of at most ``limit`` bytes as JSON.

    Small inputs are kept as they are. A big one (a ``write`` of a large
    file) keeps its keys, with each value shortened to a fair share: the
    model needs to know what was called, not every byte of the arguments.
    """
    text = json.dumps(value, ensure_ascii=False, default=str)
    size = len(utf8(text))
    if size <= limit:
        try:  # msgspec reads it 3-4 times faster than json, except NaN or a lone surrogate
            copy = _FAST_LOADS(text)
        except ValueError:
            copy = json.loads(text)
        return (copy if isinstance(copy, dict) else {}), size, False
    keys = list(value)[:_INPUT_MAX_KEYS]
    share = limit // max(len(keys), 1) - 8
    bounded: dict[str, Any] = {}
    for key in keys:
        name = str(key)[:_NAME_CAP]
        item = value[key]
        if isinstance(item, str):
            shortened = item
        else:
            shortened = json.dumps(item, ensure_ascii=False, default=str)
            if len(utf8(shortened)) <= share:
                bounded[name] = json.loads(shortened)
                continue
        raw = utf8(shortened)
        if len(raw) <= share:
            bounded[name] = shortened
        else:
            marker = f"…[truncated {len(raw)} bytes]"
            room = share - len(utf8(marker))
            kept = cut_utf8(raw, room).decode("utf-8", "surrogatepass") if room > 0 else ""
            bounded[name] = kept + marker
    text = json.dumps(bounded, ensure_ascii=False)
    size = len(utf8(text))
    if size > limit:
        return {}, 0, True
    return bounded, size, True
