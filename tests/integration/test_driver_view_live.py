"""The driver view and the pre-flight on the local cluster: NVIDIADrivers as the GPU Operator's published CRD
accepts them, a driver DaemonSet whose pod-template update the real DaemonSet controller rolls onto one node
only (OnDelete, as the operator sets it), nodes in upgrade states, and the pods that block an upgrade."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from conftest import LocalCluster, fleet_facts, run_ansible_module, wait_until

from tests.cluster import custom_resources

pytestmark = [pytest.mark.cluster]

CRD_NAME = "nvidiadrivers.nvidia.com"
API = "/apis/nvidia.com/v1alpha1/nvidiadrivers"
STATE = "nvidia.com/gpu-driver-upgrade-state"
VALIDATION_START = "nvidia.com/gpu-driver-upgrade-validation-start-time"
STUCK_NODE = "gfd-a100-noplugin"  # no GPU Operator operand runs here
FAILED_NODE = "ack-a10-0"
NODES = [STUCK_NODE, FAILED_NODE]
TARGET = "570.86.15"


def on_nodes(nodes: list[str]) -> dict:
    term = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": nodes}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def nvidia_driver(name: str, **spec: object) -> dict:
    body = {"driverType": "gpu", "image": "nvcr.io/nvidia/driver", "version": "550.90.07", **spec}
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver", "metadata": {"name": name}, "spec": body}


def driver_daemonset(owner: dict) -> dict:
    labels = {"app": "nvidia-driver-daemonset", "app.kubernetes.io/component": "nvidia-driver"}
    ref = {k: owner[k] for k in ("apiVersion", "kind")} | {
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
    }
    container = {"name": "nvidia-driver-ctr", "image": "nvcr.io/nvidia/driver:550.90.07-ubuntu22.04"}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "nvidia-gpu-driver-ubuntu22.04", "labels": labels, "ownerReferences": [ref]},
        "spec": {
            "selector": {"matchLabels": {"app": "nvidia-driver-daemonset"}},
            "updateStrategy": {"type": "OnDelete"},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"affinity": on_nodes(NODES), "containers": [container]},
            },
        },
    }


def gpu_daemonset() -> dict:
    container = {
        "name": "agent",
        "image": "registry.local/gpu-agent:1",
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "gpu-agent"},
        "spec": {
            "selector": {"matchLabels": {"app": "gpu-agent"}},
            "template": {
                "metadata": {"labels": {"app": "gpu-agent"}},
                "spec": {"affinity": on_nodes([FAILED_NODE]), "containers": [container]},
            },
        },
    }


def bare_pod(name: str, node: str, image: str = "busybox", env: dict | None = None, labels: dict | None = None) -> dict:
    container: dict = {"name": "main", "image": image}
    if env:
        container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"nodeName": node, "containers": [container]},
    }


def pods_of(cluster: LocalCluster, namespace: str, app: str) -> list[dict]:
    items = cluster.get(f"/api/v1/namespaces/{namespace}/pods?labelSelector=app%3D{app}")["items"]
    return [p for p in items if "deletionTimestamp" not in p["metadata"] and p["spec"].get("nodeName")]


@pytest.fixture(scope="module")
def scene(cluster: LocalCluster) -> Iterator[dict]:
    """The CRD served (the cluster applies it when it starts; an older running cluster gets it here), an
    NVIDIADriver, a namespace with the driver DaemonSet rolled onto one node and the blocking pods, and two
    nodes in upgrade states; everything removed and the nodes restored at the end."""
    [crd] = [c for c in custom_resources.definitions() if c["metadata"]["name"] == CRD_NAME]
    cluster.api.ensure(custom_resources.CRD_PATH, crd)
    wait_until(lambda: cluster.api.request("GET", API)[0] == 200, 60, what="nvidiadrivers served")
    suffix = uuid.uuid4().hex[:8]
    namespace, driver_name = f"t-driver-{suffix}", f"t-pool-{suffix}"
    status, owner = cluster.create(API, nvidia_driver(driver_name, nodeSelector={"kubernetes.io/hostname": STUCK_NODE}))
    assert status == 201, owner
    assert isinstance(owner, dict)
    status, reply = cluster.create(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    )
    assert status == 201, reply
    started = int(time.time()) - 7200
    try:
        cluster.patch(
            f"/api/v1/nodes/{STUCK_NODE}",
            {"metadata": {"labels": {STATE: "validation-required"}, "annotations": {VALIDATION_START: str(started)}}},
        )
        cluster.patch(f"/api/v1/nodes/{FAILED_NODE}", {"metadata": {"labels": {STATE: "upgrade-failed"}}})
        base = f"/apis/apps/v1/namespaces/{namespace}/daemonsets"
        for body in (driver_daemonset(owner), gpu_daemonset()):
            status, reply = cluster.create(base, body)
            assert status == 201, reply
        pods = f"/api/v1/namespaces/{namespace}/pods"
        for body in (
            bare_pod("sneaky", STUCK_NODE, env={"NVIDIA_VISIBLE_DEVICES": "all"}),
            bare_pod("db-0", STUCK_NODE, labels={"app": "db"}),
            bare_pod("new-cuda", STUCK_NODE, image="nvidia/cuda:12.9.0-base-ubuntu24.04"),
        ):
            status, reply = cluster.create(pods, body)
            assert status == 201, reply
        budget = {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "db"},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "db"}}},
        }
        status, reply = cluster.create(f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets", budget)
        assert status == 201, reply
        wait_until(lambda: len(pods_of(cluster, namespace, "nvidia-driver-daemonset")) == 2, 30, 0.2, "driver pods")
        # A new pod template: OnDelete keeps both pods on the old one until one is deleted.
        cluster.patch(
            f"{base}/nvidia-gpu-driver-ubuntu22.04", {"spec": {"template": {"metadata": {"annotations": {"rev": "2"}}}}}
        )
        [old] = [
            p for p in pods_of(cluster, namespace, "nvidia-driver-daemonset") if p["spec"]["nodeName"] == FAILED_NODE
        ]
        cluster.api.request("DELETE", f"{pods}/{old['metadata']['name']}?gracePeriodSeconds=0")

        def rolled() -> bool:
            found = pods_of(cluster, namespace, "nvidia-driver-daemonset")
            return len(found) == 2 and any(
                p["spec"]["nodeName"] == FAILED_NODE and p["metadata"]["labels"].get("pod-template-generation") == "2"
                for p in found
            )

        wait_until(rolled, 30, 0.2, "the driver pod on the failed node on the new template")
        wait_until(lambda: pods_of(cluster, namespace, "gpu-agent"), 30, 0.2, "the GPU DaemonSet's pod")
        yield {"namespace": namespace, "driver": driver_name, "started": started}
    finally:
        cluster.api.request("DELETE", f"/api/v1/namespaces/{namespace}")
        cluster.api.request("DELETE", f"{API}/{driver_name}")
        cluster.patch(
            f"/api/v1/nodes/{STUCK_NODE}",
            {"metadata": {"labels": {STATE: None}, "annotations": {VALIDATION_START: None}}},
        )
        cluster.patch(f"/api/v1/nodes/{FAILED_NODE}", {"metadata": {"labels": {STATE: None}}})


def test_the_published_crd_accepts_and_refuses_as_the_operator_does(cluster: LocalCluster, scene: dict):
    refused = nvidia_driver(f"t-bad-{uuid.uuid4().hex[:6]}", default=True, nodeSelector={"pool": "a"})
    status, reply = cluster.create(API, refused)
    assert status == 422 and "default NVIDIADriver must not use nodeSelector" in str(reply)
    status, reply = cluster.create(API, nvidia_driver("t-bad-type", driverType="cuda"))
    assert status == 422, reply
    stored = cluster.get(f"{API}/{scene['driver']}")
    assert stored["spec"]["default"] is False and stored["spec"]["kernelModuleType"] == "auto"  # the CRD's defaults


def test_the_view_and_the_preflight(cluster: LocalCluster, scene: dict):
    status, result, _done = run_ansible_module(
        cluster.kubeconfig, "gpu_driver_info", {"names": NODES, "target_driver": TARGET}, "--check"
    )
    assert status == "SUCCESS", result
    drivers = result["drivers"]
    assert result["changed"] is False and result["api_requests"] == 6
    by_node = {n["node"]: n for n in drivers["nodes"]}
    assert set(by_node) == set(NODES)
    stuck, failed = by_node[STUCK_NODE], by_node[FAILED_NODE]
    assert (stuck["managed_by"], stuck["driver_resource"]) == ("nvidia-driver-cr", scene["driver"])
    assert stuck["upgrade_state"] == "validation-required" and stuck["state_since"] >= 7200
    assert failed["upgrade_state"] == "upgrade-failed" and failed["state_since"] is None
    # The DaemonSet controller put the new template only where its pod was deleted.
    assert (stuck["pod_revision_current"], failed["pod_revision_current"]) == (False, True)
    assert stuck["pod"].startswith(f"{scene['namespace']}/") and stuck["version"] == "550.90.07"
    ours = sorted(
        (b["node"], b["pod"].split("-")[0] if b["reason"] == "gpu-daemonset-pod" else b["pod"], b["reason"])
        for b in drivers["blockers"]
        if b["namespace"] == scene["namespace"]
    )
    assert ours == [
        (FAILED_NODE, "gpu", "gpu-daemonset-pod"),
        (STUCK_NODE, "db-0", "budget-allows-no-disruption"),
        (STUCK_NODE, "new-cuda", "cuda-needs-newer-driver"),
        (STUCK_NODE, "sneaky", "gpu-use-without-request"),
    ]
    assert not stuck["ready_to_upgrade"] and drivers["counts"]["pods_not_current"] >= 1
    assert any(line.startswith(f"{STUCK_NODE}: driver 550.90.07") for line in result["report"])


def test_the_fleet_facts_report_the_stuck_the_failed_and_the_old_template(cluster: LocalCluster, scene: dict):
    args = {"names": NODES, "driver_upgrade": {"read_objects": True}}
    status, result, _done = run_ansible_module(cluster.kubeconfig, "gpu_node_facts", args)
    assert status == "SUCCESS", result
    facts = fleet_facts(result)
    assert facts["api_requests"] == 8  # the facts' six lists, NVIDIADrivers and DaemonSets
    problems = sorted((p["where"]["node"], p["id"]) for p in facts["problems"] if p["id"].startswith("fleet.driver"))
    assert problems == [
        (FAILED_NODE, "fleet.driver_upgrade_failed"),
        (STUCK_NODE, "fleet.driver_pod_not_current"),
        (STUCK_NODE, "fleet.driver_upgrade_stuck"),
    ]
    stuck = next(n for n in facts["nodes"] if n["name"] == STUCK_NODE)["driver"]
    assert stuck["driver_resource"] == scene["driver"] and stuck["pod_revision_current"] is False
