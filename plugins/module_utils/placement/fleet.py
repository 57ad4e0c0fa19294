# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The nodes as placement sees them: what is free on each (by GPU source), its model and pool."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra import DraObjects, model_from_devices
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.models import (
    DEFAULT_MODEL_LABEL_KEYS,
    UNKNOWN_MODEL,
    detect_model,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import NVIDIA_GPU
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.dra import DraFree, dra_free, whole_gpus
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.filters import free_resources

SOURCE_DEVICE_PLUGIN = "device_plugin"
SOURCE_DRA = "dra"
# Labels that tell nodes apart one by one: nodes alike but for them pass a shape's filters alike,
# unless the shape selects on one of them.
UNIQUE_LABELS = frozenset({"kubernetes.io/hostname"})


@dataclass(frozen=True)
class PlacementOptions:
    resource: str = NVIDIA_GPU  # the GPU resource the sizes are counted in
    sizes: tuple[int, ...] = (1, 2, 4, 8)
    model_label_keys: tuple[str, ...] = DEFAULT_MODEL_LABEL_KEYS
    pool_label_keys: tuple[str, ...] = ()  # node labels that split a model's nodes into pools
    cpu: int = 0  # millicores per pod of the view's shape
    memory: int = 0  # bytes per pod
    tolerations: tuple[Mapping[str, str], ...] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Fleet:
    nodes: Sequence[Mapping[str, Any]]  # every node, GPU or not (the scheduler weighs them all)
    dra: DraFree
    groups: Sequence[Sequence[Mapping[str, Any]]] = ()  # the nodes by kind: labels but UNIQUE_LABELS, taints, cordon

    @property
    def gpu_nodes(self) -> list[Mapping[str, Any]]:
        return [n for n in self.nodes if n["gpu_node"]]


def _model(node: Mapping[str, Any], devices: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> str:
    model = detect_model(node["labels"], keys).model
    if model is None and devices:
        model = model_from_devices(devices).model
    return model or UNKNOWN_MODEL


def node_state(
    node: Mapping[str, Any], used: Mapping[str, int], dra: DraFree, options: PlacementOptions
) -> dict[str, Any]:
    """A node with its free resources, its free GPUs per source and its pool."""
    free = free_resources(node["allocatable"], used)
    devices = dra.free.get(node["name"], [])
    dp_allocatable = node["allocatable"].get(options.resource, 0)
    by_source = {
        SOURCE_DEVICE_PLUGIN: max(free.get(options.resource, 0), 0) if dp_allocatable else 0,
        SOURCE_DRA: whole_gpus(devices),
    }
    model = _model(node, devices, options.model_label_keys)
    pool = {"model": model, **{key: node["labels"].get(key) for key in options.pool_label_keys}}
    return {
        **node,
        "free": free,
        "gpus_free": by_source[SOURCE_DEVICE_PLUGIN] if dp_allocatable else by_source[SOURCE_DRA],
        "by_source": by_source,
        "withdrawn": max(node["capacity"].get(options.resource, 0) - dp_allocatable, 0)
        + dra.withdrawn.get(node["name"], 0),
        "model": model,
        "pool": pool,
        # Nodes of the same taints and cordon (and the labels a shape selects on) pass its filters alike.
        "taint_signature": hash((repr(node["taints"]), node["unschedulable"])),
        "gpu_node": bool(dp_allocatable or dra.published.get(node["name"]) or model != UNKNOWN_MODEL),
    }


def fleet_of(
    nodes: Iterable[Mapping[str, Any]],
    usage: Mapping[str, Mapping[str, int]],
    dra_objects: DraObjects,
    options: PlacementOptions,
) -> Fleet:
    """The fleet from projected nodes, the usage of the pods bound to them and what DRA drivers publish."""
    dra = dra_free(dra_objects)
    states = [node_state(n, usage.get(n["name"], {}), dra, options) for n in sorted(nodes, key=lambda n: n["name"])]
    return Fleet(states, dra, node_groups(states))


def node_groups(nodes: Iterable[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for node in nodes:
        labels = tuple(sorted((k, v) for k, v in node["labels"].items() if k not in UNIQUE_LABELS))
        groups.setdefault((node["taint_signature"], node["gpu_node"], labels), []).append(node)
    return list(groups.values())


def pool_name(pool: Mapping[str, Any]) -> str:
    extra = [f"{k}={v}" for k, v in pool.items() if k != "model" and v is not None]
    return " ".join([str(pool["model"]), *extra])
