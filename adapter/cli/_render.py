"""Terminal output: rich on a TTY, plain text otherwise (and always for --json).

Everything the CLI prints goes through :class:`Out`, and :class:`Out` writes only
well-formed text (:mod:`adapter._base._unicode`): server data (titles, text, tool input
and output, error messages) may hold lone UTF-16 surrogates, which a UTF-8
terminal or pipe refuses, and one would end the command mid-output.
"""

from __future__ import annotations

import io
import json
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO, cast

from rich.console import Console, RenderableType
from rich.tree import Tree

from .._base._unicode import well_formed, well_formed_data
from .._stop._stop_tree import StopReport
from .._types._partial_result import PartialResult

__all__ = ["Out", "WellFormedStream", "partial_lines", "printable", "report_tree"]

_OUTCOME_STYLE = {"aborted": "green", "not_found": "yellow", "failed": "bold red"}
_STATUS_STYLE = {"busy": "bold yellow", "retry": "magenta", "idle": "green"}


class WellFormedStream(io.TextIOBase):
    """A text stream that hands ``target`` only well-formed text.

    A high surrogate that ends a write is held back until the next one: text
    streamed in deltas may be cut inside a pair, and the two halves written in
    turn must still print as the one character they encode. :meth:`close`
    writes a half still held (as U+FFFD) and leaves ``target`` open.
    """

    def __init__(self, target: TextIO) -> None:
        super().__init__()
        self._target = target
        self._held = ""

    def write(self, text: str) -> int:
        count = len(text)
        text, self._held = self._held + text, ""
        if text and "\ud800" <= text[-1] <= "\udbff":
            text, self._held = text[:-1], text[-1]
        if text:
            self._target.write(well_formed(text))
        return count

    def flush(self) -> None:
        self._target.flush()

    def close(self) -> None:
        if self._held:
            held, self._held = self._held, ""
            self._target.write(well_formed(held))
            self.flush()

    def isatty(self) -> bool:
        return self._target.isatty()

    def fileno(self) -> int:
        return self._target.fileno()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._target, "encoding", None) or "utf-8"


class Out:
    """Where the CLI writes: stdout for results, stderr for errors and progress.

    Both go through a :class:`WellFormedStream`; :meth:`close` at the end of the
    command writes what it still holds."""

    def __init__(self, *, force_plain: bool = False) -> None:
        # The streams of the moment, bound once: rich's Live points sys.stdout at its
        # console while it runs, and a stream that looked sys.stdout up at each write
        # would feed the console its own output, forever.
        self.stdout = WellFormedStream(sys.stdout)
        self.stderr = WellFormedStream(sys.stderr)
        # A text stream in all but the name typing gives it (``IO[str]``).
        self.console = Console(file=cast(TextIO, self.stdout), highlight=False, soft_wrap=True)
        self.err = Console(file=cast(TextIO, self.stderr), highlight=False, soft_wrap=True)
        self.rich = self.console.is_terminal and not force_plain

    def line(self, text: str = "", style: str | None = None) -> None:
        if self.rich:
            self.console.print(text, style=style, markup=False)
        else:
            self.stdout.write(text + "\n")
            self.stdout.flush()

    def write(self, text: str) -> None:
        self.stdout.write(text)
        self.stdout.flush()

    def json(self, data: Any) -> None:
        """``data`` as indented JSON; strings well formed first, so the document holds
        no lone-surrogate escape that a strict JSON parser would refuse."""
        text = json.dumps(well_formed_data(data), indent=2, default=lambda v: well_formed(str(v)))
        self.write(text + "\n")

    def error(self, text: str) -> None:
        self.err.print(
            f"error: {text}", style="bold red" if self.err.is_terminal else None, markup=False
        )

    def tree(self, tree: Tree, plain: Sequence[str]) -> None:
        if self.rich:
            self.console.print(tree)
        else:
            for text in plain:
                self.line(text)

    def show(self, renderable: RenderableType) -> None:
        """A rich renderable (a table): styled on a terminal, plain to a pipe, and
        never wider than the console (rich wraps each cell to fit)."""
        self.console.print(renderable)

    def close(self) -> None:
        self.stdout.close()
        self.stderr.close()


def _build_tree(
    root: str,
    children: Mapping[str | None, list[str]],
    label: Callable[[str], tuple[str, str]],
) -> tuple[Tree, list[str]]:
    """A rich tree and its plain-text lines; iterative, since a tree can be deep."""
    tree = Tree(label(root)[0])
    stack: list[tuple[Tree, str]] = [(tree, root)]
    while stack:
        node, sid = stack.pop()
        for child in children.get(sid, []):
            stack.append((node.add(label(child)[0]), child))
    return tree, _plain_lines(root, children, label)


def _plain_lines(
    root: str,
    children: Mapping[str | None, list[str]],
    label: Callable[[str], tuple[str, str]],
) -> list[str]:
    lines = [label(root)[1]]
    stack: list[tuple[str, str, bool]] = [
        (kid, "", i == len(children.get(root, [])) - 1)
        for i, kid in reversed(list(enumerate(children.get(root, []))))
    ]
    while stack:
        sid, prefix, last = stack.pop()
        lines.append(f"{prefix}{'└── ' if last else '├── '}{label(sid)[1]}")
        kids = children.get(sid, [])
        child_prefix = prefix + ("    " if last else "│   ")
        for i in range(len(kids) - 1, -1, -1):
            stack.append((kids[i], child_prefix, i == len(kids) - 1))
    return lines


def session_tree(
    root: str,
    sessions: Mapping[str, tuple[str | None, str]],
    statuses: Mapping[str, str],
) -> tuple[Tree, list[str]]:
    """A session tree (``sessions``: id -> (parent, title)) with each session's status."""
    kids: dict[str | None, list[str]] = {}
    for sid, (parent, _) in sessions.items():
        if sid != root:
            kids.setdefault(parent, []).append(sid)

    def label(sid: str) -> tuple[str, str]:
        title = sessions[sid][1]
        status = statuses.get(sid, "idle")
        style = _STATUS_STYLE.get(status, "white")
        return (
            f"[{style}]{status:<5}[/] [bold]{_esc(title)}[/] [dim]{sid}[/]",
            f"{status:<5} {title}  {sid}",
        )

    return _build_tree(root, kids, label)


def report_tree(
    report: StopReport, titles: Mapping[str, str] | None = None
) -> tuple[Tree, list[str]]:
    """The stop report as a tree: each session's outcome, timing and title."""
    titles = titles or {}
    kids: dict[str | None, list[str]] = {}
    for s in report:
        if s.session_id != report.root_id:
            kids.setdefault(s.parent_id, []).append(s.session_id)

    def label(sid: str) -> tuple[str, str]:
        s = report[sid]
        timing = (
            f"{s.started * 1000:7.1f} → {s.ended * 1000:7.1f} ms"
            if s.started is not None and s.ended is not None
            else "unfinished"
        )
        title = titles.get(sid, "")
        extra = f" ({s.failed_step}: {s.error})" if s.error is not None else ""
        style = _OUTCOME_STYLE.get(s.outcome, "white")
        outcome = s.outcome.replace("_", " ")
        rich_text = (
            f"[{style}]{outcome:<9}[/] [dim]{timing}[/] [bold]{_esc(title)}[/] "
            f"[dim]{sid}[/]{_esc(extra)}"
        )
        plain_text = f"{outcome:<9} {timing}  {title}  {sid}{extra}"
        return rich_text, plain_text

    return _build_tree(report.root_id, kids, label)


def partial_lines(partial: PartialResult, *, max_output: int = 200) -> list[str]:
    lines: list[str] = []
    if partial.text:
        lines.append(f"text so far: {_short(partial.text, max_output)}")
    for call in partial.tool_calls:
        head = (
            f"{call.status:<11} {call.tool} {_short(_input(call.input), 80)}  [{call.session_id}]"
        )
        lines.append(head)
        body = call.output if call.output else call.error
        if body:
            lines.append(f"            → {_short(body, max_output)}")
    if not lines:
        lines.append("(nothing yet)")
    return lines


def _input(data: Mapping[str, Any]) -> str:
    for key in ("command", "description", "filePath", "url"):
        value = data.get(key)
        if isinstance(value, str):
            return value
    return ", ".join(f"{k}={v}" for k, v in data.items())


def _short(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


# C0 and C1 controls (ESC starts a terminal command, CSI is one in a byte), and the
# format characters that reorder or hide text (bidi overrides and isolates, zero
# widths): rich strips only BEL, BS, VT, FF and CR.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")


def printable(text: str, limit: int) -> str:
    """Server text for one line of a terminal: at most ``limit`` characters (``…``
    ending a longer one, which is cut before any other work), well formed, each run
    of whitespace one space, and every other control or format character U+FFFD, so
    that no server string can move the cursor, retitle the window or reorder a line."""
    head = well_formed(text[: limit + 1])
    flat = " ".join(_UNPRINTABLE.sub(_replacement, head).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _replacement(match: re.Match[str]) -> str:
    return " " if match.group().isspace() else "\ufffd"


def _esc(text: str) -> str:
    return text.replace("[", r"\[")
