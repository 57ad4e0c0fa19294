# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Verdicts on the nodes whose GPUs come through NVIDIA's DRA driver: its kubelet-plugin pod runs
and is Ready there, and the node's GPUs are published in ResourceSlices."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.findings import (
    KIND_DRA_NO_SLICES,
    KIND_DRA_NOT_READABLE,
    KIND_DRA_PLUGIN_NOT_READY,
    KIND_NO_DRA_PLUGIN_POD,
    KIND_SERVED_TWICE,
    found,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.device_plugins import is_dra_deployment
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra import (
    DevicePluginSide,
    current_pools,
    devices_by_node,
    dual_stack,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.options import FleetOptions
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import namespaced_name


@dataclass(frozen=True)
class DraLayout:
    """Where the DRA driver runs and what it publishes: kubelet-plugin pods and GPU devices per node."""

    readable: bool
    plugin_pods: Mapping[str, list[Mapping[str, Any]]] = field(default_factory=dict)
    devices: Mapping[str, list[dict[str, Any]]] = field(default_factory=dict)
    slices: Mapping[str, int] = field(default_factory=dict)
    note: str | None = None

    @property
    def nodes(self) -> set[str]:
        return set(self.devices) | set(self.plugin_pods)


def is_dra_plugin_pod(pod: Mapping[str, Any]) -> bool:
    return is_dra_deployment(pod["deployment"])


def dra_layout(
    plugin_pods: Sequence[Mapping[str, Any]], slices: Sequence[Mapping[str, Any]] | None, note: str | None = None
) -> DraLayout:
    """The layout from the projected plugin pods and GPU slices (None: the slices could not be read)."""
    pods: dict[str, list[Mapping[str, Any]]] = {}
    for pod in sorted((p for p in plugin_pods if is_dra_plugin_pod(p)), key=namespaced_name):
        pods.setdefault(pod["node"], []).append(pod)
    current = current_pools(slices or []).slices
    counts: dict[str, int] = {}
    for item in current:
        if item["node"]:
            counts[item["node"]] = counts.get(item["node"], 0) + 1
    return DraLayout(slices is not None, pods, devices_by_node(current), counts, note)


def dra_node_findings(node: Mapping[str, Any], layout: DraLayout) -> list[dict[str, Any]]:
    """A Ready kubelet-plugin pod on a DRA GPU node, and ResourceSlices published for it."""
    name, subject = node["name"], f"node {node['name']}"
    pods = layout.plugin_pods.get(name, [])
    findings = []
    if not pods:
        devices = len(layout.devices.get(name, []))
        findings.append(found(KIND_NO_DRA_PLUGIN_POD, subject, name, devices=devices))
    elif not any(p["ready"] for p in pods):
        pod = pods[0]
        fields = {"pod": namespaced_name(pod), "phase": pod["phase"], "namespace": pod["namespace"]}
        findings.append(found(KIND_DRA_PLUGIN_NOT_READY, subject, name, name=pod["name"], **fields))
    if pods and layout.readable and not layout.slices.get(name):
        findings.append(found(KIND_DRA_NO_SLICES, subject, name, namespace=pods[0]["namespace"], name=pods[0]["name"]))
    return findings


def served_twice_findings(node: Mapping[str, Any], layout: DraLayout, options: FleetOptions) -> list[dict[str, Any]]:
    """The device plugin's GPU resource in the node's allocatable beside a GPU driver's devices in its
    ResourceSlices: the same GPUs offered twice (gpu/dra.py decides it, for the fleet facts too, which
    also read the claims and classes this check does not)."""
    name = node["name"]
    plugin = DevicePluginSide(node["allocatable"], options.counts)
    fields = ("resource", "allocatable", "driver", "devices")
    return [
        found(KIND_SERVED_TWICE, f"node {name}", name, **{key: entry[key] for key in fields})
        for entry in dual_stack(plugin, layout.devices.get(name, []), (), {})
    ]


def dra_node_summary(name: str, layout: DraLayout) -> dict[str, Any]:
    pods = layout.plugin_pods.get(name, [])
    return {
        "kubelet_plugin_pods": [namespaced_name(p) for p in pods],
        "kubelet_plugin_ready": any(p["ready"] for p in pods),
        "slices": layout.slices.get(name, 0),
        "devices": len(layout.devices.get(name, [])),
    }


def dra_cluster_findings(layout: DraLayout) -> list[dict[str, Any]]:
    if layout.note is None:
        return []
    return [found(KIND_DRA_NOT_READABLE, "cluster", note=layout.note)]
