"""Applying a node quarantine plan: one patch per node, replanned when another client changed what it
tests; evictions bounded in flight, a budget's 429 retried until the timeout, never a deletion unless
asked; and what the run reports."""

from __future__ import annotations

import threading
import time

from test_node_quarantine import IS_GPU, OPTIONS, raw_node, raw_pod, share

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import ClusterError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.node_quarantine import apply as a
from ansible_collections.kubegpu.scheduling.plugins.module_utils.node_quarantine import plan as q
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write import evictions as ev
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.evictions import BudgetRef, PodEviction


def _plan(asked, nodes, pods=(), options=OPTIONS):
    compact = [q.project_node(n, options) for n in nodes]
    projected = [p for p in (ev.project_pod(i, frozenset(asked), IS_GPU) for i in pods) if p is not None]
    return q.plan_quarantine(asked, q.QuarantineReads(compact, projected, []), options)


def _replan(node, plan):
    return q.replan_node(node, plan, OPTIONS)


def test_one_patch_per_node_that_changes_and_none_for_the_others():
    plan = _plan(
        ["gpu-0", "gpu-1"], [raw_node("gpu-0"), raw_node("gpu-1", unschedulable=True, taints=[q.QUARANTINE_TAINT])]
    )
    sent = []
    results = a.apply_node_patches(plan.nodes, lambda name, patch: sent.append(name), lambda n: None, _replan)
    assert sent == ["gpu-0", "gpu-1"]  # gpu-1 has no record yet: it gets one
    assert [r.status for r in results] == [a.NODE_DONE, a.NODE_DONE]


def test_a_patch_whose_test_fails_is_replanned_on_the_node_read_again():
    plan = _plan(["gpu-0"], [raw_node("gpu-0")])
    sent = []

    def send(name, patch):
        sent.append(patch)
        if len(sent) == 1:
            raise ClusterError("the test failed", 422)

    cordoned = q.project_node(raw_node("gpu-0", unschedulable=True), OPTIONS)
    results = a.apply_node_patches(plan.nodes, send, lambda name: cordoned, _replan)
    assert len(sent) == 2 and not any(op["path"] == "/spec/unschedulable" for op in sent[1])
    assert results[0].status == a.NODE_DONE and results[0].plan.record.cordoned is False


def test_a_node_deleted_meanwhile_is_reported_gone_and_a_forbidden_patch_stops_the_others():
    plan = _plan(["gpu-0"], [raw_node("gpu-0")])

    def gone(name, patch):
        raise ClusterError("not found", 404)

    assert a.apply_node_patches(plan.nodes, gone, lambda n: None, _replan)[0].status == a.NODE_GONE
    plans = _plan([f"gpu-{i}" for i in range(3)], [raw_node(f"gpu-{i}") for i in range(3)]).nodes

    def forbidden(name, patch):
        raise ClusterError("forbidden", 403)

    results = a.apply_node_patches(plans, forbidden, lambda n: None, _replan, parallelism=1)
    assert [r.status for r in results] == [a.NODE_FAILED, a.NODE_NOT_ATTEMPTED, a.NODE_NOT_ATTEMPTED]


class FakeClock:
    def __init__(self):
        self.now = 0.0
        self.lock = threading.Lock()

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        with self.lock:
            self.now += seconds


def _pod(name, budgets=()):
    return PodEviction("ml", name, "gpu-0", {"nvidia.com/gpu": 1}, tuple(budgets))


def test_a_budget_429_is_retried_until_it_allows_the_eviction():
    clock = FakeClock()
    answers = [429, 429, None]

    def evict(pod):
        status = answers.pop(0)
        if status:
            raise ClusterError("Cannot evict pod as it would violate the pod's disruption budget.", status)

    result = ev.evict_pods(
        [_pod("a")], ev.EvictionCalls(evict, lambda p: None, clock=clock, sleep=clock.sleep), ev.EvictionSettings(60)
    )
    assert [(r.status, r.attempts) for r in result] == [(ev.EVICTED, 3)]
    assert 0 < clock.now < 60


def test_a_pod_its_budget_keeps_past_the_timeout_is_blocked_and_never_deleted_unless_asked():
    budget = BudgetRef("keep", 0, True)
    for force, status in ((False, ev.BLOCKED), (True, ev.DELETED)):
        clock = FakeClock()
        deleted = []

        def evict(pod):
            raise ClusterError("Cannot evict pod as it would violate the pod's disruption budget.", 429)

        settings = ev.EvictionSettings(10, force_delete=force)
        result = ev.evict_pods(
            [_pod("a", [budget])], ev.EvictionCalls(evict, deleted.append, clock=clock, sleep=clock.sleep), settings
        )
        assert result[0].status == status and result[0].attempts > 2
        assert clock.now >= 10
        assert len(deleted) == (1 if force else 0)
        findings = a.run_findings([], result, 10)
        assert findings[0]["kind"] == (
            "quarantine.pod_deleted_past_budget" if force else "quarantine.eviction_blocked_by_budget"
        )
        assert "PodDisruptionBudget ml/keep" in findings[0]["problem"]


def test_a_pod_gone_already_counts_as_evicted_and_one_several_budgets_select_is_blocked_at_once():
    def evict(pod):
        if pod.name == "gone":
            raise ClusterError("not found", 404)
        raise ClusterError(
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.", 500
        )

    clock = FakeClock()
    result = ev.evict_pods(
        [_pod("gone"), _pod("two")],
        ev.EvictionCalls(evict, lambda p: None, clock=clock, sleep=clock.sleep),
        ev.EvictionSettings(30),
    )
    assert [(r.status, r.attempts) for r in result] == [(ev.POD_GONE, 1), (ev.BLOCKED, 1)]
    assert clock.now == 0


def test_a_forbidden_eviction_stops_the_ones_not_sent_yet():
    def evict(pod):
        raise ClusterError("forbidden", 403)

    result = ev.evict_pods(
        [_pod(f"p{i}") for i in range(3)],
        ev.EvictionCalls(evict, lambda p: None),
        ev.EvictionSettings(30, parallelism=1),
    )
    assert [r.status for r in result] == [ev.FAILED, ev.NOT_ATTEMPTED, ev.NOT_ATTEMPTED]


def test_no_more_evictions_are_in_flight_than_the_parallelism():
    lock = threading.Lock()
    flying = [0, 0]

    def evict(pod):
        with lock:
            flying[0] += 1
            flying[1] = max(flying[1], flying[0])
        time.sleep(0.01)
        with lock:
            flying[0] -= 1

    pods = [_pod(f"p{i}") for i in range(40)]
    result = ev.evict_pods(pods, ev.EvictionCalls(evict, lambda p: None), ev.EvictionSettings(30, parallelism=4))
    assert all(r.status == ev.EVICTED for r in result)
    assert 1 < flying[1] <= 4


def test_only_pods_of_nodes_quarantined_now_are_evicted():
    pods = [raw_pod(f"p{i}", f"h{i}", {"nvidia.com/gpu": "8"}) for i in range(3)]
    plan = _plan(["h0", "h1", "h2"], [raw_node(f"h{i}") for i in range(4)], pods, share(0.5))
    results = [
        a.NodeResult(plan.nodes[0]),
        a.NodeResult(plan.nodes[1], a.NODE_FAILED, "boom"),
        a.NodeResult(plan.nodes[2]),
    ]
    assert plan.nodes[2].outcome == q.OUTCOME_HELD
    assert [p.ref for p in a.pods_to_evict(results)] == ["ml/p0"]


def test_the_summary_names_what_was_held_missing_left_and_blocked():
    pods = [
        raw_pod("p0", "h0", {"nvidia.com/gpu": "1"}),
        raw_pod("ds", "h0", {"nvidia.com/gpu": "1"}, owner="DaemonSet"),
    ]
    plan = _plan(["h0", "h1", "nope"], [raw_node("h0"), raw_node("h1")], pods, share(0.5))
    blocked = ev.EvictionResult(plan.nodes[0].evict[0], ev.BLOCKED, "429")
    summary = a.summarize(plan, a.checked_results(plan), [blocked], 5)
    assert summary["quarantined"] == ["h0"] and summary["missing"] == ["nope"]
    assert summary["held_back"][0]["node"] == "h1" and summary["held_back"][0]["pool"] == "model=NVIDIA-H100-80GB-HBM3"
    assert summary["to_evict"] == ["ml/p0"] and summary["blocked"][0]["pod"] == "ml/p0"
    assert summary["pools"] == {"model=NVIDIA-H100-80GB-HBM3": {"out_of_service": 8, "limit": 8}}
    kinds = [f["kind"] for f in summary["findings"]]
    assert kinds == [
        "quarantine.gpu_pod_left_on_node",
        "quarantine.held_by_breaker",
        "quarantine.node_not_found",
        "quarantine.eviction_blocked_by_budget",
    ]
    assert [d["before_header"] for d in summary["diff"]] == ["node/h0"]
    assert a.failure_message(summary) is None
    assert "ml/p0" in ev.blocked_warning(summary["blocked"])


def test_a_node_patch_the_api_server_refuses_is_a_finding_naming_the_error_and_its_pods_stay():
    pods = [raw_pod("train", "gpu-0", {"nvidia.com/gpu": "8"})]
    plan = _plan(["gpu-0"], [raw_node("gpu-0")], pods)
    error = 'nodes "gpu-0" is forbidden: User "ci" cannot patch resource "nodes" in API group "" at the cluster scope'

    def forbidden(name, patch):
        raise ClusterError(error, 403)

    results = a.apply_node_patches(plan.nodes, forbidden, lambda n: None, _replan, errors=(ClusterError,))
    assert [r.status for r in results] == [a.NODE_FAILED]
    assert a.pods_to_evict(results) == []
    summary = a.summarize(plan, results, None, 30)
    (finding,) = [f for f in summary["findings"] if f["id"] == "quarantine.node_patch_failed"]
    assert (finding["severity"], finding["where"]) == ("error", {"node": "gpu-0"})
    assert finding["message"] == error and finding["node"] == "gpu-0"
    assert "its pods were not evicted" in finding["remedy"]
    assert summary["quarantined"] == [] and summary["failed_nodes"] == [{"node": "gpu-0", "error": error}]
    assert a.failure_message(summary).startswith(f"quarantine incomplete; not quarantined: gpu-0: {error}")
