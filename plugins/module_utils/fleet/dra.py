# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the fleet facts say of a node's DRA driver and devices, and which pending pods want DRA
GPUs, from the DRA side of the fleet (gpu/dra_fleet.py counts its GPUs)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra import (
    DevicePluginSide,
    claim_holders,
    device_key,
    device_model,
    dual_stack,
    is_gpu_class,
    keeps_pods_away,
    tainted_device_text,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra_fleet import DraFleet
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.health import device_health
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import namespaced_name

SOURCE_DEVICE_PLUGIN = "device_plugin"
SOURCE_DRA = "dra"


# --- one node --------------------------------------------------------------------------------------


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


def tainted_devices(devices: Iterable[Mapping[str, Any]]) -> list[str]:
    return [tainted_device_text(d) for d in devices if keeps_pods_away(d)]


def node_dra_facts(
    name: str,
    device_plugin: DevicePluginSide,
    plugin_pods: Sequence[Mapping[str, Any]],
    fleet: DraFleet,
    every_device: bool = False,
) -> dict[str, Any]:
    """The DRA part of one node's facts: the devices listed are those with a taint, or every device with
    `every_device`; `device_count` counts them all. `served_by_both` names each extended resource the
    device plugin serves here beside a GPU driver's devices, and whether pods hold GPUs both ways."""
    devices = fleet.devices.get(name, [])
    listed = devices if every_device else [d for d in devices if d["taints"]]
    return {
        "readable": fleet.readable,
        "drivers": sorted({d["driver"] for d in devices}),
        "slices": fleet.slice_counts.get(name, 0),
        "device_count": len(devices),
        "devices": [device_facts(d, fleet.holders) for d in listed],
        "pods": claim_holders(devices, fleet.holders)[0],
        "kubelet_plugin_pods": sorted(namespaced_name(p) for p in plugin_pods),
        "kubelet_plugin_ready": any(p["ready"] for p in plugin_pods),
        "served_by_both": dual_stack(device_plugin, devices, fleet.classes, fleet.holders),
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
