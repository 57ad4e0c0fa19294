"""The local fleet's GPU Operator operands (namespace gpu-operator, on gfd-h100) are known GPU system
components: the live audit allows their findings with the component's name, and the fleet facts do not
count them as GPU use outside the scheduler, while the same pods are judged with the catalogue off."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import LocalCluster, fleet_facts, run_ansible_module

pytestmark = [pytest.mark.cluster, pytest.mark.every_release]

SYSTEM_FIXTURES = Path(__file__).resolve().parents[1] / "unit" / "fixtures" / "manifests" / "system"
# Published DaemonSets applied as they are: the operator's golden renders of the driver (init with the
# driver's args, OpenShift's Driver Toolkit), GKE's NCCL installers (RDMA with its container toolkit
# installer, TCPX, TCPXO), the MPS control daemon as the operator and the device plugin's chart render it,
# and Koordinator's node agents.
PUBLISHED_COMPONENTS = {
    "NVIDIA GPU Operator driver": (
        "gpu-operator-driver-full-spec.yaml",
        "gpu-operator-driver-openshift-drivertoolkit.yaml",
        "gpu-operator-driver-gdrcopy-openshift.yaml",
    ),
    "GKE NCCL RDMA installer": (
        "gke-nccl-rdma-installer.yaml",
        "gke-nccl-rdma-installer-autopilot.yaml",
        "gke-nccl-rdma-installer-a4x-container-toolkit.yaml",
    ),
    "GKE NCCL TCPX installer": ("gke-nccl-tcpx-installer.yaml", "gke-nccl-tcpx-installer-autopilot.yaml"),
    "GKE NCCL TCPXO installer": ("gke-nccl-tcpxo-installer.yaml", "gke-nccl-tcpxo-installer-iptables.yaml"),
    "NVIDIA MPS control daemon": (
        "gpu-operator-mps-control-daemon-v24.3.0.yaml",
        "nvidia-device-plugin-mps-control-daemon-helm.yaml",
    ),
    "Koordinator koordlet": ("koordlet.yaml",),
    "AMD GPU Operator device config manager": ("amd-gpu-device-config-manager.yaml",),
    "Kubernetes DRA example driver, kubelet plugin": ("dra-example-driver-kubeletplugin.yaml",),
    "Koordinator device daemon": ("koord-device-daemon.yaml",),
}

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


@pytest.mark.parametrize("component", sorted(PUBLISHED_COMPONENTS))
def test_published_components_are_allowed_with_their_names_in_the_live_audit(
    cluster: LocalCluster, namespace: str, component: str
):
    names = []
    for fixture in PUBLISHED_COMPONENTS[component]:
        daemonset = yaml.safe_load((SYSTEM_FIXTURES / fixture).read_text(encoding="utf-8"))
        daemonset["metadata"] = {"name": fixture.removesuffix(".yaml"), "namespace": namespace}
        status, reply = cluster.create(f"/apis/apps/v1/namespaces/{namespace}/daemonsets", daemonset)
        assert status == 201, f"{fixture}: {status} {reply}"
        names.append(daemonset["metadata"]["name"])
    try:
        result = run(cluster, "gpu_pod_validate", {"live": True, "namespaces": [namespace]})
        assert result["findings"] == []
        assert {a["object_name"] for a in result["allowed"]} == set(names)
        assert {a["allowed_reason"] for a in result["allowed"]} == {f"known GPU system component: {component}"}
        judged = run(
            cluster,
            "gpu_pod_validate",
            {"live": True, "namespaces": [namespace], "fail_on": "never", "system_components": {"builtin": False}},
        )
        assert judged["allowed"] == []
        assert {f["object_name"] for f in judged["findings"]} == set(names)
    finally:
        for name in names:
            cluster.delete(f"/apis/apps/v1/namespaces/{namespace}/daemonsets/{name}")
