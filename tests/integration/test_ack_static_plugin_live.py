"""The ACK nodes' static device-plugin pods (mirror pods in kube-system, tests/cluster/ack.py) are a known
GPU system component: the live audit allows their findings as the NVIDIA device plugin and judges them
with the catalogue off, and the fleet facts count them as the nodes' device plugin, not as GPU use
outside the scheduler."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import LocalCluster, fleet_facts, run_ansible_module

from tests.cluster import ack

pytestmark = [pytest.mark.cluster, pytest.mark.every_release]


def run(cluster: LocalCluster, module: str, args: dict[str, Any]) -> dict[str, Any]:
    status, result, _done = run_ansible_module(cluster.kubeconfig, module, args)
    assert status == "SUCCESS", f"{status}: {result.get('msg')}"
    return result


def test_the_live_audit_allows_the_static_pods_as_the_nvidia_device_plugin(cluster: LocalCluster):
    static_pods = {ack.mirror_pod_name(n) for n in ack.static_nodes(cluster.fleet)}
    assert static_pods
    result = run(cluster, "gpu_pod_validate", {"live": True, "namespaces": [ack.NAMESPACE]})
    assert [f for f in result["findings"] if f["object_name"] in static_pods] == []
    allowed = {a["object_name"]: a["allowed_reason"] for a in result["allowed"] if a["object_name"] in static_pods}
    assert allowed == dict.fromkeys(static_pods, "known GPU system component: NVIDIA device plugin")

    judged = run(
        cluster,
        "gpu_pod_validate",
        {"live": True, "namespaces": [ack.NAMESPACE], "fail_on": "never", "system_components": {"builtin": False}},
    )
    assert {f["object_name"] for f in judged["findings"]} >= static_pods


def test_the_fleet_facts_see_the_static_pods_as_the_ack_nodes_device_plugin(cluster: LocalCluster):
    result = fleet_facts(run(cluster, "gpu_node_facts", {}))
    nodes = {n["name"]: n for n in result["nodes"]}
    for name in ack.static_nodes(cluster.fleet):
        problems = nodes[name]["problems"]
        assert nodes[name]["device_plugin_ready"] is True, name
        assert "no_device_plugin_pod" not in {p["kind"] for p in problems}, name
        # The fleet's own bypass pod may be named here; the static pod, which sets NVIDIA_VISIBLE_DEVICES=all, never.
        outside = [p for p in problems if p["kind"] == "gpu_use_outside_scheduler"]
        assert not any(ack.mirror_pod_name(name) in str(p) for p in outside), outside
