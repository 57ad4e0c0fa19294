# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Apply labeling plans through the functions it is handed (send, reread, replan), so check
mode and conflicts fall out; summaries and diffs of what changed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.patches import JsonPatch
from ansible_collections.kubegpu.scheduling.plugins.module_utils.labels.plan import (
    CompactNode,
    LabelingOptions,
    NodePlan,
    Outcome,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.diff import diff_entry
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.node_patches import (
    PatchCalls,
    Patched,
    PatchResult,
    patch_nodes,
)

MAX_WARNED_NODES = 10


class ApplyStatus(str, Enum):
    DONE = "done"
    FAILED = "failed"
    NOT_ATTEMPTED = "not_attempted"


@dataclass(frozen=True)
class NodeResult:
    plan: NodePlan
    status: ApplyStatus = ApplyStatus.DONE
    error: str = ""


def _result(patched: PatchResult[NodePlan]) -> NodeResult:
    """The loop's outcome in labeling's words: a node deleted meanwhile is skipped, not failed."""
    plan = patched.plan
    if patched.outcome is Patched.GONE:
        return NodeResult(replace(plan, outcome=Outcome.SKIP, after=None, reason="node was deleted", patch=None))
    if patched.outcome is Patched.KEPT_CHANGING:
        message = (
            "the node's label or ownership record kept changing while it was being labeled "
            f"({patched.status}, the patch no longer applied; {patched.attempts} attempts)"
        )
        return NodeResult(plan, ApplyStatus.FAILED, message)
    if patched.outcome is Patched.FAILED:
        return NodeResult(plan, ApplyStatus.FAILED, patched.error)
    if patched.outcome is Patched.NOT_ATTEMPTED:
        return NodeResult(plan, ApplyStatus.NOT_ATTEMPTED)
    return NodeResult(plan)


def apply_plans(
    plans: Sequence[NodePlan],
    send: Callable[[str, JsonPatch], object],
    reread: Callable[[str], CompactNode | None],
    replan: Callable[[CompactNode], NodePlan],
    *,
    parallelism: int = 16,
    errors: tuple[type[BaseException], ...] = (Exception,),
) -> list[NodeResult]:
    """Send every plan's patch through the guarded node patches of write/node_patches.py,
    `parallelism` at a time; plans without a patch pass through.

    `send(name, patch)` patches one node, `reread(name)` reads it again when the patch no longer
    applies (409, or 422 from a failed `test`; None when it is gone) and `replan(node)` decides
    again; a patch refused again unchanged fails the node. A failure that is not about one node (the API
    server is down, throttles beyond the retries, or forbids the write) stops the sending: the
    patches already in flight finish, and the rest are returned as not attempted.
    """
    calls: PatchCalls[NodePlan, CompactNode] = PatchCalls(send, reread, lambda node, _plan: replan(node), errors)
    return [_result(patched) for patched in patch_nodes(plans, calls, parallelism)]


def _label_line(key: str, value: str | None) -> str:
    return f"{key}={value}\n" if value is not None else ""


def label_diff(plan: NodePlan, key: str) -> dict[str, Any]:
    """Before and after of the managed label only, as `key=value` lines, for Ansible's diff callback."""
    note = "foreign value overwritten" if plan.forced else ""
    return diff_entry(f"node/{plan.name}", _label_line(key, plan.before), _label_line(key, plan.after), note)


def summarize(results: Sequence[NodeResult], key: str) -> dict[str, Any]:
    """The module result for these outcomes (without `changed` and `writes`)."""
    done = [r.plan for r in results if r.status is ApplyStatus.DONE]
    labeled = [p for p in done if p.outcome is Outcome.LABEL]
    unlabeled = [p for p in done if p.outcome is Outcome.UNLABEL]
    conflicts = [p for p in done if p.outcome is Outcome.CONFLICT]
    skipped = [p for p in done if p.outcome is Outcome.SKIP]
    summary: dict[str, Any] = {
        "labeled": [p.name for p in labeled],
        "unlabeled": [p.name for p in unlabeled],
        "unchanged": [p.name for p in done if p.outcome is Outcome.UNCHANGED],
        "conflicts": [
            {"node": p.name, "current": p.before, "desired": p.desired, "reason": p.reason} for p in conflicts
        ],
        "skipped_nodes": [
            {"node": p.name, "reason": p.reason, **({"models": dict(p.models)} if p.models else {})} for p in skipped
        ],
        "mixed_models": [
            {"node": p.name, "models": dict(p.models), "value": p.desired}
            for p in done
            if p.models and p.outcome is not Outcome.SKIP
        ],
        "failed_nodes": [{"node": r.plan.name, "error": r.error} for r in results if r.status is ApplyStatus.FAILED],
        "not_attempted": [r.plan.name for r in results if r.status is ApplyStatus.NOT_ATTEMPTED],
        "diff": [label_diff(p, key) for p in labeled + unlabeled],
    }
    # `skipped` and `failed` are reserved in an Ansible result (they mark the task), hence `_nodes`.
    summary["counts"] = {
        "labeled": len(labeled),
        "unlabeled": len(unlabeled),
        "unchanged": len(summary["unchanged"]),
        "conflicts": len(conflicts),
        "skipped": len(skipped),
        "failed": len(summary["failed_nodes"]),
        "not_attempted": len(summary["not_attempted"]),
    }
    return summary


def _some(names: Sequence[str], limit: int = 20) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def failure_message(results: Sequence[NodeResult]) -> str | None:
    """A message for a run that did not finish, naming the nodes done and not done; None if it finished."""
    failed = [r for r in results if r.status is ApplyStatus.FAILED]
    not_attempted = [r.plan.name for r in results if r.status is ApplyStatus.NOT_ATTEMPTED]
    if not failed and not not_attempted:
        return None
    written = [
        r.plan.name
        for r in results
        if r.status is ApplyStatus.DONE and r.plan.outcome in (Outcome.LABEL, Outcome.UNLABEL)
    ]
    first = failed[0] if failed else None
    parts = [f"labeling stopped: {first.error}" if first and not_attempted else "labeling failed on some nodes"]
    if failed:
        parts.append(f"failed on {len(failed)} node(s): " + "; ".join(f"{r.plan.name}: {r.error}" for r in failed[:5]))
    parts.append(f"changed {len(written)} node(s)" + (f": {_some(written)}" if written else ""))
    if not_attempted:
        parts.append(f"not attempted {len(not_attempted)} node(s): {_some(not_attempted)}")
    parts.append("each node is patched in one request, so none is half-labeled; run again to converge")
    return "; ".join(parts)


def _named(entries: list[str]) -> str:
    shown = ", ".join(entries[:MAX_WARNED_NODES])
    return shown + (f" and {len(entries) - MAX_WARNED_NODES} more" if len(entries) > MAX_WARNED_NODES else "")


def warnings_for(summary: dict[str, Any], options: LabelingOptions) -> list[str]:
    warnings = []
    mixed = [s for s in summary["skipped_nodes"] if "models" in s]
    for entry in mixed[:MAX_WARNED_NODES]:
        warnings.append(f"node {entry['node']} skipped: {entry['reason']} (mixed_models=skip)")
    if len(mixed) > MAX_WARNED_NODES:
        warnings.append(f"{len(mixed) - MAX_WARNED_NODES} more nodes skipped for naming different GPU models")
    conflicts = [c["node"] for c in summary["conflicts"]]
    if conflicts:
        warnings.append(
            f"{len(conflicts)} node(s) carry a {options.label_key} value this collection did not set, left alone "
            f"(see conflicts; force: true overwrites it on GPU nodes): {_named(conflicts)}"
        )
    missing = [s["node"] for s in summary["skipped_nodes"] if s["reason"].startswith("no such node")]
    if missing:
        warnings.append(f"no such node: {_named(missing)}")
    return warnings
