# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The DRA side of the fleet: the GPUs DRA drivers publish on each node and what is allocated of
them, from the projected DeviceClasses, ResourceSlices, ResourceClaims and DeviceTaintRules.

A physical GPU counts once. Devices that consume one shared counter set are alternatives for
the same GPU (partitions made on demand), and so are the MIG devices of a GPU that is also
published whole: they are one GPU, allocated as soon as any of them is. A static MIG device
is a GPU of its own, as the device plugin counts `nvidia.com/mig-*`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra import (
    DEVICE_TYPE_GPU,
    GPU_DRIVERS,
    DraObjects,
    claims_by_device,
    current_pools,
    device_key,
    devices_by_node,
    keeps_pods_away,
    pool_nodes,
    with_rule_taints,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import namespaced_name


@dataclass(frozen=True)
class DraFleet:
    """The DRA side of the fleet, worked out once per run."""

    readable: bool
    devices: Mapping[str, list[dict[str, Any]]]
    holders: Mapping[tuple[str, str, str], list[Mapping[str, Any]]]
    classes: Sequence[Mapping[str, Any]]
    claims: Mapping[tuple[str, str], Mapping[str, Any]]
    slice_counts: Mapping[str, int]
    missing: Mapping[str | None, list[str]] = field(default_factory=dict)
    notes: Sequence[str] = ()


def _missing_allocations(
    claims: Iterable[Mapping[str, Any]], published: set[tuple[str, str, str]], owners: Mapping[tuple[str, str], str]
) -> dict[str | None, list[str]]:
    """Per node (None when it cannot be told), the claims allocated a GPU device no slice publishes."""
    missing: dict[str | None, list[str]] = defaultdict(list)
    for claim in claims:
        for result in claim["results"]:
            key = device_key(result["driver"], result["pool"], result["device"])
            if result["driver"] in GPU_DRIVERS and key not in published:
                node = claim["node"] or owners.get((result["driver"], result["pool"]))
                missing[node].append(f"{namespaced_name(claim)} holds {'/'.join(key)}")
    return dict(missing)


def dra_fleet(dra: DraObjects) -> DraFleet:
    pools = current_pools(dra.slices)
    current = with_rule_taints(pools.slices, dra.taint_rules)
    slice_counts: dict[str, int] = defaultdict(int)
    for item in current:
        if item["node"]:
            slice_counts[item["node"]] += 1
    published = {device_key(d["driver"], d["pool"], d["name"]) for s in current for d in s["devices"]}
    return DraFleet(
        readable=dra.available,
        devices=devices_by_node(current),
        holders=claims_by_device(dra.claims),
        classes=dra.classes,
        claims={(c["namespace"], c["name"]): c for c in dra.claims},
        slice_counts=dict(slice_counts),
        missing=_missing_allocations(dra.claims, published, pool_nodes(current)),
        notes=[n for n in (dra.unavailable, dra.taint_rules_unavailable) if n] + pools.incomplete,
    )


def _unit_key(device: Mapping[str, Any], whole_gpus: set[str]) -> tuple[str, ...]:
    if device["counter_sets"]:
        return ("counter-set", device["driver"], device["pool"], device["counter_sets"][0])
    if device["parent_uuid"] and device["parent_uuid"] in whole_gpus:
        return ("gpu", device["parent_uuid"])
    if device["uuid"] and device["type"] != "mig":
        return ("gpu", device["uuid"])
    return ("device", device["driver"], device["pool"], device["name"])


def gpu_units(devices: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """The devices grouped by physical GPU (or static MIG device): each group counts once."""
    whole = {d["uuid"] for d in devices if d["type"] == DEVICE_TYPE_GPU and d["uuid"]}
    units: dict[tuple[str, ...], list[Mapping[str, Any]]] = {}
    for device in devices:
        units.setdefault(_unit_key(device, whole), []).append(device)
    return list(units.values())


def _held(device: Mapping[str, Any], holders: Mapping[tuple[str, str, str], list[Mapping[str, Any]]]) -> bool:
    return bool(holders.get(device_key(device["driver"], device["pool"], device["name"])))


def dra_counts(
    devices: Sequence[Mapping[str, Any]], holders: Mapping[tuple[str, str, str], list[Mapping[str, Any]]]
) -> dict[str, int]:
    """Capacity, allocatable (not tainted away), allocated and free (neither) GPUs of a node's devices."""
    units = gpu_units(devices)
    allocated = [any(_held(d, holders) for d in unit) for unit in units]
    tainted = [any(keeps_pods_away(d) for d in unit) for unit in units]
    return {
        "capacity": len(units),
        "allocatable": len(units) - sum(tainted),
        "allocated": sum(allocated),
        "free": sum(1 for a, t in zip(allocated, tainted, strict=True) if not a and not t),
    }
