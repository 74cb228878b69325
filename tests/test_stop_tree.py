"""Contract tests of ``stop_tree`` against a respx-mocked session API."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import httpx
import pytest
import respx

from adapter import (
    InvalidInputError,
    OpenCodeClient,
    ProtocolError,
    RequestError,
    RetryPolicy,
    TreeStopError,
    stop_tree,
)
from tests.mocked_tree_api import BASE, Gate, TreeApi, error, not_found, session_json

ROOT = "ses_root"


@pytest.fixture
async def opencode_client() -> AsyncIterator[OpenCodeClient]:
    async with OpenCodeClient(
        BASE, retry=RetryPolicy(attempts=3, initial_wait=0.001, max_wait=0.002)
    ) as c:
        yield c


def tree(router: respx.MockRouter, children: dict[str, list[str]]) -> TreeApi:
    return TreeApi(router, children=children)


async def stays_true(condition: Callable[[], bool], seconds: float) -> None:
    """Checks ``condition`` at every turn of the event loop for ``seconds`` (respx has no
    fake for ``caught_up`` to wait on: a window, checked each round, is the wait)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while loop.time() < deadline:
        assert condition()
        await asyncio.sleep(0)
    assert condition()


async def until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    """Polls ``condition`` until it holds (each turn of the event loop)."""
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.001)


async def test_root_is_aborted_and_settled_before_any_other_request(
    router: respx.MockRouter, opencode_client: OpenCodeClient
) -> None:
    api = tree(router, {ROOT: ["ses_a", "ses_b"], "ses_a": ["ses_aa"]})
    gate = api.abort_hooks[ROOT] = Gate()
    task = asyncio.create_task(stop_tree(opencode_client, ROOT))
    await gate.started.wait()
    # nothing may start while the root abort is pending
    await stays_true(lambda: api.calls == [("abort", ROOT)], 0.01)
    gate.release()
    report = await task
    assert api.calls[0] == ("abort", ROOT)
    assert api.calls[1] == ("children", ROOT)
    assert report.session_ids == (ROOT, "ses_a", "ses_b", "ses_aa")
    assert all(s.outcome == "aborted" for s in report)
    assert sorted(api.aborts) == sorted(report.session_ids)


async def test_nested_and_late_children_are_stopped(
    router: respx.MockRouter, opencode_client: OpenCodeClient
) -> None:
    api = tree(router, {ROOT: ["ses_a"], "ses_a": ["ses_a1"], "ses_a1": ["ses_a11"]})
    gate = api.abort_hooks[ROOT] = Gate()
    task = asyncio.create_task(stop_tree(opencode_client, ROOT))
    await gate.started.wait()
    api.children[ROOT].append("ses_late")  # spawned while the root abort was held
    api.children["ses_late"] = ["ses_late_kid"]
    gate.release()
    report = await task
    assert set(api.aborts) == {ROOT, "ses_a", "ses_a1", "ses_a11", "ses_late", "ses_late_kid"}
    assert report["ses_a11"].depth == 3
    assert report["ses_late_kid"].parent_id == "ses_late"


async def test_unrelated_sessions_are_never_requested(
    router: respx.MockRouter, opencode_client: OpenCodeClient
) -> None:
    api = tree(
        router,
        {
            ROOT: ["ses_a"],
            "ses_a": [],
            "ses_unrelated": ["ses_unrelated_kid"],
            "ses_unrelated_kid": [],
        },
    )
    api.busy = {"ses_unrelated", "ses_unrelated_kid"}
    await stop_tree(opencode_client, ROOT)
    touched = {sid for _, sid in api.calls}
    assert "ses_unrelated" not in touched
    assert "ses_unrelated_kid" not in touched
    assert api.busy == {"ses_unrelated", "ses_unrelated_kid"}


async def test_peak_in_flight_is_exactly_the_concurrency(
    router: respx.MockRouter, opencode_client: OpenCodeClient
) -> None:
    # Wide and nested: 8 children, 7 of which have 8 children each; every
    # grandchild abort and one listing are held until the limit is reached.
    kids = [f"ses_c{i}" for i in range(8)]
    children: dict[str, list[str]] = {ROOT: kids, "ses_c0": []}
    for k in kids[1:]:
        children[k] = [f"{k}_n{j}" for j in range(8)]
    api = tree(router, children)
    release = asyncio.Event()
    reached = asyncio.Event()

    async def hold(sid: str) -> httpx.Response | None:
        if api.in_flight >= 8:
            reached.set()
        await release.wait()
        return None

    for k in kids[1:]:
        for j in range(8):
            api.abort_hooks[f"{k}_n{j}"] = hold
    api.children_hooks["ses_c0"] = hold
    task = asyncio.create_task(stop_tree(opencode_client, ROOT, concurrency=8))
    await asyncio.wait_for(reached.wait(), 5)
    for _ in range(20):
        await asyncio.sleep(0)
    assert api.in_flight == 8
    assert api.max_in_flight == 8
    release.set()
    report = await task
    assert api.max_in_flight == 8
    assert report.max_in_flight == 8
    assert len(report) == 1 + 8 + 7 * 8


@pytest.mark.parametrize("concurrency", [1, 3])
async def test_concurrency_limit_is_respected(
    router: respx.MockRouter, opencode_client: OpenCodeClient, concurrency: int
) -> None:
    children = {ROOT: [f"ses_{i}" for i in range(20)]}
    api = tree(router, children)
    api.latency = lambda kind, sid: 0.002
    report = await stop_tree(opencode_client, ROOT, concurrency=concurrency)
    assert api.max_in_flight == concurrency
    assert report.max_in_flight == concurrency


async def test_one_failing_child_abort_every_sibling_still_attempted(
    router: respx.MockRouter, opencode_client: OpenCodeClient
) -> None:
    api = tree(router, {ROOT: ["ses_bad", "ses_ok1", "ses_ok2"], "ses_ok1": ["ses_ok1_kid"]})
    failing = Gate(error(400, "child abort failed"))
    api.abort_hooks["ses_bad"] = failing
    task = asyncio.create_task(stop_tree(opencode_client, ROOT))
    await failing.started.wait()
    others = {"ses_ok1", "ses_ok2", "ses_ok1_kid"}
    await until(lambda: others <= set(api.aborts) and others <= set(api.listings))
    assert not task.done(), "the stop must wait for every abort"
    failing.release()
    with pytest.raises(TreeStopError) as caught:
        await task
    err = caught.value
    assert err.first_failure is not None
    assert err.first_failure.session_id == "ses_bad"
    assert err.first_failure.failed_step == "abort"
    assert isinstance(err.cause, RequestError)
    assert "child abort failed" in str(err.cause)
    assert err.report["ses_ok2"].outcome == "aborted"
    assert err.report["ses_bad"].outcome == "failed"
    # It was listed after its failed abort: a failure never hides a subtree.
    assert "ses_bad" in api.listings


async def test_first_failure_is_first_in_breadth_first_order(
    router: respx.MockRouter, opencode_client: OpenCodeClient
) -> None:
    api = tree(router, {ROOT: ["ses_a", "ses_b"], "ses_a": ["ses_a1"]})
    # ses_a1 (deeper) fails first in time; ses_b (earlier in BFS) fails later.
    slow_b = Gate(error(400, "b failed"))
    api.abort_hooks["ses_b"] = slow_b
    api.abort_hooks["ses_a1"] = lambda sid: _resp(error(400, "a1 failed"))
    task = asyncio.create_task(stop_tree(opencode_client, ROOT))
    await slow_b.started.wait()
    while "ses_a1" not in api.aborts:
        await asyncio.sleep(0.001)
    slow_b.release()
    with pytest.raises(TreeStopError) as caught:
        await task
    assert caught.value.first_failure is not None
    assert caught.value.first_failure.session_id == "ses_b"
    assert [s.session_id for s in caught.value.report.failures] == ["ses_b", "ses_a1"]


async def _resp(response: httpx.Response) -> httpx.Response:
    return response


async def test_root_failure_is_first_and_does_not_skip_the_walk(
    router: respx.MockRouter, opencode_client: OpenCodeClient
) -> None:
    api = tree(router, {ROOT: ["ses_a"], "ses_a": []})
    api.abort_hooks[ROOT] = lambda sid: _resp(error(400, "root refused"))
    api.abort_hooks["ses_a"] = lambda sid: _resp(error(400, "a refused"))
    with pytest.raises(TreeStopError) as caught:
        await stop_tree(opencode_client, ROOT)
    assert caught.value.first_failure is not None
    assert caught.value.first_failure.session_id == ROOT
    assert "ses_a" in api.aborts


async def test_not_found_means_already_gone(
    router: respx.MockRouter, opencode_client: OpenCodeClient
) -> None:
    api = tree(router, {ROOT: ["ses_gone", "ses_kidless"], "ses_kidless": []})
    api.children_hooks["ses_kidless"] = lambda sid: _resp(not_found(sid))
    api.abort_hooks["ses_gone"] = lambda sid: _resp(not_found(sid))
    report = await stop_tree(opencode_client, ROOT)
    assert report["ses_gone"].outcome == "not_found"
    assert report["ses_kidless"].outcome == "aborted"
    assert report.ok
    assert "ses_gone" not in api.listings, "a session that is gone is not listed"


async def test_root_children_404_is_not_a_failure(
    router: respx.MockRouter, opencode_client: OpenCodeClient
) -> None:
    tree(router, {})  # the root is unknown: abort says true, children says 404
    report = await stop_tree(opencode_client, ROOT)
    assert report.session_ids == (ROOT,)
    assert report.ok


async def test_cycles_and_diamonds_are_visited_once(
    router: respx.MockRouter, opencode_client: OpenCodeClient
) -> None:
    api = tree(
        router,
        {
            ROOT: ["ses_a", "ses_b"],
            "ses_a": ["ses_shared", ROOT],  # cycle back to the root
            "ses_b": ["ses_shared"],  # diamond
            "ses_shared": ["ses_a"],  # cycle
        },
    )
    report = await stop_tree(opencode_client, ROOT)
    assert sorted(api.aborts) == sorted([ROOT, "ses_a", "ses_b", "ses_shared"])
    assert sorted(api.listings) == sorted([ROOT, "ses_a", "ses_b", "ses_shared"])
    assert len(report) == 4


async def test_children_are_ordered_by_creation_time(
    router: respx.MockRouter, opencode_client: OpenCodeClient
) -> None:
    api = tree(router, {ROOT: ["ses_z", "ses_y", "ses_x"]})
    api.created = {"ses_z": 3.0, "ses_y": 1.0, "ses_x": 2.0}
    report = await stop_tree(opencode_client, ROOT, concurrency=1)
    assert report.session_ids == (ROOT, "ses_y", "ses_x", "ses_z")
    assert api.aborts == [ROOT, "ses_y", "ses_x", "ses_z"]


async def test_walk_is_work_conserving(
    router: respx.MockRouter, opencode_client: OpenCodeClient
) -> None:
    # One slow abort at level 1 must not stop the walk from going deeper elsewhere.
    api = tree(
        router,
        {ROOT: ["ses_slow", "ses_fast"], "ses_fast": ["ses_deep"], "ses_deep": ["ses_deeper"]},
    )
    slow = Gate()
    api.abort_hooks["ses_slow"] = slow
    task = asyncio.create_task(stop_tree(opencode_client, ROOT, concurrency=2))
    await slow.started.wait()
    for _ in range(200):
        if "ses_deeper" in api.aborts:
            break
        await asyncio.sleep(0.001)
    assert "ses_deeper" in api.aborts, "a free permit waited for a whole level"
    assert not task.done()
    slow.release()
    report = await task
    assert report.ok


async def test_whole_walk_timeout_with_a_hanging_abort(
    router: respx.MockRouter, opencode_client: OpenCodeClient
) -> None:
    api = tree(router, {ROOT: ["ses_hang", "ses_ok"]})
    hang = Gate()
    api.abort_hooks["ses_hang"] = hang
    with pytest.raises(TreeStopError) as caught:
        await stop_tree(opencode_client, ROOT, timeout=0.2)
    err = caught.value
    assert isinstance(err.cause, TimeoutError)
    assert err.report["ses_ok"].outcome == "aborted"
    assert err.report["ses_hang"].outcome == "failed"
    assert isinstance(err.report["ses_hang"].error, TimeoutError)
    assert err.first_failure is not None and err.first_failure.session_id == "ses_hang"
    # Cancelled, not leaked: no task of the walk survives the call.
    await asyncio.sleep(0)
    assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []


async def test_transient_503_is_retried_then_succeeds(
    router: respx.MockRouter, opencode_client: OpenCodeClient
) -> None:
    api = tree(router, {ROOT: ["ses_flaky"]})
    attempts: list[int] = []

    async def flaky(sid: str) -> httpx.Response | None:
        attempts.append(1)
        return error(503, "busy") if len(attempts) < 3 else None

    api.abort_hooks["ses_flaky"] = flaky
    report = await stop_tree(opencode_client, ROOT)
    assert report["ses_flaky"].outcome == "aborted"
    assert len(attempts) == 3


async def test_retries_exhausted_is_a_failure(
    router: respx.MockRouter, opencode_client: OpenCodeClient
) -> None:
    api = tree(router, {ROOT: ["ses_flaky"]})
    api.abort_hooks["ses_flaky"] = lambda sid: _resp(error(503, "still busy"))
    with pytest.raises(TreeStopError) as caught:
        await stop_tree(opencode_client, ROOT)
    assert api.aborts.count("ses_flaky") == 3
    assert isinstance(caught.value.cause, RequestError)
    assert caught.value.cause.status == 503
    assert "after 3 attempts" in str(caught.value.cause)


@pytest.mark.parametrize(
    "hostile",
    [
        "../../global/dispose",
        "ses_a/../../x",
        "ses_%2F..",
        "ses_ünïcode",
        "not_a_session",
        "",
        42,
        None,
    ],
)
async def test_hostile_child_ids_are_refused_without_any_request(
    router: respx.MockRouter, opencode_client: OpenCodeClient, hostile: object
) -> None:
    api = tree(router, {ROOT: ["ses_good"], "ses_good": []})

    async def evil(sid: str) -> httpx.Response:
        return httpx.Response(
            200, json=[session_json("ses_fine", ROOT, 1.0), {"id": hostile, "time": {"created": 2}}]
        )

    api.children_hooks[ROOT] = evil
    with pytest.raises(TreeStopError) as caught:
        await stop_tree(opencode_client, ROOT)
    assert isinstance(caught.value.cause, ProtocolError)
    assert caught.value.first_failure is not None
    assert caught.value.first_failure.failed_step == "children"
    # The valid sibling is still stopped; no request left for any other path.
    assert api.aborts == [ROOT, "ses_fine"]
    allowed = {f"/session/{sid}/{op}" for sid in (ROOT, "ses_fine") for op in ("abort", "children")}
    assert {r.request.url.path for r in router.calls} <= allowed | {"/session/status"}


async def test_verification_pass_catches_a_root_busy_again(
    router: respx.MockRouter, opencode_client: OpenCodeClient
) -> None:
    api = tree(router, {ROOT: ["ses_a"], "ses_a": []})
    seen = {"rounds": 0}

    async def status() -> httpx.Response | None:
        seen["rounds"] += 1
        if seen["rounds"] == 1:
            # The root started one more step, and spawned a child, after the walk.
            api.children[ROOT].append("ses_after")
            return httpx.Response(200, json={ROOT: {"type": "busy"}, "ses_other": {"type": "busy"}})
        return httpx.Response(200, json={"ses_other": {"type": "busy"}})

    api.status_hook = status
    report = await stop_tree(opencode_client, ROOT)
    assert api.aborts.count(ROOT) == 2
    assert report[ROOT].reaborts == 1
    assert "ses_after" in api.aborts
    assert "ses_other" not in api.aborts
    assert report.verify_rounds == 2


async def test_sessions_that_stay_busy_fail_the_stop(
    router: respx.MockRouter, opencode_client: OpenCodeClient
) -> None:
    api = tree(router, {ROOT: []})
    api.status_hook = lambda: _resp(httpx.Response(200, json={ROOT: {"type": "busy"}}))
    with pytest.raises(TreeStopError) as caught:
        await stop_tree(opencode_client, ROOT, max_verify_rounds=2)
    assert caught.value.report.still_busy == (ROOT,)
    assert caught.value.report.verify_rounds == 2


async def test_verify_can_be_turned_off(
    router: respx.MockRouter, opencode_client: OpenCodeClient
) -> None:
    api = tree(router, {ROOT: []})
    report = await stop_tree(opencode_client, ROOT, verify=False)
    assert report.verify_rounds == 0
    assert ("status", "") not in api.calls


async def test_tree_larger_than_the_bound_is_refused(
    router: respx.MockRouter, opencode_client: OpenCodeClient
) -> None:
    tree(router, {ROOT: [f"ses_{i}" for i in range(50)]})
    with pytest.raises(TreeStopError, match="more than 10 sessions"):
        await stop_tree(opencode_client, ROOT, max_sessions=10)


async def test_custom_root_abort_replaces_the_root_request(
    router: respx.MockRouter, opencode_client: OpenCodeClient
) -> None:
    api = tree(router, {ROOT: ["ses_a"]})
    called: list[str] = []

    async def root_abort() -> None:
        called.append("root")

    report = await stop_tree(opencode_client, ROOT, root_abort=root_abort)
    assert called == ["root"]
    assert ROOT not in api.aborts
    assert report[ROOT].outcome == "aborted"


@pytest.mark.parametrize("bad", ["", "../x", "abc", "ses_/"])
async def test_invalid_root_is_refused(opencode_client: OpenCodeClient, bad: str) -> None:
    with pytest.raises(InvalidInputError):
        await stop_tree(opencode_client, bad)


async def test_invalid_parameters_are_refused(opencode_client: OpenCodeClient) -> None:
    with pytest.raises(InvalidInputError):
        await stop_tree(opencode_client, ROOT, concurrency=0)
    with pytest.raises(InvalidInputError):
        await stop_tree(opencode_client, ROOT, timeout=0)


async def test_report_renders_as_a_tree(
    router: respx.MockRouter, opencode_client: OpenCodeClient
) -> None:
    api = tree(router, {ROOT: ["ses_a", "ses_b"], "ses_a": ["ses_a1"]})
    api.abort_hooks["ses_b"] = lambda sid: _resp(not_found(sid))
    report = await stop_tree(opencode_client, ROOT)
    text = str(report)
    lines = text.splitlines()
    assert lines[0].startswith("ses_root  aborted")
    assert lines[1].startswith("├── ses_a  aborted")
    assert lines[2].startswith("│   └── ses_a1  aborted")
    assert lines[3].startswith("└── ses_b  not found")
    assert "4 sessions: 3 aborted, 1 already gone, 0 failed" in lines[4]


async def test_a_verify_reabort_that_lands_supersedes_a_failed_abort(
    router: respx.MockRouter, opencode_client: OpenCodeClient
) -> None:
    api = tree(router, {ROOT: []})
    calls = {"n": 0}

    async def first_fails(sid: str) -> httpx.Response | None:
        calls["n"] += 1
        return error(500, "hiccup") if calls["n"] <= 3 else None  # all retries of the first try

    api.abort_hooks[ROOT] = first_fails
    api.busy = {ROOT}
    report = await stop_tree(opencode_client, ROOT)
    assert report[ROOT].outcome == "aborted" and report[ROOT].reaborts == 1
    assert report.ok


async def test_progress_reports_settled_and_discovered(
    router: respx.MockRouter, opencode_client: OpenCodeClient
) -> None:
    tree(router, {ROOT: ["ses_a", "ses_b"], "ses_a": ["ses_c"]})
    seen: list[tuple[int, int]] = []
    await stop_tree(
        opencode_client,
        ROOT,
        concurrency=1,
        progress=lambda done, known: seen.append((done, known)),
    )
    assert seen == [(1, 1), (2, 3), (3, 3), (4, 4)]


async def test_eager_root_listing_stops_children_while_the_root_abort_is_in_flight(
    router: respx.MockRouter, opencode_client: OpenCodeClient
) -> None:
    api = tree(router, {ROOT: ["ses_a", "ses_b"], "ses_a": ["ses_a1"]})
    gate = api.abort_hooks[ROOT] = Gate()
    task = asyncio.create_task(stop_tree(opencode_client, ROOT, eager_root_listing=True))
    await gate.started.wait()
    for _ in range(200):
        if {"ses_a", "ses_b", "ses_a1"} <= set(api.aborts):
            break
        await asyncio.sleep(0.001)
    assert {"ses_a", "ses_b", "ses_a1"} <= set(api.aborts), "children stopped during the root abort"
    assert api.aborts[0] == ROOT, "the root abort is still sent first"
    api.children[ROOT].append("ses_late")  # created while the root abort was in flight
    assert not task.done()
    gate.release()
    report = await task
    assert "ses_late" in api.aborts, "the listing after the root abort finds late children"
    assert api.listings.count(ROOT) == 2
    assert report.ok and len(report) == 5


async def test_a_failed_early_listing_is_not_a_failure(
    router: respx.MockRouter, opencode_client: OpenCodeClient
) -> None:
    api = tree(router, {ROOT: ["ses_a"]})
    calls = {"n": 0}

    async def first_listing_fails(sid: str) -> httpx.Response | None:
        calls["n"] += 1
        return error(400, "not now") if calls["n"] == 1 else None

    api.children_hooks[ROOT] = first_listing_fails
    report = await stop_tree(opencode_client, ROOT, eager_root_listing=True)
    assert report.ok and "ses_a" in api.aborts
