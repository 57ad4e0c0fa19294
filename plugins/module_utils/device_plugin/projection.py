# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fields of DaemonSets, plugin pods and nodes that the verdicts read."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.device_plugins import deployment_of, is_static_pod
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.models import looks_like_gpu_node
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.nodes import project_node
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.options import FleetOptions
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.placement import placement_of
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import (
    as_list,
    as_mapping,
    as_text,
    condition_true,
    optional_int,
    positive_int,
    string_map,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.pods import FINISHED_POD_PHASES
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.selectors import selector_text


def project_daemonset(daemonset: object) -> dict[str, Any] | None:
    """The fields of a DaemonSet the verdicts need, or None for something that is not one."""
    metadata = as_mapping(as_mapping(daemonset).get("metadata"))
    spec = as_mapping(as_mapping(daemonset).get("spec"))
    status = as_mapping(as_mapping(daemonset).get("status"))
    namespace, name = metadata.get("namespace"), metadata.get("name")
    if not isinstance(namespace, str) or not isinstance(name, str) or not namespace or not name:
        return None
    template = as_mapping(spec.get("template"))
    template_labels = string_map(as_mapping(template.get("metadata")).get("labels"))
    return {
        "namespace": namespace,
        "name": name,
        "deployment": deployment_of(template_labels).key,
        "labels": string_map(metadata.get("labels")),
        "template_labels": template_labels,
        "pod_selector": selector_text(spec.get("selector")),
        "generation": optional_int(metadata.get("generation")),
        "observed_generation": optional_int(status.get("observedGeneration")),
        "desired": positive_int(status.get("desiredNumberScheduled")),
        "current": positive_int(status.get("currentNumberScheduled")),
        "updated": positive_int(status.get("updatedNumberScheduled")),
        "ready": positive_int(status.get("numberReady")),
        "available": positive_int(status.get("numberAvailable")),
        "misscheduled": positive_int(status.get("numberMisscheduled")),
        "placement": placement_of(as_mapping(template.get("spec"))),
    }


def _first_problem_reason(status: Mapping[str, Any]) -> str | None:
    for container in map(
        as_mapping, as_list(status.get("initContainerStatuses")) + as_list(status.get("containerStatuses"))
    ):
        state = as_mapping(container.get("state"))
        for phase in ("waiting", "terminated"):
            reason = as_mapping(state.get(phase)).get("reason")
            if isinstance(reason, str) and reason:
                return reason
    reason = status.get("reason")
    return reason if isinstance(reason, str) and reason else None


def _restarts(status: Mapping[str, Any]) -> int:
    return sum(positive_int(as_mapping(c).get("restartCount")) for c in as_list(status.get("containerStatuses")))


def project_plugin_pod(pod: object) -> dict[str, Any] | None:
    """The fields of a device-plugin pod the verdicts need; None unless it is bound and not finished."""
    metadata = as_mapping(as_mapping(pod).get("metadata"))
    spec = as_mapping(as_mapping(pod).get("spec"))
    status = as_mapping(as_mapping(pod).get("status"))
    node, name = spec.get("nodeName"), metadata.get("name")
    if not isinstance(node, str) or not node or not isinstance(name, str) or not name:
        return None
    if status.get("phase") in FINISHED_POD_PHASES:
        return None
    owners = [as_mapping(o) for o in as_list(metadata.get("ownerReferences"))]
    static = is_static_pod(string_map(metadata.get("annotations")), (as_text(o.get("kind")) for o in owners))
    return {
        "namespace": as_text(metadata.get("namespace")),
        "name": name,
        "node": node,
        "ready": condition_true(status, "Ready"),
        "phase": as_text(status.get("phase")) or "Unknown",
        "reason": _first_problem_reason(status),
        "restarts": _restarts(status),
        "static": static,
        "daemonset": next((as_text(o.get("name")) for o in owners if o.get("kind") == "DaemonSet"), None),
        "deployment": deployment_of(string_map(metadata.get("labels")), static).key,
    }


def gpu_count_of(node: Mapping[str, Any], field: str, options: FleetOptions) -> int:
    return sum(count for resource, count in node[field].items() if options.counts(resource))


def compact_node(node: object, options: FleetOptions, extra_label_keys: Iterable[str] = ()) -> dict[str, Any] | None:
    """node_facts' compact node, keeping also the labels the DaemonSets' placement reads."""
    compact = project_node(node, options)
    if compact is None:
        return None
    wanted = options.label_keys | frozenset(extra_label_keys)
    labels = string_map(as_mapping(as_mapping(node).get("metadata")).get("labels"))
    compact["labels"] = {k: v for k, v in labels.items() if k in wanted}
    return compact


def is_gpu_node(node: Mapping[str, Any], options: FleetOptions) -> bool:
    return looks_like_gpu_node(node["labels"], node["capacity"], options.counts, options.model_label_keys)


@dataclass
class ClusterReads:
    """What the check read, projected: the DaemonSets to check and the findings of the targets that
    matched none, the nodes, the plugin pods (device plugin and DRA kubelet plugin), the DRA driver's
    DaemonSets and the GPU ResourceSlices (None when they could not be read, ``dra_note`` says why)."""

    daemonsets: list[dict[str, Any]]
    missing: list[dict[str, Any]]
    nodes: list[dict[str, Any]]
    plugin_pods: list[dict[str, Any]]
    dra_daemonsets: list[dict[str, Any]] = field(default_factory=list)
    slices: list[dict[str, Any]] | None = None
    dra_note: str | None = None
