"""Print the differential report: ``python -m tests.differential --report [SCENARIO...]``.

Starts a scripted model and a real ``opencode serve`` (``OPENCODE_BIN`` or the
project-local install), runs every scenario (or the named ones) on it and on a
fresh fake each, and prints each divergence found, per scenario.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from typing import Any

from adapter.testing import RealOpenCodeServer, ScriptedModelServer

from .compare import compare, report
from .driver import FakeTarget, RealTarget, record_both
from .language import (
    BACKGROUND_SUBAGENTS_ENV,
    auto_compaction_server_options,
    command_server_options,
)
from .scenarios import BY_NAME, SCENARIOS
from .schema import served_spec


async def _run(names: list[str]) -> int:
    chosen = [BY_NAME[n] for n in names] if names else SCENARIOS
    results = []
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        model = stack.enter_context(ScriptedModelServer())
        server = stack.enter_context(RealOpenCodeServer(model.base_url))
        real = RealTarget(server, model)
        api = served_spec(server.base_url, server.auth)
        others: dict[str, RealTarget] = {}

        def other(kind: str, options: dict[str, Any]) -> RealTarget:
            if kind not in others:
                second = RealOpenCodeServer(model.base_url, **options)
                others[kind] = RealTarget(stack.enter_context(second), model)
            return others[kind]

        for scenario in chosen:
            target = real
            if scenario.auto_compaction:
                target = other("compacting", auto_compaction_server_options())
            if scenario.commands:
                target = other("commands", command_server_options())
            if scenario.background_subagents:
                target = other("background", {"extra_env": BACKGROUND_SUBAGENTS_ENV})
            fake = FakeTarget(background_subagents=scenario.background_subagents)
            t0 = time.monotonic()
            try:
                fake_rec, real_rec = await record_both(scenario, fake, target)
            finally:
                await fake.aclose()
            results.append(
                (scenario, compare(scenario, fake_rec, real_rec, api), time.monotonic() - t0)
            )
            print(report(results[-1:]).rsplit("\n", 1)[0], flush=True)
    print(report(results).rsplit("\n", 1)[1])
    print(f"total {time.monotonic() - started:.1f} s (server start included)")
    return 1 if any(d for _s, d, _t in results) else 0


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.differential")
    parser.add_argument("--report", action="store_true", help="print every divergence")
    parser.add_argument("scenarios", nargs="*", help="scenario names (default: all)")
    args = parser.parse_args()
    unknown = [n for n in args.scenarios if n not in BY_NAME]
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(unknown)}; known: {', '.join(BY_NAME)}")
    return asyncio.run(_run(args.scenarios))


if __name__ == "__main__":
    sys.exit(main())
