# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One run of gpu_driver_upgrade on the write-module skeleton, by `action`: `plan` (read only),
`settle` (host mode, after the host tasks: the GPUs back, the pods that failed admission cleared),
`hold`, `start` and `wait` (GPU Operator mode: its skip label held on the nodes not yet due, let go
for a batch, its state labels watched), and `fail` (a failure recorded on nodes). Nothing is sent
in check mode."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.driver_roll.decide import (
    DONE,
    FAILED,
    NodePatch,
    admission_failures,
    failure_patch,
    gpus_back,
    hold_patch,
    kept_cordons,
    patch_diff,
    start_patch,
    upgrade_stand,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.driver_roll.plan import (
    RollNode,
    RollOptions,
    plan_roll,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.driver_roll.preflight import read_blockers
from ansible_collections.kubegpu.scheduling.plugins.module_utils.driver_roll.reads import (
    delete_pod,
    failed_pods,
    patch_node,
    read_nodes,
    reread_node,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.options import FleetOptions, options_from_params
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import ClusterError, OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.selectors import parse_label_selector
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.breaker import check_share
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.module import WriteRun
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.node_patches import (
    PatchCalls,
    Patched,
    patch_nodes,
)

POLL_INTERVAL = 1.0
ACTIONS = ("plan", "settle", "hold", "start", "wait", "fail")


def now_text() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def build_options(params: Mapping[str, Any]) -> RollOptions:
    pool_by = tuple(dict.fromkeys(k.strip() for k in params["pool_by"] if k.strip()))
    if not pool_by:
        raise OptionError("pool_by must name at least one dimension (model, or a node label key)")
    return RollOptions(
        target_version=params["target_version"].strip(),
        mode=params["mode"],
        max_unavailable=str(params["max_unavailable"]),
        canary=params["canary"],
        max_share=check_share(params["max_share"]),
        pool_by=pool_by,
        max_fail_percentage=params["max_fail_percentage"],
        fleet=options_from_params(model_label_keys=params["model_label_keys"]),
    )


def send_patches(
    client: KubeClient, plans: Sequence[NodePatch], replan: Callable[[RollNode], NodePatch], params: Mapping[str, Any]
) -> tuple[list[str], list[dict[str, Any]]]:
    """The patches sent, guarded (a node changed meanwhile is read and decided again); the nodes
    patched, and those whose patch failed with the error."""
    fleet = options_from_params(model_label_keys=params["model_label_keys"])
    calls: PatchCalls[NodePatch, RollNode] = PatchCalls(
        send=lambda name, patch: patch_node(client, name, patch),
        reread=lambda name: reread_node(client, name, fleet),
        replan=lambda node, _plan: replan(node),
        errors=(ClusterError,),
    )
    results = patch_nodes([p for p in plans if p.patch is not None], calls, params["parallelism"])
    patched = [r.plan.name for r in results if r.outcome is Patched.DONE and r.attempts]
    failed = [
        {"node": r.plan.name, "error": r.error or r.outcome.value} for r in results if r.outcome is not Patched.DONE
    ]
    return patched, failed


def named(nodes: Sequence[RollNode], names: Sequence[str]) -> tuple[list[RollNode], list[str]]:
    by_name = {n.name: n for n in nodes}
    return [by_name[n] for n in dict.fromkeys(names) if n in by_name], [n for n in names if n not in by_name]


def poll(look: Callable[[], list[RollNode]], done: Callable[[list[RollNode]], bool], timeout: float) -> list[RollNode]:
    """The nodes looked at until `done` holds of them or `timeout` seconds have passed."""
    deadline = time.monotonic() + timeout
    while True:
        nodes = look()
        if done(nodes) or time.monotonic() >= deadline:
            return nodes
        time.sleep(min(POLL_INTERVAL, max(0.0, deadline - time.monotonic())))


def run_plan(params: Mapping[str, Any], client: KubeClient, options: RollOptions) -> WriteRun:
    nodes = read_nodes(client, options.fleet)
    selectors = [parse_label_selector(s) for s in params["label_selectors"]]
    names = params["names"] or []
    if not names and not selectors:
        raise OptionError("name the nodes to upgrade (names) or select them (label_selectors)")
    blockers, daemonset_pods, notes = read_blockers(client, nodes, names, selectors, options)
    plan = plan_roll(nodes, (names, selectors), blockers, options)
    warnings = list(notes) + [f"no such node: {name}" for name in plan.missing]
    result = {
        **plan.result(),
        "target_version": options.target_version,
        "mode": options.mode,
        "daemonset_pods": {node: pods for node, pods in daemonset_pods.items() if node in plan.expected_gpus},
    }
    return WriteRun(result, False, None, warnings)


Sent = tuple[list[str], list[dict[str, Any]], list[dict[str, Any]]]


def send_or_check(
    client: KubeClient,
    decided: Sequence[tuple[RollNode, NodePatch]],
    replan: Callable[[RollNode], NodePatch],
    params: Mapping[str, Any],
    check: bool,
) -> Sent:
    """The patches sent (none in check mode): the nodes patched (would be), those that failed, the diff."""
    diff = [patch_diff(node, plan) for node, plan in decided if plan.patch]
    plans = [pair[1] for pair in decided]
    if check:
        return [p.name for p in plans if p.patch], [], diff
    return (*send_patches(client, plans, replan, params), diff)


def record_failures(
    client: KubeClient, nodes: Sequence[RollNode], reasons: Mapping[str, str], params: Mapping[str, Any], check: bool
) -> Sent:
    """The failure of each node's upgrade recorded on it (none sent in check mode)."""
    target, at = params["target_version"].strip(), now_text()

    def decide(node: RollNode) -> NodePatch:
        return failure_patch(node, target, reasons[node.name], at)

    return send_or_check(client, [(n, decide(n)) for n in nodes if n.name in reasons], decide, params, check)


def run_settle(params: Mapping[str, Any], client: KubeClient, fleet: FleetOptions, check: bool) -> WriteRun:
    """Host mode after the host tasks: wait for each node's GPUs, clear the pods that failed admission."""
    names, expected = params["names"] or [], {k: int(v) for k, v in (params["expected_gpus"] or {}).items()}

    def back(node: RollNode) -> bool:
        return gpus_back(node, expected.get(node.name, 1))

    timeout = 0 if check or not params["wait"] else params["wait_timeout"]
    nodes, missing = named(
        poll(lambda: read_nodes(client, fleet), lambda ns: all(map(back, named(ns, names)[0])), timeout), names
    )
    owned, bare = admission_failures(failed_pods(client), frozenset(names))
    if not check:
        for pod in owned:
            delete_pod(client, pod["pod"])
    reasons = {
        n.name: f"the node publishes {n.allocatable} GPUs, not the {expected.get(n.name, 1)} it had, "
        f"{params['wait_timeout']}s after the host tasks"
        for n in nodes
        if not back(n)
    }
    reasons.update({name: "the node is gone" for name in missing})
    recorded, patch_failed, diff = record_failures(client, nodes, reasons, params, check)
    result = {
        "back": [n.name for n in nodes if back(n)],
        "not_back": [{"node": k, "reason": v} for k, v in reasons.items()],
        "deleted_pods": owned,
        "bare_pods": bare,
        "recorded": recorded,
        "patch_failed": patch_failed,
    }
    warnings = [
        f"pod {p['pod']} failed admission on {p['node']} and has no controller: delete it when its owner has seen it"
        for p in bare
    ]
    failure = None if check else ("; ".join(f"{k}: {v}" for k, v in reasons.items()) or None)
    return WriteRun(result, bool(owned or recorded), diff, warnings, failure)


def run_gate(params: Mapping[str, Any], client: KubeClient, fleet: FleetOptions, check: bool) -> WriteRun:
    """Operator mode: the skip label held on the nodes (hold) or let go for a batch (start)."""
    target, at, hold = params["target_version"].strip(), now_text(), params["action"] == "hold"
    nodes, missing = named(read_nodes(client, fleet), params["names"] or [])

    def decide(node: RollNode) -> NodePatch:
        return hold_patch(node, target, at) if hold else start_patch(node)

    decided = [(n, decide(n)) for n in nodes]
    patched, failed, diff = send_or_check(client, decided, decide, params, check)
    plans = [pair[1] for pair in decided]
    key = "held" if hold else "started"
    result = {
        key: patched,
        "unchanged": [p.name for p in plans if p.patch is None],
        "missing": missing,
        "patch_failed": failed,
    }
    failure = "; ".join(f"{f['node']}: {f['error']}" for f in failed) or None
    return WriteRun(result, bool(patched), diff, [f"no such node: {m}" for m in missing], failure)


def run_wait(params: Mapping[str, Any], client: KubeClient, fleet: FleetOptions, check: bool) -> WriteRun:
    """Operator mode: the batch watched until every node is upgrade-done, one is upgrade-failed, or the time is up."""
    names, target = params["names"] or [], params["target_version"].strip()

    def settled(nodes: list[RollNode]) -> bool:
        stands = [upgrade_stand(n, target)[0] for n in named(nodes, names)[0]]
        return FAILED in stands or all(s == DONE for s in stands)

    timeout = 0 if check or not params["wait"] else params["wait_timeout"]
    nodes, missing = named(poll(lambda: read_nodes(client, fleet), settled, timeout), names)
    stands = {n.name: upgrade_stand(n, target) for n in nodes}
    failed = {k: f"the GPU Operator says {s}" for k, (v, s) in stands.items() if v == FAILED}
    stuck = {
        k: f"still in state {s} after {params['wait_timeout']}s"
        for k, (v, s) in stands.items()
        if v not in (DONE, FAILED)
    }
    reasons = {**failed, **({} if failed else stuck), **{m: "the node is gone" for m in missing}}
    recorded, patch_failed, diff = record_failures(client, nodes, reasons, params, check)
    result = {
        "done": [k for k, stand in stands.items() if stand[0] == DONE],
        "failed": [{"node": k, "state": stands[k][1], "reason": r} for k, r in failed.items()],
        "waiting": [{"node": k, "state": s} for k, (v, s) in stands.items() if v not in (DONE, FAILED)],
        "kept_cordons": kept_cordons(nodes),
        "recorded": recorded,
        "patch_failed": patch_failed,
    }
    failure = None if check else ("; ".join(f"{k}: {v}" for k, v in reasons.items()) or None)
    return WriteRun(result, bool(recorded), diff, (), failure)


def run_fail(params: Mapping[str, Any], client: KubeClient, fleet: FleetOptions, check: bool) -> WriteRun:
    if not (params.get("reason") or "").strip():
        raise OptionError("reason must say why the nodes' upgrade failed: it is recorded on each node")
    nodes, missing = named(read_nodes(client, fleet), params["names"] or [])
    reasons = {n.name: params["reason"].strip() for n in nodes}
    recorded, failed, diff = record_failures(client, nodes, reasons, params, check)
    return WriteRun({"recorded": recorded, "missing": missing, "patch_failed": failed}, bool(recorded), diff)


def run_roll(params: Mapping[str, Any], client: KubeClient, check_mode: bool) -> WriteRun:
    options = build_options(params)
    action = params["action"]
    if action == "plan":
        return run_plan(params, client, options)
    if not params["names"]:
        raise OptionError(f"action {action} works on the nodes named in names: name them")
    if action == "settle":
        return run_settle(params, client, options.fleet, check_mode)
    if action in ("hold", "start"):
        return run_gate(params, client, options.fleet, check_mode)
    if action == "wait":
        return run_wait(params, client, options.fleet, check_mode)
    return run_fail(params, client, options.fleet, check_mode)
