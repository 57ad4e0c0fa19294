"""The device plugin and NVIDIA's DRA driver serving the same GPU, on the local control plane: two
KWOK nodes of this test's own, each with `nvidia.com/gpu: 1` in its allocatable (the device plugin)
and a ResourceSlice of driver gpu.nvidia.com publishing that one GPU (the DRA driver's kubelet
plugin, in its shape: tests/cluster/dra.py). On one node a pod asks for `nvidia.com/gpu: 1` and
another holds a ResourceClaim for one GPU of DeviceClass gpu.nvidia.com: the real kube-scheduler
binds both, since it counts the extended resource and the slice's devices apart (one GPU, two
holders), and gpu_node_facts calls that over-commit, naming both pods. The other node, with no
pods, shows the risk only; gpu_device_plugin_validate, which reads no claims, flags both nodes by the
same rule. Everything made here is deleted, and waited for, at the end.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import GPU, LocalCluster, fleet_facts, run_ansible_module, wait_until

from tests.cluster import dra as cluster_dra
from tests.cluster import fleet as fleet_file

pytestmark = pytest.mark.cluster

RESOURCE = "/apis/resource.k8s.io/v1"
GPU_CLASS = "gpu.nvidia.com"
RUN = uuid.uuid4().hex[:8]
BUSY = f"dual-stack-{RUN}-busy"
IDLE = f"dual-stack-{RUN}-idle"
TAINT = {"key": "kubegpu-test/dual-stack", "value": RUN, "effect": "NoSchedule"}
SERVED_TWICE = "gpus_served_by_device_plugin_and_dra"
OVER_COMMITTED = "gpus_over_committed_by_device_plugin_and_dra"
ONE_H100 = {"product": "NVIDIA H100 80GB HBM3", "gpus": 1, "memory": "80Gi", "mig": None}


def node(name: str) -> dict[str, Any]:
    """A KWOK node of the fleet's template with one GPU from the device plugin, tainted for this test."""
    spec = {
        "name": name,
        "cpu": "16",
        "memory": "64Gi",
        "gpus": 1,
        "allocatable_gpus": 1,
        "labels": {"kubegpu-test/dual-stack": RUN},
        "taints": [TAINT],
    }
    return fleet_file.node_object(spec)


def pod(name: str, namespace: str, on: str, claim: str | None = None) -> dict[str, Any]:
    """A GPU pod pinned to a node: `nvidia.com/gpu: 1` in its limits, or the claim named."""
    container: dict[str, Any] = {"name": "main", "image": "nvidia/cuda:12.4.1-base-ubuntu22.04"}
    spec: dict[str, Any] = {
        "nodeSelector": {"kubernetes.io/hostname": on},
        "tolerations": [{"key": TAINT["key"], "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [container],
    }
    if claim:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
        container["resources"] = {"claims": [{"name": "gpu"}]}
    else:
        container["resources"] = {"limits": {GPU: "1"}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def one_gpu_claim(namespace: str) -> dict[str, Any]:
    request = {"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS, "allocationMode": "ExactCount", "count": 1}}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "one-gpu", "namespace": namespace},
        "spec": {"devices": {"requests": [request]}},
    }


def exists(cluster: LocalCluster, path: str) -> bool:
    return cluster.api.request("GET", path)[0] != 404


def node_settled(cluster: LocalCluster, name: str) -> bool:
    """Ready, with no taint but this test's (the lifecycle controller's not-ready taint lifted)."""
    found = cluster.get(f"/api/v1/nodes/{name}")
    conditions = found.get("status", {}).get("conditions", [])
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
    return ready and [t["key"] for t in found["spec"].get("taints", [])] == [TAINT["key"]]


def create(cluster: LocalCluster, made: list[str], collection: str, body: dict[str, Any]) -> dict[str, Any]:
    status, reply = cluster.create(collection, body)
    assert status == 201, reply
    made.append(f"{collection}/{body['metadata']['name']}")
    assert isinstance(reply, dict)
    return reply


def delete_all(cluster: LocalCluster, made: list[str]) -> None:
    """Delete in reverse order of making, each waited for until the API no longer has it."""
    for path in reversed(made):
        cluster.delete(path)
        wait_until(lambda path=path: not exists(cluster, path), 60, 0.2, what=f"{path} to go")


@pytest.fixture(scope="module")
def dual_stack(cluster: LocalCluster) -> Iterator[dict[str, Any]]:
    """The two nodes, their slices, the class where the cluster lacks it, the pods and the claim;
    the facts read once all is bound."""
    made: list[str] = []
    try:
        uids = {n: create(cluster, made, "/api/v1/nodes", node(n))["metadata"]["uid"] for n in (BUSY, IDLE)}
        if not exists(cluster, f"{RESOURCE}/deviceclasses/{GPU_CLASS}"):
            (chart_class,) = [c for c in cluster_dra.device_classes() if c["metadata"]["name"] == GPU_CLASS]
            create(cluster, made, f"{RESOURCE}/deviceclasses", chart_class)
        for name, uid in uids.items():
            create(cluster, made, f"{RESOURCE}/resourceslices", cluster_dra.resource_slice(name, ONE_H100, uid))
        namespace = f"t-dual-{RUN}"
        create(
            cluster,
            made,
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        )
        wait_until(lambda: all(node_settled(cluster, n) for n in uids), 60, 0.2, what="the test's nodes Ready")
        create(cluster, made, f"{RESOURCE}/namespaces/{namespace}/resourceclaims", one_gpu_claim(namespace))
        pods = f"/api/v1/namespaces/{namespace}/pods"
        create(cluster, made, pods, pod("limits", namespace, BUSY))
        create(cluster, made, pods, pod("claimer", namespace, BUSY, claim="one-gpu"))

        def bound() -> bool:
            return all(cluster.get(f"{pods}/{p}")["spec"].get("nodeName") for p in ("limits", "claimer"))

        wait_until(bound, 30, 0.2, what="both pods bound")
        status, result, _done = run_ansible_module(cluster.kubeconfig, "gpu_node_facts")
        assert status == "SUCCESS", result.get("msg")
        status, checked, _done = run_ansible_module(
            cluster.kubeconfig, "gpu_device_plugin_validate", {"fail_on": "never"}
        )
        assert status == "SUCCESS", checked.get("msg")
        yield {"namespace": namespace, "pods": pods, "facts": fleet_facts(result), "check": checked}
    finally:
        delete_all(cluster, made)


def facts_of(dual_stack: dict[str, Any], name: str) -> dict[str, Any]:
    return next(n for n in dual_stack["facts"]["nodes"] if n["name"] == name)


def mapping_class(cluster: LocalCluster) -> str | None:
    """The class that maps nvidia.com/gpu to the driver's GPUs, where the release serves the field."""
    spec = cluster.get(f"{RESOURCE}/deviceclasses/{GPU_CLASS}")["spec"]
    return GPU_CLASS if spec.get("extendedResourceName") == GPU else None


def test_the_scheduler_binds_a_limits_pod_and_a_claim_pod_onto_one_gpu(cluster: LocalCluster, dual_stack):
    namespace, pods = dual_stack["namespace"], dual_stack["pods"]
    assert cluster.get(f"/api/v1/nodes/{BUSY}")["status"]["allocatable"][GPU] == "1"
    assert [cluster.get(f"{pods}/{p}")["spec"]["nodeName"] for p in ("limits", "claimer")] == [BUSY, BUSY]
    claim = cluster.get(f"{RESOURCE}/namespaces/{namespace}/resourceclaims/one-gpu")
    results = claim["status"]["allocation"]["devices"]["results"]
    assert [(r["driver"], r["pool"], r["device"]) for r in results] == [("gpu.nvidia.com", BUSY, "gpu-0")]
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["claimer"]


def test_the_facts_call_the_busy_node_over_committed_naming_both_pods(cluster: LocalCluster, dual_stack):
    namespace = dual_stack["namespace"]
    busy = facts_of(dual_stack, BUSY)
    (entry,) = busy["dra"]["served_by_both"]
    assert entry["over_committed"] is True
    assert (entry["resource"], entry["driver"], entry["devices"]) == (GPU, "gpu.nvidia.com", 1)
    assert entry["device_class"] == mapping_class(cluster)
    assert (entry["plugin_pods"], entry["claim_pods"]) == ([f"{namespace}/limits"], [f"{namespace}/claimer"])
    (problem,) = [p for p in busy["problems"] if p["kind"] in (SERVED_TWICE, OVER_COMMITTED)]
    assert problem["kind"] == OVER_COMMITTED and problem["severity"] == "error"
    assert f"{namespace}/limits hold 1 {GPU}" in problem["reason"]
    assert f"{namespace}/claimer hold claims on 1 device(s) of driver gpu.nvidia.com" in problem["reason"]
    fleet_kinds = {(p["node"], p["kind"]) for p in dual_stack["facts"]["problems"]}
    assert (BUSY, OVER_COMMITTED) in fleet_kinds and (BUSY, SERVED_TWICE) not in fleet_kinds


def test_the_idle_node_shows_the_risk_only(cluster: LocalCluster, dual_stack):
    idle = facts_of(dual_stack, IDLE)
    (entry,) = idle["dra"]["served_by_both"]
    assert (entry["over_committed"], entry["plugin_pods"], entry["claim_pods"]) == (False, [], [])
    assert entry["device_class"] == mapping_class(cluster)
    kinds = [p["kind"] for p in idle["problems"]]
    assert SERVED_TWICE in kinds and OVER_COMMITTED not in kinds
    assert idle["gpu_sources"] == ["device_plugin", "dra"]


def test_the_device_plugin_check_flags_both_nodes_by_the_same_rule(dual_stack):
    found = {(f["where"].get("node"), f["kind"]) for f in dual_stack["check"]["findings"]}
    assert {(BUSY, SERVED_TWICE), (IDLE, SERVED_TWICE)} <= found
