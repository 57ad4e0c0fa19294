# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPUs DRA drivers publish on each node, what is allocated of them, and what the facts
say of a node's driver, from the projected DeviceClasses, ResourceSlices and ResourceClaims.

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
    class_selects,
    current_pools,
    device_key,
    device_model,
    devices_by_node,
    is_gpu_class,
    keeps_pods_away,
    pool_nodes,
    tainted_device_text,
    with_rule_taints,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.health import device_health
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import namespaced_name

SOURCE_DEVICE_PLUGIN = "device_plugin"
SOURCE_DRA = "dra"


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


# --- one node --------------------------------------------------------------------------------------


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


def device_facts(
    device: Mapping[str, Any], holders: Mapping[tuple[str, str, str], list[Mapping[str, Any]]]
) -> dict[str, Any]:
    claims = holders.get(device_key(device["driver"], device["pool"], device["name"]), [])
    return {
        "name": device["name"],
        "driver": device["driver"],
        "pool": device["pool"],
        "type": device["type"],
        "model": device_model(device),
        "product_name": device["product"],
        "uuid": device["uuid"],
        "parent_uuid": device["parent_uuid"],
        "memory": device["memory"],
        "mig_profile": device["profile"],
        "allocated": bool(claims),
        "claims": sorted(namespaced_name(c) for c in claims),
        "taints": list(device["taints"]),
        "health": device_health(device),
    }


def holding_pods(
    devices: Sequence[Mapping[str, Any]], holders: Mapping[tuple[str, str, str], list[Mapping[str, Any]]]
) -> list[str]:
    """The pods a node's allocated devices are reserved for, as `namespace/name`."""
    pods: set[str] = set()
    for device in devices:
        for claim in holders.get(device_key(device["driver"], device["pool"], device["name"]), []):
            pods.update(f"{claim['namespace']}/{pod}" for pod in claim["reserved_for"] if pod)
    return sorted(pods)


def served_by_both(
    allocatable: Mapping[str, int], devices: Sequence[Mapping[str, Any]], classes: Iterable[Mapping[str, Any]]
) -> list[dict[str, str]]:
    """Extended resources the node's device plugin advertises and a DeviceClass also maps to its DRA devices."""
    found = []
    for device_class in classes:
        resource = device_class["extended_resource"]
        if resource and allocatable.get(resource, 0) > 0 and any(class_selects(device_class, d) for d in devices):
            found.append({"resource": resource, "device_class": device_class["name"]})
    return found


def tainted_devices(devices: Iterable[Mapping[str, Any]]) -> list[str]:
    return [tainted_device_text(d) for d in devices if keeps_pods_away(d)]


def node_dra_facts(
    name: str,
    allocatable: Mapping[str, int],
    plugin_pods: Sequence[Mapping[str, Any]],
    fleet: DraFleet,
    every_device: bool = False,
) -> dict[str, Any]:
    """The DRA part of one node's facts: the devices listed are those with a taint, or every device with
    `every_device`; `device_count` counts them all."""
    devices = fleet.devices.get(name, [])
    listed = devices if every_device else [d for d in devices if d["taints"]]
    return {
        "readable": fleet.readable,
        "drivers": sorted({d["driver"] for d in devices}),
        "slices": fleet.slice_counts.get(name, 0),
        "device_count": len(devices),
        "devices": [device_facts(d, fleet.holders) for d in listed],
        "pods": holding_pods(devices, fleet.holders),
        "kubelet_plugin_pods": sorted(namespaced_name(p) for p in plugin_pods),
        "kubelet_plugin_ready": any(p["ready"] for p in plugin_pods),
        "served_by_both": served_by_both(allocatable, devices, fleet.classes),
        "tainted_devices": tainted_devices(devices),
        "missing_devices": list(fleet.missing.get(name, [])),
    }


def is_dra_node(name: str, plugin_pods: Sequence[Mapping[str, Any]], fleet: DraFleet) -> bool:
    return bool(fleet.devices.get(name) or plugin_pods)


# --- pods the scheduler cannot place ---------------------------------------------------------------


def asks_for_dra_gpus(pod: Mapping[str, Any], fleet: DraFleet) -> bool:
    """A pending pod wants GPUs: GPU extended resources, or a claim on a GPU DeviceClass."""
    if pod["gpus"]:
        return True
    gpu_classes = {c["name"] for c in fleet.classes if is_gpu_class(c)}
    for claim_name in pod["claims"]:
        claim = fleet.claims.get((pod["namespace"], claim_name))
        if claim is not None and gpu_classes & set(claim["classes"]):
            return True
    return False


def unallocatable_pods(pending: Iterable[Mapping[str, Any]], fleet: DraFleet) -> list[Mapping[str, Any]]:
    return sorted((p for p in pending if asks_for_dra_gpus(p, fleet)), key=namespaced_name)
