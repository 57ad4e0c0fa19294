# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU facts per node and for the whole fleet, from one list each of nodes, pods, DeviceClasses,
ResourceSlices and ResourceClaims.

Everything here is pure: ``project_node``, ``project_pod`` and the DRA projections keep only the
fields the facts need, so the caller can drop each list page as soon as it is read;
``summarise`` turns them into facts. Device-plugin and DRA kubelet-plugin pods come out of the
same pod list, matched by their labels in memory, so a run costs five paginated lists whatever
the size of the cluster. A node's GPUs come from two sources, added up: the device plugin
(extended resources in the node's status) and DRA drivers (devices in ResourceSlices).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.catalogue import KINDS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.kinds import device_plugin as plugin_kinds
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.kinds import fleet as fleet_kinds
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.kinds.device_plugin import FLEET_CASE
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import (
    CHECK_DEVICE_PLUGIN,
    CHECK_FLEET,
    Hit,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.results import fleet_problem, where_of
from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.dra import (
    SOURCE_DEVICE_PLUGIN,
    SOURCE_DRA,
    is_dra_node,
    node_dra_facts,
    unallocatable_pods,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.health import (
    health_counts,
    node_health,
    with_problems,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.metrics_health import (
    by_node,
    down_targets,
    node_metrics_health,
    not_collected,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.projection import (
    ROLE_DEVICE_PLUGIN,
    ROLE_DRA_PLUGIN,
    ROLE_UNALLOCATABLE,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.prometheus_reads import QUERY_NAMES, MetricsRead
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra import (
    DUAL_STACK_MAPPED,
    DevicePluginSide,
    DraObjects,
    model_from_devices,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra_fleet import DraFleet, dra_counts, dra_fleet
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.health import expected_gpus
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.models import (
    ACK_EXCLUSIVE_MODE,
    ACK_SCHEDULE_LABEL,
    UNKNOWN_MODEL,
    capacity_signals,
    cuda_version,
    detect_model,
    driver_version,
    label_gpu_count,
    label_signals,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.nodes import location_facts
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.options import DEFAULT_OPTIONS, FleetOptions
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import namespaced_name

PROBLEM_NO_CAPACITY = plugin_kinds.NO_CAPACITY
PROBLEM_UNHEALTHY = plugin_kinds.UNHEALTHY_GPUS
PROBLEM_NO_PLUGIN = plugin_kinds.NO_PLUGIN_POD
PROBLEM_PLUGIN_NOT_READY = plugin_kinds.PLUGIN_NOT_READY
PROBLEM_NOT_EXCLUSIVE = fleet_kinds.NOT_EXCLUSIVE
PROBLEM_OVERALLOCATED = fleet_kinds.OVERALLOCATED
PROBLEM_OUTSIDE_SCHEDULER = fleet_kinds.OUTSIDE_SCHEDULER
PROBLEM_DRA_PLUGIN_NOT_READY = fleet_kinds.DRA_PLUGIN_NOT_READY
PROBLEM_DRA_NO_SLICES = plugin_kinds.DRA_NO_SLICES
PROBLEM_SERVED_TWICE = fleet_kinds.SERVED_TWICE
PROBLEM_OVER_COMMITTED = fleet_kinds.OVER_COMMITTED
PROBLEM_DRA_DEVICE_GONE = fleet_kinds.DRA_DEVICE_GONE
PROBLEM_DRA_DEVICE_TAINTED = fleet_kinds.DRA_DEVICE_TAINTED
PROBLEM_CLAIMS_UNALLOCATABLE = fleet_kinds.CLAIMS_UNALLOCATABLE
# The problem text of each kind (its title in the registry; {resource} is the primary GPU resource).
PROBLEM_TEXT = {kind.id: kind.title for kind in KINDS.of_check(CHECK_FLEET)}


def _problem(kind: str, options: FleetOptions, case: str = "", **fields: Any) -> dict[str, Any]:
    """The fleet problem of a hit of ``kind``: its text, the reason it was found and the remedy."""
    if case == "" and CHECK_DEVICE_PLUGIN in KINDS[kind].checks:
        case = FLEET_CASE
    hit = Hit(kind, {"resource": options.primary_resource, **fields}, case=case)
    return fleet_problem(KINDS.finding(hit))


def _on(node: str | None, problem: Mapping[str, Any], **where: Any) -> dict[str, Any]:
    """A problem of the fleet's list: the node it is on first (None for the cluster), and in its ``where``."""
    return {"node": node, **problem, "where": where_of({**problem["where"], "node": node, **where})}


def _resource_table(node: Mapping[str, Any], allocated: Mapping[str, int], options: FleetOptions) -> dict[str, dict]:
    names = sorted(r for r in set(node["capacity"]) | set(node["allocatable"]) | set(allocated) if options.counts(r))
    return {
        name: {
            "capacity": node["capacity"].get(name, 0),
            "allocatable": node["allocatable"].get(name, 0),
            "allocated": allocated.get(name, 0),
        }
        for name in names
    }


def _allocated_by_resource(pods: Iterable[Mapping[str, Any]], options: FleetOptions) -> dict[str, int]:
    allocated: dict[str, int] = defaultdict(int)
    for pod in pods:
        for name, count in pod["gpus"].items():
            if options.counts(name):
                allocated[name] += count
    return dict(allocated)


def _device_plugin_problems(facts: Mapping[str, Any], options: FleetOptions) -> list[dict[str, str]]:
    problems = []
    own = facts["by_source"][SOURCE_DEVICE_PLUGIN]
    on_dra_node = facts["dra"]["is_dra_node"]
    label_evidence = facts["gpu_signals"]["labels"]
    if own["capacity"] == 0 and label_evidence and not on_dra_node:
        problems.append(_problem(PROBLEM_NO_CAPACITY, options, labels=", ".join(label_evidence)))
    if own["allocatable"] < own["capacity"]:
        unhealthy = own["capacity"] - own["allocatable"]
        problems.append(_problem(PROBLEM_UNHEALTHY, options, unhealthy=unhealthy, **own))
    if not facts["device_plugin_pods"]:
        if not on_dra_node:
            problems.append(_problem(PROBLEM_NO_PLUGIN, options))
    elif not facts["device_plugin_ready"]:
        problems.append(_problem(PROBLEM_PLUGIN_NOT_READY, options, pods=", ".join(facts["device_plugin_pods"])))
    mode = facts["ack_scheduling_mode"]
    if mode is not None and mode != ACK_EXCLUSIVE_MODE:
        problems.append(_problem(PROBLEM_NOT_EXCLUSIVE, options, mode=mode))
    if own["allocated"] > own["allocatable"]:
        problems.append(_problem(PROBLEM_OVERALLOCATED, options, **own))
    if facts["pods_outside_scheduler"]:
        problems.append(_problem(PROBLEM_OUTSIDE_SCHEDULER, options, pods="; ".join(facts["pods_outside_scheduler"])))
    return problems


def _dra_problems(facts: Mapping[str, Any], options: FleetOptions) -> list[dict[str, str]]:
    dra = facts["dra"]
    problems = []
    plugins, devices = dra["kubelet_plugin_pods"], dra["device_count"]
    if plugins and not dra["kubelet_plugin_ready"]:
        problems.append(_problem(PROBLEM_DRA_PLUGIN_NOT_READY, options, pods=", ".join(plugins)))
    elif devices and not plugins:
        problems.append(_problem(PROBLEM_DRA_PLUGIN_NOT_READY, options, "no_pod", devices=devices))
    if plugins and dra["readable"] and not dra["slices"]:
        problems.append(_problem(PROBLEM_DRA_NO_SLICES, options, plugins=", ".join(plugins)))
    for both in dra["served_by_both"]:
        problems.append(_served_twice(both, options))
    if dra["tainted_devices"]:
        problems.append(_problem(PROBLEM_DRA_DEVICE_TAINTED, options, devices="; ".join(dra["tainted_devices"])))
    if dra["missing_devices"]:
        problems.append(_problem(PROBLEM_DRA_DEVICE_GONE, options, devices="; ".join(dra["missing_devices"])))
    return problems


def _served_twice(both: Mapping[str, Any], options: FleetOptions) -> dict[str, Any]:
    """The risk of GPUs served both ways on a node, or the over-commit when pods hold them both ways."""
    fields = {k: v for k, v in both.items() if k not in ("plugin_pods", "claim_pods")}
    if both["over_committed"]:
        pods = {"plugin_pods": ", ".join(both["plugin_pods"]), "claim_pods": ", ".join(both["claim_pods"])}
        return _problem(PROBLEM_OVER_COMMITTED, options, **fields, **pods)
    case = DUAL_STACK_MAPPED if both["device_class"] else ""
    return _problem(PROBLEM_SERVED_TWICE, options, case, **fields)


def node_problems(facts: Mapping[str, Any], options: FleetOptions) -> list[dict[str, str]]:
    """The problems of one GPU node, each with the reason it was found."""
    return _device_plugin_problems(facts, options) + _dra_problems(facts, options)


def _source_counts(capacity: int, allocatable: int, allocated: int) -> dict[str, int]:
    return {
        "capacity": capacity,
        "allocatable": allocatable,
        "allocated": allocated,
        "free": max(allocatable - allocated, 0),
    }


def _sum_sources(sources: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    return {key: sum(s[key] for s in sources.values()) for key in ("capacity", "allocatable", "allocated", "free")}


def _plugin_pod_facts(plugin_pods: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The node's device-plugin pod (a Ready one first), whether one is Ready, and all of them."""
    refs = sorted(namespaced_name(p) for p in plugin_pods)
    ready = sorted(namespaced_name(p) for p in plugin_pods if p["ready"])
    return {
        "device_plugin_pod": next(iter(ready or refs), None),
        "device_plugin_ready": bool(ready),
        "device_plugin_pods": refs,
    }


def _gpu_sources(device_plugin: bool, dra_facts: Mapping[str, Any]) -> list[str]:
    sources = ((SOURCE_DEVICE_PLUGIN, device_plugin), (SOURCE_DRA, dra_facts["is_dra_node"]))
    return [source for source, present in sources if present]


def _gpu_signals(node: Mapping[str, Any], options: FleetOptions, dra_devices: int) -> dict[str, Any]:
    return {
        "labels": label_signals(node["labels"], options.model_label_keys),
        "capacity": capacity_signals(node["capacity"], options.counts),
        "dra_devices": dra_devices,
    }


def _plugin_counts(resources: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    """The device plugin's counts: its extended resources added up."""
    return _source_counts(
        *(sum(r[key] for r in resources.values()) for key in ("capacity", "allocatable", "allocated"))
    )


def _model_facts(model: Any) -> dict[str, Any]:
    return {
        "model": model.model,
        "model_source": model.source,
        "model_label_value": model.label_value,
        "mig_profile": model.mig_profile,
    }


def node_facts(
    node: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    plugin_pods: Sequence[Mapping[str, Any]],
    options: FleetOptions = DEFAULT_OPTIONS,
    dra_plugin_pods: Sequence[Mapping[str, Any]] = (),
    dra: DraFleet | None = None,
) -> dict[str, Any]:
    """Facts for one GPU node, given the compact pods bound to it and the fleet's DRA side."""
    dra = dra or dra_fleet(DraObjects())
    labels = node["labels"]
    model = detect_model(labels, options.model_label_keys)
    devices = dra.devices.get(node["name"], [])
    if model.model is None and devices:
        model = model_from_devices(devices)
    holders = [p for p in pods if p["gpus"]]
    allocated_by_resource = _allocated_by_resource(holders, options)
    resources = _resource_table(node, allocated_by_resource, options)
    by_source = {SOURCE_DEVICE_PLUGIN: _plugin_counts(resources), SOURCE_DRA: dra_counts(devices, dra.holders)}
    totals = _sum_sources(by_source)
    plugin_side = DevicePluginSide(
        node["allocatable"], options.counts, {namespaced_name(p): p["gpus"] for p in holders}
    )
    dra_facts = node_dra_facts(node["name"], plugin_side, dra_plugin_pods, dra, options.all_dra_devices)
    dra_facts["is_dra_node"] = is_dra_node(node["name"], dra_plugin_pods, dra)
    facts: dict[str, Any] = {
        "name": node["name"],
        **_model_facts(model),
        "label_gpu_count": label_gpu_count(labels),
        "capacity": totals["capacity"],
        "allocatable": totals["allocatable"],
        "unhealthy": max(totals["capacity"] - totals["allocatable"], 0),
        "allocated": totals["allocated"],
        "free": totals["free"],
        "resources": resources,
        "gpu_sources": _gpu_sources(by_source[SOURCE_DEVICE_PLUGIN]["capacity"] > 0 or bool(plugin_pods), dra_facts),
        "by_source": by_source,
        "ready": node["ready"],
        "schedulable": node["schedulable"],
        "taints": node["taints"],
        **location_facts(node),
        "driver_version": driver_version(labels),
        "cuda_version": cuda_version(labels),
        "ack_scheduling_mode": labels.get(ACK_SCHEDULE_LABEL),
        **_plugin_pod_facts(plugin_pods),
        "gpu_pods": sorted({namespaced_name(p) for p in holders} | set(dra_facts["pods"])),
        "pods_outside_scheduler": sorted(
            f"{namespaced_name(p)} ({', '.join(p['bypass'])})" for p in pods if p["bypass"]
        ),
        "gpu_signals": _gpu_signals(node, options, len(devices)),
        "dra": dra_facts,
    }
    facts["problems"] = node_problems(facts, options)
    facts["health"] = node_health(node, facts, options.health)
    return facts


def _is_gpu_node(node: Mapping[str, Any], options: FleetOptions, dra_nodes: set[str]) -> bool:
    return bool(
        node["name"] in dra_nodes
        or label_signals(node["labels"], options.model_label_keys)
        or capacity_signals(node["capacity"], options.counts)
    )


_COUNTERS = ("capacity", "allocatable", "unhealthy", "allocated", "free")
_SOURCE_COUNTERS = ("capacity", "allocatable", "allocated", "free")


def _add_sources(into: dict[str, dict[str, int]], facts: Mapping[str, Any]) -> None:
    for source, counts in facts["by_source"].items():
        entry = into.setdefault(source, dict.fromkeys(_SOURCE_COUNTERS, 0))
        for counter in _SOURCE_COUNTERS:
            entry[counter] += counts[counter]


def _model_totals(nodes: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    models: dict[str, dict[str, Any]] = {}
    for facts in nodes:
        key = facts["model"] or UNKNOWN_MODEL
        entry = models.setdefault(
            key, {"label_value": facts["model_label_value"], "nodes": 0, **dict.fromkeys(_COUNTERS, 0), "by_source": {}}
        )
        entry["nodes"] += 1
        for counter in _COUNTERS:
            entry[counter] += facts[counter]
        _add_sources(entry["by_source"], facts)
    return dict(sorted(models.items()))


def _fleet_totals(nodes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    totals: dict[str, Any] = {"nodes": len(nodes)}
    totals.update({counter: sum(n[counter] for n in nodes) for counter in _COUNTERS})
    totals["by_source"] = {}
    for facts in nodes:
        _add_sources(totals["by_source"], facts)
    return totals


def _cluster_problems(
    pending: Sequence[Mapping[str, Any]], dra: DraFleet, node_names: set[str], options: FleetOptions
) -> list[dict[str, Any]]:
    """Problems that belong to no reported node: GPU pods no node can allocate, allocations off every node."""
    problems: list[dict[str, Any]] = []
    for pod in unallocatable_pods(pending, dra):
        problem = _problem(PROBLEM_CLAIMS_UNALLOCATABLE, options, pod=namespaced_name(pod), message=pod["message"])
        problems.append(_on(None, problem, pod=namespaced_name(pod)))
    for node, missing in sorted(dra.missing.items(), key=lambda pair: pair[0] or ""):
        if node is None or node not in node_names:
            problems.append(_on(node, _problem(PROBLEM_DRA_DEVICE_GONE, options, devices="; ".join(missing))))
    return problems


def _dra_summary(dra: DraObjects) -> dict[str, Any]:
    return {
        "readable": dra.available,
        "device_classes": sorted(c["name"] for c in dra.classes),
        "extended_resources": {c["name"]: c["extended_resource"] for c in dra.classes if c["extended_resource"]},
        "resource_slices": len(dra.slices),
        "resource_claims": len(dra.claims),
        "allocated_claims": sum(1 for c in dra.claims if c["allocated"]),
    }


def _by_role(pods: Iterable[Mapping[str, Any]], role: str) -> dict[str, list[Mapping[str, Any]]]:
    grouped: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for pod in pods:
        if pod["role"] == role:
            grouped[pod["node"]].append(pod)
    return grouped


def _expected_in_metrics(node: Mapping[str, Any], facts: Mapping[str, Any], options: FleetOptions):
    """The GPUs the exporter should report for the node: as the health view expects them, else its
    registered GPUs. On a MIG node only health.expected_gpus: its count label and its capacity count
    MIG devices, and the exporter counts GPUs."""
    if facts["mig_profile"]:
        return expected_gpus(facts, {}, options.health)
    expected = expected_gpus(facts, node["labels"], options.health)
    if expected is None and facts["capacity"]:
        return facts["capacity"], "GPUs registered"
    return expected


def _judge_by_metrics(
    gpu_nodes: Sequence[Mapping[str, Any]], facts: list[dict[str, Any]], read: MetricsRead, options: FleetOptions
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Each GPU node's health judged also by the DCGM exporter's metrics (in place), what the read
    said of the fleet (``metrics`` of the facts), and the fleet problems it raises."""
    views = by_node(read)
    for node, node_facts_ in zip(gpu_nodes, facts, strict=True):
        expected = _expected_in_metrics(node, node_facts_, options)
        problems, said = node_metrics_health(node["name"], expected, views.get(node["name"]), read)
        node_facts_["health"] = with_problems(node_facts_["health"], problems, said)
    missing = not_collected(read)
    problems = [
        _on(
            None,
            _problem(
                fleet_kinds.METRICS_NOT_COLLECTED, options, metric=s.metric, problem_kind=s.kind, csv_line=s.csv_line
            ),
        )
        for s in missing
    ]
    summary = {
        "source": "prometheus",
        "url": read.source.url,
        "at": read.at,
        "window": read.source.window,
        "queries": len(QUERY_NAMES),
        "requests": read.requests,
        "error": read.error,
        "not_collected": [s.metric for s in missing],
        "targets_down": down_targets(read, {f["name"] for f in facts}),
        "unknown": sorted(f["name"] for f in facts if f["health"]["metrics"]["unknown"]),
    }
    return summary, problems


def _metric_notes(summary: Mapping[str, Any] | None) -> list[str]:
    """What limits the health view's reading of the metrics, as notes of the facts."""
    if summary is None:
        return []
    notes = [f"GPU health not judged by the DCGM exporter's metrics: {summary['error']}"] if summary["error"] else []
    if summary["targets_down"]:
        notes.append(f"DCGM exporter scrape targets down, naming no GPU node: {', '.join(summary['targets_down'])}")
    return notes


def summarise(
    nodes: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    plugin_pods: Iterable[Mapping[str, Any]],
    options: FleetOptions = DEFAULT_OPTIONS,
    dra: DraObjects | None = None,
    metrics: MetricsRead | None = None,
) -> dict[str, Any]:
    """Fleet facts from compact nodes and pods (as `project_node` and `project_pod` return them)
    and the projected DRA objects; with ``metrics``, the health view judges by the DCGM exporter's
    metrics too.

    `pods` are the pods that hold or ask for GPUs, and the GPU pods no node can allocate;
    `plugin_pods` the device-plugin and DRA kubelet-plugin pods. Only nodes that look like GPU
    nodes, or have GPUs through DRA, are reported.
    """
    dra = dra or DraObjects()
    fleet = dra_fleet(dra)
    pods = list(pods)
    plugin_pods = list(plugin_pods)
    pods_by_node: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for pod in pods:
        if pod["role"] != ROLE_UNALLOCATABLE:
            pods_by_node[pod["node"]].append(pod)
    plugins_by_node = _by_role(plugin_pods, ROLE_DEVICE_PLUGIN)
    dra_plugins_by_node = _by_role(plugin_pods, ROLE_DRA_PLUGIN)
    dra_nodes = set(fleet.devices) | set(dra_plugins_by_node)
    gpu_nodes = sorted((n for n in nodes if _is_gpu_node(n, options, dra_nodes)), key=lambda n: n["name"])
    facts = [
        node_facts(
            n, pods_by_node[n["name"]], plugins_by_node[n["name"]], options, dra_plugins_by_node[n["name"]], fleet
        )
        for n in gpu_nodes
    ]
    summary, metric_problems = _judge_by_metrics(gpu_nodes, facts, metrics, options) if metrics else (None, [])
    pending = [p for p in pods if p["role"] == ROLE_UNALLOCATABLE]
    node_names = {f["name"] for f in facts}
    result = {
        "nodes": facts,
        "models": _model_totals(facts),
        "totals": _fleet_totals(facts),
        "nodes_without_capacity": [f["name"] for f in facts if f["capacity"] == 0],
        "problems": [_on(f["name"], problem) for f in facts for problem in f["problems"]]
        + _cluster_problems(pending, fleet, node_names, options)
        + metric_problems,
        "health": health_counts(facts),
        "dra": _dra_summary(dra),
        "notes": [*fleet.notes, *_metric_notes(summary)],
    }
    if summary is not None:
        result["metrics"] = summary
    return result


def split_pods(
    projected: Iterable[Mapping[str, Any] | None],
) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """Projected pods as (pods that hold or ask for GPUs, device-plugin and DRA kubelet-plugin pods);
    None entries dropped."""
    pods: list[Mapping[str, Any]] = []
    plugins: list[Mapping[str, Any]] = []
    for pod in projected:
        if pod is None:
            continue
        if pod["role"] in (ROLE_DEVICE_PLUGIN, ROLE_DRA_PLUGIN):
            plugins.append(pod)
        else:
            pods.append(pod)
    return pods, plugins
