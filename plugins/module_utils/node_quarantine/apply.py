# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Apply a node quarantine plan through the functions it is handed: one patch per node that
changes (read again and decided again when another client changed what it tests), then the
evictions of the GPU pods of the nodes quarantined, a bounded number in flight, a budget's 429
retried with back-off until the run's timeout; what the run did, as the module returns it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.catalogue import KINDS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.kinds import quarantine as kinds
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import Hit
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.results import plugin_finding
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import error_status
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.patches import MAX_CONFLICT_ATTEMPTS, JsonPatch
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.retries import backoff_delay
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.breaker import describe_pool
from ansible_collections.kubegpu.scheduling.plugins.module_utils.node_quarantine.plan import (
    OUTCOME_HELD,
    OUTCOME_MISSING,
    OUTCOME_QUARANTINE,
    OUTCOME_UNCHANGED,
    CompactNode,
    NodePlan,
    PodEviction,
    QuarantinePlan,
    diff_entry,
    node_entry,
)

NODE_DONE = "done"
NODE_FAILED = "failed"
NODE_GONE = "gone"
NODE_NOT_ATTEMPTED = "not_attempted"

EVICTED = "evicted"
POD_GONE = "gone"
BLOCKED = "blocked"
DELETED = "deleted"
FAILED = "failed"
NOT_ATTEMPTED = "not_attempted"

TOO_MANY_REQUESTS = 429
NOT_FOUND = 404
# A pod several budgets select: the API server answers 500 and never evicts it.
SEVERAL_BUDGETS = "more than one PodDisruptionBudget"
# The node changed since it was read: 409, or 422 when a `test` of the patch failed.
_CHANGED = frozenset({409, 422})
# Statuses about one object only; the others mean the API server takes no writes now.
_OBJECT_ONLY = frozenset({400, 404, 409, 422, TOO_MANY_REQUESTS})
MAX_EVICTION_BACKOFF = 5.0


@dataclass(frozen=True)
class NodeResult:
    plan: NodePlan
    status: str = NODE_DONE
    error: str = ""


@dataclass(frozen=True)
class EvictionResult:
    pod: PodEviction
    status: str
    detail: str = ""
    attempts: int = 0


def _patch_one(
    plan: NodePlan,
    send: Callable[[str, JsonPatch], object],
    reread: Callable[[str], CompactNode | None],
    replan: Callable[[CompactNode, NodePlan], NodePlan],
    stop: threading.Event,
    errors: tuple[type[BaseException], ...],
) -> NodeResult:
    for _attempt in range(MAX_CONFLICT_ATTEMPTS):
        if plan.patch is None:
            return NodeResult(plan)
        if stop.is_set():
            return NodeResult(plan, NODE_NOT_ATTEMPTED)
        try:
            send(plan.name, plan.patch)
            return NodeResult(plan)
        except errors as exc:
            status = error_status(exc)
            if status == NOT_FOUND:
                return NodeResult(plan, NODE_GONE, "the node was deleted")
            if status not in _CHANGED:
                if status not in _OBJECT_ONLY:
                    stop.set()
                return NodeResult(plan, NODE_FAILED, str(exc))
        try:
            node = reread(plan.name)
        except errors as exc:
            if error_status(exc) not in _OBJECT_ONLY:
                stop.set()
            return NodeResult(plan, NODE_FAILED, str(exc))
        if node is None:
            return NodeResult(plan, NODE_GONE, "the node was deleted")
        plan = replan(node, plan)
    message = (
        "the node's cordon, taints or quarantine record kept changing while it was being quarantined "
        f"({MAX_CONFLICT_ATTEMPTS} attempts)"
    )
    return NodeResult(plan, NODE_FAILED, message)


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
    stop = threading.Event()
    pending = [p for p in plans if p.patch is not None]
    results = {p.name: NodeResult(p) for p in plans if p.patch is None}
    if pending:
        with ThreadPoolExecutor(max_workers=max(1, min(parallelism, len(pending)))) as pool:
            futures = [pool.submit(_patch_one, p, send, reread, replan, stop, errors) for p in pending]
            for plan, future in zip(pending, futures, strict=True):
                results[plan.name] = future.result()
    return [results[p.name] for p in plans]


@dataclass(frozen=True)
class EvictionSettings:
    timeout: float
    force_delete: bool = False
    parallelism: int = 16
    backoff: float = 0.5


@dataclass(frozen=True)
class EvictionCalls:
    """What evictions go through: the eviction and the deletion of one pod, the failures they raise
    that are answers about that pod, and the clock and sleep the back-off runs on."""

    evict: Callable[[PodEviction], object]
    delete: Callable[[PodEviction], object]
    errors: tuple[type[BaseException], ...] = (Exception,)
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


def _evict_one(
    pod: PodEviction, calls: EvictionCalls, settings: EvictionSettings, deadline: float, stop: threading.Event
) -> EvictionResult:
    attempt = 0
    detail = ""
    while True:
        if stop.is_set():
            return EvictionResult(pod, NOT_ATTEMPTED, attempts=attempt)
        attempt += 1
        try:
            calls.evict(pod)
            return EvictionResult(pod, EVICTED, attempts=attempt)
        except calls.errors as exc:
            status, detail = error_status(exc), str(exc)
            if status == NOT_FOUND:
                return EvictionResult(pod, POD_GONE, attempts=attempt)
            if SEVERAL_BUDGETS in detail:
                break
            if status != TOO_MANY_REQUESTS:
                if status not in _OBJECT_ONLY:
                    stop.set()
                return EvictionResult(pod, FAILED, detail, attempt)
        remaining = deadline - calls.clock()
        if remaining <= 0:
            break
        calls.sleep(min(backoff_delay(attempt - 1, settings.backoff), MAX_EVICTION_BACKOFF, remaining))
    if not settings.force_delete:
        return EvictionResult(pod, BLOCKED, detail, attempt)
    try:
        calls.delete(pod)
    except calls.errors as exc:
        return EvictionResult(pod, FAILED, f"{detail}; then deleting it failed: {exc}", attempt)
    return EvictionResult(pod, DELETED, detail, attempt)


def evict_pods(pods: Sequence[PodEviction], calls: EvictionCalls, settings: EvictionSettings) -> list[EvictionResult]:
    """Evict every pod through `calls.evict`, `settings.parallelism` in flight; a pod its budget keeps
    (429) is tried again with back-off until `settings.timeout` seconds after the start, then reported
    blocked, or deleted through `calls.delete` with `force_delete`."""
    if not pods:
        return []
    deadline = calls.clock() + settings.timeout
    stop = threading.Event()
    with ThreadPoolExecutor(max_workers=max(1, min(settings.parallelism, len(pods)))) as pool:
        futures = [pool.submit(_evict_one, p, calls, settings, deadline, stop) for p in pods]
        return [future.result() for future in futures]


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
    found = []
    for node in nodes:
        if node.status == NODE_FAILED:
            found.append(_finding(kinds.NODE_PATCH_FAILED, (node.plan.name, None), error=node.error))
    for result in evictions:
        pod = result.pod
        budgets = ", ".join(f"PodDisruptionBudget {pod.namespace}/{b}" for b in pod.blocking) or "its budget"
        if result.status == BLOCKED:
            found.append(
                _finding(
                    kinds.EVICTION_BLOCKED,
                    (pod.node, pod.ref),
                    pod=pod.ref,
                    node=pod.node,
                    budgets=budgets,
                    timeout=f"{timeout:g}",
                    detail=result.detail,
                )
            )
        elif result.status == DELETED:
            found.append(
                _finding(
                    kinds.POD_DELETED,
                    (pod.node, pod.ref),
                    pod=pod.ref,
                    node=pod.node,
                    budgets=budgets,
                    timeout=f"{timeout:g}",
                )
            )
        elif result.status in (FAILED, NOT_ATTEMPTED):
            error = result.detail or "not attempted: the API server failed on another pod first"
            found.append(_finding(kinds.EVICTION_FAILED, (pod.node, pod.ref), pod=pod.ref, node=pod.node, error=error))
    return found


def summarize(
    plan: QuarantinePlan,
    nodes: Sequence[NodeResult],
    evictions: Sequence[EvictionResult] | None,
    timeout: float,
) -> dict[str, Any]:
    """The module's result (without `changed`, `writes` and `diff`): the plan per node, what was done,
    the findings. `evictions` is None when the run evicts nothing (check mode, or evict: false)."""
    done = [r.plan for r in nodes if r.status == NODE_DONE]
    by_status: dict[str, list[str]] = {}
    for result in evictions or []:
        by_status.setdefault(result.status, []).append(result.pod.ref)
    blocked = [r for r in evictions or [] if r.status == BLOCKED]
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
        "evicted": by_status.get(EVICTED, []) + by_status.get(POD_GONE, []),
        "blocked": [
            {"pod": r.pod.ref, "node": r.pod.node, "budgets": list(r.pod.blocking), "error": r.detail} for r in blocked
        ],
        "deleted": by_status.get(DELETED, []),
        "eviction_failed": [
            {"pod": r.pod.ref, "error": r.detail or "not attempted"}
            for r in evictions or []
            if r.status in (FAILED, NOT_ATTEMPTED)
        ],
        "pools": {
            describe_pool(key): {"out_of_service": plan.used[key], "limit": plan.limits[key]}
            for key in sorted({key for node in plan.nodes for key in node.pools})
        },
        "findings": plan_findings(plan) + run_findings(nodes, evictions or [], timeout),
    }
    summary["diff"] = [diff_entry(r.plan) for r in nodes if r.plan.patch is not None and r.status == NODE_DONE]
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


def blocked_warning(summary: dict[str, Any]) -> str | None:
    blocked = summary["blocked"]
    if not blocked:
        return None
    named = "; ".join(f"{b['pod']} (PodDisruptionBudget {', '.join(b['budgets']) or '?'})" for b in blocked[:10])
    more = f" and {len(blocked) - 10} more" if len(blocked) > 10 else ""
    return f"{len(blocked)} GPU pod(s) stay on quarantined nodes, kept by their budget: {named}{more}"
