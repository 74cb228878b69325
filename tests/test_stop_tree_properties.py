"""Property: on any tree, with any failures and latencies, the walk keeps its promises."""

from __future__ import annotations

import asyncio
from collections import deque

import httpx
import respx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapter import OpenCodeClient, RetryPolicy, TreeStopError, stop_tree
from tests.mocked_tree_api import BASE, TreeApi, error, not_found

ROOT = "ses_n0"


@st.composite
def scenarios(
    draw: st.DrawFn,
) -> tuple[dict[str, list[str]], set[str], set[str], dict[str, float], int]:
    size = draw(st.integers(1, 40))
    names = [f"ses_n{i}" for i in range(size)]
    children: dict[str, list[str]] = {n: [] for n in names}
    for i in range(1, size):
        # Mostly a tree (a parent earlier in the list); sometimes extra edges
        # to anything, which makes diamonds, cycles and unrelated islands.
        if draw(st.booleans()) or i < 3:
            parent = names[draw(st.integers(0, i - 1))]
            children[parent].append(names[i])
    for _ in range(draw(st.integers(0, 5))):
        a, b = draw(st.sampled_from(names)), draw(st.sampled_from(names))
        if b not in children[a]:
            children[a].append(b)
    failing = set(draw(st.lists(st.sampled_from(names), max_size=4)))
    gone = set(draw(st.lists(st.sampled_from(names), max_size=3))) - failing
    latency = {n: draw(st.sampled_from([0.0, 0.0, 0.0005, 0.001, 0.003])) for n in names}
    concurrency = draw(st.integers(1, 8))
    return children, failing, gone, latency, concurrency


def bfs(children: dict[str, list[str]], root: str, gone: set[str]) -> list[str]:
    seen = [root]
    queue = deque([root])
    while queue:
        node = queue.popleft()
        if node in gone:
            continue  # a session that is gone has no children to list
        for kid in children.get(node, []):
            if kid not in seen:
                seen.append(kid)
                queue.append(kid)
    return seen


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_walk_properties(
    scenario: tuple[dict[str, list[str]], set[str], set[str], dict[str, float], int],
) -> None:
    children, failing, gone, latency, concurrency = scenario
    asyncio.run(_check(children, failing, gone, latency, concurrency))


async def _check(
    children: dict[str, list[str]],
    failing: set[str],
    gone: set[str],
    latency: dict[str, float],
    concurrency: int,
) -> None:
    reachable = bfs(children, ROOT, gone)
    with respx.mock(base_url=BASE, assert_all_called=False) as router:
        api = TreeApi(router, children=children)
        api.latency = lambda kind, sid: latency.get(sid, 0.0)

        async def fail(sid: str) -> httpx.Response:
            return error(400, f"{sid} refused")

        async def vanish(sid: str) -> httpx.Response:
            return not_found(sid)

        for sid in failing:
            api.abort_hooks[sid] = fail
        for sid in gone:
            api.abort_hooks[sid] = vanish
        async with OpenCodeClient(BASE, retry=RetryPolicy(attempts=1)) as client:
            try:
                report = await stop_tree(client, ROOT, concurrency=concurrency)
                raised = None
            except TreeStopError as exc:
                report = exc.report
                raised = exc

    # Every reachable session aborted exactly once; nothing else touched.
    assert sorted(api.aborts) == sorted(reachable)
    assert set(api.listings) <= set(reachable)
    assert len(api.listings) == len(set(api.listings))
    assert set(report.session_ids) == set(reachable)
    # Never more than `concurrency` requests in flight.
    assert api.max_in_flight <= concurrency
    assert report.max_in_flight == api.max_in_flight
    # Discovery order: root first, every session after its parent.
    order = {sid: i for i, sid in enumerate(report.session_ids)}
    assert report.session_ids[0] == ROOT
    for s in report:
        if s.parent_id is not None:
            assert order[s.parent_id] < order[s.session_id]
            assert s.session_id in children[s.parent_id]
    # Outcomes and the first failure in discovery order.
    expected_failed = [sid for sid in report.session_ids if sid in failing]
    assert [s.session_id for s in report.failures] == expected_failed
    if expected_failed:
        assert raised is not None and raised.first_failure is not None
        assert raised.first_failure.session_id == expected_failed[0]
    else:
        assert raised is None
    for s in report:
        if s.session_id in gone:
            assert s.outcome == "not_found"
    # One permit and no latency: the walk is exactly breadth-first.
    if concurrency == 1:
        assert list(report.session_ids) == reachable
