# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Apply a node quarantine plan through the functions it is handed: one patch per node that
changes, through the guarded node patches of write/node_patches.py (read again and decided again
when another client changed what it tests), then the evictions of the GPU pods of the nodes
quarantined (write/evictions.py); what the run did, as the module returns it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.catalogue import KINDS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.kinds import quarantine as kinds
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import Hit
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.results import plugin_finding
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.patches import MAX_CONFLICT_ATTEMPTS, JsonPatch
from ansible_collections.kubegpu.scheduling.plugins.module_utils.node_quarantine.plan import (
    OUTCOME_HELD,
    OUTCOME_MISSING,
    OUTCOME_QUARANTINE,
    OUTCOME_UNCHANGED,
    CompactNode,
    NodePlan,
    PodEviction,
    QuarantinePlan,
    node_diff,
    node_entry,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.breaker import describe_pool
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.evictions import (
    EvictionResult,
    eviction_findings,
    eviction_lists,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.node_patches import (
    PatchCalls,
    Patched,
    PatchResult,
    patch_nodes,
)

NODE_DONE = "done"
NODE_FAILED = "failed"
NODE_GONE = "gone"
NODE_NOT_ATTEMPTED = "not_attempted"

_STATUS = {
    Patched.DONE: NODE_DONE,
    Patched.GONE: NODE_GONE,
    Patched.FAILED: NODE_FAILED,
    Patched.KEPT_CHANGING: NODE_FAILED,
    Patched.NOT_ATTEMPTED: NODE_NOT_ATTEMPTED,
}


@dataclass(frozen=True)
class NodeResult:
    plan: NodePlan
    status: str = NODE_DONE
    error: str = ""


def _result(patched: PatchResult[NodePlan]) -> NodeResult:
    """The loop's outcome in quarantine's words."""
    error = patched.error
    if patched.outcome is Patched.GONE:
        error = "the node was deleted"
    elif patched.outcome is Patched.KEPT_CHANGING:
        error = (
            "the node's cordon, taints or quarantine record kept changing while it was being quarantined "
            f"({MAX_CONFLICT_ATTEMPTS} attempts)"
        )
    return NodeResult(patched.plan, _STATUS[patched.outcome], error)


def apply_node_patches(
    plans: Sequence[NodePlan],
    send: Callable[[str, JsonPatch], object],
    reread: Callable[[str], CompactNode | None],
    replan: Callable[[CompactNode, NodePlan], NodePlan],
    *,
    parallelism: int = 16,
    errors: tuple[type[BaseException], ...] = (Exception,),
) -> list[NodeResult]:
    """Send each plan's patch, `parallelism` at a time; plans without one pass through. A failure that is
    not about one node (the API server is down, or forbids the write) stops the sending."""
    calls: PatchCalls[NodePlan, CompactNode] = PatchCalls(send, reread, replan, errors)
    return [_result(patched) for patched in patch_nodes(plans, calls, parallelism)]


def pods_to_evict(results: Sequence[NodeResult]) -> list[PodEviction]:
    """The GPU pods of the nodes that are quarantined now (patched, or already so)."""
    return [
        pod
        for result in results
        if result.status == NODE_DONE and result.plan.outcome in (OUTCOME_QUARANTINE, OUTCOME_UNCHANGED)
        for pod in result.plan.evict
    ]


# --- what the run reports ------------------------------------------------------------------------


def _finding(kind: str, where: tuple[str | None, str | None], **fields: Any) -> dict[str, Any]:
    """The finding of a hit of `kind` at `where` (the node, and the pod or pool it concerns)."""
    return plugin_finding(KINDS.finding(Hit(kind, fields, {"node": where[0], "subject": where[1]})))


def _gpus_text(gpus: dict[str, int]) -> str:
    return ", ".join(f"{count} {resource}" for resource, count in sorted(gpus.items()))


def plan_findings(plan: QuarantinePlan) -> list[dict[str, Any]]:
    """What the plan itself reports: nodes held back or missing, GPU pods left on the nodes."""
    found = []
    for node in plan.nodes:
        if node.outcome == OUTCOME_MISSING:
            found.append(_finding(kinds.NODE_NOT_FOUND, (node.name, None), node=node.name))
        if node.held is not None:
            found.append(
                _finding(kinds.HELD_BY_BREAKER, (node.name, describe_pool(node.held.pool)), reason=node.held.reason)
            )
        for pod in node.left:
            found.append(
                _finding(
                    kinds.POD_LEFT,
                    (node.name, pod.ref),
                    pod=pod.ref,
                    gpus=_gpus_text(dict(pod.gpus)),
                    reason=pod.reason,
                )
            )
    return found


def run_findings(
    nodes: Sequence[NodeResult], evictions: Sequence[EvictionResult], timeout: float
) -> list[dict[str, Any]]:
    """What the writes report: node patches that failed, pods not evicted, pods deleted past their budget."""
    found = [
        _finding(kinds.NODE_PATCH_FAILED, (node.plan.name, None), error=node.error)
        for node in nodes
        if node.status == NODE_FAILED
    ]
    return found + eviction_findings(evictions, timeout)


def summarize(
    plan: QuarantinePlan,
    nodes: Sequence[NodeResult],
    evictions: Sequence[EvictionResult] | None,
    timeout: float,
) -> dict[str, Any]:
    """The module's result (without `changed`, `writes` and `diff`): the plan per node, what was done,
    the findings. `evictions` is None when the run evicts nothing (check mode, or evict: false)."""
    done = [r.plan for r in nodes if r.status == NODE_DONE]
    summary: dict[str, Any] = {
        "nodes": [node_entry(r.plan) for r in nodes],
        "quarantined": [p.name for p in done if p.outcome == OUTCOME_QUARANTINE],
        "unchanged": [p.name for p in done if p.outcome == OUTCOME_UNCHANGED],
        "held_back": [
            {"node": p.name, "pool": describe_pool(p.held.pool), "reason": p.held.reason}
            for p in plan.nodes
            if p.outcome == OUTCOME_HELD and p.held is not None
        ],
        "missing": [p.name for p in plan.nodes if p.outcome == OUTCOME_MISSING],
        "failed_nodes": [
            {"node": r.plan.name, "error": r.error} for r in nodes if r.status in (NODE_FAILED, NODE_GONE)
        ],
        "not_attempted": [r.plan.name for r in nodes if r.status == NODE_NOT_ATTEMPTED],
        "to_evict": [p.ref for r in nodes for p in r.plan.evict if r.plan.outcome != OUTCOME_HELD],
        **eviction_lists(evictions),
        "pools": {
            describe_pool(key): {"out_of_service": plan.used[key], "limit": plan.limits[key]}
            for key in sorted({key for node in plan.nodes for key in node.pools})
        },
        "findings": plan_findings(plan) + run_findings(nodes, evictions or [], timeout),
    }
    summary["diff"] = [node_diff(r.plan) for r in nodes if r.plan.patch is not None and r.status == NODE_DONE]
    return summary


def checked_results(plan: QuarantinePlan) -> list[NodeResult]:
    """The results of check mode: every plan as if applied."""
    return [NodeResult(p) for p in plan.nodes]


def failure_message(summary: dict[str, Any]) -> str | None:
    """Why the task fails, or None: a node not quarantined that was meant to be, or a GPU pod whose
    eviction failed. A pod its budget keeps does not fail it: the node is quarantined, the pod is named
    (see `blocked_warning`), and a later run evicts it once the budget allows."""
    parts = []
    if summary["failed_nodes"]:
        parts.append("not quarantined: " + "; ".join(f"{f['node']}: {f['error']}" for f in summary["failed_nodes"][:5]))
    if summary["not_attempted"]:
        parts.append("not attempted: " + ", ".join(summary["not_attempted"][:20]))
    if summary["eviction_failed"]:
        parts.append("not evicted: " + "; ".join(f"{f['pod']}: {f['error']}" for f in summary["eviction_failed"][:5]))
    return ("quarantine incomplete; " + "; ".join(parts) + "; run again to converge") if parts else None
