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
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.findings import (
    KIND_NO_DEVICE_PLUGIN,
    KIND_NO_GPU_NODES,
    KIND_SEVERAL_DEPLOYMENTS,
    finding,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.hosts import HostContext, host_verdicts
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.nodes import (
    _DEPLOY_PLUGIN_REMEDY,
    node_findings,
    node_summary,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.projection import is_gpu_node
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.report import render_report
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.severity import (
    ERROR,
    INFO,
    SEVERITIES,
    WARNING,
    severity_rank,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.device_plugins import (
    ACK_STATIC,
    DEPLOYMENTS_BY_KEY,
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
) -> list[dict[str, Any]]:
    found = []
    if not gpu_nodes:
        found.append(
            finding(
                INFO,
                KIND_NO_GPU_NODES,
                "cluster",
                f"no node looks like a GPU node (no GPU model or count labels, no {options.primary_resource} capacity)",
                "nothing to check on nodes; if GPU nodes were expected, check that they joined the cluster and carry "
                "their provider's GPU labels",
            )
        )
    elif not daemonsets and not plugin_pods:
        found.append(
            finding(
                ERROR,
                KIND_NO_DEVICE_PLUGIN,
                "cluster",
                f"no device plugin found ({len(gpu_nodes)} GPU node(s), no device-plugin DaemonSet or pod)",
                _DEPLOY_PLUGIN_REMEDY,
            )
        )
    if len(deployments) > 1:
        titles = "; ".join(
            f"{d['title']} ({', '.join(d['daemonsets']) or str(d['static_pods']) + ' pods'})" for d in deployments
        )
        found.append(
            finding(
                WARNING,
                KIND_SEVERAL_DEPLOYMENTS,
                "cluster",
                f"several deployments of the device plugin: {titles}",
                "keep one per node: two plugins on one node advertise the same GPUs twice (the per-node findings "
                "name any node that runs two)",
            )
        )
    return found


def evaluate(
    daemonsets: Sequence[Mapping[str, Any]],
    nodes: Iterable[Mapping[str, Any]],
    plugin_pods: Sequence[Mapping[str, Any]],
    options: FleetOptions,
    host_facts: Mapping[str, Any] | None = None,
    require_hardening: bool = False,
    missing_daemonsets: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """Every verdict, from projected DaemonSets, compact nodes and projected plugin pods."""
    all_nodes = {n["name"]: n for n in nodes}
    gpu_nodes = sorted((n for n in all_nodes.values() if is_gpu_node(n, options)), key=lambda n: n["name"])
    pods_by_node = _plugin_pods_by_node(plugin_pods)
    static_seen = any(p["static"] for p in plugin_pods)
    deployments = deployments_found(daemonsets, plugin_pods)

    findings = cluster_findings(gpu_nodes, daemonsets, plugin_pods, deployments, options)
    findings += [dict(f) for f in missing_daemonsets]
    unserved = [n for n in gpu_nodes if not pods_by_node.get(n["name"])]
    daemonset_summaries = []
    for daemonset in sorted(daemonsets, key=namespaced_name):
        own = daemonset_findings(daemonset, gpu_nodes, unserved)
        daemonset_summaries.append(daemonset_summary(daemonset, own))
        findings += own
    node_summaries = {}
    for node in gpu_nodes:
        pods = pods_by_node.get(node["name"], [])
        node_summaries[node["name"]] = node_summary(node, pods, options)
        findings += node_findings(node, pods, daemonsets, static_seen, options)
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
        "nodes": list(node_summaries.values()),
        "findings": findings,
        "counts": {
            "gpu_nodes": len(gpu_nodes),
            "daemonsets": len(daemonsets),
            "plugin_pods": len(plugin_pods),
            **{severity: sum(f["severity"] == severity for f in findings) for severity in SEVERITIES},
        },
    }
    result["report"] = render_report(result)
    return result
