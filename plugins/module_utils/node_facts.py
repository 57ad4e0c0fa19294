# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU facts per node and for the whole fleet, from one node list and one pod list.

Everything here is pure: `project_node` and `project_pod` keep only the fields the facts need,
so the caller can drop each list page as soon as it is read; `summarise` turns the compact
nodes and pods into facts. Device-plugin pods come out of the same pod list, matched by their
labels in memory, so a run costs two paginated lists whatever the size of the cluster.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu_models import (
    DEFAULT_MODEL_LABEL_KEYS,
    capacity_signals,
    detect_model,
    label_gpu_count,
    label_signals,
    needed_label_keys,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.plain import as_list, as_mapping, as_text, string_map
from ansible_collections.kubegpu.scheduling.plugins.module_utils.quantity import gpu_count
from ansible_collections.kubegpu.scheduling.plugins.module_utils.resources import NVIDIA_GPU, gpu_resource_matcher

ACTIVE_POD_FIELD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"
MIG_RESOURCE_PATTERN = "nvidia.com/mig-*"
ACK_SCHEDULE_LABEL = "ack.node.gpu.schedule"
ACK_EXCLUSIVE_MODE = "default"
VISIBLE_DEVICES_ENV = "NVIDIA_VISIBLE_DEVICES"
UNKNOWN_MODEL = "unknown"

DRIVER_VERSION_LABEL = "nvidia.com/cuda.driver-version.full"
DRIVER_VERSION_PART_LABELS = (
    "nvidia.com/cuda.driver.major",
    "nvidia.com/cuda.driver.minor",
    "nvidia.com/cuda.driver.rev",
)
CUDA_VERSION_LABEL = "nvidia.com/cuda.runtime-version.full"
CUDA_VERSION_PART_LABELS = ("nvidia.com/cuda.runtime.major", "nvidia.com/cuda.runtime.minor")
ACK_DRIVER_LABEL = "ack.aliyun.com/nvidia-driver-version"
_VERSION_LABELS = (
    DRIVER_VERSION_LABEL,
    *DRIVER_VERSION_PART_LABELS,
    CUDA_VERSION_LABEL,
    *CUDA_VERSION_PART_LABELS,
    ACK_DRIVER_LABEL,
    ACK_SCHEDULE_LABEL,
)

# NVIDIA's static DaemonSet, its Helm chart, the GPU Operator, ACK (DaemonSet and static
# mirror pods alike), and Google's plugin on GKE and Kubespray.
DEFAULT_DEVICE_PLUGIN_SELECTORS: tuple[str, ...] = (
    "name=nvidia-device-plugin-ds",
    "app.kubernetes.io/name=nvidia-device-plugin",
    "app=nvidia-device-plugin-daemonset",
    "component=nvidia-device-plugin",
    "k8s-app=nvidia-gpu-device-plugin",
)
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

ROLE_WORKLOAD = "workload"
ROLE_DEVICE_PLUGIN = "device_plugin"
ROLE_EXEMPT = "exempt"


class FactsOptionError(ValueError):
    """An option value that cannot be used; the message names the option."""


# --- label selectors, matched in memory -------------------------------------------------

_SELECTOR_TERM = re.compile(
    r"^\s*(?:"
    r"(?P<absent>!)\s*(?P<absent_key>[^\s!=(),]+)"
    r"|(?P<set_key>[^\s!=(),]+)\s+(?P<set_op>in|notin)\s*\((?P<values>[^()]*)\)"
    r"|(?P<cmp_key>[^\s!=(),]+)\s*(?P<cmp_op>==|!=|=)\s*(?P<cmp_value>[^\s!=(),]*)"
    r"|(?P<exists_key>[^\s!=(),]+)"
    r")\s*$"
)


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str  # one of =, !=, in, notin, exists, !exists
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.operator == "exists":
            return present
        if self.operator == "!exists":
            return not present
        if self.operator in ("=", "in"):
            return present and value in self.values
        return not present or value not in self.values  # != and notin


@dataclass(frozen=True)
class LabelSelector:
    text: str
    requirements: tuple[Requirement, ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(requirement.matches(labels) for requirement in self.requirements)


def _split_selector_terms(text: str) -> list[str]:
    terms: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(char)
    terms.append("".join(current))
    return terms


def _parse_requirement(term: str, text: str) -> Requirement:
    match = _SELECTOR_TERM.match(term)
    if not match:
        raise FactsOptionError(f"label selector {text!r}: cannot read {term.strip()!r}")
    if match["absent_key"]:
        return Requirement(match["absent_key"], "!exists")
    if match["set_key"]:
        values = frozenset(v.strip() for v in match["values"].split(",") if v.strip())
        return Requirement(match["set_key"], match["set_op"], values)
    if match["cmp_key"]:
        operator = "=" if match["cmp_op"] == "==" else match["cmp_op"]
        return Requirement(match["cmp_key"], operator, frozenset({match["cmp_value"]}))
    return Requirement(match["exists_key"], "exists")


def parse_label_selector(text: object) -> LabelSelector:
    """Parse a Kubernetes label selector string (=, ==, !=, in, notin, key, !key)."""
    if not isinstance(text, str) or not text.strip():
        raise FactsOptionError(f"label selector {text!r} is empty or not a string")
    return LabelSelector(text, tuple(_parse_requirement(term, text) for term in _split_selector_terms(text)))


# --- options ------------------------------------------------------------------------------


@dataclass(frozen=True)
class FleetOptions:
    resource_names: tuple[str, ...] = (NVIDIA_GPU,)
    model_label_keys: tuple[str, ...] = DEFAULT_MODEL_LABEL_KEYS
    plugin_namespaces: frozenset[str] = frozenset()
    plugin_selectors: tuple[LabelSelector, ...] = tuple(
        parse_label_selector(s) for s in DEFAULT_DEVICE_PLUGIN_SELECTORS
    )
    exempt_selectors: tuple[LabelSelector, ...] = tuple(parse_label_selector(s) for s in DEFAULT_EXEMPT_POD_SELECTORS)
    is_gpu: Callable[[str], bool] = field(default=gpu_resource_matcher(), compare=False)

    def counts(self, resource: str) -> bool:
        """Whether a resource counts as whole GPUs in capacity, allocatable and allocated."""
        return resource in self.resource_names or fnmatchcase(resource, MIG_RESOURCE_PATTERN)

    @property
    def primary_resource(self) -> str:
        return self.resource_names[0] if self.resource_names else NVIDIA_GPU

    @property
    def label_keys(self) -> frozenset[str]:
        return needed_label_keys(self.model_label_keys) | frozenset(_VERSION_LABELS)


def _string_list(value: object, option: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v.strip() for v in value):
        raise FactsOptionError(f"{option} must be a list of non-empty strings, got {value!r}")
    return [v.strip() for v in value]


def options_from_params(
    resource_names: object = None,
    model_label_keys: object = None,
    device_plugin: object = None,
    exempt_pod_selectors: object = None,
) -> FleetOptions:
    """Module parameters as FleetOptions; None means the default. Raises FactsOptionError."""
    names = tuple(_string_list(resource_names, "resource_names")) or (NVIDIA_GPU,)
    keys = tuple(_string_list(model_label_keys, "model_label_keys")) or DEFAULT_MODEL_LABEL_KEYS
    plugin = device_plugin if device_plugin is not None else {}
    if not isinstance(plugin, Mapping):
        raise FactsOptionError(f"device_plugin must be a dictionary, got {plugin!r}")
    namespaces = frozenset(_string_list(plugin.get("namespaces"), "device_plugin.namespaces"))
    selector_texts = plugin.get("label_selectors")
    plugin_selectors = (
        _string_list(selector_texts, "device_plugin.label_selectors")
        if selector_texts is not None
        else list(DEFAULT_DEVICE_PLUGIN_SELECTORS)
    )
    exempt_texts = (
        _string_list(exempt_pod_selectors, "exempt_pod_selectors")
        if exempt_pod_selectors is not None
        else list(DEFAULT_EXEMPT_POD_SELECTORS)
    )
    return FleetOptions(
        resource_names=names,
        model_label_keys=keys,
        plugin_namespaces=namespaces,
        plugin_selectors=tuple(parse_label_selector(s) for s in plugin_selectors),
        exempt_selectors=tuple(parse_label_selector(s) for s in exempt_texts),
        is_gpu=gpu_resource_matcher(names),
    )


DEFAULT_OPTIONS = FleetOptions()


# --- safe access to API objects given as plain dicts -----------------------------------------


def _condition_true(status: Mapping[str, Any], kind: str) -> bool:
    return any(
        as_mapping(c).get("type") == kind and as_mapping(c).get("status") == "True"
        for c in as_list(status.get("conditions"))
    )


def _gpu_quantities(resources: object, is_gpu: Callable[[str], bool]) -> dict[str, int]:
    return {
        name: gpu_count(value)
        for name, value in as_mapping(resources).items()
        if isinstance(name, str) and is_gpu(name) and gpu_count(value) > 0
    }


# --- nodes ---------------------------------------------------------------------------------


def _taint(value: object) -> dict[str, str | None] | None:
    taint = as_mapping(value)
    if not isinstance(taint.get("key"), str):
        return None
    return {"key": taint["key"], "value": taint.get("value"), "effect": taint.get("effect")}


def project_node(node: object, options: FleetOptions = DEFAULT_OPTIONS) -> dict[str, Any] | None:
    """The fields of a Node the facts need, or None for something that is not a named node."""
    metadata = as_mapping(as_mapping(node).get("metadata"))
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        return None
    spec = as_mapping(as_mapping(node).get("spec"))
    status = as_mapping(as_mapping(node).get("status"))
    labels = string_map(metadata.get("labels"))
    return {
        "name": name,
        "labels": {k: v for k, v in labels.items() if k in options.label_keys},
        "capacity": _gpu_quantities(status.get("capacity"), options.is_gpu),
        "allocatable": _gpu_quantities(status.get("allocatable"), options.is_gpu),
        "ready": _condition_true(status, "Ready"),
        "schedulable": not spec.get("unschedulable", False),
        "taints": [t for t in map(_taint, as_list(spec.get("taints"))) if t is not None],
    }


# --- pods ----------------------------------------------------------------------------------


def _containers(spec: Mapping[str, Any], kind: str) -> list[Mapping[str, Any]]:
    return [as_mapping(c) for c in as_list(spec.get(kind))]


def _container_gpus(container: Mapping[str, Any], is_gpu: Callable[[str], bool]) -> dict[str, int]:
    """GPU limits of a container; for extended resources a request alone means the same amount."""
    resources = as_mapping(container.get("resources"))
    limits = _gpu_quantities(resources.get("limits"), is_gpu)
    requests = _gpu_quantities(resources.get("requests"), is_gpu)
    return {**requests, **limits}


def _is_sidecar(container: Mapping[str, Any]) -> bool:
    return container.get("restartPolicy") == "Always"


def pod_gpus(spec: Mapping[str, Any], is_gpu: Callable[[str], bool]) -> dict[str, int]:
    """The GPUs a pod holds per resource, as the scheduler computes a pod's request.

    Regular containers and sidecar init containers run together and add up; ordinary init
    containers run one at a time before them, so only the largest of those counts.
    """
    running: dict[str, int] = defaultdict(int)
    init_peak: dict[str, int] = defaultdict(int)
    for container in _containers(spec, "containers"):
        for name, count in _container_gpus(container, is_gpu).items():
            running[name] += count
    for container in _containers(spec, "initContainers"):
        for name, count in _container_gpus(container, is_gpu).items():
            if _is_sidecar(container):
                running[name] += count
            else:
                init_peak[name] = max(init_peak[name], count)
    return {name: max(running[name], init_peak[name]) for name in sorted(set(running) | set(init_peak))}


def requests_no_gpu(value: str) -> bool:
    """Whether an NVIDIA_VISIBLE_DEVICES value asks for no GPU (the toolkit: void > none > all)."""
    entries = [entry.strip().lower() for entry in value.split(",")]
    return "void" in entries or all(entry in ("", "none") for entry in entries)


def _visible_devices_setting(container: Mapping[str, Any]) -> str | None:
    """How a container sets NVIDIA_VISIBLE_DEVICES in `env` (the last entry wins), or None."""
    setting = None
    for entry in map(as_mapping, as_list(container.get("env"))):
        if entry.get("name") != VISIBLE_DEVICES_ENV:
            continue
        if "valueFrom" in entry:
            setting = f"{VISIBLE_DEVICES_ENV} from a reference"
        else:
            value = entry.get("value")
            value = value if isinstance(value, str) else ""
            setting = None if requests_no_gpu(value) else f"{VISIBLE_DEVICES_ENV}={value}"
    return setting


def visible_devices_findings(spec: Mapping[str, Any]) -> list[str]:
    """Containers that ask the NVIDIA runtime for GPUs through the environment."""
    findings = []
    for kind in ("initContainers", "containers", "ephemeralContainers"):
        for container in _containers(spec, kind):
            setting = _visible_devices_setting(container)
            if setting:
                findings.append(f"container {container.get('name', '?')}: {setting}")
    return findings


def pod_role(namespace: str, labels: Mapping[str, str], options: FleetOptions) -> str:
    in_plugin_namespace = not options.plugin_namespaces or namespace in options.plugin_namespaces
    if in_plugin_namespace and any(s.matches(labels) for s in options.plugin_selectors):
        return ROLE_DEVICE_PLUGIN
    if any(s.matches(labels) for s in options.exempt_selectors):
        return ROLE_EXEMPT
    return ROLE_WORKLOAD


def project_pod(pod: object, options: FleetOptions = DEFAULT_OPTIONS) -> dict[str, Any] | None:
    """The fields of a Pod the facts need, or None for a pod that cannot affect them.

    A pod matters when it is bound to a node, not finished, and either is a device-plugin pod,
    holds GPUs, or asks for GPUs through NVIDIA_VISIBLE_DEVICES without holding any.
    """
    metadata = as_mapping(as_mapping(pod).get("metadata"))
    spec = as_mapping(as_mapping(pod).get("spec"))
    status = as_mapping(as_mapping(pod).get("status"))
    node = spec.get("nodeName")
    if not isinstance(node, str) or not node or status.get("phase") in ("Succeeded", "Failed"):
        return None
    namespace = as_text(metadata.get("namespace"))
    role = pod_role(namespace, string_map(metadata.get("labels")), options)
    gpus = pod_gpus(spec, options.is_gpu)
    bypass = visible_devices_findings(spec) if role == ROLE_WORKLOAD and not gpus else []
    if role != ROLE_DEVICE_PLUGIN and not gpus and not bypass:
        return None
    return {
        "namespace": namespace,
        "name": as_text(metadata.get("name")),
        "node": node,
        "role": role,
        "gpus": gpus,
        "bypass": bypass,
        "ready": _condition_true(status, "Ready"),
    }


def pod_ref(pod: Mapping[str, Any]) -> str:
    return f"{pod['namespace']}/{pod['name']}"


# --- facts ---------------------------------------------------------------------------------


def _joined_version(labels: Mapping[str, str], full_key: str, part_keys: Sequence[str]) -> str | None:
    if labels.get(full_key):
        return labels[full_key]
    parts = [labels.get(key) for key in part_keys]
    return ".".join(p for p in parts if p) if parts[0] else None


def driver_version(labels: Mapping[str, str]) -> str | None:
    return _joined_version(labels, DRIVER_VERSION_LABEL, DRIVER_VERSION_PART_LABELS) or labels.get(ACK_DRIVER_LABEL)


def cuda_version(labels: Mapping[str, str]) -> str | None:
    return _joined_version(labels, CUDA_VERSION_LABEL, CUDA_VERSION_PART_LABELS)


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
    plugin_refs = sorted(pod_ref(p) for p in plugin_pods)
    ready_plugins = sorted(pod_ref(p) for p in plugin_pods if p["ready"])
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
        "gpu_pods": sorted(pod_ref(p) for p in holders),
        "pods_outside_scheduler": sorted(f"{pod_ref(p)} ({', '.join(p['bypass'])})" for p in pods if p["bypass"]),
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
