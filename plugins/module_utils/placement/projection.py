# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fields of nodes and pods placement needs, kept small so that list pages can be dropped as
they are read: a node's labels, taints, cordon and allocatable; a bound pod only as what it takes
from its node (added into that node's usage at once); a pod no node took yet with what decides
where it may go."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.placement import node_taints, placement_of
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import (
    as_list,
    as_mapping,
    as_text,
    object_parts,
    optional_int,
    string_map,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.pods import FINISHED_POD_PHASES
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.requests import (
    PODS,
    node_allocatable,
    pod_requests,
)

DEFAULT_SCHEDULER = "default-scheduler"


def project_node(item: object, is_gpu: Callable[[str], bool]) -> dict[str, Any] | None:
    """A node as the scheduler's filters see it, or None for something that is not a named node."""
    parts = object_parts(item)
    if parts is None:
        return None
    name, metadata, spec, status = parts
    return {
        "name": name,
        "labels": string_map(metadata.get("labels")),
        "taints": node_taints(spec),
        "unschedulable": spec.get("unschedulable") is True,
        "allocatable": node_allocatable(status, is_gpu),
        "capacity": {
            k: v for k, v in node_allocatable({"allocatable": status.get("capacity")}, is_gpu).items() if is_gpu(k)
        },
    }


def add_usage(usage: dict[str, dict[str, int]], node: str, requests: Mapping[str, int]) -> None:
    """Count one bound pod against its node: its requests and one pod slot."""
    taken = usage.get(node)
    if taken is None:
        taken = usage[sys.intern(node)] = {}
    taken[PODS] = taken.get(PODS, 0) + 1
    for name, value in requests.items():
        taken[name] = taken.get(name, 0) + value


def dra_served_resources(status: Mapping[str, Any]) -> list[str]:
    """Extended resources the scheduler served from a DRA claim (KEP-5004)."""
    mappings = as_list(as_mapping(status.get("extendedResourceClaimStatus")).get("requestMappings"))
    return [n for n in (as_mapping(m).get("resourceName") for m in mappings) if isinstance(n, str)]


def claim_refs(spec: Mapping[str, Any], status: Mapping[str, Any]) -> tuple[list[str], bool]:
    """The ResourceClaims a pod uses (named, or made from its templates), and whether a template's
    claim is not made yet."""
    names = []
    templated = False
    made = {
        as_text(as_mapping(s).get("name")): as_text(as_mapping(s).get("resourceClaimName"))
        for s in as_list(status.get("resourceClaimStatuses"))
    }
    for claim in map(as_mapping, as_list(spec.get("resourceClaims"))):
        named = as_text(claim.get("resourceClaimName")) or made.get(as_text(claim.get("name")), "")
        if named:
            names.append(named)
        elif claim.get("resourceClaimTemplateName"):
            templated = True
    extended = as_text(as_mapping(status.get("extendedResourceClaimStatus")).get("resourceClaimName"))
    return [*names, *([extended] if extended else [])], templated


def not_modelled(spec: Mapping[str, Any]) -> list[str]:
    """Filters of the default profile that can rule nodes out and that the view does not evaluate."""
    found = []
    containers = as_list(spec.get("containers")) + as_list(spec.get("initContainers"))
    if any(as_mapping(p).get("hostPort") for c in containers for p in as_list(as_mapping(c).get("ports"))):
        found.append("host ports (NodePorts)")
    if any(
        "persistentVolumeClaim" in as_mapping(v) or "ephemeral" in as_mapping(v) for v in as_list(spec.get("volumes"))
    ):
        found.append("persistent volumes (VolumeBinding)")
    if any(
        as_mapping(c).get("whenUnsatisfiable") == "DoNotSchedule"
        for c in as_list(spec.get("topologySpreadConstraints"))
    ):
        found.append("topology spread constraints (PodTopologySpread)")
    affinity = as_mapping(spec.get("affinity"))
    for kind in ("podAffinity", "podAntiAffinity"):
        if as_list(as_mapping(affinity.get(kind)).get("requiredDuringSchedulingIgnoredDuringExecution")):
            found.append(f"required {kind} (InterPodAffinity)")
    terms = as_list(
        as_mapping(as_mapping(affinity.get("nodeAffinity")).get("requiredDuringSchedulingIgnoredDuringExecution")).get(
            "nodeSelectorTerms"
        )
    )
    if any(as_list(as_mapping(t).get("matchFields")) for t in terms):
        found.append("node affinity matchFields")
    return found


def scheduled_message(status: Mapping[str, Any]) -> str:
    for condition in map(as_mapping, as_list(status.get("conditions"))):
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return as_text(condition.get("message"))
    return ""


def pod_shape(spec: Mapping[str, Any], status: Mapping[str, Any], is_gpu: Callable[[str], bool]) -> dict[str, Any]:
    """What decides where a pod may go: its requests, selectors, affinity, tolerations and claims."""
    claims, templated = claim_refs(spec, status)
    return {
        "requests": pod_requests(spec, is_gpu),
        **placement_of(spec),
        "scheduler": as_text(spec.get("schedulerName")) or DEFAULT_SCHEDULER,
        "priority": optional_int(spec.get("priority")) or 0,
        "claims": claims,
        "claims_not_made": templated,
        "not_modelled": not_modelled(spec),
        "gated": bool(as_list(spec.get("schedulingGates"))),
    }


def wants_gpus(shape: Mapping[str, Any], is_gpu: Callable[[str], bool]) -> bool:
    return bool(shape["claims"] or shape["claims_not_made"] or any(is_gpu(r) for r in shape["requests"]))


def project_pod(item: object, is_gpu: Callable[[str], bool], usage: dict[str, dict[str, int]]) -> dict[str, Any] | None:
    """A bound, unfinished pod is added to its node's usage (None returned); an unbound one that wants
    GPUs comes back with its shape; anything else is None."""
    pod = as_mapping(item)
    spec = as_mapping(pod.get("spec"))
    status = as_mapping(pod.get("status"))
    if status.get("phase") in FINISHED_POD_PHASES:
        return None
    node = spec.get("nodeName")
    if isinstance(node, str) and node:
        requests = pod_requests(spec, is_gpu)
        for served in dra_served_resources(status):
            requests.pop(served, None)  # counted through its claim
        add_usage(usage, node, requests)
        return None
    shape = pod_shape(spec, status, is_gpu)
    if not wants_gpus(shape, is_gpu):
        return None
    metadata = as_mapping(pod.get("metadata"))
    return {
        "namespace": as_text(metadata.get("namespace")),
        "name": as_text(metadata.get("name")),
        **shape,
        "message": scheduled_message(status),
    }
