"""The guarded node-patch loop every node write runs on: what becomes of a plan when the node changed,
went away, or the API server failed."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import ClusterError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.patches import MAX_CONFLICT_ATTEMPTS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.node_patches import (
    PatchCalls,
    Patched,
    in_parallel,
    patch_node,
    patch_nodes,
)


@dataclass(frozen=True)
class Plan:
    name: str
    patch: list | None
    version: int = 0


def replan_to(version: int, patch: list | None):
    return lambda node, plan: Plan(plan.name, patch, version)


def calls(failures: dict[str, list[ClusterError]], replan=None, reread=None, sent=None) -> PatchCalls:
    def send(name: str, patch: list) -> None:
        if sent is not None:
            sent.append(name)
        if failures.get(name):
            raise failures[name].pop(0)

    return PatchCalls(
        send, reread or (lambda name: {"name": name}), replan or replan_to(1, [{"op": "add"}]), (ClusterError,)
    )


def test_a_plan_without_a_patch_sends_nothing():
    sent: list[str] = []
    result = patch_node(Plan("a", None), calls({}, sent=sent))
    assert result.outcome is Patched.DONE and sent == []


def test_a_node_changed_meanwhile_is_decided_again_and_patched():
    sent: list[str] = []
    result = patch_node(Plan("a", [{"op": "x"}]), calls({"a": [ClusterError("changed", 409)]}, sent=sent))
    assert result.outcome is Patched.DONE and result.plan.version == 1 and sent == ["a", "a"]


def test_a_node_that_needs_nothing_once_read_again_is_done():
    result = patch_node(Plan("a", [{"op": "x"}]), calls({"a": [ClusterError("changed", 422)]}, replan_to(2, None)))
    assert result.outcome is Patched.DONE and result.plan.version == 2 and result.attempts == 1


def test_a_patch_refused_again_unchanged_fails_with_the_first_answer():
    patch = [{"op": "x"}]
    result = patch_node(Plan("a", patch), calls({"a": [ClusterError("invalid value", 422)]}, replan_to(1, patch)))
    assert result.outcome is Patched.FAILED and result.error == "invalid value" and result.status == 422


def test_a_node_that_keeps_changing_stops_after_the_bounded_attempts():
    failures = {"a": [ClusterError("changed", 409)] * MAX_CONFLICT_ATTEMPTS}
    sent: list[str] = []
    result = patch_node(Plan("a", [{"op": "x"}]), calls(failures, sent=sent))
    assert result.outcome is Patched.KEPT_CHANGING and result.attempts == MAX_CONFLICT_ATTEMPTS
    assert len(sent) == MAX_CONFLICT_ATTEMPTS and result.status == 409


def test_a_node_deleted_meanwhile_is_gone():
    sent = patch_node(Plan("a", [{"op": "x"}]), calls({"a": [ClusterError("not found", 404)]}))
    assert sent.outcome is Patched.GONE and sent.error == "not found"
    reread = patch_node(Plan("a", [{"op": "x"}]), calls({"a": [ClusterError("changed", 409)]}, reread=lambda _n: None))
    assert reread.outcome is Patched.GONE and reread.error == ""


def test_a_failure_not_about_one_node_stops_the_sending():
    plans = [Plan(f"n{i}", [{"op": "x"}]) for i in range(5)]
    sent: list[str] = []
    results = patch_nodes(plans, calls({"n1": [ClusterError("forbidden", 403)]}, sent=sent), parallelism=1)
    assert [r.outcome for r in results] == [Patched.DONE, Patched.FAILED] + [Patched.NOT_ATTEMPTED] * 3
    assert sent == ["n0", "n1"]


def test_a_failure_about_one_node_does_not_stop_the_others():
    plans = [Plan(f"n{i}", [{"op": "x"}]) for i in range(3)]
    results = patch_nodes(plans, calls({"n0": [ClusterError("bad request", 400)]}), parallelism=1)
    assert [r.outcome for r in results] == [Patched.FAILED, Patched.DONE, Patched.DONE]


def test_no_more_than_the_parallelism_run_at_once():
    running, most, lock = [0], [0], threading.Lock()

    def work(item: int) -> int:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        threading.Event().wait(0.01)
        with lock:
            running[0] -= 1
        return item * 2

    assert in_parallel(work, list(range(12)), 3) == [i * 2 for i in range(12)]
    assert most[0] <= 3
