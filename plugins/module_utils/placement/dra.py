# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPUs DRA drivers can still hand out on each node, for whole-device allocation: devices of
the newest generation of each pool, not held by a claim, not tainted away, and no part of a GPU
another claim holds (a MIG device of it, a device sharing its counter set)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu import dra as gpu_dra


@dataclass(frozen=True)
class DraFree:
    """Per node, the devices free to allocate and how many GPU devices are tainted away; the classes
    and claims by name, for pods that ask through claims or a class's extended resource."""

    free: Mapping[str, list[Mapping[str, Any]]] = field(default_factory=dict)
    withdrawn: Mapping[str, int] = field(default_factory=dict)
    published: Mapping[str, int] = field(default_factory=dict)  # devices each node publishes, free or not
    classes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    claims: Mapping[tuple[str, str], Mapping[str, Any]] = field(default_factory=dict)
    readable: bool = True


def _blocked_parts(devices: Sequence[Mapping[str, Any]], held: set[tuple[str, str, str]]) -> tuple[set[str], set[str]]:
    """The GPU UUIDs and counter sets of which some device is held."""
    uuids: set[str] = set()
    counters: set[str] = set()
    for device in devices:
        if gpu_dra.device_key(device["driver"], device["pool"], device["name"]) in held:
            uuids.update(u for u in (device["uuid"], device["parent_uuid"]) if u)
            counters.update(f"{device['driver']}/{device['pool']}/{c}" for c in device["counter_sets"])
    return uuids, counters


def _is_free(device: Mapping[str, Any], held: set[tuple[str, str, str]], blocked: tuple[set[str], set[str]]) -> bool:
    uuids, counters = blocked
    if gpu_dra.device_key(device["driver"], device["pool"], device["name"]) in held or gpu_dra.keeps_pods_away(device):
        return False
    if any(u in uuids for u in (device["uuid"], device["parent_uuid"]) if u):
        return False
    return not any(f"{device['driver']}/{device['pool']}/{c}" in counters for c in device["counter_sets"])


def dra_free(dra: gpu_dra.DraObjects) -> DraFree:
    current = gpu_dra.with_rule_taints(gpu_dra.current_pools(dra.slices).slices, dra.taint_rules)
    held = set(gpu_dra.claims_by_device(dra.claims))
    free: dict[str, list[Mapping[str, Any]]] = {}
    withdrawn: dict[str, int] = {}
    published: dict[str, int] = {}
    for node, devices in gpu_dra.devices_by_node(current).items():
        blocked = _blocked_parts(devices, held)
        free[node] = [d for d in devices if _is_free(d, held, blocked)]
        published[node] = len(devices)
        withdrawn[node] = sum(1 for d in devices if d["type"] == gpu_dra.DEVICE_TYPE_GPU and gpu_dra.keeps_pods_away(d))
    return DraFree(
        free=free,
        withdrawn=withdrawn,
        published=published,
        classes={c["name"]: c for c in dra.classes},
        claims={(c["namespace"], c["name"]): c for c in dra.claims},
        readable=dra.available,
    )


def whole_gpus(devices: Sequence[Mapping[str, Any]]) -> int:
    return sum(1 for d in devices if d["type"] == gpu_dra.DEVICE_TYPE_GPU)


def class_free(device_class: Mapping[str, Any], devices: Sequence[Mapping[str, Any]]) -> int:
    return sum(1 for d in devices if gpu_dra.class_selects(device_class, d))


def mapping_class(dra: DraFree, resource: str) -> Mapping[str, Any] | None:
    """The DeviceClass that serves an extended resource through DRA (``extendedResourceName``), if any."""
    return next((c for c in dra.classes.values() if c["extended_resource"] == resource), None)


def out_of_reach(node: Mapping[str, Any], resource: str, dra: DraFree) -> bool:
    """A request for `resource` cannot get the node's DRA devices: the node does not advertise it and no
    DeviceClass serves it (``extendedResourceName``; where DRAExtendedResource is off, as in 1.34, none does)."""
    return resource not in node["allocatable"] and mapping_class(dra, resource) is None


def unserved_resource_note(
    dra: DraFree, resource: str, nodes: Sequence[Mapping[str, Any]], named: int = 5
) -> str | None:
    """What a pod asking for `resource` cannot get, said once: the devices DRA drivers publish on nodes that do not
    offer `resource` themselves, where no DeviceClass serves it (its field is dropped by API servers whose
    DRAExtendedResource gate is off, as 1.34's is by default). None where a class serves it or DRA is not read."""
    if not dra.readable:
        return None
    dra_only = sorted(n["name"] for n in nodes if dra.published.get(n["name"]) and out_of_reach(n, resource, dra))
    if not dra_only:
        return None
    more = f" and {len(dra_only) - named} more" if len(dra_only) > named else ""
    return (
        f"no DeviceClass serves {resource} (spec.extendedResourceName; API servers drop the field where the "
        f"DRAExtendedResource feature gate is off, as 1.34 has it): pods that ask for {resource} cannot use the "
        f"devices DRA drivers publish on {len(dra_only)} node(s) ({', '.join(dra_only[:named])}{more}); "
        "they need a ResourceClaim"
    )
