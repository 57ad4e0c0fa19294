"""The local cluster behaves like a real one for GPUs: the real API server, scheduler and
DaemonSet controller act on the simulated fleet."""

from __future__ import annotations

import pytest
from conftest import LocalCluster, daemonset_selects, wait_until

from tests.cluster import ack

pytestmark = pytest.mark.cluster

GPU = "nvidia.com/gpu"


def gpu_pod(name: str, *, limits: dict | None = None, requests: dict | None = None, node: str | None = None) -> dict:
    resources = {}
    if limits is not None:
        resources["limits"] = limits
    if requests is not None:
        resources["requests"] = requests
    spec: dict = {
        "containers": [{"name": "cuda", "image": "nvidia/cuda:12.4.1-base-ubuntu22.04", "resources": resources}],
        "tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}],
    }
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def test_api_lists_gpu_nodes_with_capacity(cluster: LocalCluster):
    nodes = {n["metadata"]["name"]: n for n in cluster.get("/api/v1/nodes")["items"]}
    for spec in cluster.fleet["nodes"]:
        node = nodes[spec["name"]]
        addresses = {a["type"]: a["address"] for a in node["status"]["addresses"]}
        assert addresses["InternalIP"] == "127.0.0.1"
        assert set(addresses.values()) <= {"127.0.0.1", "localhost"}
        capacity = node["status"]["capacity"]
        if spec["gpus"] is None:
            assert GPU not in capacity
        else:
            assert capacity[GPU] == str(spec["gpus"])
            assert node["status"]["allocatable"][GPU] == str(spec["allocatable_gpus"])
        assert any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"]["conditions"])
    assert nodes["gfd-h100"]["status"]["capacity"][GPU] == "8"
    assert nodes["gfd-t4-unhealthy"]["status"]["allocatable"][GPU] == "3"


def test_gpu_pod_is_scheduled_to_a_gpu_node_and_runs(cluster: LocalCluster, namespace: str):
    status, body = cluster.create(f"/api/v1/namespaces/{namespace}/pods", gpu_pod("one-gpu", limits={GPU: "1"}))
    assert status == 201, body
    pod = wait_until(
        lambda: (
            (p := cluster.get(f"/api/v1/namespaces/{namespace}/pods/one-gpu"))["status"].get("phase") == "Running" and p
        ),
        what="pod Running",
    )
    node = cluster.get(f"/api/v1/nodes/{pod['spec']['nodeName']}")
    assert int(node["status"]["allocatable"][GPU]) >= 1


def test_scheduler_counts_gpus_one_pod_more_than_free(cluster: LocalCluster, namespace: str):
    node = "gfd-h100"
    # GPUs other pods hold there already: the sample pod `make site` leaves running may be one.
    held = sum(p.gpus for p in cluster.unlisted_pods() if p.node == node)
    free = int(cluster.get(f"/api/v1/nodes/{node}")["status"]["allocatable"][GPU]) - held
    assert free > 0
    for i in range(free + 1):
        status, body = cluster.create(
            f"/api/v1/namespaces/{namespace}/pods", gpu_pod(f"gpu-{i}", limits={GPU: "1"}, node=node)
        )
        assert status == 201, body

    def settled():
        pods = cluster.get(f"/api/v1/namespaces/{namespace}/pods")["items"]
        phases = [p["status"].get("phase") for p in pods]
        unscheduled = [
            p for p in pods if any(c.get("reason") == "Unschedulable" for c in p["status"].get("conditions", []))
        ]
        return phases.count("Running") == free and len(unscheduled) == 1 and (pods, unscheduled[0])

    pods, pending = wait_until(settled, timeout=90, what=f"{free} Running and one Unschedulable")
    assert pending["status"]["phase"] == "Pending"
    message = next(c["message"] for c in pending["status"]["conditions"] if c["type"] == "PodScheduled")
    assert "Insufficient nvidia.com/gpu" in message
    assert {p["spec"].get("nodeName") for p in pods if p["status"]["phase"] == "Running"} == {node}


@pytest.mark.parametrize(
    "resources, message",
    [
        (
            {"requests": {GPU: "1"}},
            "spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources",
        ),
        (
            {"requests": {GPU: "1"}, "limits": {GPU: "2"}},
            'spec.containers[0].resources.requests: Invalid value: "1": must be equal to nvidia.com/gpu limit of 2',
        ),
        ({"limits": {GPU: "500m"}}, "must be an integer"),
    ],
)
def test_api_server_rejects_malformed_gpu_requests(cluster: LocalCluster, namespace: str, resources, message):
    status, body = cluster.create(f"/api/v1/namespaces/{namespace}/pods", gpu_pod("bad", **resources))
    assert status == 422
    assert message in body["message"]


def test_device_plugin_daemonset_status_tracks_pod_readiness(cluster: LocalCluster):
    plugin = cluster.fleet["device_plugin"]
    path = f"/apis/apps/v1/namespaces/{plugin['namespace']}/daemonsets/{plugin['name']}"
    selected = [n for n in cluster.fleet["nodes"] if daemonset_selects(cluster.fleet, n)]
    status = cluster.get(path)["status"]
    assert status["desiredNumberScheduled"] == len(selected)
    assert status["numberReady"] == status["numberAvailable"] == len(selected)
    assert status["numberMisscheduled"] == 0

    node = next(n["name"] for n in selected if n["gpus"])
    cluster.set_plugin_pod_ready(node, False)
    try:
        wait_until(
            lambda: cluster.get(path)["status"]["numberReady"] == len(selected) - 1,
            timeout=60,
            what="numberReady to drop by one",
        )
        pod = cluster.plugin_pod_on(node)
        ready = next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")
        assert ready["status"] == "False"
        assert cluster.get(path)["status"]["desiredNumberScheduled"] == len(selected)
    finally:
        cluster.set_plugin_pod_ready(node, True)
    wait_until(
        lambda: cluster.get(path)["status"]["numberReady"] == len(selected), timeout=60, what="numberReady to recover"
    )


def test_ack_nodes_run_the_static_device_plugin_pod_not_the_daemonsets(cluster: LocalCluster):
    plugin = cluster.fleet["device_plugin"]
    static_nodes = ack.static_nodes(cluster.fleet)
    assert static_nodes
    for node in static_nodes:
        uid = cluster.get(f"/api/v1/nodes/{node}")["metadata"]["uid"]
        pod = cluster.get(f"/api/v1/namespaces/{ack.NAMESPACE}/pods/{ack.mirror_pod_name(node)}")
        metadata = pod["metadata"]
        assert metadata["annotations"]["kubernetes.io/config.source"] == "file"
        assert "kubernetes.io/config.mirror" in metadata["annotations"]
        assert [(o["kind"], o["name"], o["uid"]) for o in metadata["ownerReferences"]] == [("Node", node, uid)]
        assert pod["spec"]["nodeName"] == node
        assert pod["status"]["phase"] == "Running"
        assert any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"]["conditions"])
        on_node = cluster.get(f"/api/v1/namespaces/{plugin['namespace']}/pods?fieldSelector=spec.nodeName%3D{node}")
        owners = {o["name"] for p in on_node["items"] for o in p["metadata"].get("ownerReferences", [])}
        assert plugin["name"] not in owners, f"the DaemonSet runs a pod on {node} too"
