"""The local fleet's GPU Operator operands (namespace gpu-operator, on gfd-h100) are known GPU system
components: the live audit allows their findings with the component's name, and the fleet facts do not
count them as GPU use outside the scheduler, while the same pods are judged with the catalogue off."""

from __future__ import annotations

from typing import Any

from conftest import LocalCluster, fleet_facts, run_ansible_module

OPERATOR_NAMESPACE = "gpu-operator"
OPERATOR_NODE = "gfd-h100"
OPERANDS = {
    "NVIDIA GPU Operator driver",
    "NVIDIA GPU Operator container toolkit",
    "NVIDIA GPU Operator validator",
    "NVIDIA GPU Feature Discovery",
    "NVIDIA DCGM exporter",
    "NVIDIA GPU Operator node status exporter",
}


def run(cluster: LocalCluster, module: str, args: dict[str, Any]) -> dict[str, Any]:
    status, result, _done = run_ansible_module(cluster.kubeconfig, module, args)
    assert status == "SUCCESS", f"{status}: {result.get('msg')}"
    return result


def test_the_live_audit_allows_the_operands_findings_with_their_component_names(cluster: LocalCluster):
    result = run(cluster, "gpu_pod_validate", {"live": True, "namespaces": [OPERATOR_NAMESPACE]})
    assert result["findings"] == []
    reasons = {a["allowed_reason"] for a in result["allowed"]}
    assert reasons == {f"known GPU system component: {name}" for name in OPERANDS}
    judged = run(
        cluster,
        "gpu_pod_validate",
        {"live": True, "namespaces": [OPERATOR_NAMESPACE], "fail_on": "never", "system_components": {"builtin": False}},
    )
    assert judged["allowed"] == []
    assert {f["rule"] for f in judged["findings"]} >= {"KGPU201", "KGPU301"}


def test_the_fleet_facts_do_not_count_the_operands_as_gpu_use_outside_the_scheduler(cluster: LocalCluster):
    # Without the label selectors, only the catalogue tells the operands from workloads.
    def problems(system_components: dict[str, Any]) -> set[str]:
        result = fleet_facts(
            run(cluster, "gpu_node_facts", {"exempt_pod_selectors": [], "system_components": system_components})
        )
        node = next(n for n in result["nodes"] if n["name"] == OPERATOR_NODE)
        return {p["kind"] for p in node["problems"]}

    assert "gpu_use_outside_scheduler" not in problems({})
    assert "gpu_use_outside_scheduler" in problems({"builtin": False})
