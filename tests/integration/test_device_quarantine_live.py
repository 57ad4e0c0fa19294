"""A DeviceTaintRule of the collection's own on one GPU of a DRA node, on the local control plane
(1.37.2): the rule the plan builds is served in resource.k8s.io/v1, the device taint eviction
controller reports for effect None the pods the plan finds on the device, and for NoExecute it
deletes the pod that holds the device through an extended-resource claim, though a
PodDisruptionBudget allows no disruption of it. Leaves the cluster as it was.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest
from conftest import LocalCluster, wait_until

from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_quarantine import device as plan
from tests.cluster.counters import api_requests, sent_since

pytestmark = pytest.mark.cluster

RESOURCE = "/apis/resource.k8s.io/v1"
NODE = "dra-h100"
OWNER = {"who": "kubegpu-test", "why": "simulated XID 79", "when": "2026-12-03T10:00:00Z"}


def _gpu_pod(namespace: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "on-bad-gpu", "namespace": namespace, "labels": {"app": "on-bad-gpu"}},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": NODE},
            "tolerations": [{"operator": "Exists", "effect": "NoSchedule"}],
            "containers": [
                {
                    "name": "main",
                    "image": "nvidia/cuda:12.4.1-base-ubuntu22.04",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                }
            ],
        },
    }


def _writes(cluster: LocalCluster) -> Counter:
    """Write requests the API server has answered, per (verb, resource, subresource): its own counters."""

    def key(labels: dict[str, str]) -> tuple[str, str, str] | None:
        if labels.get("verb") in ("POST", "PATCH", "DELETE") and labels.get("resource") in ("devicetaintrules", "pods"):
            return (labels["verb"], labels["resource"], labels.get("subresource", ""))
        return None

    return api_requests(cluster, key)


def _claims(cluster: LocalCluster) -> list[dict]:
    return cluster.get(f"{RESOURCE}/resourceclaims")["items"]


def test_a_rule_on_one_device_reports_then_deletes_its_extended_resource_user_past_its_budget(
    cluster: LocalCluster, namespace: str
):
    # A budget that forbids any disruption of the pod: the controller deletes, it does not evict.
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "keep-on-bad-gpu", "namespace": namespace},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "on-bad-gpu"}}},
    }
    status, reply = cluster.create(f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets", budget)
    assert status == 201, reply
    status, reply = cluster.create(f"/api/v1/namespaces/{namespace}/pods", _gpu_pod(namespace))
    assert status == 201, reply
    pod_path = f"/api/v1/namespaces/{namespace}/pods/on-bad-gpu"
    wait_until(lambda: cluster.get(pod_path)["status"].get("phase") == "Running", 60, what="pod Running")
    claim_name = cluster.get(pod_path)["status"]["extendedResourceClaimStatus"]["resourceClaimName"]
    claim = cluster.get(f"{RESOURCE}/namespaces/{namespace}/resourceclaims/{claim_name}")
    result = claim["status"]["allocation"]["devices"]["results"][0]
    ref = plan.DeviceRef(result["driver"], result["pool"], result["device"])
    users = plan.device_users(_claims(cluster), ref)
    assert users == [
        {"namespace": namespace, "name": "on-bad-gpu", "claim": claim_name, "through": "extended_resource"}
    ]

    before = _writes(cluster)
    body = plan.rule_body(ref, plan.DEFAULT_TAINT_KEY, plan.EFFECT_NONE, OWNER)
    rule_path = f"{RESOURCE}/devicetaintrules/{body['metadata']['name']}"
    status, reply = cluster.create(f"{RESOURCE}/devicetaintrules", body)
    assert status == 201, reply
    try:
        report = wait_until(lambda: plan.simulation(cluster.get(rule_path)), 60, what="the None report")
        assert report == {"published": 1, "allocated": 1, "pods": len(users), "namespaces": 1}
        assert cluster.get(pod_path)["metadata"].get("deletionTimestamp") is None
        budget_path = f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/keep-on-bad-gpu"
        wait_until(
            lambda: cluster.get(budget_path).get("status", {}).get("currentHealthy") == 1, 60, what="budget current"
        )
        assert cluster.get(budget_path)["status"]["disruptionsAllowed"] == 0

        cluster.patch(rule_path, {"spec": {"taint": {"effect": "NoExecute"}}})
        started = time.monotonic()

        def gone() -> bool:
            status, _reply = cluster.api.request("GET", pod_path)
            return status == 404

        wait_until(gone, 60, what="the pod evicted by the device taint eviction controller")
        print(f"extended-resource pod deleted by the controller in {time.monotonic() - started:.1f}s")
    finally:
        assert cluster.delete(rule_path) in (200, 202, 404)
    after = _writes(cluster)
    delta = sent_since(before, after)
    # One rule created, switched once, deleted once; the pod deleted (the controller, then KWOK
    # finishing the deletion), never through an eviction.
    rule_writes = {key: value for key, value in delta.items() if key[1] == "devicetaintrules" and not key[2]}
    assert rule_writes == {
        ("POST", "devicetaintrules", ""): 1,
        ("PATCH", "devicetaintrules", ""): 1,
        ("DELETE", "devicetaintrules", ""): 1,
    }, delta
    assert delta.get(("DELETE", "pods", ""), 0) >= 1 and ("POST", "pods", "eviction") not in delta, delta
    assert plan.releasable([body], [ref]) == [body["metadata"]["name"]]
