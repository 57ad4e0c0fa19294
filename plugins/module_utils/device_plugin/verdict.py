# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every verdict of the device-plugin check, from projected DaemonSets, nodes and plugin pods."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
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
    served_twice_findings,
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
    ClusterReads,
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


@dataclass(frozen=True)
class Fleet:
    """The GPU nodes as the check sees them: by name, which serve GPUs through DRA alone, the
    device-plugin pods per node, and where the DRA driver runs and publishes."""

    all_nodes: dict[str, Mapping[str, Any]]
    gpu_nodes: list[Mapping[str, Any]]
    dra: DraLayout
    device_plugin_pods: list[Mapping[str, Any]]
    pods_by_node: dict[str, list[Mapping[str, Any]]]
    dra_only: set[str]

    def serves(self, node: str) -> bool:
        """Whether a device-plugin pod runs on the node."""
        return bool(self.pods_by_node.get(node))

    def dra_serves(self, node: str) -> bool:
        """Whether a DRA kubelet-plugin pod runs on the node."""
        return bool(self.dra.plugin_pods.get(node))

    @property
    def static_seen(self) -> bool:
        return any(p["static"] for p in self.device_plugin_pods)

    @property
    def device_plugin_nodes(self) -> list[Mapping[str, Any]]:
        return [n for n in self.gpu_nodes if n["name"] not in self.dra_only]

    @property
    def dra_nodes(self) -> list[Mapping[str, Any]]:
        return [n for n in self.gpu_nodes if n["name"] in self.dra.nodes]


def fleet_of(read: ClusterReads, options: FleetOptions) -> Fleet:
    all_nodes = {n["name"]: n for n in read.nodes}
    dra = dra_layout(read.plugin_pods, read.slices, read.dra_note)
    device_plugin_pods = [p for p in read.plugin_pods if not is_dra_plugin_pod(p)]
    gpu_nodes = sorted(
        (n for n in all_nodes.values() if is_gpu_node(n, options) or n["name"] in dra.nodes), key=lambda n: n["name"]
    )
    pods_by_node = _plugin_pods_by_node(device_plugin_pods)
    dra_only = {n["name"] for n in gpu_nodes if _dra_only(n, pods_by_node, dra, options)}
    return Fleet(all_nodes, gpu_nodes, dra, device_plugin_pods, pods_by_node, dra_only)


def daemonset_verdicts(
    daemonsets: Sequence[Mapping[str, Any]], nodes: Sequence[Mapping[str, Any]], served: Callable[[str], bool]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The summary and the findings of each DaemonSet, over the GPU nodes it should serve."""
    unserved = [n for n in nodes if not served(n["name"])]
    summaries, findings = [], []
    for daemonset in sorted(daemonsets, key=namespaced_name):
        own = daemonset_findings(daemonset, nodes, unserved)
        summaries.append(daemonset_summary(daemonset, own))
        findings += own
    return summaries, findings


def node_verdicts(
    fleet: Fleet, daemonsets: Sequence[Mapping[str, Any]], options: FleetOptions
) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """The summary of each GPU node, and the findings of its device plugin and DRA kubelet plugin."""
    summaries, findings = {}, []
    for node in fleet.gpu_nodes:
        name = node["name"]
        pods = fleet.pods_by_node.get(name, [])
        summary = node_summary(node, pods, options)
        sources = (("device_plugin", name not in fleet.dra_only), ("dra", name in fleet.dra.nodes))
        summary["gpu_sources"] = [source for source, present in sources if present]
        summary["dra"] = dra_node_summary(name, fleet.dra)
        summaries[name] = summary
        if name not in fleet.dra_only:
            findings += node_findings(node, pods, daemonsets, fleet.static_seen, options)
        if name in fleet.dra.nodes:
            findings += dra_node_findings(node, fleet.dra) + served_twice_findings(node, fleet.dra, options)
    return summaries, findings


def _mark_nodes(findings: Iterable[Mapping[str, Any]], summaries: Mapping[str, dict[str, Any]]) -> None:
    """Each node's summary names the kinds of its findings, and is unhealthy with an error."""
    for item in findings:
        summary = summaries.get(item["node"] or "")
        if summary is not None:
            summary["problems"].append(item["kind"])
            summary["healthy"] = summary["healthy"] and item["severity"] != ERROR


def _counts(read: ClusterReads, fleet: Fleet, findings: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    return {
        "gpu_nodes": len(fleet.gpu_nodes),
        "daemonsets": len(read.daemonsets),
        "plugin_pods": len(fleet.device_plugin_pods),
        "dra_nodes": len(fleet.dra_nodes),
        "dra_daemonsets": len(read.dra_daemonsets),
        "dra_plugin_pods": len(read.plugin_pods) - len(fleet.device_plugin_pods),
        **{severity: sum(f["severity"] == severity for f in findings) for severity in SEVERITIES},
    }


def evaluate(
    read: ClusterReads,
    options: FleetOptions,
    host_facts: Mapping[str, Any] | None = None,
    require_hardening: bool = False,
) -> dict[str, Any]:
    """Every verdict, from what the check read (projected DaemonSets, compact nodes, projected plugin
    pods of the device plugin and the DRA kubelet plugin, the DRA driver's DaemonSets and the GPU
    ResourceSlices) and the gpu_host_facts results of the GPU hosts."""
    fleet = fleet_of(read, options)
    deployments = deployments_found([*read.daemonsets, *read.dra_daemonsets], fleet.device_plugin_pods)
    findings = cluster_findings(
        fleet.gpu_nodes, read.daemonsets, fleet.device_plugin_pods, deployments, options, fleet.dra
    )
    findings += dra_cluster_findings(fleet.dra)
    findings += [dict(f) for f in read.missing]
    daemonsets, own = daemonset_verdicts(read.daemonsets, fleet.device_plugin_nodes, fleet.serves)
    findings += own
    dra_daemonsets, own = daemonset_verdicts(read.dra_daemonsets, fleet.dra_nodes, fleet.dra_serves)
    findings += own
    nodes, own = node_verdicts(fleet, read.daemonsets, options)
    findings += own
    context = HostContext(fleet.all_nodes, nodes, read.daemonsets, fleet.static_seen, options)
    findings += host_verdicts(host_facts, context, require_hardening)
    _mark_nodes(findings, nodes)
    findings.sort(key=_severity_rank)
    result = {
        "healthy": not any(f["severity"] == ERROR for f in findings),
        "deployments": deployments,
        "daemonsets": daemonsets,
        "dra_daemonsets": dra_daemonsets,
        "nodes": list(nodes.values()),
        "findings": findings,
        "counts": _counts(read, fleet, findings),
    }
    result["report"] = render_report(result)
    return result
