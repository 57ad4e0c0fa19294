# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the NVIDIA device plugin runs: the known deployments, their pod labels, the kubelet
plugin of NVIDIA's DRA driver, and the GPU system pods that set NVIDIA_VISIBLE_DEVICES on purpose."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.selectors import parse_label_selector

MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
CONFIG_SOURCE_ANNOTATION = "kubernetes.io/config.source"
ACK_STATIC_MANIFEST = "/etc/kubernetes/manifests/nvidia-device-plugin.yml"
REGISTERED_LOG_LINE = "Registered device plugin for 'nvidia.com/gpu' with Kubelet"
# The releases of NVIDIA's device plugin the collection knows, oldest first, and the one it takes by default:
# gpu_device_plugin deploys their published manifests (plugin_deploy/releases.py), gpu_plugin_config_validate
# checks configs against their schema (plugin_config/schema.py); the device_plugin role's default and choices follow.
PLUGIN_RELEASES = ("v0.17.4", "v0.18.2")
DEFAULT_PLUGIN_RELEASE = PLUGIN_RELEASES[-1]


@dataclass(frozen=True)
class Deployment:
    key: str
    title: str
    selector: str


NVIDIA_STATIC = Deployment("nvidia-static", "NVIDIA device plugin, static DaemonSet", "name=nvidia-device-plugin-ds")
NVIDIA_HELM = Deployment(
    "nvidia-helm", "NVIDIA device plugin, Helm chart", "app.kubernetes.io/name=nvidia-device-plugin"
)
GPU_OPERATOR = Deployment("gpu-operator", "NVIDIA GPU Operator", "app=nvidia-device-plugin-daemonset")
ACK_MANAGED = Deployment("ack-managed", "ACK ack-nvidia-device-plugin (DaemonSet)", "component=nvidia-device-plugin")
ACK_STATIC = Deployment("ack-static", f"ACK static pods ({ACK_STATIC_MANIFEST})", "component=nvidia-device-plugin")
GKE = Deployment("gke", "Google's nvidia-gpu-device-plugin (GKE, Kubespray)", "k8s-app=nvidia-gpu-device-plugin")
CUSTOM = Deployment("custom", "device plugin found by the given selectors", "")
DAEMONSET_DEPLOYMENTS: tuple[Deployment, ...] = (NVIDIA_STATIC, NVIDIA_HELM, GPU_OPERATOR, ACK_MANAGED, GKE)
# The kubelet plugin of NVIDIA's DRA driver: its Helm chart labels the pods `<chart>-component:
# kubelet-plugin`, the chart being nvidia-dra-driver-gpu in the released versions and
# dra-driver-nvidia-gpu since the move to kubernetes-sigs (templates/_helpers.tpl, selectorLabels).
NVIDIA_DRA = Deployment(
    "nvidia-dra-driver", "NVIDIA DRA driver for GPUs, kubelet plugin", "nvidia-dra-driver-gpu-component=kubelet-plugin"
)
NVIDIA_DRA_SIGS = Deployment(
    "dra-driver-nvidia-gpu",
    "NVIDIA DRA driver for GPUs, kubelet plugin (kubernetes-sigs chart)",
    "dra-driver-nvidia-gpu-component=kubelet-plugin",
)
DRA_KUBELET_PLUGIN_DEPLOYMENTS: tuple[Deployment, ...] = (NVIDIA_DRA, NVIDIA_DRA_SIGS)
DEPLOYMENTS_BY_KEY = {d.key: d for d in (*DAEMONSET_DEPLOYMENTS, *DRA_KUBELET_PLUGIN_DEPLOYMENTS, ACK_STATIC, CUSTOM)}
_DEPLOYMENT_SELECTORS = tuple(
    (d, parse_label_selector(d.selector)) for d in (*DAEMONSET_DEPLOYMENTS, *DRA_KUBELET_PLUGIN_DEPLOYMENTS)
)


def deployment_of(labels: Mapping[str, str], static: bool = False) -> Deployment:
    """The known deployment whose pod labels these are (a static pod's can only be ACK's)."""
    for deployment, selector in _DEPLOYMENT_SELECTORS:
        if selector.matches(labels):
            return ACK_STATIC if static and deployment is ACK_MANAGED else deployment
    return CUSTOM


def is_static_pod(annotations: Mapping[str, str], owner_kinds: Iterable[str]) -> bool:
    """A mirror pod of a static pod the kubelet runs from a manifest file."""
    return (
        MIRROR_POD_ANNOTATION in annotations
        or annotations.get(CONFIG_SOURCE_ANNOTATION) == "file"
        or "Node" in owner_kinds
    )


# A pod matching one of these is a device-plugin pod: NVIDIA's static DaemonSet, its Helm chart,
# the GPU Operator, ACK (DaemonSet and static mirror pods alike), and Google's plugin.
DEFAULT_DEVICE_PLUGIN_SELECTORS: tuple[str, ...] = tuple(d.selector for d in DAEMONSET_DEPLOYMENTS)
# A pod matching one of these is a kubelet-plugin pod of a GPU DRA driver.
DEFAULT_DRA_PLUGIN_SELECTORS: tuple[str, ...] = tuple(d.selector for d in DRA_KUBELET_PLUGIN_DEPLOYMENTS)


def is_dra_deployment(key: str) -> bool:
    return key in {d.key for d in DRA_KUBELET_PLUGIN_DEPLOYMENTS}


# GPU Operator operands set NVIDIA_VISIBLE_DEVICES=all on purpose (monitoring, validation,
# MIG management): they are not workloads hiding from the scheduler.
_GPU_OPERATOR_OPERANDS = (
    "nvidia-dcgm-exporter",
    "nvidia-dcgm",
    "gpu-feature-discovery",
    "nvidia-operator-validator",
    "nvidia-container-toolkit-daemonset",
    "nvidia-mig-manager",
    "nvidia-driver-daemonset",
)
DEFAULT_EXEMPT_POD_SELECTORS: tuple[str, ...] = (f"app in ({','.join(_GPU_OPERATOR_OPERANDS)})",)
