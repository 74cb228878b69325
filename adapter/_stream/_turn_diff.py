"""``turn.diff.updated``: the files a turn changed, from its user message's diff summary.

Measured on ``opencode serve`` 1.18.34 with snapshots on in a git project
(``tests/fixtures/events-diff-1.18.34.jsonl``; 1.17.19 and 1.18.3 run the same code):
``session.diff`` is ``[]`` after every step and idle, whatever changed, and carries files
only for a revert (what the revert undoes). The turn's changes come with its user
message: ``message.updated`` of the root's user message whose ``info.summary.diffs`` is
``[{file, patch, additions, deletions, status}]``, the turn's whole diff so far (from
its first step's snapshot to its newest finished step's, so a subagent's changes are
in it), sent after each step and once more just after the run's idle, repeated when
nothing changed; ``[]`` at the start of each turn; nothing with snapshots off. Older
releases (1.15.13, 1.14.48) send the same summary, and their ``session.diff`` is the
whole session's diff, not the turn's.

So the turn's user message is the source. This module parses its diff within bounds
(a patch is the file's whole unified diff: a 5,000-line new file's is 54 kB) and sends
it only when it changed from what was last sent for that message: a turn that changed
nothing sends nothing, a repeat is not sent again. A steered turn has one summary
per prompt (measured: the steer's covers the steps answering it, the first keeps its
own); the turn's files are their union.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .._client._native import MessageUpdated
from .._threads._registry import ThreadRegistry
from .._threads._thread_state import ThreadState
from .._types._events import FileDiff, TurnDiffUpdated

__all__ = [
    "MAX_DIFF_FILES",
    "MAX_PATCHES_CHARS",
    "MAX_PATCH_CHARS",
    "file_diffs",
    "prompt_diff",
    "turn_diff",
]

#: Files one ``turn.diff.updated`` lists; more are counted in ``omitted_files``.
MAX_DIFF_FILES = 1_000
#: A file's patch longer than this is dropped (``patch_omitted``); its counts stay.
MAX_PATCH_CHARS = 65_536
#: The patches of one event together; past it, further patches are dropped too.
MAX_PATCHES_CHARS = 1_048_576
_MAX_PATH = 4_096
_MAX_STATUS = 64
#: User messages of one turn whose files are remembered (a turn has one per prompt).
_MAX_PROMPTS = 64


def file_diffs(info: Mapping[str, Any]) -> tuple[tuple[FileDiff, ...], int] | None:
    """A user message ``info``'s ``summary.diffs`` as bounded files and how many entries
    were left out; ``None`` when it has no such list."""
    summary = info.get("summary")
    diffs = summary.get("diffs") if isinstance(summary, dict) else None
    if not isinstance(diffs, list):
        return None
    files = [f for f in map(_file, diffs) if f is not None]
    return _bounded(files, len(diffs) - len(files))


def _file(entry: object) -> FileDiff | None:
    if not isinstance(entry, dict):
        return None
    path = entry.get("file")
    additions = entry.get("additions")
    deletions = entry.get("deletions")
    status = entry.get("status")
    patch = entry.get("patch")
    if not isinstance(path, str) or not path or len(path) > _MAX_PATH:
        return None
    added, deleted = _count(additions), _count(deletions)
    if added is None or deleted is None:
        return None
    if status is not None and (not isinstance(status, str) or len(status) > _MAX_STATUS):
        return None
    if patch is not None and not isinstance(patch, str):
        return None
    oversized = patch is not None and len(patch) > MAX_PATCH_CHARS
    return FileDiff(
        path,
        status,
        added,
        deleted,
        None if oversized else patch,
        patch_omitted=oversized,
    )


def _count(value: object) -> int | None:
    """A line count (a JSON number, whole and not negative), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if value >= 0 and float(value).is_integer() else None


def _bounded(files: list[FileDiff], omitted: int) -> tuple[tuple[FileDiff, ...], int]:
    """At most :data:`MAX_DIFF_FILES` files, their patches within :data:`MAX_PATCHES_CHARS`."""
    kept = files[:MAX_DIFF_FILES]
    omitted += len(files) - len(kept)
    budget = MAX_PATCHES_CHARS
    out: list[FileDiff] = []
    for f in kept:
        if f.patch is not None and len(f.patch) > budget:
            f = FileDiff(f.path, f.status, f.additions, f.deletions, None, patch_omitted=True)
        budget -= len(f.patch or "")
        out.append(f)
    return tuple(out), omitted


def _union(prompts: Iterable[tuple[tuple[FileDiff, ...], int]]) -> tuple[tuple[FileDiff, ...], int]:
    """The files of a turn's prompts together: a file changed under two prompts adds up
    their counts and patches (OpenCode diffs each prompt's steps on their own)."""
    merged: dict[str, FileDiff] = {}
    omitted = 0
    for files, left_out in prompts:
        omitted += left_out
        for f in files:
            before = merged.get(f.path)
            if before is not None:
                patches = [p for p in (before.patch, f.patch) if p is not None]
                f = FileDiff(
                    f.path,
                    f.status if f.status == "deleted" else before.status,
                    before.additions + f.additions,
                    before.deletions + f.deletions,
                    "".join(patches) if patches else None,
                    patch_omitted=before.patch_omitted or f.patch_omitted,
                )
            merged[f.path] = f
    return _bounded([merged[path] for path in sorted(merged)], omitted)


def turn_diff(core: ThreadRegistry, thread: ThreadState, event: MessageUpdated) -> None:
    """A root message changed: if it is a turn's prompt whose diff changed, send it."""
    if event.role != "user":
        return
    info = event.raw.get("properties", {}).get("info")
    if isinstance(info, dict):
        prompt_diff(core, thread, event.message_id, info)


def prompt_diff(
    core: ThreadRegistry, thread: ThreadState, message_id: str, info: Mapping[str, Any]
) -> None:
    """A root user message ``info``, live or read back from the stored messages after an
    outage: if it is a turn's prompt whose diff changed from what was sent, send it."""
    if thread.closing:
        return
    parsed = file_diffs(info)
    turn_id = thread.ledger.turn_of(message_id) if parsed is not None else None
    if parsed is None or turn_id is None:
        return
    memory = thread.diffs
    if memory.turn_id != turn_id:
        memory.turn_id = turn_id
        memory.prompts.clear()
    if memory.prompts.get(message_id, ((), 0)) == parsed:
        return  # the empty start of a turn, or a repeat: nothing new to show
    memory.prompts[message_id] = parsed
    while len(memory.prompts) > _MAX_PROMPTS:
        memory.prompts.pop(next(iter(memory.prompts)))
    files, omitted = parsed if len(memory.prompts) == 1 else _union(memory.prompts.values())
    core.emit(
        TurnDiffUpdated(
            thread_id=thread.thread_id, turn_id=turn_id, files=files, omitted_files=omitted
        )
    )
