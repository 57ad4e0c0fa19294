# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Quarantine of whole GPU nodes, pure: from one list each of nodes, pods and PodDisruptionBudgets
(and the DRA objects the fleet facts read), what each node asked for needs, which of its pods to
evict and which budgets are in their way, and what the breaker holds back.

A node is quarantined when it is cordoned, carries the collection's `NoSchedule` taint and the
record that says who, why, when, and whether the collection cordoned and tainted it: a node someone
had cordoned already is recorded `cordoned: false`, so a release never uncordons it.

Only the pods that hold GPUs on the node are evicted (device-plugin resources, sharing resources
included, and DRA claims on GPU drivers), never DaemonSet pods (they come back on their own),
mirror pods (the API cannot evict them) or finished pods, as `kubectl drain` leaves them. The
taint is `NoSchedule`, not `NoExecute`: a `NoExecute` taint evicts past PodDisruptionBudgets,
the Eviction API honours them.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra import GPU_DRIVERS, model_from_devices
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra_fleet import DraFleet, dra_counts
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.models import UNKNOWN_MODEL, detect_model
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.options import DEFAULT_OPTIONS, FleetOptions
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import gpu_quantities
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.patches import JsonPatch, member_ops
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import (
    as_list,
    as_mapping,
    object_parts,
    string_map,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.breaker import (
    MODEL_DIMENSION,
    Candidate,
    Held,
    PoolKey,
    apply_breaker,
    count_pools,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.diff import diff_entry
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.evictions import (
    Budget,
    CompactPod,
    PodEviction,
    eviction_entry,
    pod_eviction,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.ownership import (
    QUARANTINE_TAINT,
    RECORD_ANNOTATION,
    Record,
    is_quarantine_taint,
    read_record,
    record_annotation,
)

OUTCOME_QUARANTINE = "quarantine"
OUTCOME_UNCHANGED = "unchanged"
OUTCOME_HELD = "held"
OUTCOME_MISSING = "missing"


@dataclass(frozen=True)
class QuarantineOptions:
    reason: str
    quarantined_by: str
    # When the record says the node was quarantined (the caller's clock, so the plan stays pure).
    now: str
    max_share: float
    # The dimensions a node's GPUs are pooled by for the breaker: "model", or node label keys.
    pool_by: tuple[str, ...] = (MODEL_DIMENSION,)
    fleet: FleetOptions = DEFAULT_OPTIONS


@dataclass(frozen=True)
class CompactNode:
    """What quarantine reads of a Node."""

    name: str
    unschedulable: bool
    # The taints as read, whole: the patch tests them before it appends the quarantine taint.
    taints: tuple[Mapping[str, Any], ...]
    has_annotations: bool
    record_text: str | None
    labels: Mapping[str, str]
    # Whole GPUs from the device plugin (the resources that count as GPUs in the fleet facts).
    gpus: int

    @property
    def tainted(self) -> bool:
        return any(is_quarantine_taint(t) for t in self.taints)


@dataclass(frozen=True)
class LeftPod:
    """A GPU pod on the node that is not evicted, and why."""

    ref: str
    gpus: Mapping[str, int]
    reason: str


@dataclass(frozen=True)
class NodeState:
    unschedulable: bool
    taints: tuple[str, ...]
    record: str | None


@dataclass(frozen=True)
class NodePlan:
    name: str
    outcome: str
    gpus: int = 0
    before: NodeState | None = None
    after: NodeState | None = None
    record: Record | None = None
    cordon: bool = False
    taint: bool = False
    patch: JsonPatch | None = None
    evict: tuple[PodEviction, ...] = ()
    left: tuple[LeftPod, ...] = ()
    held: Held | None = None
    pools: tuple[PoolKey, ...] = ()


@dataclass(frozen=True)
class QuarantineReads:
    """What the plan is made from: every node of the cluster (the breaker counts each pool's GPUs),
    the pods on the nodes asked, every budget, the DRA side of the fleet, and per (namespace, pod) the
    GPU devices of DRA drivers its claims hold."""

    nodes: Sequence[CompactNode]
    pods: Sequence[CompactPod]
    budgets: Sequence[Budget]
    dra: DraFleet | None = None
    holders: Mapping[tuple[str, str], Mapping[str, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class QuarantinePlan:
    nodes: tuple[NodePlan, ...]
    # GPUs out of service per pool after this run, and the most the breaker lets be.
    used: Mapping[PoolKey, int] = field(default_factory=dict)
    limits: Mapping[PoolKey, int] = field(default_factory=dict)


# --- options -------------------------------------------------------------------------------------


def check_nodes(value: object) -> list[str]:
    """The node names asked for, in order, without repeats; an empty list is refused."""
    names = value if isinstance(value, list) else None
    if not names or not all(isinstance(n, str) and n.strip() for n in names):
        raise OptionError("nodes must name at least one node (a list of node names)")
    return list(dict.fromkeys(n.strip() for n in names))


# --- projections ---------------------------------------------------------------------------------


def project_node(item: object, options: QuarantineOptions) -> CompactNode | None:
    parts = object_parts(item)
    if parts is None:
        return None
    name, metadata, spec, status = parts
    annotations = string_map(metadata.get("annotations"))
    labels = string_map(metadata.get("labels"))
    wanted = set(options.fleet.model_label_keys) | set(options.pool_by)
    capacity = gpu_quantities(status.get("capacity"), options.fleet.is_gpu)
    return CompactNode(
        name=name,
        unschedulable=spec.get("unschedulable") is True,
        taints=tuple(as_mapping(t) for t in as_list(spec.get("taints"))),
        has_annotations=bool(as_mapping(metadata.get("annotations"))),
        record_text=annotations.get(RECORD_ANNOTATION),
        labels={k: v for k, v in labels.items() if k in wanted},
        gpus=sum(count for resource, count in capacity.items() if options.fleet.counts(resource)),
    )


def dra_holders(claims: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], dict[str, int]]:
    """Per (namespace, pod), the GPU devices of DRA drivers its claims hold, by driver, from projected
    claims (a result with admin access holds no device)."""
    holders: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
    for claim in claims:
        drivers: dict[str, int] = defaultdict(int)
        for result in claim["results"]:
            if result["driver"] in GPU_DRIVERS and not result["admin"]:
                drivers[result["driver"]] += 1
        for pod in filter(None, claim["reserved_for"]):
            held = holders[(claim["namespace"], pod)]
            for driver, count in drivers.items():
                held[driver] = held.get(driver, 0) + count
    return {key: value for key, value in holders.items() if value}


# --- the plan ------------------------------------------------------------------------------------


def taint_text(taint: Mapping[str, Any]) -> str:
    value = taint.get("value")
    return f"{taint.get('key')}{'=' + str(value) if value else ''}:{taint.get('effect')}"


def node_state(node: CompactNode) -> NodeState:
    return NodeState(node.unschedulable, tuple(taint_text(t) for t in node.taints), node.record_text)


def node_model(node: CompactNode, dra: DraFleet | None, options: QuarantineOptions) -> str:
    model = detect_model(node.labels, options.fleet.model_label_keys).model
    if model is None and dra is not None and dra.devices.get(node.name):
        model = model_from_devices(dra.devices[node.name]).model
    return model or UNKNOWN_MODEL


def node_pools(node: CompactNode, dra: DraFleet | None, options: QuarantineOptions) -> tuple[PoolKey, ...]:
    """The pools the node's GPUs count in: its model's, and its value of each label named (a node
    without the label counts in the pool of the empty value)."""
    return tuple(
        (MODEL_DIMENSION, node_model(node, dra, options)) if key == MODEL_DIMENSION else (key, node.labels.get(key, ""))
        for key in options.pool_by
    )


def node_gpus(node: CompactNode, dra: DraFleet | None) -> int:
    if dra is None or not dra.devices.get(node.name):
        return node.gpus
    return node.gpus + dra_counts(dra.devices[node.name], dra.holders)["capacity"]


def out_of_service(node: CompactNode) -> bool:
    """Its GPUs take no new work: quarantined already, or cordoned."""
    return node.tainted or node.unschedulable


def next_record(node: CompactNode, cordon: bool, taint: bool, options: QuarantineOptions) -> Record:
    """The record after this run: the one on the node, kept (its who, why and when), saying also
    what this run cordons or taints; a new one where there is none that reads."""
    current = read_record(node.record_text)
    if current is None:
        return Record(options.quarantined_by, options.reason, options.now, cordoned=cordon, tainted=taint)
    return replace(current, cordoned=current.cordoned or cordon, tainted=current.tainted or taint)


def node_patch(node: CompactNode, cordon: bool, taint: bool, record: str) -> JsonPatch | None:
    """One JSON patch that cordons, taints and records, guarded on the fields it changes as read
    (a heartbeat's status update never makes it fail; another client's cordon, taint or record does,
    and the node is read again); None when nothing changes."""
    guards: JsonPatch = []
    writes: JsonPatch = []
    if cordon:
        guards.append({"op": "test", "path": "/spec/unschedulable", "value": node.unschedulable or None})
        writes.append({"op": "add", "path": "/spec/unschedulable", "value": True})
    if taint:
        taints = [dict(t) for t in node.taints]
        guards.append({"op": "test", "path": "/spec/taints", "value": taints or None})
        if taints:
            writes.append({"op": "add", "path": "/spec/taints/-", "value": dict(QUARANTINE_TAINT)})
        else:
            writes.append({"op": "add", "path": "/spec/taints", "value": [dict(QUARANTINE_TAINT)]})
    if record != node.record_text:
        present = node.has_annotations or node.record_text is not None
        guard, write = member_ops(present, "annotations", RECORD_ANNOTATION, node.record_text, record)
        guards += guard
        writes += write
    return guards + writes if writes else None


def split_gpu_pods(
    pods: Iterable[CompactPod], holders: Mapping[tuple[str, str], Mapping[str, int]], budgets: Sequence[Budget]
) -> tuple[dict[str, list[PodEviction]], dict[str, list[LeftPod]]]:
    """Per node, the GPU pods to evict and those left there with the reason; pods without GPUs are neither."""
    by_namespace: dict[str, list[Budget]] = defaultdict(list)
    for budget in budgets:
        by_namespace[budget.namespace].append(budget)
    evict: dict[str, list[PodEviction]] = defaultdict(list)
    left: dict[str, list[LeftPod]] = defaultdict(list)
    for pod in pods:
        gpus = dict(pod.gpus) or dict(holders.get((pod.namespace, pod.name), {}))
        if not gpus:
            continue
        reason = pod.left_because
        if reason:
            left[pod.node].append(LeftPod(pod.ref, gpus, reason))
        else:
            evict[pod.node].append(pod_eviction(replace(pod, gpus=gpus), by_namespace[pod.namespace]))
    return evict, left


def node_change(node: CompactNode, options: QuarantineOptions) -> tuple[bool, bool, Record, JsonPatch | None]:
    cordon, taint = not node.unschedulable, not node.tainted
    record = next_record(node, cordon, taint, options)
    return cordon, taint, record, node_patch(node, cordon, taint, record_text(node, record))


def record_text(node: CompactNode, record: Record) -> str:
    """The annotation after this run: the node's own text while it says the same."""
    same = node.record_text is not None and read_record(node.record_text) == record
    return node.record_text if same and node.record_text is not None else record_annotation(record)


def after_state(node: CompactNode, patch: JsonPatch | None, record: Record) -> NodeState:
    before = node_state(node)
    if patch is None:
        return before
    taints = before.taints if node.tainted else (*before.taints, taint_text(QUARANTINE_TAINT))
    return NodeState(True, taints, record_text(node, record))


def plan_quarantine(asked: Sequence[str], reads: QuarantineReads, options: QuarantineOptions) -> QuarantinePlan:
    """The plan for the nodes asked (in their order, which is the breaker's), from what was read."""
    by_name = {n.name: n for n in reads.nodes}
    members = []
    pools_of: dict[str, tuple[PoolKey, ...]] = {}
    gpus_of: dict[str, int] = {}
    for node in by_name.values():
        pools_of[node.name], gpus_of[node.name] = node_pools(node, reads.dra, options), node_gpus(node, reads.dra)
        members.append((pools_of[node.name], gpus_of[node.name], out_of_service(node)))
    pools = count_pools(members)
    # A node cordoned already takes no more GPUs out of service: the breaker never holds it back.
    candidates = [
        Candidate(name, 0 if by_name[name].unschedulable else gpus_of[name], pools_of[name])
        for name in asked
        if name in by_name and not by_name[name].tainted
    ]
    verdict = apply_breaker(pools, candidates, options.max_share)
    held = {h.name: h for h in verdict.held}
    evictions, left = split_gpu_pods(reads.pods, reads.holders, reads.budgets)
    plans = []
    for name in asked:
        found = by_name.get(name)
        if found is None:
            plans.append(NodePlan(name, OUTCOME_MISSING))
            continue
        state = node_state(found)
        base = NodePlan(
            name,
            OUTCOME_HELD,
            gpus=gpus_of[name],
            before=state,
            after=state,
            held=held.get(name),
            pools=pools_of[name],
            left=tuple(sorted(left.get(name, []), key=lambda p: p.ref)),
        )
        if name in held:
            plans.append(base)
            continue
        evict = tuple(sorted(evictions.get(name, []), key=lambda p: p.ref))
        plans.append(replan_node(found, replace(base, evict=evict), options))
    return QuarantinePlan(tuple(plans), verdict.used, verdict.limits)


def replan_node(node: CompactNode, plan: NodePlan, options: QuarantineOptions) -> NodePlan:
    """The node's plan again, on the node as read again after its patch no longer applied; the
    breaker's verdict and the pods stay as planned."""
    cordon, taint, record, patch = node_change(node, options)
    return replace(
        plan,
        outcome=OUTCOME_QUARANTINE if patch is not None else OUTCOME_UNCHANGED,
        before=node_state(node),
        after=after_state(node, patch, record),
        record=record,
        cordon=cordon,
        taint=taint,
        patch=patch,
    )


# --- how the plan is shown -----------------------------------------------------------------------


def state_text(state: NodeState | None) -> str:
    if state is None:
        return ""
    lines = [f"spec.unschedulable: {'true' if state.unschedulable else 'false'}"]
    lines += [f"spec.taints: {taint}" for taint in state.taints]
    if state.record is not None:
        lines.append(f"metadata.annotations.{RECORD_ANNOTATION}: {state.record}")
    return "".join(line + "\n" for line in lines)


def node_diff(plan: NodePlan) -> dict[str, Any]:
    return diff_entry(f"node/{plan.name}", state_text(plan.before), state_text(plan.after))


def node_entry(plan: NodePlan) -> dict[str, Any]:
    """The node's plan as the module returns it."""
    entry: dict[str, Any] = {"node": plan.name, "outcome": plan.outcome, "gpus": plan.gpus}
    entry["pools"] = [f"{dimension}={value}" for dimension, value in plan.pools]
    entry["cordon"] = plan.patch is not None and plan.cordon
    entry["taint"] = plan.patch is not None and plan.taint
    entry["record"] = json.loads(record_annotation(plan.record)) if plan.record is not None else None
    entry["evict"] = [eviction_entry(p) for p in plan.evict]
    entry["left"] = [{"pod": p.ref, "gpus": dict(p.gpus), "reason": p.reason} for p in plan.left]
    entry["held_back"] = plan.held.reason if plan.held is not None else None
    return entry
