"""The fake's project files, and each prompt's diff summary as OpenCode computes it.

Why a module: with ``snapshot: true`` in a git project (measured on 1.18.34,
``tests/fixtures/events-diff-1.18.34.jsonl``) OpenCode diffs the worktree between a
prompt's first step and its newest finished one, and writes the result on the prompt's
user message (``info.summary.diffs``: ``[{file, patch, additions, deletions, status}]``,
sorted by file, paths relative to the worktree), sent with ``message.updated`` after
each step and after the run's idle; ``session.diff`` stays ``[]``. The fake has no
disk: its ``write`` and ``edit`` tools change the texts kept here, and the summary is
computed from them the same way. Off (the default, as the real suite's configuration
``snapshot: false``), nothing is kept and no summary is sent.
"""

from __future__ import annotations

import difflib
import posixpath
from collections.abc import Mapping
from typing import Any

from .wire import JSON

__all__ = ["ProjectFiles"]


class ProjectFiles:
    """File texts by path, and each prompt's starting texts of the files it changed."""

    def __init__(self) -> None:
        self.enabled = False
        self._texts: dict[str, str | None] = {}
        #: Prompt (user message id) -> path -> the text before its first change.
        self._before: dict[str, dict[str, str | None]] = {}
        #: Path relative to the worktree -> the path the tools named.
        self._named: dict[str, str] = {}

    def tool_ran(self, prompt_id: str, directory: str, tool: str, args: Mapping[str, Any]) -> None:
        """A completed ``write`` (``filePath``, ``content``) or ``edit`` (``filePath``,
        ``oldString``, ``newString``) changes the file, if snapshots are on."""
        path = args.get("filePath")
        if not self.enabled or not isinstance(path, str) or tool not in ("write", "edit"):
            return
        now = self._texts.get(path)
        if tool == "write":
            content = args.get("content")
            text = content if isinstance(content, str) else ""
        else:
            old, new = args.get("oldString"), args.get("newString")
            if not isinstance(old, str) or not isinstance(new, str):
                return
            text = (now if now is not None else old).replace(old, new, 1)
        file = posixpath.relpath(path, directory) if path.startswith("/") else path
        self._before.setdefault(prompt_id, {}).setdefault(file, now)
        self._named[file] = path
        self._texts[path] = text

    def summary(self, prompt_id: str) -> list[JSON] | None:
        """The prompt's ``summary.diffs``, or ``None`` with snapshots off."""
        if not self.enabled:
            return None
        diffs: list[JSON] = []
        for file, before in sorted(self._before.get(prompt_id, {}).items()):
            after = self._texts.get(self._named.get(file, file))
            if before == after:
                continue
            old = (before or "").splitlines(keepends=True)
            new = (after or "").splitlines(keepends=True)
            body = list(difflib.unified_diff(old, new, file, file, "", "", n=3))
            status = "added" if before is None else "deleted" if after is None else "modified"
            diffs.append(
                {
                    "file": file,
                    "patch": f"Index: {file}\n{'=' * 67}\n" + "".join(body),
                    "additions": sum(1 for line in body[2:] if line.startswith("+")),
                    "deletions": sum(1 for line in body[2:] if line.startswith("-")),
                    "status": status,
                }
            )
        return diffs
