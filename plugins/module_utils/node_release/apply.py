# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run release plans through the functions it is handed (the proof pod's create, read, wait, logs
and delete; the node's patch, reread and replan): per node, the proof pod first, and the patch only
when it Succeeded; the proof pod is deleted whatever its outcome. Then the module's result."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.kinds import release as kinds
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import Hit
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.pods import FINISHED_POD_PHASES
from ansible_collections.kubegpu.scheduling.plugins.module_utils.node_release.release import (
    JsonPatch,
    ProofOutcome,
    ReleaseNode,
    ReleasePlan,
    Verdict,
    finding_dict,
    is_proof_pod,
    judge_proof,
    missing_plan,
    proof_hit,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.diff import diff_entry
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.node_patches import (
    PatchCalls,
    Patched,
    in_parallel,
    patch_node,
)

_LOGGED_PHASES = ("Running", *FINISHED_POD_PHASES)


@dataclass(frozen=True)
class PodCalls:
    """The proof pod's I/O: read (None when gone), create, delete (returns once it is gone), the
    tail of its log, a poll `wait(probe, done, timeout) -> (last value, done in time)`, and the
    namespace of the proof pods made when it is missing."""

    read: Callable[[str, str], dict[str, Any] | None]
    create: Callable[[dict[str, Any]], object]
    delete: Callable[[str, str], object]
    logs: Callable[[str, str], list[str]]
    wait: Callable[[Callable[[], Any], Callable[[Any], bool], float], tuple[Any, bool]]
    ensure_namespace: Callable[[str], object] = lambda _namespace: None


@dataclass(frozen=True)
class NodeCalls:
    """The node's I/O: send a patch, read the node again (None when gone), decide again."""

    send: Callable[[str, JsonPatch], object]
    reread: Callable[[str], ReleaseNode | None]
    replan: Callable[[ReleaseNode], ReleasePlan]


@dataclass(frozen=True)
class NodeResult:
    plan: ReleasePlan
    released: bool = False
    proof: ProofOutcome | None = None
    hits: tuple[Hit, ...] = ()


def _where(plan: ReleasePlan) -> tuple[str, str, str]:
    metadata = (plan.proof or {}).get("metadata", {})
    namespace, name = metadata.get("namespace", ""), metadata.get("name", "")
    return namespace, name, f"{namespace}/{name}"


def _finished(pod: dict[str, Any] | None) -> bool:
    return pod is None or (pod.get("status") or {}).get("phase") in FINISHED_POD_PHASES


def run_proof(
    plan: ReleasePlan, pods: PodCalls, timeout: float, errors: tuple[type[BaseException], ...]
) -> tuple[ProofOutcome | None, Hit | None]:
    """The proof pod created, followed until it finishes or the timeout, its log read, and deleted."""
    if plan.proof is None:
        raise AssertionError(f"the plan of {plan.node} has no proof pod")
    namespace, name, ref = _where(plan)
    try:
        existing = pods.read(namespace, name)
        if existing is not None:
            if not is_proof_pod(existing, plan.node):
                return None, Hit(kinds.PROOF_POD_IN_THE_WAY, {"node": plan.node, "pod": ref}, {"node": plan.node})
            pods.delete(namespace, name)  # the proof of a run that was interrupted
        pods.create(plan.proof)
        try:
            last, finished = pods.wait(lambda: pods.read(namespace, name), _finished, timeout)
            phase = (last or {}).get("status", {}).get("phase")
            logs = pods.logs(namespace, name) if phase in _LOGGED_PHASES else []
        finally:
            pods.delete(namespace, name)
    except errors as exc:
        fields = {"node": plan.node, "pod": ref, "error": str(exc)}
        return None, Hit(kinds.PROOF_NOT_RUN, fields, {"node": plan.node, "pod": ref})
    outcome = judge_proof(last, finished, logs)
    return outcome, None if outcome.passed else proof_hit(plan.node, ref, outcome, timeout)


def apply_release(
    plan: ReleasePlan, nodes: NodeCalls, outcome: ProofOutcome | None, errors: tuple[type[BaseException], ...]
) -> NodeResult:
    """The release patch, once the proof passed, through the guarded node patches of
    write/node_patches.py: a node that changed meanwhile is decided again."""
    if plan.patch is None:
        raise AssertionError(f"the plan of {plan.node} has no patch")
    calls: PatchCalls[ReleasePlan, ReleaseNode] = PatchCalls(
        nodes.send, nodes.reread, lambda node, _plan: nodes.replan(node), errors
    )
    patched = patch_node(plan, calls)
    plan = patched.plan
    if patched.outcome is Patched.GONE and not patched.error:
        plan = missing_plan(plan.node)  # deleted before it was read again
    elif patched.outcome is not Patched.DONE:
        return NodeResult(plan, False, outcome, (*plan.hits, _patch_failed(plan.node, patched.error)))
    return NodeResult(plan, plan.verdict is Verdict.RELEASE, outcome, plan.hits)


def _patch_failed(node: str, error: str) -> Hit:
    return Hit(kinds.PATCH_FAILED, {"node": node, "error": error}, {"node": node})


def release_one(
    plan: ReleasePlan, pods: PodCalls, nodes: NodeCalls, timeout: float, errors: tuple[type[BaseException], ...]
) -> NodeResult:
    if plan.verdict is not Verdict.RELEASE:
        return NodeResult(plan, hits=plan.hits)
    outcome, hit = run_proof(plan, pods, timeout, errors)
    if hit is not None:
        return NodeResult(plan, False, outcome, (*plan.hits, hit))
    return apply_release(plan, nodes, outcome, errors)


def release_all(
    plans: Sequence[ReleasePlan],
    pods: PodCalls,
    nodes: NodeCalls,
    timeout: float,
    *,
    parallelism: int = 16,
    errors: tuple[type[BaseException], ...] = (Exception,),
) -> list[NodeResult]:
    """Every plan run, `parallelism` proofs at a time; plans that release nothing pass through."""
    if not any(p.verdict is Verdict.RELEASE for p in plans):
        return [NodeResult(p, hits=p.hits) for p in plans]
    return in_parallel(lambda plan: release_one(plan, pods, nodes, timeout, errors), plans, parallelism)


def planned(plans: Sequence[ReleasePlan]) -> list[NodeResult]:
    """Results for check mode: nothing run, nothing released."""
    return [NodeResult(p, hits=p.hits) for p in plans]


def _plan_entry(plan: ReleasePlan) -> dict[str, Any]:
    return {
        "node": plan.node,
        "verdict": plan.verdict.value,
        "removes": list(plan.removes),
        "keeps": [finding_dict(h)["message"] for h in plan.hits if h.kind in (kinds.CORDON_KEPT, kinds.TAINT_KEPT)],
        "proof_pod": plan.proof,
        "patch": plan.patch,
    }


def _held_entry(result: NodeResult, reason: str) -> dict[str, Any]:
    proof = result.proof
    _namespace, _name, ref = _where(result.plan)
    return {
        "node": result.plan.node,
        "reason": reason,
        "pod": ref if result.plan.proof else None,
        "phase": proof.phase if proof else None,
        "exit_code": proof.exit_code if proof else None,
        "exit_reason": proof.exit_reason if proof else None,
        "logs": list(proof.logs) if proof else [],
    }


_HOLDING = frozenset(
    {
        kinds.NO_GPU_TO_PROVE,
        kinds.PROOF_FAILED,
        kinds.PROOF_TIMED_OUT,
        kinds.PROOF_POD_IN_THE_WAY,
        kinds.PROOF_NOT_RUN,
        kinds.PATCH_FAILED,
    }
)


def summarize(results: Sequence[NodeResult], check_mode: bool) -> dict[str, Any]:
    """The module's result (without `changed` and `writes`). In check mode `released` names the
    nodes that would be released once their proof passes."""
    released, held, not_quarantined, not_ours, missing, findings, diff = [], [], [], [], [], [], []
    for result in results:
        plan = result.plan
        found = [finding_dict(h) for h in result.hits]
        findings += found
        holding = [f for f in found if f["kind"] in _HOLDING]
        if holding:
            held.append(_held_entry(result, holding[-1]["message"]))
        elif result.released or (check_mode and plan.verdict is Verdict.RELEASE):
            released.append(plan.node)
            diff.append(diff_entry(f"node/{plan.node}", plan.before, plan.after))
        elif plan.verdict is Verdict.NOT_QUARANTINED:
            not_quarantined.append(plan.node)
        elif plan.verdict is Verdict.NOT_OURS:
            not_ours.append({"node": plan.node, "reason": found[0]["message"]})
        elif plan.verdict is Verdict.NO_SUCH_NODE:
            missing.append(plan.node)
    return {
        "released": released,
        "held": held,
        "not_quarantined": not_quarantined,
        "not_ours": not_ours,
        "missing": missing,
        "plan": [_plan_entry(r.plan) for r in results],
        "findings": findings,
        "counts": {
            "released": len(released),
            "held": len(held),
            "not_quarantined": len(not_quarantined),
            "not_ours": len(not_ours),
            "missing": len(missing),
        },
        "diff": diff,
    }


def failure_message(summary: dict[str, Any]) -> str | None:
    """A message for a run that leaves nodes quarantined that it was asked to release; None otherwise."""
    held = summary["held"]
    if not held:
        return None
    reasons = "; ".join(f"{h['node']}: {h['reason']}" for h in held[:5])
    more = f" and {len(held) - 5} more" if len(held) > 5 else ""
    done = f"; released {len(summary['released'])}: {', '.join(summary['released'])}" if summary["released"] else ""
    return f"{len(held)} node(s) stay quarantined: {reasons}{more}{done}"
