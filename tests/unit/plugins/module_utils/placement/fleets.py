"""Nodes, pods and DRA objects in the API's shape, for the placement tests."""

from __future__ import annotations

from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra import (
    DraObjects,
    project_claim,
    project_device_class,
    project_slice,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import gpu_resource_matcher
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.fleet import PlacementOptions, fleet_of
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.projection import project_node, project_pod

IS_GPU = gpu_resource_matcher()
GPU = "nvidia.com/gpu"


def node(
    name: str,
    gpus: int | None = 8,
    *,
    labels=None,
    taints=None,
    cordoned=False,
    cpu="64",
    memory="512Gi",
    pods="110",
    allocatable_gpus: int | None = None,
) -> dict[str, Any]:
    allocatable = {"cpu": cpu, "memory": memory, "pods": pods}
    capacity = dict(allocatable)
    if gpus is not None:
        capacity[GPU] = str(gpus)
        allocatable[GPU] = str(gpus if allocatable_gpus is None else allocatable_gpus)
    spec: dict[str, Any] = {"taints": taints or []}
    if cordoned:
        spec["unschedulable"] = True
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": spec,
        "status": {"capacity": capacity, "allocatable": allocatable},
    }


def pod(
    name: str,
    gpus: int = 0,
    *,
    node_name: str | None = None,
    cpu: str | None = None,
    memory: str | None = None,
    selector=None,
    tolerations=None,
    phase="Pending",
    claims=None,
    **spec_extra,
) -> dict[str, Any]:
    limits = {GPU: str(gpus)} if gpus else {}
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": "cuda", "resources": {"limits": limits, "requests": requests}}]
    }
    if node_name:
        spec["nodeName"] = node_name
    if selector:
        spec["nodeSelector"] = selector
    if tolerations:
        spec["tolerations"] = tolerations
    if claims:
        spec["resourceClaims"] = [{"name": c, "resourceClaimName": c} for c in claims]
    spec.update(spec_extra)
    return {"metadata": {"name": name, "namespace": "ml"}, "spec": spec, "status": {"phase": phase}}


def dra_slice(node_name: str, gpus: int, product: str = "NVIDIA H100 80GB HBM3") -> dict[str, Any]:
    # The shape of NVIDIA's DRA driver's slices (tests/cluster/dra.py names the source).
    devices = [
        {
            "name": f"gpu-{i}",
            "attributes": {
                "type": {"string": "gpu"},
                "uuid": {"string": f"GPU-{node_name}-{i}"},
                "productName": {"string": product},
            },
            "capacity": {"memory": {"value": "80Gi"}},
        }
        for i in range(gpus)
    ]
    return {
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        }
    }


GPU_CLASS = {  # NVIDIA's chart's gpu.nvidia.com DeviceClass, mapping nvidia.com/gpu (KEP-5004)
    "metadata": {"name": "gpu.nvidia.com"},
    "spec": {
        "selectors": [
            {
                "cel": {
                    "expression": "device.driver == 'gpu.nvidia.com' && "
                    "device.attributes['gpu.nvidia.com'].type == 'gpu'"
                }
            }
        ],
        "extendedResourceName": GPU,
    },
}


def claim(name: str, count: int, node_name: str | None = None, devices=()) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if node_name:
        status["allocation"] = {
            "devices": {
                "results": [
                    {"driver": "gpu.nvidia.com", "pool": node_name, "device": d, "request": "gpu"} for d in devices
                ]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
                ]
            },
        }
    return {
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {
            "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": count}}]}
        },
        "status": status,
    }


def dra_objects(slices=(), claims=(), classes=(GPU_CLASS,)) -> DraObjects:
    return DraObjects(
        classes=[project_device_class(c) for c in classes],
        slices=[project_slice(s) for s in slices],
        claims=[project_claim(c) for c in claims],
    )


def build(nodes, pods, dra: DraObjects | None = None, options: PlacementOptions | None = None):
    """(fleet, pending pods) as the module builds them from its reads."""
    usage: dict[str, dict[str, int]] = {}
    projected = [project_node(n, IS_GPU) for n in nodes]
    pending = [p for p in (project_pod(i, IS_GPU, usage) for i in pods) if p is not None]
    return fleet_of(projected, usage, dra or DraObjects(), options or PlacementOptions()), pending
