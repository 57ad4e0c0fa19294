# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The releases of NVIDIA's device plugin that the collection deploys, as NVIDIA publishes them.

Each release is its two static manifests, as data: ``deployments/static/nvidia-device-plugin.yml``
(the plugin's DaemonSet) and ``deployments/static/gpu-feature-discovery-daemonset.yaml`` (GPU Feature
Discovery) of NVIDIA/k8s-device-plugin at the release's tag, whose commit is recorded. The two releases
differ in the image tag, GFD's version labels, and the plugin's environment (v0.17.4 sets
FAIL_ON_INIT_ERROR=false, v0.18.2 none). tests/unit/plugins/module_utils/plugin_deploy/test_releases.py
holds this data to copies of the published files.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.device_plugins import DEFAULT_PLUGIN_RELEASE

REPOSITORY = "NVIDIA/k8s-device-plugin"
DEVICE_PLUGIN_PATH = "deployments/static/nvidia-device-plugin.yml"
FEATURE_DISCOVERY_PATH = "deployments/static/gpu-feature-discovery-daemonset.yaml"
IMAGE_REPOSITORY = "nvcr.io/nvidia/k8s-device-plugin"
DEVICE_PLUGIN_CONTAINER = "nvidia-device-plugin-ctr"
FEATURE_DISCOVERY_CONTAINER = "gpu-feature-discovery"


@dataclass(frozen=True)
class Release:
    version: str
    commit: str  # of the tag in NVIDIA/k8s-device-plugin
    device_plugin_env: tuple[tuple[str, str], ...]

    @property
    def image(self) -> str:
        return f"{IMAGE_REPOSITORY}:{self.version}"

    def device_plugin(self) -> dict[str, Any]:
        """deployments/static/nvidia-device-plugin.yml of the release."""
        return copy.deepcopy(_device_plugin(self))

    def feature_discovery(self) -> dict[str, Any]:
        """deployments/static/gpu-feature-discovery-daemonset.yaml of the release."""
        return copy.deepcopy(_feature_discovery(self))


def _device_plugin(release: Release) -> dict[str, Any]:
    labels = {"name": "nvidia-device-plugin-ds"}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "nvidia-device-plugin-daemonset", "namespace": "kube-system"},
        "spec": {
            "selector": {"matchLabels": dict(labels)},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                    "priorityClassName": "system-node-critical",
                    "containers": [
                        {
                            "image": release.image,
                            "name": DEVICE_PLUGIN_CONTAINER,
                            "env": [{"name": name, "value": value} for name, value in release.device_plugin_env],
                            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                            "volumeMounts": [
                                {"name": "kubelet-device-plugins-dir", "mountPath": "/var/lib/kubelet/device-plugins"}
                            ],
                        }
                    ],
                    "volumes": [
                        {
                            "name": "kubelet-device-plugins-dir",
                            "hostPath": {"path": "/var/lib/kubelet/device-plugins", "type": "Directory"},
                        }
                    ],
                },
            },
        },
    }


def _feature_discovery(release: Release) -> dict[str, Any]:
    version = release.version.lstrip("v")
    selector = {"app.kubernetes.io/name": "gpu-feature-discovery", "app.kubernetes.io/part-of": "nvidia-gpu"}
    labels = {
        "app.kubernetes.io/name": "gpu-feature-discovery",
        "app.kubernetes.io/version": version,
        "app.kubernetes.io/part-of": "nvidia-gpu",
    }
    features = "/etc/kubernetes/node-feature-discovery/features.d"
    terms = [
        ("feature.node.kubernetes.io/pci-10de.present", "true"),
        ("feature.node.kubernetes.io/cpu-model.vendor_id", "NVIDIA"),
        ("nvidia.com/gpu.present", "true"),
    ]
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "gpu-feature-discovery", "labels": dict(labels)},
        "spec": {
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "containers": [
                        {
                            "image": release.image,
                            "name": FEATURE_DISCOVERY_CONTAINER,
                            "command": ["/usr/bin/gpu-feature-discovery"],
                            "volumeMounts": [
                                {"name": "output-dir", "mountPath": features},
                                {"name": "host-sys", "mountPath": "/sys"},
                            ],
                            "securityContext": {"privileged": True},
                            "env": [{"name": "MIG_STRATEGY", "value": "none"}],
                        }
                    ],
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}
                                    for key, value in terms
                                ]
                            }
                        }
                    },
                    "volumes": [
                        {"name": "output-dir", "hostPath": {"path": features, "type": "DirectoryOrCreate"}},
                        {"name": "host-sys", "hostPath": {"path": "/sys", "type": "Directory"}},
                    ],
                },
            },
        },
    }


RELEASES: Mapping[str, Release] = {
    "v0.17.4": Release("v0.17.4", "fd56a747defe15333adce40fcd3a06ffb129251b", (("FAIL_ON_INIT_ERROR", "false"),)),
    "v0.18.2": Release("v0.18.2", "fb1242add205d8563f9c604b8ba239607b4083e6", ()),
}
DEFAULT_RELEASE = DEFAULT_PLUGIN_RELEASE


def release_of(version: str) -> Release:
    return RELEASES[version]
