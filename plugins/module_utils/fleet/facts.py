# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU facts per node and for the whole fleet, from one node list and one pod list.

Everything here is pure: ``project_node`` and ``project_pod`` keep only the fields the facts
need, so the caller can drop each list page as soon as it is read; ``summarise`` turns the
compact nodes and pods into facts. Device-plugin pods come out of the same pod list, matched by
their labels in memory, so a run costs two paginated lists whatever the size of the cluster.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.projection import ROLE_DEVICE_PLUGIN
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
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.options import DEFAULT_OPTIONS, FleetOptions
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import namespaced_name

PROBLEM_NO_CAPACITY = "no_gpu_capacity"
PROBLEM_UNHEALTHY = "allocatable_below_capacity"
PROBLEM_NO_PLUGIN = "no_device_plugin_pod"
PROBLEM_PLUGIN_NOT_READY = "device_plugin_not_ready"
PROBLEM_NOT_EXCLUSIVE = "not_default_scheduling_mode"
PROBLEM_OVERALLOCATED = "allocated_above_allocatable"
PROBLEM_OUTSIDE_SCHEDULER = "gpu_use_outside_scheduler"
PROBLEM_TEXT = {
    PROBLEM_NO_CAPACITY: "GPU labels but no {resource} capacity",
    PROBLEM_UNHEALTHY: "allocatable below capacity",
    PROBLEM_NO_PLUGIN: "no device-plugin pod",
    PROBLEM_PLUGIN_NOT_READY: "plugin pod not Ready",
    PROBLEM_NOT_EXCLUSIVE: "node not in default (exclusive) GPU scheduling mode",
    PROBLEM_OVERALLOCATED: "allocated above allocatable",
    PROBLEM_OUTSIDE_SCHEDULER: "pods on this node use GPUs outside the scheduler",
}


def _problem(kind: str, reason: str, options: FleetOptions) -> dict[str, str]:
    return {"kind": kind, "problem": PROBLEM_TEXT[kind].format(resource=options.primary_resource), "reason": reason}


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


def node_problems(facts: Mapping[str, Any], options: FleetOptions) -> list[dict[str, str]]:
    """The problems of one GPU node, each with the reason it was found."""
    problems = []
    label_evidence = facts["gpu_signals"]["labels"]
    if facts["capacity"] == 0 and label_evidence:
        problems.append(_problem(PROBLEM_NO_CAPACITY, f"labels {', '.join(label_evidence)}; capacity 0", options))
    if facts["allocatable"] < facts["capacity"]:
        problems.append(
            _problem(
                PROBLEM_UNHEALTHY,
                f"capacity {facts['capacity']}, allocatable {facts['allocatable']}: "
                f"{facts['unhealthy']} GPU(s) marked unhealthy by the device plugin",
                options,
            )
        )
    if not facts["device_plugin_pods"]:
        problems.append(
            _problem(PROBLEM_NO_PLUGIN, "no pod matching the device-plugin selectors is bound here", options)
        )
    elif not facts["device_plugin_ready"]:
        problems.append(
            _problem(PROBLEM_PLUGIN_NOT_READY, f"not Ready: {', '.join(facts['device_plugin_pods'])}", options)
        )
    mode = facts["ack_scheduling_mode"]
    if mode is not None and mode != ACK_EXCLUSIVE_MODE:
        problems.append(_problem(PROBLEM_NOT_EXCLUSIVE, f"{ACK_SCHEDULE_LABEL}={mode}", options))
    if facts["allocated"] > facts["allocatable"]:
        problems.append(
            _problem(
                PROBLEM_OVERALLOCATED, f"allocated {facts['allocated']}, allocatable {facts['allocatable']}", options
            )
        )
    if facts["pods_outside_scheduler"]:
        problems.append(_problem(PROBLEM_OUTSIDE_SCHEDULER, "; ".join(facts["pods_outside_scheduler"]), options))
    return problems


def node_facts(
    node: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    plugin_pods: Sequence[Mapping[str, Any]],
    options: FleetOptions = DEFAULT_OPTIONS,
) -> dict[str, Any]:
    """Facts for one GPU node, given the compact pods bound to it."""
    labels = node["labels"]
    model = detect_model(labels, options.model_label_keys)
    holders = [p for p in pods if p["gpus"]]
    allocated_by_resource = _allocated_by_resource(holders, options)
    resources = _resource_table(node, allocated_by_resource, options)
    capacity = sum(r["capacity"] for r in resources.values())
    allocatable = sum(r["allocatable"] for r in resources.values())
    allocated = sum(r["allocated"] for r in resources.values())
    plugin_refs = sorted(namespaced_name(p) for p in plugin_pods)
    ready_plugins = sorted(namespaced_name(p) for p in plugin_pods if p["ready"])
    facts: dict[str, Any] = {
        "name": node["name"],
        "model": model.model,
        "model_source": model.source,
        "model_label_value": model.label_value,
        "mig_profile": model.mig_profile,
        "label_gpu_count": label_gpu_count(labels),
        "capacity": capacity,
        "allocatable": allocatable,
        "unhealthy": max(capacity - allocatable, 0),
        "allocated": allocated,
        "free": max(allocatable - allocated, 0),
        "resources": resources,
        "ready": node["ready"],
        "schedulable": node["schedulable"],
        "taints": node["taints"],
        "driver_version": driver_version(labels),
        "cuda_version": cuda_version(labels),
        "ack_scheduling_mode": labels.get(ACK_SCHEDULE_LABEL),
        "device_plugin_pod": next(iter(ready_plugins or plugin_refs), None),
        "device_plugin_ready": bool(ready_plugins),
        "device_plugin_pods": plugin_refs,
        "gpu_pods": sorted(namespaced_name(p) for p in holders),
        "pods_outside_scheduler": sorted(
            f"{namespaced_name(p)} ({', '.join(p['bypass'])})" for p in pods if p["bypass"]
        ),
        "gpu_signals": {
            "labels": label_signals(labels, options.model_label_keys),
            "capacity": capacity_signals(node["capacity"], options.counts),
        },
    }
    facts["problems"] = node_problems(facts, options)
    return facts


def _is_gpu_node(node: Mapping[str, Any], options: FleetOptions) -> bool:
    return bool(
        label_signals(node["labels"], options.model_label_keys) or capacity_signals(node["capacity"], options.counts)
    )


def _model_totals(nodes: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    models: dict[str, dict[str, Any]] = {}
    for facts in nodes:
        key = facts["model"] or UNKNOWN_MODEL
        entry = models.setdefault(
            key,
            {
                "label_value": facts["model_label_value"],
                "nodes": 0,
                "capacity": 0,
                "allocatable": 0,
                "unhealthy": 0,
                "allocated": 0,
                "free": 0,
            },
        )
        entry["nodes"] += 1
        for counter in ("capacity", "allocatable", "unhealthy", "allocated", "free"):
            entry[counter] += facts[counter]
    return dict(sorted(models.items()))


def _fleet_totals(nodes: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    counters = ("capacity", "allocatable", "unhealthy", "allocated", "free")
    totals = {"nodes": len(nodes)}
    totals.update({counter: sum(n[counter] for n in nodes) for counter in counters})
    return totals


def summarise(
    nodes: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    plugin_pods: Iterable[Mapping[str, Any]],
    options: FleetOptions = DEFAULT_OPTIONS,
) -> dict[str, Any]:
    """Fleet facts from compact nodes and pods (as `project_node` and `project_pod` return them).

    `pods` are the pods that hold or ask for GPUs; `plugin_pods` the device-plugin pods.
    Only nodes that look like GPU nodes are reported.
    """
    pods_by_node: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    plugins_by_node: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for pod in pods:
        pods_by_node[pod["node"]].append(pod)
    for pod in plugin_pods:
        plugins_by_node[pod["node"]].append(pod)
    gpu_nodes = sorted((n for n in nodes if _is_gpu_node(n, options)), key=lambda n: n["name"])
    facts = [node_facts(n, pods_by_node[n["name"]], plugins_by_node[n["name"]], options) for n in gpu_nodes]
    return {
        "nodes": facts,
        "models": _model_totals(facts),
        "totals": _fleet_totals(facts),
        "nodes_without_capacity": [f["name"] for f in facts if f["capacity"] == 0],
        "problems": [{"node": f["name"], **problem} for f in facts for problem in f["problems"]],
    }


def split_pods(
    projected: Iterable[Mapping[str, Any] | None],
) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """Projected pods as (pods that hold or ask for GPUs, device-plugin pods); None entries dropped."""
    pods: list[Mapping[str, Any]] = []
    plugins: list[Mapping[str, Any]] = []
    for pod in projected:
        if pod is None:
            continue
        if pod["role"] == ROLE_DEVICE_PLUGIN:
            plugins.append(pod)
        else:
            pods.append(pod)
    return pods, plugins
