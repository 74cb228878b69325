"""A test of internals: the thread registry (``adapter._threads._registry``).

``ThreadRegistry.forget`` is called here directly, as an old stop that ended late would
call it, because no public call can make it run at that moment; the public path (a
replacement started while the old teardown is held) is in ``test_teardown.py``.
"""

from __future__ import annotations

from adapter.testing.fake import FakeOpenCodeServer, Text
from tests.faults.harness import Harness

T = "thread-1"


async def test_a_late_cleanup_of_the_old_thread_never_removes_its_replacement(
    fake: FakeOpenCodeServer, h: Harness
) -> None:
    """B11 at its root: forgetting a thread removes only that thread object and its own
    sessions (``ThreadRegistry.forget`` checks identity). Here the old thread is forgotten
    again after the replacement is live, as an old stop that ended late would. The
    replacement resumes the old session, so both share its id: the session -> thread
    map must keep pointing at the replacement too."""
    fake.script("ok", [Text("still routed")])
    old = await h.oc.start_session(T)
    old_thread = h.oc._registry.threads[T]
    await h.oc.stop_session(T)
    new = await h.oc.start_session(T, resume=old.resume)
    assert new.session_id == old.session_id
    h.oc._registry.forget(old_thread)
    assert h.oc.has_session(T) and h.oc._registry.threads[T] is not old_thread
    await h.oc.send_turn(T, "go [[script:ok]]")
    done = await h.rec.wait_for("turn.completed")
    assert done.thread_id == T, "the replacement's events are still routed to it"
