"""What the evictions report when a GPU pod is not evicted: the API server's refusal named per pod,
the pods not sent after a failure that is not about one pod, and a deletion past the budget that failed."""

from __future__ import annotations

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.kinds import quarantine as kinds
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import ClusterError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write import evictions as ev

FORBIDDEN = (
    'pods "train-0" is forbidden: User "ci" cannot create resource "pods/eviction" in API group "" '
    'in the namespace "ml"'
)


def _pod(name: str, budgets: tuple[ev.BudgetRef, ...] = ()) -> ev.PodEviction:
    return ev.PodEviction("ml", name, "gpu-0", {"nvidia.com/gpu": 8}, budgets)


def test_a_refused_eviction_names_the_pod_its_node_and_the_error_and_stops_the_rest():
    def evict(pod):
        raise ClusterError(FORBIDDEN, 403)

    calls = ev.EvictionCalls(evict, lambda pod: None, errors=(ClusterError,))
    results = ev.evict_pods([_pod("train-0"), _pod("train-1")], calls, ev.EvictionSettings(30, parallelism=1))
    assert [r.status for r in results] == [ev.FAILED, ev.NOT_ATTEMPTED]
    refused, skipped = ev.eviction_findings(results, 30)
    assert (refused["id"], refused["severity"]) == (kinds.EVICTION_FAILED, "error")
    assert refused["where"] == {"node": "gpu-0", "subject": "ml/train-0"}
    assert refused["message"] == f"ml/train-0 on gpu-0: {FORBIDDEN}"
    assert skipped["id"] == kinds.EVICTION_FAILED and skipped["where"]["subject"] == "ml/train-1"
    assert skipped["message"] == "ml/train-1 on gpu-0: not attempted: the API server failed on another pod first"
    assert ev.eviction_lists(results)["eviction_failed"] == [
        {"pod": "ml/train-0", "error": FORBIDDEN},
        {"pod": "ml/train-1", "error": "not attempted"},
    ]


def test_a_deletion_past_the_budget_that_fails_is_an_eviction_failure_naming_both_answers():
    now = [0.0]

    def evict(pod):
        raise ClusterError("Cannot evict pod as it would violate the pod's disruption budget.", 429)

    def delete(pod):
        raise ClusterError(f'pods "{pod.name}" is forbidden: cannot delete', 403)

    def sleep(seconds):
        now[0] += seconds

    calls = ev.EvictionCalls(evict, delete, errors=(ClusterError,), clock=lambda: now[0], sleep=sleep)
    pod = _pod("train-0", (ev.BudgetRef("keep", 0, True),))
    (result,) = ev.evict_pods([pod], calls, ev.EvictionSettings(5, force_delete=True))
    assert result.status == ev.FAILED and now[0] >= 5
    (finding,) = ev.eviction_findings([result], 5)
    assert (finding["id"], finding["node"], finding["subject"]) == (kinds.EVICTION_FAILED, "gpu-0", "ml/train-0")
    assert finding["message"].startswith("ml/train-0 on gpu-0: Cannot evict pod as it would violate")
    assert finding["message"].endswith('then deleting it failed: pods "train-0" is forbidden: cannot delete')


def test_a_pod_kept_by_a_budget_the_plan_saw_allowing_is_named_by_the_api_servers_refusal():
    """The budget allowed a disruption when it was read and none when the eviction came (another
    eviction took it): the pod is said kept by the budget the API server's refusal names.
    The refusal in the words describe_api_error gives the API server's 429 (kubernetes
    pkg/registry/core/pod/storage/eviction.go, checkAndDecrement's DisruptionBudget cause)."""
    now = [0.0]
    refusal = (
        'refused by PodDisruptionBudget "keep" (429 Too Many Requests) on POST '
        "/api/v1/namespaces/ml/pods/train-0/eviction: The disruption budget keep needs 2 healthy pods and has 2 currently"
    )

    def evict(pod):
        raise ClusterError(refusal, 429)

    def sleep(seconds):
        now[0] += seconds

    calls = ev.EvictionCalls(evict, lambda pod: None, errors=(ClusterError,), clock=lambda: now[0], sleep=sleep)
    pod = _pod("train-0", (ev.BudgetRef("keep", 1, True),))
    assert pod.blocking == ()
    (result,) = ev.evict_pods([pod], calls, ev.EvictionSettings(5))
    assert result.status == ev.BLOCKED
    (finding,) = ev.eviction_findings([result], 5)
    assert finding["id"] == kinds.EVICTION_BLOCKED
    assert finding["message"].startswith("ml/train-0 stays on gpu-0: PodDisruptionBudget ml/keep allowed no disruption")
    assert "throttl" not in finding["message"]
    assert ev.eviction_lists([result])["blocked"] == [
        {"pod": "ml/train-0", "node": "gpu-0", "budgets": ["keep"], "error": refusal}
    ]
    assert ev.blocked_warning(ev.eviction_lists([result])["blocked"]) == (
        "1 GPU pod(s) stay on quarantined nodes, kept by their budget: ml/train-0 (PodDisruptionBudget keep)"
    )
