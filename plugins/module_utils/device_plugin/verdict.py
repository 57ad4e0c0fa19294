# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every verdict of the device-plugin check, from projected DaemonSets, nodes and plugin pods."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.daemonsets import (
    daemonset_findings,
    daemonset_summary,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.dra import (
    DraLayout,
    dra_cluster_findings,
    dra_layout,
    dra_node_findings,
    dra_node_summary,
    is_dra_plugin_pod,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.findings import (
    KIND_NO_DEVICE_PLUGIN,
    KIND_NO_GPU_NODES,
    KIND_SEVERAL_DEPLOYMENTS,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.findings import found as found_kind
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.hosts import HostContext, host_verdicts
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.nodes import (
    node_findings,
    node_summary,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.projection import (
    gpu_count_of,
    is_gpu_node,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.report import render_report
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.severity import (
    ERROR,
    SEVERITIES,
    severity_rank,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.device_plugins import (
    ACK_STATIC,
    DEPLOYMENTS_BY_KEY,
    is_dra_deployment,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.options import FleetOptions
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import namespaced_name


def _severity_rank(item: Mapping[str, Any]) -> int:
    return severity_rank(item["severity"])


def _plugin_pods_by_node(plugin_pods: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    by_node: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for pod in sorted(plugin_pods, key=namespaced_name):
        by_node[pod["node"]].append(pod)
    return by_node


def deployments_found(
    daemonsets: Sequence[Mapping[str, Any]], plugin_pods: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Which deployments of the plugin run: by DaemonSet, plus ACK static pods."""
    found: dict[str, dict[str, Any]] = {}
    for daemonset in daemonsets:
        entry = found.setdefault(daemonset["deployment"], {"daemonsets": [], "static_pods": 0})
        entry["daemonsets"].append(namespaced_name(daemonset))
    for pod in plugin_pods:
        if pod["static"]:
            found.setdefault(ACK_STATIC.key, {"daemonsets": [], "static_pods": 0})["static_pods"] += 1
    return [{"key": key, "title": DEPLOYMENTS_BY_KEY[key].title, **entry} for key, entry in sorted(found.items())]


def cluster_findings(
    gpu_nodes: Sequence[Mapping[str, Any]],
    daemonsets: Sequence[Mapping[str, Any]],
    plugin_pods: Sequence[Mapping[str, Any]],
    deployments: Sequence[Mapping[str, Any]],
    options: FleetOptions,
    dra: DraLayout | None = None,
) -> list[dict[str, Any]]:
    """No GPU node, no device plugin (nor DRA driver) at all, several deployments of the plugin."""
    found = []
    serves_through_dra = dra is not None and bool(dra.nodes)
    deployments = [d for d in deployments if not is_dra_deployment(d["key"])]
    if not gpu_nodes:
        found.append(found_kind(KIND_NO_GPU_NODES, "cluster", resource=options.primary_resource))
    elif not daemonsets and not plugin_pods and not serves_through_dra:
        found.append(found_kind(KIND_NO_DEVICE_PLUGIN, "cluster", gpu_nodes=len(gpu_nodes)))
    if len(deployments) > 1:
        titles = "; ".join(
            f"{d['title']} ({', '.join(d['daemonsets']) or str(d['static_pods']) + ' pods'})" for d in deployments
        )
        found.append(found_kind(KIND_SEVERAL_DEPLOYMENTS, "cluster", titles=titles))
    return found


def _dra_only(node: Mapping[str, Any], dp_pods: Mapping[str, Any], dra: DraLayout, options: FleetOptions) -> bool:
    """A DRA GPU node with no device plugin: its GPUs are not the device plugin's to advertise."""
    name = node["name"]
    return name in dra.nodes and not dp_pods.get(name) and gpu_count_of(node, "capacity", options) == 0


def evaluate(
    daemonsets: Sequence[Mapping[str, Any]],
    nodes: Iterable[Mapping[str, Any]],
    plugin_pods: Sequence[Mapping[str, Any]],
    options: FleetOptions,
    host_facts: Mapping[str, Any] | None = None,
    require_hardening: bool = False,
    missing_daemonsets: Sequence[Mapping[str, Any]] = (),
    dra_daemonsets: Sequence[Mapping[str, Any]] = (),
    slices: Sequence[Mapping[str, Any]] | None = (),
    dra_note: str | None = None,
) -> dict[str, Any]:
    """Every verdict, from projected DaemonSets, compact nodes and projected plugin pods (device
    plugin and DRA kubelet plugin), the DRA driver's DaemonSets and the GPU ResourceSlices (None
    when they could not be read, with `dra_note` saying why)."""
    all_nodes = {n["name"]: n for n in nodes}
    dra = dra_layout(plugin_pods, slices, dra_note)
    device_plugin_pods = [p for p in plugin_pods if not is_dra_plugin_pod(p)]
    gpu_nodes = sorted(
        (n for n in all_nodes.values() if is_gpu_node(n, options) or n["name"] in dra.nodes), key=lambda n: n["name"]
    )
    pods_by_node = _plugin_pods_by_node(device_plugin_pods)
    static_seen = any(p["static"] for p in device_plugin_pods)
    deployments = deployments_found([*daemonsets, *dra_daemonsets], device_plugin_pods)
    dra_only = {n["name"] for n in gpu_nodes if _dra_only(n, pods_by_node, dra, options)}

    findings = cluster_findings(gpu_nodes, daemonsets, device_plugin_pods, deployments, options, dra)
    findings += dra_cluster_findings(dra)
    findings += [dict(f) for f in missing_daemonsets]
    device_plugin_nodes = [n for n in gpu_nodes if n["name"] not in dra_only]
    unserved = [n for n in device_plugin_nodes if not pods_by_node.get(n["name"])]
    daemonset_summaries = []
    for daemonset in sorted(daemonsets, key=namespaced_name):
        own = daemonset_findings(daemonset, device_plugin_nodes, unserved)
        daemonset_summaries.append(daemonset_summary(daemonset, own))
        findings += own
    dra_nodes = [n for n in gpu_nodes if n["name"] in dra.nodes]
    dra_summaries = []
    for daemonset in sorted(dra_daemonsets, key=namespaced_name):
        own = daemonset_findings(daemonset, dra_nodes, [n for n in dra_nodes if not dra.plugin_pods.get(n["name"])])
        dra_summaries.append(daemonset_summary(daemonset, own))
        findings += own
    node_summaries = {}
    for node in gpu_nodes:
        pods = pods_by_node.get(node["name"], [])
        summary = node_summary(node, pods, options)
        summary["gpu_sources"] = [
            source
            for source, present in (("device_plugin", node["name"] not in dra_only), ("dra", node["name"] in dra.nodes))
            if present
        ]
        summary["dra"] = dra_node_summary(node["name"], dra)
        node_summaries[node["name"]] = summary
        if node["name"] not in dra_only:
            findings += node_findings(node, pods, daemonsets, static_seen, options)
        if node["name"] in dra.nodes:
            findings += dra_node_findings(node, dra)
    findings += host_verdicts(
        host_facts, HostContext(all_nodes, node_summaries, daemonsets, static_seen, options), require_hardening
    )
    for item in findings:
        summary = node_summaries.get(item["node"] or "")
        if summary is not None:
            summary["problems"].append(item["kind"])
            summary["healthy"] = summary["healthy"] and item["severity"] != ERROR

    findings.sort(key=_severity_rank)
    result = {
        "healthy": not any(f["severity"] == ERROR for f in findings),
        "deployments": deployments,
        "daemonsets": daemonset_summaries,
        "dra_daemonsets": dra_summaries,
        "nodes": list(node_summaries.values()),
        "findings": findings,
        "counts": {
            "gpu_nodes": len(gpu_nodes),
            "daemonsets": len(daemonsets),
            "plugin_pods": len(device_plugin_pods),
            "dra_nodes": len(dra_nodes),
            "dra_daemonsets": len(dra_daemonsets),
            "dra_plugin_pods": len(plugin_pods) - len(device_plugin_pods),
            **{severity: sum(f["severity"] == severity for f in findings) for severity in SEVERITIES},
        },
    }
    result["report"] = render_report(result)
    return result
