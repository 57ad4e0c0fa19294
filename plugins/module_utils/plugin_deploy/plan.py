# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure decisions of the device-plugin deployment: which nodes the plugin targets and whether
another device plugin already serves them, the findings of objects not ours, the capacity expected,
and whether a rollout is done. What an apply would change is write/owned.py's."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import Hit
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.device_plugins import (
    DEPLOYMENTS_BY_KEY,
    is_dra_deployment,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.models import label_gpu_count
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import NVIDIA_GPU
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.placement import placement_mismatches
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import (
    as_list,
    as_mapping,
    condition_true,
    string_map,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.quantity import gpu_count
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.owned import MARK

MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
POD_TEMPLATE_GENERATION = "pod-template-generation"  # the label the DaemonSet controller puts on its pods


def not_owned_hits(keys: Iterable[str]) -> list[Hit]:
    """A hit per object of the deployment's names that the collection did not make (write/owned.py
    refuses to write them)."""
    return [Hit("deploy_not_owned", {"subject": key, "label": MARK}, {"subject": key}) for key in keys]


def targeted_nodes(nodes: Iterable[Mapping[str, Any]], placement: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The nodes (name, labels, taints) the DaemonSet with this placement runs a pod on."""
    return sorted((n for n in nodes if not placement_mismatches(n, placement)), key=lambda n: n["name"])


def served_hits(
    targeted: Iterable[str], plugin_pods: Iterable[Mapping[str, Any]], namespace: str, daemonset: str
) -> list[Hit]:
    """One hit per deployment of a device plugin, other than this DaemonSet, that runs on targeted nodes.

    ``plugin_pods`` are the device-plugin check's projected plugin pods (node, namespace, name,
    daemonset, deployment)."""
    wanted = set(targeted)
    by_deployment: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for pod in plugin_pods:
        ours = pod.get("namespace") == namespace and pod.get("daemonset") == daemonset
        if pod.get("node") in wanted and not ours and not is_dra_deployment(str(pod.get("deployment"))):
            by_deployment[str(pod.get("deployment"))].append(pod)
    hits = []
    for key, pods in sorted(by_deployment.items()):
        nodes = sorted({str(p["node"]) for p in pods})
        deployment = DEPLOYMENTS_BY_KEY[key].title if key in DEPLOYMENTS_BY_KEY else key
        names = ", ".join(sorted(f"{p['namespace']}/{p['name']}" for p in pods)[:5])
        fields = {"count": len(nodes), "deployment": deployment, "pods": names, "nodes": ", ".join(nodes[:10])}
        hits.append(Hit("deploy_already_served", fields, {"subject": deployment, "node": nodes[0]}))
    return hits


def advertised_resources(summary: Mapping[str, Any] | None) -> dict[str, int]:
    """The resources the plugin advertises with a config (the plugin_config check's summary of it),
    each with its replicas per GPU; no config: whole GPUs."""
    shared = as_list(as_mapping(summary).get("shared"))
    resources = {str(s["advertised"]): int(s.get("replicas") or 1) for s in map(as_mapping, shared) if s}
    return resources or {NVIDIA_GPU: 1}


def node_capacity(node: Mapping[str, Any]) -> dict[str, int]:
    return {k: gpu_count(v) for k, v in as_mapping(node.get("capacity")).items()}


def capacity_back(node: Mapping[str, Any], summary: Mapping[str, Any] | None) -> bool:
    """Whether the node advertises what the plugin serves: an advertised resource above zero (with the
    mixed MIG strategy, a MIG resource will do)."""
    capacity = node_capacity(node)
    if any(capacity.get(name, 0) > 0 for name in advertised_resources(summary)):
        return True
    mixed = as_mapping(summary).get("mig_strategy") == "mixed"
    return mixed and any(k.startswith(MIG_RESOURCE_PREFIX) and v > 0 for k, v in capacity.items())


def expected_capacity(node: Mapping[str, Any], summary: Mapping[str, Any] | None) -> dict[str, Any]:
    """Per targeted node: the GPUs its labels count, and per advertised resource the capacity expected
    (GPUs x replicas) and found."""
    gpus = label_gpu_count(node["labels"])
    capacity = node_capacity(node)
    resources = {
        name: {"expected": None if gpus is None else gpus * replicas, "capacity": capacity.get(name, 0)}
        for name, replicas in advertised_resources(summary).items()
    }
    matches = gpus is not None and all(r["expected"] == r["capacity"] for r in resources.values())
    return {"node": node["name"], "gpus": gpus, "resources": resources, "as_expected": matches}


def pod_on_template(pod: Mapping[str, Any], generation: object) -> bool:
    labels = string_map(as_mapping(pod.get("metadata")).get("labels"))
    return labels.get(POD_TEMPLATE_GENERATION) == str(generation)


def rollout_waiting(
    daemonset: Mapping[str, Any] | None,
    pods: Iterable[Mapping[str, Any]],
    targeted: Iterable[Mapping[str, Any]],
    summary: Mapping[str, Any] | None,
) -> list[str]:
    """What a rollout still waits for, one line per node (empty: done): on every targeted node one
    Ready pod of the DaemonSet's current template, and the node's GPU capacity back."""
    if daemonset is None:
        return ["the DaemonSet is gone"]
    metadata, status = as_mapping(daemonset.get("metadata")), as_mapping(daemonset.get("status"))
    generation = metadata.get("generation")
    observed = status.get("observedGeneration")
    if generation is not None and (not isinstance(observed, int) or observed < generation):
        return [f"the DaemonSet controller has not seen generation {generation} yet"]
    by_node: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for pod in pods:
        pod_metadata = as_mapping(pod.get("metadata"))
        if "deletionTimestamp" not in pod_metadata:
            by_node[str(as_mapping(pod.get("spec")).get("nodeName"))].append(pod)
    waiting = []
    for node in targeted:
        name = node["name"]
        current = [p for p in by_node.get(name, []) if pod_on_template(p, generation)]
        if not current:
            waiting.append(f"{name}: no pod of the current template")
        elif not any(condition_true(as_mapping(p.get("status")), "Ready") for p in current):
            waiting.append(f"{name}: pod {as_mapping(current[0].get('metadata')).get('name')} not Ready")
        elif len(by_node[name]) > len(current):
            waiting.append(f"{name}: a pod of an earlier template still runs")
        elif not capacity_back(node, summary):
            waiting.append(f"{name}: no {' or '.join(advertised_resources(summary))} capacity")
    return waiting
