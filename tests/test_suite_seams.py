"""The suite stays on the library's public seams, and waits on conditions, not on the clock.

Why: a test that reads a private attribute (``oc._registry``) or imports a private module
(``from adapter._stream._hub import ...``) breaks when the inside is rearranged though no
behaviour changed, and it shows a newcomer a way to use the library that no host has. A
fixed ``asyncio.sleep(0.05)`` is either too long (a slow suite) or too short on a loaded
machine (a flaky one); the suite's old ``settle()`` helpers (N rounds of ``sleep(0)``)
guessed how many loop iterations a reaction takes. Each check reads every module under
``tests/`` (its AST, not its text) and lists every offender as ``file:line`` in its failure.

The rules:

(a) **No private attribute read, no private module imported**: an attribute whose name
    starts with ``_`` (not a dunder) on anything but ``self`` or ``cls``, and
    ``import adapter._x`` / ``from adapter._x import ...`` / ``from adapter.x import _y``
    (any dotted part or imported name private). A namedtuple's public ``_replace``,
    ``_asdict``, ``_fields`` and ``_make`` are not private. Files that test internals on
    purpose are in ``TESTS_OF_INTERNALS``, each with why; a directory entry (ending in
    ``/``) covers the files under it.
(b) **No fixed sleep outside a polling loop**: ``asyncio.sleep(<literal>)`` (or ``sleep``
    imported from ``asyncio``) with a non-zero number literal is allowed only inside a
    polling loop of the same function: a ``while`` whose test is not a constant, or a
    ``while``/``for`` whose body has an ``if`` that leaves the loop (``break``, ``return``
    or ``raise``). ``sleep(0)`` (a yield) and a sleep of a named value (``LATENCY``, a
    parameter) are not fixed waits in this sense. Wait on the condition instead:
    ``rec.wait_for``, ``fake.wait_until``, ``caught_up(fake, oc)``.
(c) **No ``settle(`` call**: ``caught_up(fake, oc)`` (``adapter.testing``) waits until the
    adapter has handled every event the fake published, which is what ``settle`` guessed.

The self-tests at the end pin what each rule flags and what it lets pass.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"

#: Files (or directories, ending in ``/``) that test internals on purpose: file -> why.
TESTS_OF_INTERNALS: dict[str, str] = {
    "tests/test_native.py": "unit tests of the native event parser (adapter._client._native)",
    "tests/faults/test_native_fuzz.py": "fuzzes the native parser's wire payloads",
    "tests/faults/test_pump_survives.py": "the event pump's own survival, driven from inside",
    "tests/faults/test_registry_internals.py": "the thread registry (adapter._threads)",
    "tests/partial_support.py": "the PartialCollector tests' recorded streams and events",
    "tests/test_partial_collector.py": "unit tests of the PartialCollector (adapter._stop)",
    "tests/test_partial_collector_bounds.py": "the PartialCollector's bounds, on its own",
    "tests/test_partial_recorded_streams.py": "the PartialCollector on recorded real streams",
    "tests/test_partial_result.py": "PartialResult's rendering, made by the PartialCollector",
    "tests/test_bounded_text.py": "the event hub's bounded text windows (adapter._stream)",
    "tests/test_ids.py": "the message-id minter (adapter._base._ids)",
    "tests/test_skewed_server_ids.py": "the id minter against a skewed server clock",
    "tests/real/test_ids_real.py": "the id minter's shape against a real server",
    "tests/real/test_skewed_ids_real.py": "the id minter's ordering against a real server",
    "tests/test_unicode.py": "unit tests of adapter._base._unicode",
    "tests/test_lifecycle.py": "the thread and turn state machines' tables",
    "tests/test_directories.py": "normalise_directory (adapter._server._directories)",
    "tests/test_compat.py": "the tested release range (adapter._server._releases)",
    "tests/test_subagent_tasks_properties.py": "the subagent task tracker on its own",
    "tests/test_history.py": "turn_starts on hand-built histories (adapter._threads)",
    "tests/real/test_history_real.py": "the stored shape turn_starts relies on, on a real server",
    "tests/faults/test_log_safety.py": "the library's loggers (get_logger) and the ACP log setup",
    "tests/test_backoff.py": "the pump's reconnect backoff and the one Backoff (_client._retry)",
    "tests/test_cli_web.py": "the web command's pieces (cli._web); uvicorn swapped out (_serve)",
    "tests/test_cli_web_workers.py": "the web command's store/worker options, WorkerSettings",
    "tests/test_context_meter.py": "the UsageMeter and ContextLimits on their own, then end to end",
    "tests/test_diff_events.py": "file_diffs and its bounds (adapter._stream._turn_diff)",
    "tests/test_event_subscriptions_internals.py": "EventHub and EventHistory: bounds, subscribers",
    "tests/test_logging.py": "the library's own loggers (adapter._logging.get_logger)",
    "tests/test_mcp.py": "mcp_deadline (adapter._client._mcp): the add's bounded wait",
    "tests/test_native_recorder_internals.py": "the recorder's wiring into the pump, its backlog",
    "tests/test_questions_internals.py": "wire_answers (adapter._requests._answers) on its own",
    "tests/test_server_ownership.py": "the documented ServerProcess spy (adapter._adapter)",
    "tests/test_subagent_tasks_internals.py": "SubagentTasks on recorded streams; server_exited",
    "tests/test_usage.py": "UsageFeed (adapter._turns._usage_meter): a turn that spent nothing",
    "tests/test_docs_cover_the_code.py": "reads the code's own tables (the CLI's parser)",
    "tests/test_docs_decision_names.py": "reads each layer's table of decision names",
    "tests/web/store/": "the web app's thread stores (adapter.web._store), their contract",
    "tests/web/test_errors.py": "response_for (adapter.web._errors): store failures, a surrogate",
    "tests/web/app_driver.py": "the hub's subscriber count: each SSE response's subscription ends",
    "tests/acp/test_updates.py": "the event -> session/update translation on its own",
    "tests/acp/test_hostile_client.py": "the ACP transport's framing under hostile input",
    "tests/acp/client_side.py": "raw_request: the acp SDK's own private Connection (conn._conn)",
    "tests/acp/test_acp_cli.py": "the CLI's parser (adapter.cli._parser) on acp's flags",
    "tests/acp/test_acp_session_list.py": "paging with a small adapter.acp._sessions.PAGE_SIZE",
    "tests/web/test_guard.py": "the RequestGuard middleware (adapter.web._guard) on its own",
    "tests/web/test_sse_clients.py": "a short SEND_TIMEOUT (adapter.web._sse) for a stalled client",
    "tests/web/test_workers.py": "SqliteThreadStore: a short busy_timeout, which open_store lacks",
}

#: A namedtuple's public methods and fields, spelled with a leading underscore.
NAMEDTUPLE_API = frozenset({"_replace", "_asdict", "_fields", "_make", "_field_defaults"})


@dataclass(frozen=True)
class Offence:
    path: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what}"


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_reads(tree: ast.AST, path: str) -> Iterator[Offence]:
    """Rule (a): private attributes read and private modules of ``adapter`` imported."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            if node.attr in NAMEDTUPLE_API:
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            yield Offence(path, node.lineno, ast.unparse(node))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            parts = node.module.split(".")
            if parts[0] != "adapter":
                continue
            names = [alias.name for alias in node.names if _is_private(alias.name)]
            if any(map(_is_private, parts)) or names:
                imported = ", ".join(alias.name for alias in node.names)
                yield Offence(path, node.lineno, f"from {node.module} import {imported}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "adapter" and any(map(_is_private, parts)):
                    yield Offence(path, node.lineno, f"import {alias.name}")


def _sleep_names(tree: ast.AST) -> set[str]:
    """The names ``asyncio.sleep`` goes by in a module (``from asyncio import sleep``)."""
    return {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "asyncio"
        for alias in node.names
        if alias.name == "sleep"
    }


def _number(node: ast.expr) -> float | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _number(node.operand)
        return None if inner is None else -inner if isinstance(node.op, ast.USub) else inner
    value = node.value if isinstance(node, ast.Constant) else None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _leaves(node: ast.AST) -> bool:
    """``node`` holds a ``break``, ``return`` or ``raise`` (outside nested functions)."""
    todo = [node]
    while todo:
        current = todo.pop()
        if isinstance(current, (ast.Break, ast.Return, ast.Raise)):
            return True
        for child in ast.iter_child_nodes(current):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                todo.append(child)
    return False


def is_polling_loop(loop: ast.While | ast.For | ast.AsyncFor) -> bool:
    """A loop that checks a condition: a ``while`` on a non-constant test, or a loop whose
    body has an ``if`` that leaves it."""
    if isinstance(loop, ast.While) and not isinstance(loop.test, ast.Constant):
        return True
    todo: list[ast.AST] = list(loop.body)
    while todo:
        current = todo.pop()
        if isinstance(current, ast.If) and _leaves(current):
            return True
        for child in ast.iter_child_nodes(current):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                todo.append(child)
    return False


def fixed_sleeps(tree: ast.AST, path: str) -> Iterator[Offence]:
    """Rule (b): ``asyncio.sleep(<non-zero literal>)`` outside a polling loop."""
    sleep_names = _sleep_names(tree)

    def is_sleep(call: ast.Call) -> bool:
        func = call.func
        if isinstance(func, ast.Attribute):
            return (
                func.attr == "sleep"
                and isinstance(func.value, ast.Name)
                and (func.value.id == "asyncio")
            )
        return isinstance(func, ast.Name) and func.id in sleep_names

    def visit(node: ast.AST, polling: bool) -> Iterator[Offence]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                yield from visit(child, False)  # a loop around a definition is not its loop
                continue
            if isinstance(child, ast.Call) and is_sleep(child) and child.args and not polling:
                seconds = _number(child.args[0])
                if seconds is not None and seconds != 0:
                    yield Offence(path, child.lineno, ast.unparse(child))
            inner = polling
            if isinstance(child, (ast.While, ast.For, ast.AsyncFor)):
                inner = polling or is_polling_loop(child)
            yield from visit(child, inner)

    yield from visit(tree, False)


def settle_calls(tree: ast.AST, path: str) -> Iterator[Offence]:
    """Rule (c): a call of a function or method named ``settle``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name == "settle":
                yield Offence(path, node.lineno, ast.unparse(node))


def _allowed(path: str) -> bool:
    return any(
        path.startswith(entry) if entry.endswith("/") else path == entry
        for entry in TESTS_OF_INTERNALS
    )


def _modules() -> Iterator[tuple[str, ast.AST]]:
    for file in sorted(TESTS.rglob("*.py")):
        path = file.relative_to(ROOT).as_posix()
        yield path, ast.parse(file.read_text(encoding="utf-8"), path)


def _fail_on(rule: str, offences: list[Offence], fix: str) -> None:
    """Fails listing every offence as ``file:line: what``, in file and line order."""
    if offences:
        files = len({o.path for o in offences})
        lines = "\n".join(f"  {o}" for o in sorted(offences, key=lambda o: (o.path, o.line)))
        pytest.fail(f"{len(offences)} {rule} in {files} files ({fix}):\n{lines}", pytrace=False)


def test_no_private_attribute_or_module_of_the_adapter_is_read_outside_tests_of_internals() -> None:
    offences: list[Offence] = []
    used: set[str] = set()
    for path, tree in _modules():
        found = list(private_reads(tree, path))
        if found and _allowed(path):
            used.update(e for e in TESTS_OF_INTERNALS if path == e or path.startswith(e))
        elif found:
            offences += found
    stale = sorted(set(TESTS_OF_INTERNALS) - used)
    assert not stale, f"TESTS_OF_INTERNALS entries with nothing private left: {stale}"
    _fail_on(
        "private reads",
        offences,
        "use the public API or adapter.testing; a file that tests internals on purpose "
        "goes in TESTS_OF_INTERNALS with why",
    )


def test_no_fixed_sleep_outside_a_polling_loop() -> None:
    offences = [o for path, tree in _modules() for o in fixed_sleeps(tree, path)]
    _fail_on(
        "fixed sleeps",
        offences,
        "wait on the condition: rec.wait_for, fake.wait_until, caught_up(fake, oc)",
    )


def test_no_settle_calls() -> None:
    offences = [o for path, tree in _modules() for o in settle_calls(tree, path)]
    _fail_on("settle() calls", offences, "use caught_up(fake, oc)")


# -- what each rule flags and lets pass ---------------------------------------------------

PRIVATE_SOURCE = """
from adapter._stream._hub import EventStream
from adapter.cli import _web, amain
from adapter.testing import caught_up
import adapter._base._ids
import asyncio

class C:
    def f(self) -> None:
        self._mine, cls._too, type(self).__name__
oc._registry.threads
point._replace(x=1)
"""

SLEEP_SOURCE = """
from asyncio import sleep as nap

async def f(delay: float) -> None:
    await asyncio.sleep(0.05)
    await asyncio.sleep(0)
    await asyncio.sleep(delay)
    await nap(1)
    for _ in range(3):
        await asyncio.sleep(0.01)
    while not done():
        await asyncio.sleep(0.01)
    while True:
        if done():
            break
        await asyncio.sleep(0.02)
    for _ in range(50):
        if done():
            return
        await asyncio.sleep(0.03)
    while True:
        async def hook() -> None:
            await asyncio.sleep(0.5)
        if done():
            break
"""

SETTLE_SOURCE = "await settle()\nawait rec.settle(50)\nawait caught_up(fake, oc)\n_settle()\n"

Check = Callable[[ast.AST, str], Iterator[Offence]]


@pytest.mark.parametrize(
    ("check", "source", "flagged"),
    [
        (
            private_reads,
            PRIVATE_SOURCE,
            [
                "from adapter._stream._hub import EventStream",
                "from adapter.cli import _web, amain",
                "import adapter._base._ids",
                "oc._registry",
            ],
        ),
        (
            fixed_sleeps,
            SLEEP_SOURCE,
            ["asyncio.sleep(0.05)", "nap(1)", "asyncio.sleep(0.01)", "asyncio.sleep(0.5)"],
        ),
        (settle_calls, SETTLE_SOURCE, ["settle()", "rec.settle(50)"]),
    ],
    ids=["private-reads", "fixed-sleeps", "settle-calls"],
)
def test_each_rule_flags_what_it_says_and_nothing_else(
    check: Check, source: str, flagged: list[str]
) -> None:
    assert [o.what for o in check(ast.parse(source), "t.py")] == flagged
