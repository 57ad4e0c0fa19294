# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where GPU work fits now: per pool, for each size N, how many N-GPU pods fit and on which nodes,
the largest N that fits on one node, and the free GPUs stranded for N (with why)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import Hit
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.filters import static_failure
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.fleet import (
    Fleet,
    PlacementOptions,
    pool_name,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.requests import CPU, MEMORY, PODS

FRAGMENTED = "fragmented"  # free on a node with fewer than N free, or left over after the N-GPU pods
UNBOUNDED = 1 << 30


def view_shape(options: PlacementOptions) -> dict[str, Any]:
    """The pod the view places (without its GPUs): the options' CPU, memory, selector and tolerations."""
    return {
        "node_selector": dict(options.node_selector),
        "affinity_terms": [],
        "tolerations": [dict(t) for t in options.tolerations],
    }


def _by_other(node: Mapping[str, Any], options: PlacementOptions) -> tuple[int, str | None]:
    """How many pods of the shape the node's CPU, memory and pod slots take, and the first one short."""
    free = node["free"]
    counts = [(max(free[PODS], 0), PODS)]
    for name, wanted in ((CPU, options.cpu), (MEMORY, options.memory)):
        if wanted > 0:
            counts.append((max(free[name], 0) // wanted, name))
    fits, name = min(counts, key=lambda pair: pair[0])
    return fits, name if fits < 1 else None


def node_capacity(node: Mapping[str, Any], shape: Mapping[str, Any], options: PlacementOptions) -> dict[str, Any]:
    """For one node: why no view pod goes there (a filter, or a resource short), or the largest N it takes;
    and per size how many pods fit."""
    gpus = node["gpus_free"]
    failure = static_failure(node, shape)
    other, short = _by_other(node, options)
    blocked = failure[0] if failure else short
    fits = {size: 0 if blocked else min(gpus // size, other) for size in options.sizes}
    return {
        "name": node["name"],
        "pool": pool_name(node["pool"]),
        "gpus_free": gpus,
        "by_source": dict(node["by_source"]),
        "withdrawn": node["withdrawn"],
        "cpu_free_millicores": max(node["free"][CPU], 0),
        "memory_free_bytes": max(node["free"][MEMORY], 0),
        "pod_slots_free": max(node["free"][PODS], 0),
        "blocked": blocked,
        "largest": 0 if blocked else gpus,
        "fits": fits,
    }


def _stranded(entry: Mapping[str, Any], size: int) -> tuple[int, str | None]:
    gpus = entry["gpus_free"]
    if entry["blocked"]:
        return gpus, entry["blocked"]
    left = gpus - entry["fits"][size] * size
    return left, FRAGMENTED if left else None


def pool_view(pool: str, entries: Sequence[Mapping[str, Any]], options: PlacementOptions) -> dict[str, Any]:
    fits: dict[str, Any] = {}
    stranded: dict[str, Any] = {}
    for size in options.sizes:
        on = {e["name"]: e["fits"][size] for e in entries if e["fits"][size]}
        fits[str(size)] = {"pods": sum(on.values()), "nodes": on}
        reasons: dict[str, int] = {}
        for entry in entries:
            gpus, reason = _stranded(entry, size)
            if reason and gpus:
                reasons[reason] = reasons.get(reason, 0) + gpus
        stranded[str(size)] = {"gpus": sum(reasons.values()), "by_reason": reasons}
    return {
        "pool": pool,
        "nodes": len(entries),
        "gpus_free": sum(e["gpus_free"] for e in entries),
        "withdrawn": sum(e["withdrawn"] for e in entries),
        "largest": max((e["largest"] for e in entries), default=0),
        "fits": fits,
        "stranded": stranded,
    }


def placement_view(fleet: Fleet, options: PlacementOptions) -> dict[str, Any]:
    """The view of every GPU node, by pool and for the whole fleet."""
    shape = view_shape(options)
    entries = [node_capacity(n, shape, options) for n in fleet.gpu_nodes]
    by_pool: dict[str, list[Mapping[str, Any]]] = {}
    for entry in entries:
        by_pool.setdefault(entry["pool"], []).append(entry)
    pools = [pool_view(name, members, options) for name, members in sorted(by_pool.items())]
    return {
        "sizes": list(options.sizes),
        "resource": options.resource,
        "pools": pools,
        "fleet": pool_view("all", entries, options),
        "nodes": entries,
    }


def view_hits(view: Mapping[str, Any]) -> list[Hit]:
    """Per pool: GPUs free but no 1-GPU pod can use, and free GPUs that no pod of the largest size can take."""
    hits = []
    largest_size = str(max(view["sizes"])) if view["sizes"] else None
    for pool in view["pools"]:
        one = pool["stranded"].get("1") or next(iter(pool["stranded"].values()), None)
        if one and one["gpus"]:
            reasons = ", ".join(f"{count} {reason}" for reason, count in sorted(one["by_reason"].items()))
            hits.append(
                Hit(
                    "placement.stranded_gpus",
                    {"pool": pool["pool"], "gpus": one["gpus"], "reasons": reasons},
                    {"pool": pool["pool"]},
                )
            )
        if largest_size and pool["gpus_free"] >= int(largest_size) and not pool["fits"][largest_size]["pods"]:
            fields = {"pool": pool["pool"], "free": pool["gpus_free"], "size": largest_size, "largest": pool["largest"]}
            hits.append(Hit("placement.pool_fragmented", fields, {"pool": pool["pool"]}))
    return hits
