# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The default scheduler's filters for a GPU pod, node by node, in the order of its default profile,
each failure in the words of its FailedScheduling event; and how many pods of a shape a node takes.

NodeUnschedulable, TaintToleration, NodeAffinity (nodeSelector and required terms),
NodeResourcesFit (pod slots, CPU, memory, extended resources) and DynamicResources for whole devices.
A node reports the first filter it fails, as the scheduler does. Source: kubernetes/kubernetes
``pkg/scheduler/framework/plugins/{nodeunschedulable,tainttoleration,nodeaffinity,noderesources,
dynamicresources}`` and ``apis/config/v1/default_plugins.go`` at v1.37.2.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.placement import expression_met, tolerates
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.dra import (
    DraFree,
    class_free,
    mapping_class,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.requests import BASIC, CPU, MEMORY, PODS

UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "value": "", "effect": "NoSchedule"}
# What each filter says of a node it rules out (FailedScheduling, PodScheduled's message).
SAYS_UNSCHEDULABLE = "node(s) were unschedulable"
SAYS_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
SAYS_TOO_MANY_PODS = "Too many pods"
SAYS_CLAIMS = "cannot allocate all claims"
# Since 1.35 the scheduler no longer names the taint in the sum (the view's sentence does).
SAYS_TAINT = "node(s) had untolerated taint(s)"
# The filter kinds, in the order the scheduler runs them.
UNSCHEDULABLE = "unschedulable"
TAINT = "taint"
SELECTOR = "selector"
RESOURCES = "resources"
CLAIMS = "claims"
STATIC_KINDS = (UNSCHEDULABLE, TAINT, SELECTOR)


def taint_words(taint: Mapping[str, Any]) -> str:
    """A taint as the scheduler wrote it in its sum before 1.35: `{key: value}`."""
    return f"{{{taint['key']}: {taint.get('value') or ''}}}"


def says_insufficient(resource: str) -> str:
    return SAYS_TOO_MANY_PODS if resource == PODS else f"Insufficient {resource}"


def untolerated_taint(taints: Sequence[Mapping[str, Any]], tolerations: Sequence[Mapping[str, str]]) -> Mapping | None:
    for taint in taints:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def selector_met(labels: Mapping[str, str], shape: Mapping[str, Any]) -> bool:
    if any(labels.get(key) != value for key, value in shape["node_selector"].items()):
        return False
    terms = shape["affinity_terms"]
    return not terms or any(term and all(expression_met(e, labels) for e in term) for term in terms)


def static_failure(node: Mapping[str, Any], shape: Mapping[str, Any]) -> tuple[str, str] | None:
    """The first of the label and taint filters the node fails for the shape, as (kind, words)."""
    tolerations = shape["tolerations"]
    if node["unschedulable"] and not any(tolerates(t, UNSCHEDULABLE_TAINT) for t in tolerations):
        return UNSCHEDULABLE, SAYS_UNSCHEDULABLE
    taint = untolerated_taint(node["taints"], tolerations)
    if taint is not None:
        return TAINT, SAYS_TAINT
    if not selector_met(node["labels"], shape):
        return SELECTOR, SAYS_AFFINITY
    return None


def _fits(free: int, wanted: int) -> int:
    return free // wanted if wanted > 0 else 1 << 30


def dra_resources(shape: Mapping[str, Any], dra: DraFree) -> dict[str, Mapping[str, Any]]:
    """The shape's extended resources a DeviceClass maps (KEP-5004), with that class: on a node that does
    not advertise one of them, DRA serves it."""
    found = {}
    for resource in shape["requests"]:
        device_class = None if resource in BASIC else mapping_class(dra, resource)
        if device_class is not None:
            found[resource] = device_class
    return found


def resource_capacity(
    node: Mapping[str, Any], shape: Mapping[str, Any], dra: DraFree, via_dra: Mapping[str, Mapping[str, Any]]
) -> tuple[int, list[str], bool]:
    """How many pods of the shape the node's free resources take; the resources short for one pod
    (in the scheduler's words); whether DRA devices are short (its claims cannot be allocated).
    `via_dra` is `dra_resources(shape, dra)`, worked out once per shape."""
    free = node["free"]
    count = max(free[PODS], 0)
    short = [] if count >= 1 else [SAYS_TOO_MANY_PODS]
    dra_counts = []
    for resource, wanted in shape["requests"].items():
        if resource in via_dra and resource not in node["allocatable"]:
            dra_counts.append(_fits(class_free(via_dra[resource], dra.free.get(node["name"], ())), wanted))
            continue
        fits = free.get(resource, 0) // wanted
        count = min(count, fits)
        if fits < 1:
            short.append(says_insufficient(resource))
    if shape.get("claim_requests"):
        dra_counts += claim_counts(node, shape, dra, dra.free.get(node["name"], ()))
    if dra_counts:
        return min(count, *dra_counts), short, min(dra_counts) < 1
    return count, short, False


def claim_counts(
    node: Mapping[str, Any], shape: Mapping[str, Any], dra: DraFree, devices: Sequence[Mapping[str, Any]]
) -> list[int]:
    """Per DeviceClass the shape's claims ask for, how many times the node's free devices cover it.
    A claim allocated already is pinned to its node."""
    wanted: dict[str, int] = {}
    for request in shape.get("claim_requests", ()):
        if request.get("node") and request["node"] != node["name"]:
            return [0]
        if request.get("node"):
            continue
        wanted[request["class"]] = wanted.get(request["class"], 0) + request["count"]
    counts = []
    for class_name, count in wanted.items():
        device_class = dra.classes.get(class_name)
        counts.append(_fits(class_free(device_class, devices), count) if device_class else 0)
    return counts


def node_verdict(
    node: Mapping[str, Any],
    shape: Mapping[str, Any],
    dra: DraFree,
    failure: tuple[str, str] | None,
    via_dra: Mapping[str, Mapping[str, Any]],
) -> tuple[str | None, list[str], int]:
    """(kind of the first filter failed or None, its words, how many pods of the shape fit), given the
    node's `static_failure` for the shape and the shape's `dra_resources`."""
    if failure is not None:
        return failure[0], [failure[1]], 0
    count, short, claims_short = resource_capacity(node, shape, dra, via_dra)
    if short:
        return RESOURCES, short, 0
    if claims_short:
        return CLAIMS, [SAYS_CLAIMS], 0
    return None, [], count


def free_resources(allocatable: Mapping[str, int], used: Mapping[str, int]) -> dict[str, int]:
    """What is left of a node for new pods; a node that publishes no CPU or memory has none."""
    free = {name: value - used.get(name, 0) for name, value in allocatable.items()}
    for name in (CPU, MEMORY, PODS):
        free.setdefault(name, 0)
    return free
