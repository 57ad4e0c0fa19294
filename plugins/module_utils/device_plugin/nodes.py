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
    found,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.projection import gpu_count_of
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.kinds.device_plugin import (
    DEPLOY_PLUGIN_REMEDY,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.device_plugins import ACK_STATIC_MANIFEST
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
    return "no device plugin is deployed for this node: " + DEPLOY_PLUGIN_REMEDY


def _pod_state(pod: Mapping[str, Any]) -> str:
    parts = [pod["phase"]]
    if pod["reason"]:
        parts.append(pod["reason"])
    if pod["restarts"]:
        parts.append(f"{pod['restarts']} restarts")
    return ", ".join(parts)


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
        return [found(KIND_NO_PLUGIN_POD, subject, name, why=why_no_plugin_pod(node, daemonsets, static_pods_seen))]
    if len(pods) > 1:
        listed = ", ".join(f"{namespaced_name(p)} ({'static' if p['static'] else p['deployment']})" for p in pods)
        owners = ", ".join(sorted({p["daemonset"] or namespaced_name(p) for p in pods}))
        mixed = any(p["static"] for p in pods) and any(not p["static"] for p in pods)
        case = "static_and_daemonset" if mixed else ""
        return [found(KIND_SEVERAL_PLUGIN_PODS, subject, name, case, count=len(pods), listed=listed, owners=owners)]
    pod = pods[0]
    fields = {**_pod_fields(pod), "restart": restart_hint(pod)}
    if not pod["ready"]:
        return [found(KIND_PLUGIN_NOT_READY, subject, name, state=_pod_state(pod), **fields)]
    if pod["restarts"] >= RESTART_WARNING_THRESHOLD:
        return [found(KIND_PLUGIN_RESTARTING, subject, name, restarts=pod["restarts"], **fields)]
    return []


def _pod_fields(pod: Mapping[str, Any]) -> dict[str, Any]:
    return {"pod": namespaced_name(pod), "namespace": pod["namespace"], "name": pod["name"]}


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
        case = "" if plugin_ready else "plugin_not_ready"
        return [found(KIND_NO_CAPACITY, subject, name, case, resource=resource)]
    findings = []
    if allocatable < capacity:
        counts = {"capacity": capacity, "allocatable": allocatable, "unhealthy": capacity - allocatable}
        findings.append(found(KIND_UNHEALTHY_GPUS, subject, name, restart=restart, **counts))
    stated = label_gpu_count(node["labels"])
    uses_mig = any(r.startswith(MIG_RESOURCE_PATTERN.rstrip("*")) for r in node["capacity"])
    if stated is not None and stated != capacity and not uses_mig:
        key = next(k for k in COUNT_LABEL_KEYS if node["labels"].get(k, "").isdigit())
        findings.append(
            found(KIND_LABEL_COUNT_MISMATCH, subject, name, stated=stated, key=key, capacity=capacity, restart=restart)
        )
    return findings


def node_findings(
    node: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    daemonsets: Sequence[Mapping[str, Any]],
    static_pods_seen: bool,
    options: FleetOptions,
) -> list[dict[str, Any]]:
    findings = []
    if not node["ready"]:
        findings.append(found(KIND_NODE_NOT_READY, f"node {node['name']}", node["name"]))
    findings += plugin_pod_findings(node, pods, daemonsets, static_pods_seen)
    findings += capacity_findings(node, pods, options)
    return findings


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
