"""Bounded copies of untrusted text and tool inputs, for the partial-result collector.

Why its own module: a runaway tool or a hostile stream must not exhaust memory, so
every string the collector keeps is cut at a byte limit (UTF-8 safe, with a visible
``…[truncated N bytes]`` marker) and every tool input is copied detached and bounded.
These are the rules of that cutting, apart from what the collector does with it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

__all__ = ["Slot", "bound_input", "cut_utf8", "join_bounded", "marker", "utf8"]

_FAST_LOADS = msgspec.json.Decoder().decode
_NAME_CAP = 256
_INPUT_MAX_KEYS = 64


def marker(dropped: int) -> str:
    return f"\n…[truncated {dropped} bytes]"


def utf8(value: str) -> bytes:
    # "replace" because JSON may carry lone surrogates, which strict UTF-8
    # refuses; a replaced character is better than a dropped event.
    return value.encode("utf-8", "replace")


def cut_utf8(data: bytes, limit: int) -> bytes:
    """The longest prefix of ``data`` of at most ``limit`` bytes that ends on a character."""
    if len(data) <= limit:
        return data
    cut = max(limit, 0)
    # data[cut] is the first byte dropped; if it continues a character, that
    # character straddles the cut and goes too.
    while cut > 0 and (data[cut] & 0xC0) == 0x80:
        cut -= 1
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
        text = self.data.decode("utf-8", "replace")
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
            pieces.append(data.decode("utf-8", "replace"))
            if slot.dropped:
                pieces.append(marker(slot.dropped))
                cut = True
            continue
        kept = cut_utf8(data, room)
        rest = sum(s.full_size + 1 for s in slots[index + 1 :])
        pieces.append(kept.decode("utf-8", "replace"))
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
            kept = cut_utf8(raw, room).decode("utf-8") if room > 0 else ""
            bounded[name] = kept + marker
    text = json.dumps(bounded, ensure_ascii=False)
    size = len(utf8(text))
    if size > limit:
        return {}, 0, True
    return bounded, size, True
