"""Print the differential report: ``python -m tests.differential --report [SCENARIO...]``.

Starts a scripted model and a real ``opencode serve`` (``OPENCODE_BIN`` or the
project-local install), runs every scenario (or the named ones) on it and on a
fresh fake each, and prints each divergence found, per scenario.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from adapter.testing import RealOpenCodeServer, ScriptedModelServer

from .compare import compare, report
from .driver import FakeTarget, RealTarget, record_both
from .scenarios import BY_NAME, SCENARIOS
from .schema import served_spec


async def _run(names: list[str]) -> int:
    chosen = [BY_NAME[n] for n in names] if names else SCENARIOS
    results = []
    started = time.monotonic()
    with ScriptedModelServer() as model, RealOpenCodeServer(model.base_url) as server:
        real = RealTarget(server, model)
        api = served_spec(server.base_url, server.auth)
        for scenario in chosen:
            fake = FakeTarget()
            t0 = time.monotonic()
            try:
                fake_rec, real_rec = await record_both(scenario, fake, real)
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
