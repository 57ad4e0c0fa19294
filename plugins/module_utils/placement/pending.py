# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Why a GPU pod is pending (or, for a manifest, whether it would fit): node by node in the
scheduler's words, summed as its FailedScheduling event sums them, and in one sentence with
what would make it fit."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import Hit
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.models import UNKNOWN_MODEL
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import namespaced_name
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.dra import DraFree, out_of_reach
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.filters import (
    CLAIMS,
    RESOURCES,
    SAYS_CLAIMS,
    UNSCHEDULABLE,
    dra_resources,
    node_verdict,
    selector_met,
    static_failure,
    taint_words,
    untolerated_taint,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.fleet import UNIQUE_LABELS, Fleet
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.projection import DEFAULT_SCHEDULER
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.requests import BASIC, PODS

MAX_NODES_NAMED = 10
CLAIMED = "devices through its claims"


def gpu_request(shape: Mapping[str, Any], is_gpu: Callable[[str], bool]) -> tuple[str | None, int]:
    """The GPU resource a shape asks for and how many (claims: the devices they ask for)."""
    for resource, count in sorted(shape["requests"].items()):
        if resource not in BASIC and is_gpu(resource):
            return resource, count
    claimed = sum(r["count"] for r in shape.get("claim_requests", ()))
    return (None, claimed) if claimed else (None, 0)


def with_claims(shape: Mapping[str, Any], namespace: str, fleet: Fleet) -> dict[str, Any]:
    """The shape with its claims' device requests (class, count, the node an allocated claim is on)."""
    requests = []
    for name in shape["claims"]:
        claim = fleet.dra.claims.get((namespace, name))
        if claim is None:
            continue
        node = claim["node"] if claim["allocated"] else None
        requests += [{**r, "node": node} for r in claim.get("requests", ())]
    return {**shape, "claim_requests": requests}


def scheduler_message(reasons: Counter[str], nodes: int) -> str:
    """The sum the scheduler writes: `0/N nodes are available: <count> <reason>, ...` (sorted as it sorts)."""
    parts = sorted(f"{count} {reason}" for reason, count in reasons.items())
    return f"0/{nodes} nodes are available: {', '.join(parts)}."


def _values_of(fleet: Fleet, key: str) -> str:
    """The values of a label key the GPU nodes carry; for a key none carries (`accelerator` where the
    nodes name their model in another label), the GPU models the nodes do have."""
    values = sorted({n["labels"][key] for n in fleet.gpu_nodes if key in n["labels"]})
    if values:
        return ", ".join(values)
    models = sorted({n["model"] for n in fleet.gpu_nodes} - {UNKNOWN_MODEL})
    return "no GPU node has it" + (f" (the GPU models there are: {', '.join(models)})" if models else "")


def _selector_fields(shape: Mapping[str, Any], fleet: Fleet) -> dict[str, Any]:
    """The selector the pod names, and the values of its keys the GPU nodes carry."""
    wanted = [f"{k}={v}" for k, v in sorted(shape["node_selector"].items())]
    wanted += [e["key"] + " " + e["operator"] + " " + ",".join(e["values"]) for t in shape["affinity_terms"] for e in t]
    keys = list(shape["node_selector"]) + [e["key"] for t in shape["affinity_terms"] for e in t]
    existing = "; ".join(f"{k}: {_values_of(fleet, k)}" for k in dict.fromkeys(keys))
    return {"selector": ", ".join(wanted), "existing": existing}


def filled(node: Mapping[str, Any], shape: Mapping[str, Any], pods: int) -> dict[str, Any]:
    """The node once `pods` pods of the shape sit on it: their pod slots and requests taken from what is free
    (the resources DRA serves on a node that does not advertise them are its devices, not its free)."""
    free = dict(node["free"])
    for resource, wanted in shape["requests"].items():
        if resource in BASIC or resource in node["allocatable"]:
            free[resource] = free.get(resource, 0) - wanted * pods
    free[PODS] = free.get(PODS, 0) - pods
    return {**node, "free": free}


def _verdict(
    node: Mapping[str, Any], shape: Mapping[str, Any], fleet: Fleet, via_dra: Mapping[str, Any], placed: int
) -> tuple[str | None, list[str], int]:
    """`node_verdict`, on the node as it is or once `placed` pods of the shape sit on it; a node that took
    `placed` and still has the resources for one more ran out of DRA devices for it."""
    if not placed:
        return node_verdict(node, shape, fleet.dra, None, via_dra)
    kind, words, count = node_verdict(filled(node, shape, placed), shape, fleet.dra, None, via_dra)
    return (CLAIMS, [SAYS_CLAIMS], 0) if kind is None else (kind, words, count)


def _evaluate(
    shape: Mapping[str, Any], fleet: Fleet, placed: Mapping[str, int] | None = None
) -> tuple[list[tuple], Counter[str], list[tuple]]:
    """Every node against the shape, a kind of node at a time for the label and taint filters: the verdicts
    of the nodes that pass them, the scheduler's words summed over all nodes, and the GPU nodes the
    shape's selector picks with the filter each fails (or None). With `placed` (node -> pods of the shape),
    the nodes as they are once those pods sit on them."""
    via_dra = dra_resources(shape, fleet.dra)
    placed = placed or {}
    keys = set(shape["node_selector"]) | {e["key"] for term in shape["affinity_terms"] for e in term}
    groups = fleet.groups if fleet.groups and not keys & UNIQUE_LABELS else [[n] for n in fleet.nodes]
    reasons: Counter[str] = Counter()
    verdicts: list[tuple] = []
    selected: list[tuple] = []
    for group in groups:
        first = group[0]
        failure = static_failure(first, shape)
        if failure is not None:
            reasons[failure[1]] += len(group)
        else:
            for node in group:
                kind, words, count = _verdict(node, shape, fleet, via_dra, placed.get(node["name"], 0))
                verdicts.append((node, kind, words, count))
                reasons.update(words)
        if first["gpu_node"] and selector_met(first["labels"], shape):
            selected += [(node, failure) for node in group]
    return verdicts, reasons, selected


def free_to(node: Mapping[str, Any], resource: str | None, dra: DraFree) -> int:
    """The node's free GPUs a request for `resource` (None: through claims) can get."""
    if resource is not None and out_of_reach(node, resource, dra):
        return 0
    return int(node["gpus_free"])


def _nearest(candidates: Sequence[Mapping[str, Any]], free: Mapping[str, int]) -> Mapping[str, Any] | None:
    return max(candidates, key=lambda n: (free[n["name"]], n["name"]), default=None)


def _sentence(
    shape: Mapping[str, Any], fleet: Fleet, evaluation: tuple[list[tuple], Counter[str], list[tuple]], want: tuple
) -> Hit:
    """The one reason that matters most, as a hit of a placement kind."""
    verdicts, _reasons, picked = evaluation
    resource, count = want
    fits = [node["name"] for node, kind, _words, n in verdicts if kind is None and n > 0]
    base = {"gpus": count, "resource": resource or CLAIMED}
    if fits:
        return Hit("placement.fits_now", {**base, "nodes": ", ".join(fits[:MAX_NODES_NAMED]), "count": len(fits)})
    selected = [node for node, _failure in picked]
    if not selected:
        return Hit("placement.selector_matches_no_node", {**base, **_selector_fields(shape, fleet)})
    open_nodes = [node for node, failure in picked if failure is None]
    if not open_nodes:
        kinds = Counter(failure[0] for _node, failure in picked if failure)
        if kinds.get(UNSCHEDULABLE) == len(selected):
            return Hit("placement.nodes_cordoned", {**base, "nodes": len(selected)})
        taints = sorted(
            {taint_words(t) for t in (untolerated_taint(n["taints"], shape["tolerations"]) for n in selected) if t}
        )
        return Hit("placement.taints_not_tolerated", {**base, "nodes": len(selected), "taints": "; ".join(taints)})
    free = {node["name"]: free_to(node, resource, fleet.dra) for node in open_nodes}
    return _resource_sentence(base, open_nodes, verdicts, free)


def _resource_sentence(
    base: dict[str, Any], open_nodes: Sequence[Mapping[str, Any]], verdicts: Sequence[tuple], free: Mapping[str, int]
) -> Hit:
    """`free` is each open node's GPUs the request can get (`free_to`)."""
    count = base["gpus"]
    names = {n["name"] for n in open_nodes}
    kinds = {node["name"]: (kind, words) for node, kind, words, _n in verdicts if node["name"] in names}
    claims_only = base["resource"] == CLAIMED
    enough = [] if claims_only else [n for n in open_nodes if free[n["name"]] >= count]
    if claims_only and any(kind == CLAIMS for kind, _w in kinds.values()):
        return Hit("placement.claims_unallocatable", {**base, "nodes": len(open_nodes)})
    if enough:
        nearest = _nearest(enough, free)
        short = sorted({w for n in enough for w in kinds[n["name"]][1] if kinds[n["name"]][0] in (RESOURCES, CLAIMS)})
        return Hit(
            "placement.resources_short", {**base, "node": nearest["name"] if nearest else "", "short": ", ".join(short)}
        )
    nearest = _nearest(open_nodes, free)
    fields = {
        **base,
        "free": sum(free.values()),
        "node": nearest["name"] if nearest else "",
        "largest": free[nearest["name"]] if nearest else 0,
    }
    return Hit("placement.fragmented" if fields["free"] >= count else "placement.not_enough_gpus", fields)


def explain(
    shape: Mapping[str, Any], fleet: Fleet, is_gpu: Callable[[str], bool], where: Mapping[str, Any]
) -> dict[str, Any]:
    """A shape against every node: per-node words, their sum, how many pods of it fit where, the sentence."""
    evaluation = _evaluate(shape, fleet)
    verdicts, reasons, _picked = evaluation
    placeable = {node["name"]: n for node, kind, _w, n in verdicts if kind is None and n > 0}
    want = gpu_request(shape, is_gpu)
    hits = [_sentence(shape, fleet, evaluation, want)]
    if shape["scheduler"] != DEFAULT_SCHEDULER:
        hits.insert(0, Hit("placement.other_scheduler", {"scheduler": shape["scheduler"]}))
    if shape["not_modelled"]:
        hits.append(Hit("placement.not_modelled", {"filters": ", ".join(shape["not_modelled"])}))
    if shape.get("claims_not_made"):
        hits.append(Hit("placement.claims_not_made", {}))
    hits = [Hit(h.kind, h.fields, where) for h in hits]
    return {
        "gpus": want[1],
        "resource": want[0],
        "fits_on": placeable,
        "pods_that_fit": sum(placeable.values()),
        "nodes": len(fleet.nodes),
        "reasons": dict(sorted(reasons.items())),
        "message": scheduler_message(reasons, len(fleet.nodes)) if not placeable else "",
        "hits": hits,
    }


def explain_rest(shape: Mapping[str, Any], fleet: Fleet, placed: Mapping[str, int]) -> dict[str, Any]:
    """What the scheduler says of one more pod of the shape once the pods that fit sit where they fit
    (`placed`, node -> pods): the words node by node summed, and the sum as its FailedScheduling event
    writes it. Every pod of one shape takes the same from a node, so whichever way the scheduler spreads
    them, as many fit and the nodes are left as full."""
    _verdicts, reasons, _picked = _evaluate(shape, fleet, placed)
    return {"reasons": dict(sorted(reasons.items())), "message": scheduler_message(reasons, len(fleet.nodes))}


def explain_pending(
    pods: Sequence[Mapping[str, Any]], fleet: Fleet, is_gpu: Callable[[str], bool]
) -> list[dict[str, Any]]:
    """Each pending GPU pod with why it is pending."""
    explained = []
    for pod in sorted(pods, key=namespaced_name):
        ref = namespaced_name(pod)
        shape = with_claims(pod, pod["namespace"], fleet)
        entry = explain(shape, fleet, is_gpu, {"pod": ref})
        explained.append(
            {"pod": ref, "scheduler_said": pod.get("message", ""), "gated": pod.get("gated", False), **entry}
        )
    return explained
