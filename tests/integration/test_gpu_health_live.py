"""gpu_node_facts' health view against the local cluster: KWOK GPU nodes of this test made unhealthy in
each way a real cluster says so, through the API the producers use (a status patch for a node
condition or a withdrawn GPU, a taint, a device-plugin pod that is not Ready, DeviceTaintRules on
the devices of a DRA node's ResourceSlice), and judged from the
same lists the facts always read. The nodes are removed at the end."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from conftest import LocalCluster, fleet_facts, run_ansible_module, wait_until

from tests.cluster import dra
from tests.cluster import fleet as fleet_file

pytestmark = pytest.mark.cluster

GPU = "nvidia.com/gpu"
DEVICE_PLUGIN_LABEL = "nvidia.com/gpu.deploy.device-plugin"
NPD_OPTION = {"signals": [{"condition": "GPUXIDProblem", "severity": "degraded", "producer": "node-problem-detector"}]}


def node_body(name: str, run: str, gpus: int, taints: list[dict] | None = None, plugin: bool = False) -> dict:
    labels = {"nvidia.com/gpu.product": "Tesla-T4", "nvidia.com/gpu.count": "4", "type": "kwok", "health-run": run}
    if plugin:
        labels[DEVICE_PLUGIN_LABEL] = "true"
    capacity = {GPU: str(gpus), "cpu": "8", "memory": "32Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "annotations": {fleet_file.FAKE_NODE_ANNOTATION: "fake"}, "labels": labels},
        "spec": {"taints": taints or []},
        "status": {"capacity": capacity, "allocatable": dict(capacity)},
    }


def patch_status(cluster: LocalCluster, name: str, status: dict) -> None:
    """As a health producer writes: a strategic merge of the node's status (conditions merge by type)."""
    code, reply = cluster.api.request(
        "PATCH",
        f"/api/v1/nodes/{name}/status",
        {"status": status},
        content_type="application/strategic-merge-patch+json",
    )
    assert code == 200, f"PATCH {name}/status: {code} {reply}"


def condition(kind: str, status: str, reason: str, message: str) -> dict:
    return {"type": kind, "status": status, "reason": reason, "message": message}


def run_facts(cluster: LocalCluster, names: list[str], health: dict | None = None) -> dict[str, Any]:
    args: dict[str, Any] = {"names": names}
    if health is not None:
        args["health"] = health
    status, result, _done = run_ansible_module(cluster.kubeconfig, "gpu_node_facts", args)
    assert status == "SUCCESS", f"{status}: {result.get('msg')}"
    return fleet_facts(result)


def ready(cluster: LocalCluster, name: str) -> bool:
    conditions = cluster.get(f"/api/v1/nodes/{name}")["status"].get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


@pytest.fixture(scope="module")
def health_nodes(cluster: LocalCluster):
    """Eight KWOK GPU nodes of 4 Tesla T4s (GFD's count label says 4), made unhealthy one way each."""
    run = uuid.uuid4().hex[:8]
    names = {case: f"health-{run}-{case}" for case in ("ok", "withdrawn", "gke", "eks", "taint", "short", "npd")}
    names["plugin"] = f"health-{run}-plugin"
    xid_taint = [{"key": "nvidia.com/gpu-xid-error", "value": "true", "effect": "NoSchedule"}]
    bodies = [
        node_body(names[case], run, 3 if case == "short" else 4, xid_taint if case == "taint" else None)
        for case in names
        if case != "plugin"
    ]
    bodies.append(node_body(names["plugin"], run, 4, plugin=True))
    try:
        for body in bodies:
            status, reply = cluster.create("/api/v1/nodes", body)
            assert status == 201, f"creating {body['metadata']['name']}: {status} {reply}"
        for name in names.values():
            wait_until(lambda name=name: ready(cluster, name), timeout=60, what=f"KWOK to make {name} Ready")
        patch_status(cluster, names["withdrawn"], {"allocatable": {GPU: "1"}})
        gke = condition("XidCriticalError", "True", '{"79":true}', "0b5e1c9a-boot-id")
        patch_status(cluster, names["gke"], {"conditions": [gke]})
        eks = condition("AcceleratedHardwareReady", "False", "NvidiaXID79Error", "GPU has fallen off the bus")
        patch_status(cluster, names["eks"], {"conditions": [eks]})
        npd = condition("GPUXIDProblem", "True", "XID48", "double-bit ECC error")
        patch_status(cluster, names["npd"], {"conditions": [npd]})
        wait_until(lambda: _plugin_pod(cluster, names["plugin"]), timeout=60, what="the device-plugin pod")
        cluster.set_plugin_pod_ready(names["plugin"], False)
        wait_until(lambda: not _plugin_pod(cluster, names["plugin"])["ready"], timeout=60, what="plugin not Ready")
        yield names
    finally:
        for name in names.values():
            cluster.delete(f"/api/v1/nodes/{name}")
        # The device-plugin pod of a node that is gone: no kubelet will confirm its end, so it goes at once
        # rather than when the pod garbage collector finds it orphaned.
        for pod in cluster.get(f"/api/v1/pods?fieldSelector=spec.nodeName%3D{names['plugin']}")["items"]:
            metadata = pod["metadata"]
            cluster.delete(f"/api/v1/namespaces/{metadata['namespace']}/pods/{metadata['name']}?gracePeriodSeconds=0")
        wait_until(
            lambda: not cluster.get(f"/api/v1/pods?fieldSelector=spec.nodeName%3D{names['plugin']}")["items"],
            timeout=120,
            what="the device-plugin pod of the removed node to go",
        )


def _plugin_pod(cluster: LocalCluster, node: str) -> dict | None:
    pods = cluster.get(f"/api/v1/pods?fieldSelector=spec.nodeName%3D{node}")["items"]
    if not pods:
        return None
    conditions = pods[0].get("status", {}).get("conditions", [])
    return {"ready": any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)}


def statuses(facts: dict[str, Any]) -> dict[str, tuple[str, list[tuple[str, str]]]]:
    return {
        n["name"]: (n["health"]["status"], [(p["kind"], p["status"]) for p in n["health"]["problems"]])
        for n in facts["nodes"]
    }


@pytest.mark.every_release
def test_each_way_the_api_says_a_gpu_node_is_bad_is_judged_from_the_same_lists(
    cluster: LocalCluster, health_nodes: dict[str, str]
):
    names = health_nodes
    # KWOK kept what was patched: the conditions merged by type, the withdrawn GPU, the capacity.
    node = cluster.get(f"/api/v1/nodes/{names['gke']}")["status"]
    assert {"XidCriticalError", "Ready"} <= {c["type"] for c in node["conditions"]}
    withdrawn = cluster.get(f"/api/v1/nodes/{names['withdrawn']}")["status"]
    assert (withdrawn["capacity"][GPU], withdrawn["allocatable"][GPU]) == ("4", "1")

    plain = run_facts(cluster, sorted(names.values()))
    judged = run_facts(cluster, sorted(names.values()), NPD_OPTION)
    assert statuses(plain)[names["npd"]] == ("healthy", [])
    assert statuses(judged) == {
        names["ok"]: ("healthy", []),
        names["withdrawn"]: ("degraded", [("gpus_withdrawn", "degraded")]),
        names["gke"]: ("failed", [("gpu_health_condition", "failed")]),
        names["eks"]: ("failed", [("gpu_health_condition", "failed")]),
        names["taint"]: ("failed", [("gpu_health_taint", "failed")]),
        names["short"]: ("degraded", [("gpus_below_expected", "degraded")]),
        names["npd"]: ("degraded", [("gpu_health_condition", "degraded")]),
        names["plugin"]: ("failed", [("gpu_plugin_not_ready", "failed")]),
    }
    assert judged["health"] == {"healthy": 1, "unknown": 0, "degraded": 3, "failed": 4}
    reasons = {n["name"]: n["health"]["problems"] for n in judged["nodes"]}
    assert reasons[names["eks"]][0]["reason"] == (
        "EKS node monitoring agent: AcceleratedHardwareReady=False (NvidiaXID79Error): GPU has fallen off the bus"
    )
    assert reasons[names["withdrawn"]][0]["reason"] == "nvidia.com/gpu: capacity 4, allocatable 1 (3 withdrawn)"
    assert reasons[names["short"]][0]["reason"] == "3 registered, 4 expected (label nvidia.com/gpu.count)"
    assert all(p["remedy"] for problems in reasons.values() for p in problems)
    # No request more for the health view: the same six lists.
    assert judged["api_requests"] == plain["api_requests"] == 6


@pytest.mark.every_release
def test_a_per_model_expectation_and_a_bad_row_of_the_option(cluster: LocalCluster, health_nodes: dict[str, str]):
    names = health_nodes
    expected = run_facts(cluster, [names["ok"], names["short"]], {"expected_gpus": {"Tesla-T4": 8}})
    assert statuses(expected) == {
        names["ok"]: ("degraded", [("gpus_below_expected", "degraded")]),
        names["short"]: ("degraded", [("gpus_below_expected", "degraded")]),
    }
    assert by_name(expected)[names["ok"]]["health"]["problems"][0]["reason"] == (
        "4 registered, 8 expected (health.expected_gpus for Tesla-T4)"
    )
    status, result, _done = run_ansible_module(
        cluster.kubeconfig,
        "gpu_node_facts",
        {
            "names": [names["ok"]],
            "health": {"signals": [{"taint": "example.com/x"}, {"condition": "X", "severity": "bad"}]},
        },
    )
    assert status == "FAILED!"
    assert "health.signals[1].severity must be one of degraded, failed" in result["msg"]
    assert "Traceback" not in result.get("module_stderr", "")


def by_name(facts: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n["name"]: n for n in facts["nodes"]}


RESOURCE = "/apis/resource.k8s.io/v1"


def taint_rule(name: str, pool: str, device: str, effect: str) -> dict:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": name},
        "spec": {
            "deviceSelector": {"driver": dra.DRIVER, "pool": pool, "device": device},
            "taint": {"key": "example.com/gpu-health-test", "value": "xid-79", "effect": effect},
        },
    }


def test_a_dra_node_with_tainted_devices_is_degraded_then_failed(cluster: LocalCluster):
    run = uuid.uuid4().hex[:8]
    name = f"health-{run}-dra"
    body = node_body(name, run, 0)
    body["status"] = {"capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"}}
    body["metadata"]["labels"].pop("nvidia.com/gpu.count")
    rules = [f"health-{run}-gpu-0", f"health-{run}-gpu-1"]
    status, reply = cluster.create("/api/v1/nodes", body)
    assert status == 201, reply
    slice_body = dra.resource_slice(
        name, {"product": "NVIDIA H100 80GB HBM3", "gpus": 2, "memory": "80Gi", "mig": None}
    )
    try:
        status, reply = cluster.create(f"{RESOURCE}/resourceslices", slice_body)
        assert status == 201, reply
        # gpu-0 only reported (effect None), gpu-1 kept away from new pods (NoSchedule): one GPU left.
        for rule, device, effect in ((rules[0], "gpu-0", "None"), (rules[1], "gpu-1", "NoSchedule")):
            status, reply = cluster.create(f"{RESOURCE}/devicetaintrules", taint_rule(rule, name, device, effect))
            assert status == 201, reply
        node = by_name(run_facts(cluster, [name]))[name]
        assert (node["capacity"], node["allocatable"]) == (2, 1)
        assert node["health"]["status"] == "degraded"
        assert [(p["kind"], p["status"]) for p in node["health"]["problems"]] == [("gpu_devices_tainted", "degraded")]
        assert {d["name"]: d["health"] for d in node["dra"]["devices"]} == {"gpu-0": "degraded", "gpu-1": "failed"}
        # The rule on gpu-0 made NoSchedule too: no GPU of the node is left, and the node has failed.
        cluster.patch(f"{RESOURCE}/devicetaintrules/{rules[0]}", {"spec": {"taint": {"effect": "NoSchedule"}}})
        facts = run_facts(cluster, [name])
        node = by_name(facts)[name]
        assert (node["allocatable"], node["health"]["status"]) == (0, "failed")
        assert {d["name"]: d["health"] for d in node["dra"]["devices"]} == {"gpu-0": "failed", "gpu-1": "failed"}
        assert facts["health"] == {"healthy": 0, "unknown": 0, "degraded": 0, "failed": 1}
    finally:
        for rule in rules:
            cluster.delete(f"{RESOURCE}/devicetaintrules/{rule}")
        cluster.delete(f"{RESOURCE}/resourceslices/{slice_body['metadata']['name']}")
        cluster.delete(f"/api/v1/nodes/{name}")
