# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Verdicts on each GPU node: a Ready plugin pod, capacity, allocatable and the GPU count labels."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.daemonsets import (
    describe_command,
    mismatch_fixes,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.findings import (
    KIND_LABEL_COUNT_MISMATCH,
    KIND_NO_CAPACITY,
    KIND_NO_PLUGIN_POD,
    KIND_NODE_NOT_READY,
    KIND_PLUGIN_NOT_READY,
    KIND_PLUGIN_RESTARTING,
    KIND_SEVERAL_PLUGIN_PODS,
    KIND_UNHEALTHY_GPUS,
    RESTART_WARNING_THRESHOLD,
    finding,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.projection import gpu_count_of
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.severity import ERROR, WARNING
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.device_plugins import (
    ACK_STATIC_MANIFEST,
    REGISTERED_LOG_LINE,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.models import COUNT_LABEL_KEYS, label_gpu_count
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.options import FleetOptions
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import MIG_RESOURCE_PATTERN
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.placement import placement_mismatches
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import namespaced_name


def restart_hint(pod: Mapping[str, Any]) -> str:
    if pod["static"]:
        return (
            f"restart the static pod: on the node move {ACK_STATIC_MANIFEST} out of /etc/kubernetes/manifests, "
            "wait until the pod is gone, and move it back"
        )
    return f"restart it: kubectl -n {pod['namespace']} delete pod {pod['name']}"


_DEPLOY_PLUGIN_REMEDY = (
    "deploy one: on ACK install the ack-nvidia-device-plugin component from the cluster's add-ons; "
    "elsewhere NVIDIA's device plugin (kubectl create -f "
    "https://raw.githubusercontent.com/NVIDIA/k8s-device-plugin/v0.17.0/deployments/static/nvidia-device-plugin.yml, "
    "or its Helm chart nvdp/nvidia-device-plugin) or the NVIDIA GPU Operator"
)


def why_no_plugin_pod(node: Mapping[str, Any], daemonsets: Sequence[Mapping[str, Any]], static_pods_seen: bool) -> str:
    name = node["name"]
    excluded: list[str] = []
    for daemonset in daemonsets:
        mismatches = placement_mismatches(node, daemonset["placement"])
        if not mismatches:
            return (
                f"the DaemonSet {namespaced_name(daemonset)} selects this node but has no running pod on it: "
                f"{describe_command(daemonset)} (events) and "
                f"kubectl -n {daemonset['namespace']} get pods -o wide --field-selector spec.nodeName={name} show why"
            )
        reasons = "; ".join(m.text for m in mismatches)
        fixes = "; ".join(mismatch_fixes(mismatches, [name], namespaced_name(daemonset)))
        excluded.append(
            f"the DaemonSet {namespaced_name(daemonset)} does not select this node: {reasons}. Fix: {fixes}"
        )
    if excluded:
        return " / ".join(excluded)
    if static_pods_seen:
        return (
            f"this cluster runs the plugin as ACK static pods, and this node has none: restore {ACK_STATIC_MANIFEST} "
            "on the node (as on its other GPU nodes), or install the ack-nvidia-device-plugin component "
            "and label the node ack.node.gpu.schedule=default"
        )
    return "no device plugin is deployed for this node: " + _DEPLOY_PLUGIN_REMEDY


def _pod_state(pod: Mapping[str, Any]) -> str:
    parts = [pod["phase"]]
    if pod["reason"]:
        parts.append(pod["reason"])
    if pod["restarts"]:
        parts.append(f"{pod['restarts']} restarts")
    return ", ".join(parts)


def _several_pods_remedy(pods: Sequence[Mapping[str, Any]]) -> str:
    if any(p["static"] for p in pods) and any(not p["static"] for p in pods):
        return (
            "ACK clusters upgraded to 1.32 can run both the static pod and the ack-nvidia-device-plugin DaemonSet: "
            f"on the node move {ACK_STATIC_MANIFEST} out of /etc/kubernetes/manifests so that only the DaemonSet's "
            "pod serves the GPUs"
        )
    owners = sorted({p["daemonset"] or namespaced_name(p) for p in pods})
    return (
        f"two deployments of the device plugin serve the same GPUs ({', '.join(owners)}): keep one, and delete the "
        "other or change its nodeSelector so that it no longer selects this node"
    )


def plugin_pod_findings(
    node: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    daemonsets: Sequence[Mapping[str, Any]],
    static_pods_seen: bool,
) -> list[dict[str, Any]]:
    """Exactly one device-plugin pod on the node, Ready and not restarting over and over."""
    name = node["name"]
    subject = f"node {name}"
    if not pods:
        return [
            finding(
                ERROR,
                KIND_NO_PLUGIN_POD,
                subject,
                "no device-plugin pod runs on this GPU node",
                why_no_plugin_pod(node, daemonsets, static_pods_seen),
                name,
            )
        ]
    if len(pods) > 1:
        listed = ", ".join(f"{namespaced_name(p)} ({'static' if p['static'] else p['deployment']})" for p in pods)
        return [
            finding(
                ERROR,
                KIND_SEVERAL_PLUGIN_PODS,
                subject,
                f"{len(pods)} device-plugin pods: {listed}",
                _several_pods_remedy(pods),
                name,
            )
        ]
    pod = pods[0]
    if not pod["ready"]:
        remedy = (
            f"read its log: kubectl -n {pod['namespace']} logs {pod['name']} (a healthy plugin logs "
            f'"{REGISTERED_LOG_LINE}"); check the driver on the node with nvidia-smi; '
            '"Failed to initialize NVML: Unknown Error" after systemctl daemon-reload (Ubuntu 22.04, RHEL 9.3) '
            f"goes away when the pod restarts; {restart_hint(pod)}"
        )
        return [
            finding(
                ERROR,
                KIND_PLUGIN_NOT_READY,
                subject,
                f"device-plugin pod {namespaced_name(pod)} is not Ready ({_pod_state(pod)})",
                remedy,
                name,
            )
        ]
    if pod["restarts"] >= RESTART_WARNING_THRESHOLD:
        return [
            finding(
                WARNING,
                KIND_PLUGIN_RESTARTING,
                subject,
                f"device-plugin pod {namespaced_name(pod)} has restarted {pod['restarts']} times",
                f"read the log of its previous run: kubectl -n {pod['namespace']} logs {pod['name']} --previous; "
                "repeated NVML or driver errors there point at the driver on the node (check nvidia-smi)",
                name,
            )
        ]
    return []


def capacity_findings(
    node: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], options: FleetOptions
) -> list[dict[str, Any]]:
    """Capacity above zero, allocatable equal to capacity, and the count the labels state."""
    name, resource = node["name"], options.primary_resource
    plugin_ready = len(pods) == 1 and bool(pods[0]["ready"])
    restart = restart_hint(pods[0]) if len(pods) == 1 else "restart the device-plugin pod"
    subject = f"node {name}"
    capacity = gpu_count_of(node, "capacity", options)
    allocatable = gpu_count_of(node, "allocatable", options)
    if capacity == 0:
        if plugin_ready:
            remedy = (
                f"the plugin runs but has not registered GPUs with the kubelet: its log should show "
                f'"{REGISTERED_LOG_LINE}"; "No devices found" or NVML errors there mean the driver is not '
                "usable (check nvidia-smi on the node); right after a kubelet restart capacity stays 0 until the "
                "plugin registers again, so run the check again in a minute"
            )
        else:
            remedy = (
                "fix the device-plugin pod on this node first (see its finding); capacity appears once it registers"
            )
        return [finding(ERROR, KIND_NO_CAPACITY, subject, f"no {resource} capacity", remedy, name)]
    found = []
    if allocatable < capacity:
        found.append(
            finding(
                ERROR,
                KIND_UNHEALTHY_GPUS,
                subject,
                f"allocatable {allocatable} below capacity {capacity}: {capacity - allocatable} GPU(s) marked unhealthy",
                'the device plugin marks a GPU unhealthy after XID or ECC errors (its log: "XidCriticalError ... marking '
                'device as unhealthy"); find the GPU with nvidia-smi -q on the node (on ACK, ack-node-problem-detector '
                f"events name it) and repair or replace it; a GPU stays unhealthy until the plugin restarts, so then "
                f"{restart}",
                name,
            )
        )
    stated = label_gpu_count(node["labels"])
    uses_mig = any(r.startswith(MIG_RESOURCE_PATTERN.rstrip("*")) for r in node["capacity"])
    if stated is not None and stated != capacity and not uses_mig:
        key = next(k for k in COUNT_LABEL_KEYS if node["labels"].get(k, "").isdigit())
        found.append(
            finding(
                WARNING,
                KIND_LABEL_COUNT_MISMATCH,
                subject,
                f"labels state {stated} GPU(s) ({key}), capacity is {capacity}",
                "nvidia-smi -L on the node lists the GPUs the driver sees: a GPU missing there needs a hardware check; "
                f"if all are listed, the plugin has not registered them all: {restart}",
                name,
            )
        )
    return found


def node_findings(
    node: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    daemonsets: Sequence[Mapping[str, Any]],
    static_pods_seen: bool,
    options: FleetOptions,
) -> list[dict[str, Any]]:
    found = []
    if not node["ready"]:
        found.append(
            finding(
                WARNING,
                KIND_NODE_NOT_READY,
                f"node {node['name']}",
                "node is not Ready",
                "its kubelet does not report: check it on the node (systemctl status kubelet; journalctl -u kubelet)",
                node["name"],
            )
        )
    found += plugin_pod_findings(node, pods, daemonsets, static_pods_seen)
    found += capacity_findings(node, pods, options)
    return found


def node_summary(node: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], options: FleetOptions) -> dict[str, Any]:
    return {
        "name": node["name"],
        "ready": node["ready"],
        "capacity": gpu_count_of(node, "capacity", options),
        "allocatable": gpu_count_of(node, "allocatable", options),
        "label_gpu_count": label_gpu_count(node["labels"]),
        "plugin_pods": [
            {
                "pod": namespaced_name(p),
                "ready": p["ready"],
                "phase": p["phase"],
                "reason": p["reason"],
                "restarts": p["restarts"],
                "static": p["static"],
                "deployment": p["deployment"],
            }
            for p in pods
        ],
        "plugin_ready": len(pods) == 1 and pods[0]["ready"],
        "host": None,
        "healthy": True,
        "problems": [],
    }
