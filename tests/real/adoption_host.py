"""A host process for ``test_adoption_real.py``: it starts a turn, says so, and waits to be killed.

Run as ``python -m tests.real.adoption_host BASE_URL DIRECTORY PROMPT`` from the project
root. It starts thread ``t`` on the OpenCode server at ``BASE_URL`` (in ``DIRECTORY``),
sends ``PROMPT`` as its turn and prints one JSON line on stdout: the thread's resume
cursor, the turn's id, the root session's id and the thread's status. Then it waits,
forever: the test watches the tree work on the scripted model and kills the process
(``SIGKILL``), as a host process dies mid-turn.
"""

from __future__ import annotations

import asyncio
import json
import sys

from adapter import OpenCodeAdapter

THREAD = "t"


async def main(base_url: str, directory: str, prompt: str) -> None:
    async with OpenCodeAdapter(base_url, directory=directory) as oc:
        info = await oc.start_session(THREAD, title="adoption host")
        turn = await oc.send_turn(THREAD, prompt)
        line = {
            "resume": dict(info.resume),
            "turn_id": turn.turn_id,
            "session_id": info.session_id,
            "status": oc.session_info(THREAD).status,
        }
        print(json.dumps(line), flush=True)
        await asyncio.Event().wait()  # until killed


if __name__ == "__main__":
    base, folder, text = sys.argv[1:4]
    asyncio.run(main(base, folder, text))
