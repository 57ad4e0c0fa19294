"""The fleet facts' view of GPU system components as their projects publish them: a pod of the
DaemonSet on a GPU node is not GPU use outside the scheduler, whatever its labels; with the catalogue
off, the ones that ask the NVIDIA runtime for every GPU are."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.facts import (
    PROBLEM_OUTSIDE_SCHEDULER,
    split_pods,
    summarise,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.projection import ROLE_EXEMPT, project_pod
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.nodes import project_node
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.options import options_from_params

SYSTEM = Path(__file__).resolve().parents[3] / "fixtures" / "manifests" / "system"

# The published DaemonSets and their components; the MPS control daemons set NVIDIA_VISIBLE_DEVICES=all.
PUBLISHED = {
    "gpu-operator-mps-control-daemon.yaml": "NVIDIA MPS control daemon",
    "gpu-operator-mps-control-daemon-v24.3.0.yaml": "NVIDIA MPS control daemon",
    "nvidia-device-plugin-mps-control-daemon-helm.yaml": "NVIDIA MPS control daemon",
    "gke-nccl-rdma-installer.yaml": "GKE NCCL RDMA installer",
    "gke-nccl-rdma-installer-autopilot.yaml": "GKE NCCL RDMA installer",
    "gke-nccl-rdma-installer-a4x.yaml": "GKE NCCL RDMA installer",
    "gke-nccl-rdma-installer-log-martians.yaml": "GKE NCCL RDMA installer",
    "gke-nccl-rdma-installer-a4x-container-toolkit.yaml": "GKE NCCL RDMA installer",
    "gke-nccl-tcpx-installer.yaml": "GKE NCCL TCPX installer",
    "gke-nccl-tcpx-installer-autopilot.yaml": "GKE NCCL TCPX installer",
    "gke-nccl-tcpxo-installer.yaml": "GKE NCCL TCPXO installer",
    "gke-nccl-tcpxo-installer-iptables.yaml": "GKE NCCL TCPXO installer",
    "gke-nvidia-driver-installer-cos-latest.yaml": "GKE NVIDIA driver installer",
    "gke-nvidia-driver-installer-cos-latest-a4x.yaml": "GKE NVIDIA driver installer",
}
NODE = "gpu-1"


def daemonset_pod(name: str) -> dict:
    """A running pod of the fixture's DaemonSet on the GPU node, with its template's labels."""
    daemonset = yaml.safe_load((SYSTEM / name).read_text(encoding="utf-8"))
    template = daemonset["spec"]["template"]
    return {
        "metadata": {
            "name": f"{daemonset['metadata']['name']}-x1",
            "namespace": daemonset["metadata"]["namespace"],
            "labels": template["metadata"].get("labels", {}),
        },
        "spec": {**template["spec"], "nodeName": NODE},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def gpu_node() -> dict:
    return {
        "metadata": {"name": NODE, "labels": {"nvidia.com/gpu.present": "true"}},
        "spec": {},
        "status": {
            "capacity": {"nvidia.com/gpu": "8"},
            "allocatable": {"nvidia.com/gpu": "8"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def options(system_components=None):
    # No label selector tells the pod apart: only the catalogue does.
    return options_from_params(
        device_plugin={"label_selectors": []}, exempt_pod_selectors=[], system_components=system_components
    )


def outside_scheduler(pod: dict, system_components=None) -> bool:
    chosen = options(system_components)
    workloads, plugins = split_pods([project_pod(pod, chosen)])
    facts = summarise([project_node(gpu_node(), chosen)], workloads, plugins, chosen)
    return PROBLEM_OUTSIDE_SCHEDULER in {p["kind"] for p in facts["nodes"][0]["problems"]}


def asks_for_every_gpu(pod: dict) -> bool:
    return any(
        env.get("name") == "NVIDIA_VISIBLE_DEVICES" and env.get("value") == "all"
        for kind in ("initContainers", "containers")
        for container in pod["spec"].get(kind, [])
        for env in container.get("env", [])
    )


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_a_published_component_is_not_gpu_use_outside_the_scheduler(name):
    pod = daemonset_pod(name)
    assert options().components.recognise(pod["spec"]).name == PUBLISHED[name]
    projected = project_pod(pod, options())
    assert projected is None or (projected["role"] == ROLE_EXEMPT and not projected["bypass"])
    assert not outside_scheduler(pod)
    assert outside_scheduler(pod, {"builtin": False}) == asks_for_every_gpu(pod)


def test_the_mps_control_daemons_ask_for_every_gpu_so_only_the_catalogue_exempts_them():
    for name in (n for n in PUBLISHED if "mps" in n):
        pod = daemonset_pod(name)
        assert asks_for_every_gpu(pod)
        assert outside_scheduler(pod, {"builtin": False})
        assert not outside_scheduler(pod)


def test_an_mps_control_daemon_running_a_users_command_is_gpu_use_outside_the_scheduler():
    pod = daemonset_pod("gpu-operator-mps-control-daemon-v24.3.0.yaml")
    daemon = next(c for c in pod["spec"]["containers"] if c["name"] == "mps-control-daemon-ctr")
    daemon["command"] = ["python", "train.py"]
    assert options().components.recognise(pod["spec"]) is None
    assert outside_scheduler(pod)
