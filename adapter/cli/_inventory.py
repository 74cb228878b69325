"""``opencode-tree inventory``: what a server offers, as tables or as JSON.

Why its own module: it is the terminal's view of :meth:`OpenCodeAdapter.inventory`
(models with their limits and prices, agents, slash commands, skills, MCP servers and
the version), for a user choosing a ``--model`` or an ``--agent`` and for a script
that reads ``--json``. A part the server did not give is named on stderr and in the
JSON's ``errors``, the other parts are still printed, and the exit code is 1.

Every string shown in a table comes from the server and is cut and cleaned first
(:func:`printable`): a title with an escape sequence or a 200 KB description must not
take over the terminal. ``--json`` keeps the data whole (only well formed, as all JSON
the CLI prints).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from .._client._inventory import ModelInfo, ServerInventory
from .._timeouts import Timeouts
from ._commands import adapter_from, url_from
from ._render import Out, printable

__all__ = ["add_inventory_arguments", "inventory_command"]

#: The longest server string a table cell shows (names, descriptions, errors).
CELL_LIMIT = 200
_NAME_LIMIT = 80
#: The parts :meth:`OpenCodeAdapter.inventory` reads (the keys its ``errors`` may have).
_PARTS = ("models", "agents", "commands", "skills", "mcp", "version")


def add_inventory_arguments(parser: argparse.ArgumentParser) -> None:
    """``inventory``'s own options (the common ones and its ``--help`` come from the package)."""
    parser.add_argument(
        "--timeout", type=float, default=10.0, help="bound of each part's read (seconds)"
    )


async def inventory_command(args: argparse.Namespace, out: Out) -> int:
    """0 when every part was read, 1 when one or more were not (named on stderr)."""
    async with adapter_from(args, timeouts=Timeouts(request=args.timeout)) as oc:
        inventory = await oc.inventory()
    errors = inventory.errors
    if args.json:
        out.json(inventory.to_dict())
    elif len(errors) == len(_PARTS):
        # Nothing was read: one line, as for any server the CLI cannot use.
        where = url_from(args) or "the local server"
        reason = printable(errors["version"], CELL_LIMIT)
        out.error(f"could not read the inventory from {where}: {reason}")
        return 1
    else:
        _print_tables(inventory, out)
    for part, message in errors.items():
        out.error(f"{part} not read: {printable(message, CELL_LIMIT)}")
    return 1 if errors else 0


def _print_tables(inventory: ServerInventory, out: Out) -> None:
    version = inventory.version
    out.line(f"OpenCode {printable(version, _NAME_LIMIT) if version else '(version not read)'}")
    errors = inventory.errors
    sections = (
        ("models", "Models ($ per million tokens)", _models(inventory.models)),
        ("agents", "Agents", _rows(inventory.agents, "name", "mode", "description")),
        ("commands", "Commands", _rows(inventory.commands, "name", "description")),
        ("skills", "Skills", _rows(inventory.skills, "name", "description")),
        ("mcp", "MCP servers", _mcp(inventory)),
    )
    for part, title, table in sections:
        out.line("")
        if part in errors:
            out.line(f"{title}: not read ({printable(errors[part], CELL_LIMIT)})")
        elif table.row_count == 0:
            out.line(f"{title}: none")
        elif part == "models" and not _fits(table, out.console):
            out.line(title, style="bold")
            for card in _model_cards(inventory.models):
                out.show(card)
        else:
            table.title = title
            out.show(table)


def _fits(table: Table, console: Console) -> bool:
    """Whether ``table`` fits the console without wrapping a cell."""
    unbounded = console.options.update_width(1_000_000)
    return Measurement.get(console, unbounded, table).maximum <= console.width


def _table(*columns: str, right: Sequence[str] = ()) -> Table:
    table = Table(box=box.SIMPLE_HEAD, title_justify="left", title_style="bold", pad_edge=False)
    for column in columns:
        table.add_column(column, overflow="fold", justify="right" if column in right else "left")
    return table


def _models(models: Iterable[ModelInfo]) -> Table:
    table = _table(
        "id", "name", "context", "output", "input", "in", "out", "cache r/w",
        right=("context", "output", "in", "out", "cache r/w"),
    )  # fmt: skip
    for m in models:
        cost = m.cost
        table.add_row(
            _cell(m.id, _NAME_LIMIT),
            _cell(m.name, _NAME_LIMIT),
            _count(m.context_limit),
            _count(m.output_limit),
            _cell(", ".join(m.input_modalities), _NAME_LIMIT),
            _price(cost.input),
            _price(cost.output),
            f"{_price(cost.cache_read)}/{_price(cost.cache_write)}",
        )
    return table


def _model_cards(models: Iterable[ModelInfo]) -> list[Table]:
    """The models for a narrow terminal: one two-column table each, titled by its id."""
    cards: list[Table] = []
    for m in models:
        card = Table(
            box=None, show_header=False, title=_cell(m.id, _NAME_LIMIT), title_justify="left"
        )
        card.add_column(style="dim")
        card.add_column(overflow="fold")
        cost = m.cost
        for key, value in (
            ("name", _cell(m.name, _NAME_LIMIT)),
            ("context", _count(m.context_limit)),
            ("output", _count(m.output_limit)),
            ("input", _cell(", ".join(m.input_modalities), _NAME_LIMIT)),
            ("$ in/out", f"{_price(cost.input)} / {_price(cost.output)}"),
            ("$ cache r/w", f"{_price(cost.cache_read)} / {_price(cost.cache_write)}"),
        ):
            card.add_row(key, value)
        cards.append(card)
    return cards


def _rows(entries: Iterable[object], *fields: str) -> Table:
    table = _table(*fields)
    for entry in entries:
        values = [getattr(entry, f) for f in fields]
        table.add_row(
            *(
                _cell(v, CELL_LIMIT if f == "description" else _NAME_LIMIT) if v else ""
                for f, v in zip(fields, values, strict=True)
            )
        )
    return table


def _mcp(inventory: ServerInventory) -> Table:
    table = _table("name", "status", "error")
    for name, status in inventory.mcp.items():
        error = inventory.mcp_errors.get(name, "")
        table.add_row(
            _cell(name, _NAME_LIMIT),
            _cell(status, _NAME_LIMIT),
            _cell(error, CELL_LIMIT),
        )
    return table


def _cell(text: str, limit: int) -> Text:
    """Server text for a cell: :func:`printable`, and a :class:`Text` so that rich never
    reads its brackets as markup (``[/bold]`` would raise, ``[link=...]`` would link)."""
    return Text(printable(text, limit))


def _count(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"


def _price(value: float | None) -> str:
    return "—" if value is None else f"{value:g}"
