"""gpu_node_facts against the local cluster: the facts come out as tests/cluster/fleet.yaml defines them.

The expectations are computed from the fleet file here, independently of the module's code, so a
change to the fleet changes what is expected; pods the fleet file does not describe (the sample pod
that `make site` leaves running, or another user's) are read from the cluster and counted where they
run. Each test leaves the cluster as it found it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pytest
from conftest import (
    MODEL_LABEL_KEYS,
    LocalCluster,
    UnlistedPod,
    dra_resource_served,
    fleet_facts,
    run_ansible_module,
    runs_device_plugin,
    wait_until,
)

from tests.cluster import fleet as fleet_file

pytestmark = [pytest.mark.cluster, pytest.mark.every_release]

GPU = "nvidia.com/gpu"
GPU_LABEL_KEYS = MODEL_LABEL_KEYS + (
    "nvidia.com/gpu.present",
    "nvidia.com/gpu.count",
    "aliyun.accelerator/nvidia_count",
)
ACTIVE = "status.phase!=Succeeded,status.phase!=Failed"


def run_module(cluster: LocalCluster, args: dict[str, Any] | None = None, *flags: str) -> dict[str, Any]:
    """Run gpu_node_facts through `ansible` as a user would, and return its facts."""
    status, result, _done = run_ansible_module(cluster.kubeconfig, "gpu_node_facts", args, *flags)
    assert status == "SUCCESS", f"{status}: {result.get('msg')}"
    return fleet_facts(result)


def by_node(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {node["name"]: node for node in result["nodes"]}


def problem_kinds(result: dict[str, Any]) -> set[tuple[str, str]]:
    return {(p["node"], p["kind"]) for p in result["problems"]}


# --- what the fleet file says ------------------------------------------------------------------


def is_gpu_node(spec: dict[str, Any]) -> bool:
    labels = spec["labels"]
    return bool(spec["gpus"]) or any(labels.get(k) not in (None, "", "false", "0") for k in GPU_LABEL_KEYS)


def selects_gpus(visible_devices: str | None) -> bool:
    return visible_devices is not None and visible_devices.strip().lower() not in ("", "void", "none")


def asks_for_gpus_through_env(pod: dict[str, Any]) -> bool:
    return selects_gpus(pod["env"].get("NVIDIA_VISIBLE_DEVICES")) and not pod["gpus"]


def expected_fleet(fleet: dict[str, Any], unlisted: Sequence[UnlistedPod] = ()) -> dict[str, dict[str, Any]]:
    """Per GPU node of the fleet file: model, capacity, allocatable, allocated and problem kinds,
    with the pods the fleet file does not describe (`unlisted`) counted on their nodes."""
    expected = {}
    for spec in (s for s in fleet["nodes"] if is_gpu_node(s)):
        pods = [p for p in fleet["pods"] if p["node"] == spec["name"]]
        others = [p for p in unlisted if p.node == spec["name"]]
        capacity, allocatable = spec["gpus"] or 0, spec["allocatable_gpus"]
        allocated = sum(p["gpus"] for p in pods) + sum(p.gpus for p in others)
        mode = spec["labels"].get("ack.node.gpu.schedule")
        kinds = set()
        if capacity == 0:
            kinds.add("no_gpu_capacity")
        if allocatable < capacity:
            kinds.add("allocatable_below_capacity")
        if not runs_device_plugin(fleet, spec):
            kinds.add("no_device_plugin_pod")
        if mode is not None and mode != "default":
            kinds.add("not_default_scheduling_mode")
        if allocated > allocatable:
            kinds.add("allocated_above_allocatable")
        if any(asks_for_gpus_through_env(p) for p in pods) or any(
            not p.gpus and any(selects_gpus(v) for v in p.visible_devices) for p in others
        ):
            kinds.add("gpu_use_outside_scheduler")
        expected[spec["name"]] = {
            "model": next((spec["labels"][k] for k in MODEL_LABEL_KEYS if spec["labels"].get(k)), None),
            "capacity": capacity,
            "allocatable": allocatable,
            "allocated": allocated,
            "free": max(allocatable - allocated, 0),
            "kinds": kinds,
            "unlisted_gpu_pods": {p.ref for p in others if p.gpus},
        }
    # DRA nodes: their GPUs are the devices of their slices, less what the fleet's pods hold.
    for spec in fleet_file.dra_nodes(fleet):
        dra = fleet_file.expected_dra_node(spec, fleet)
        expected[spec["name"]] = {**dra, "kinds": set(), "unlisted_gpu_pods": set(), "device_plugin_ready": False}
    return expected


# --- tests -------------------------------------------------------------------------------------


def test_fleet_models_counts_and_problems_match_the_fleet_file(cluster: LocalCluster):
    expected = expected_fleet(cluster.fleet, cluster.unlisted_pods())
    result = run_module(cluster)

    nodes = by_node(result)
    assert sorted(nodes) == sorted(expected), "the GPU nodes are exactly the fleet file's GPU nodes"
    for name, want in expected.items():
        got = nodes[name]
        assert (got["model"], got["capacity"], got["allocatable"], got["allocated"], got["free"]) == (
            want["model"],
            want["capacity"],
            want["allocatable"],
            want["allocated"],
            want["free"],
        ), name
        assert {p["kind"] for p in got["problems"]} == want["kinds"], name
        assert want["unlisted_gpu_pods"] <= set(got["gpu_pods"]), name
        assert got["ready"] is True
        assert got["device_plugin_ready"] is want.get(
            "device_plugin_ready", "no_device_plugin_pod" not in want["kinds"]
        )

    models: dict[str, dict[str, int]] = {}
    for want in expected.values():
        entry = models.setdefault(want["model"] or "unknown", {"nodes": 0, "capacity": 0, "allocatable": 0})
        entry["nodes"] += 1
        entry["capacity"] += want["capacity"]
        entry["allocatable"] += want["allocatable"]
    assert {m: {k: v[k] for k in ("nodes", "capacity", "allocatable")} for m, v in result["models"].items()} == models
    assert result["totals"]["capacity"] == sum(w["capacity"] for w in expected.values())
    assert result["nodes_without_capacity"] == sorted(n for n, w in expected.items() if w["capacity"] == 0)
    assert problem_kinds(result) == {(n, k) for n, w in expected.items() for k in w["kinds"]} | {
        (None, "gpu_claims_unallocatable") for _pod in fleet_file.pending_pods(cluster.fleet)
    }
    # The fleet file must exercise every static problem kind (the Ready one is toggled below).
    assert {k for w in expected.values() for k in w["kinds"]} == {
        "no_gpu_capacity",
        "allocatable_below_capacity",
        "no_device_plugin_pod",
        "not_default_scheduling_mode",
        "allocated_above_allocatable",
        "gpu_use_outside_scheduler",
    }


def test_check_mode_gives_the_same_facts(cluster: LocalCluster):
    result = run_module(cluster, {}, "--check")
    assert sorted(by_node(result)) == sorted(expected_fleet(cluster.fleet))


def test_scheduling_a_pod_changes_allocated_and_free(cluster: LocalCluster, namespace: str):
    node = "gfd-h100"
    before = by_node(run_module(cluster, {"names": [node]}))[node]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "trainer", "namespace": namespace},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "tolerations": [{"key": GPU, "operator": "Exists"}],
            "containers": [
                {
                    "name": "main",
                    "image": "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0",
                    "resources": {"limits": {GPU: "3"}},
                }
            ],
        },
    }
    status, body = cluster.create(f"/api/v1/namespaces/{namespace}/pods", pod)
    assert status == 201, body
    wait_until(
        lambda: cluster.get(f"/api/v1/namespaces/{namespace}/pods/trainer")["spec"].get("nodeName") == node,
        what="the scheduler to bind the pod",
    )

    after = by_node(run_module(cluster, {"names": [node]}))[node]

    assert after["allocated"] == before["allocated"] + 3
    assert after["free"] == before["free"] - 3
    assert f"{namespace}/trainer" in after["gpu_pods"]


def test_plugin_pod_not_ready_shows_on_that_node_only(cluster: LocalCluster):
    node = "gfd-h100"
    baseline = problem_kinds(run_module(cluster))
    assert (node, "device_plugin_not_ready") not in baseline

    def plugin_ready() -> bool:
        conditions = cluster.plugin_pod_on(node)["status"].get("conditions", [])
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    cluster.set_plugin_pod_ready(node, False)
    try:
        wait_until(lambda: not plugin_ready(), what=f"the device-plugin pod on {node} to be not Ready")
        result = run_module(cluster)
        assert problem_kinds(result) - baseline == {(node, "device_plugin_not_ready")}
        assert baseline - problem_kinds(result) == set()
        assert by_node(result)[node]["device_plugin_ready"] is False
    finally:
        cluster.set_plugin_pod_ready(node, True)
        wait_until(plugin_ready, what=f"the device-plugin pod on {node} to be Ready again")


def count_items(cluster: LocalCluster, path: str) -> int:
    return len(cluster.get(path)["items"])


def test_requests_are_two_lists_plus_pages(cluster: LocalCluster):
    result = run_module(cluster)
    # Nodes, pods, and the DeviceClasses, ResourceSlices, ResourceClaims and DeviceTaintRules of DRA.
    assert result["api_requests"] == 6

    page = 3
    nodes = count_items(cluster, "/api/v1/nodes")
    pods = count_items(cluster, f"/api/v1/pods?fieldSelector={ACTIVE.replace('!=', '%21%3D')}")
    paged = run_module(cluster, {"page_size": page})
    # A resource the release does not serve is one request, answered 404.
    dra = [
        count_items(cluster, f"/apis/resource.k8s.io/v1/{r}") if dra_resource_served(r) else 0
        for r in ("deviceclasses", "resourceslices", "resourceclaims", "devicetaintrules")
    ]
    assert paged["api_requests"] == sum(max(1, math.ceil(n / page)) for n in (nodes, pods, *dra))
    assert paged["totals"] == result["totals"]


def test_request_count_does_not_grow_with_the_node_count(cluster: LocalCluster):
    before = run_module(cluster)
    extra = [f"facts-extra-{i}" for i in range(12)]
    try:
        for name in extra:
            node = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "annotations": {"kwok.x-k8s.io/node": "fake"},
                    "labels": {"nvidia.com/gpu.product": "Tesla-T4", "type": "kwok"},
                },
                "status": {
                    "capacity": {GPU: "1", "cpu": "8", "memory": "32Gi", "pods": "110"},
                    "allocatable": {GPU: "1", "cpu": "8", "memory": "32Gi", "pods": "110"},
                },
            }
            status, body = cluster.create("/api/v1/nodes", node)
            assert status == 201, body
        after = run_module(cluster)
        assert after["api_requests"] == before["api_requests"] == 6
        assert set(extra) <= set(by_node(after))
        assert all(by_node(after)[n]["model"] == "Tesla-T4" for n in extra)
    finally:
        for name in extra:
            cluster.delete(f"/api/v1/nodes/{name}")
