# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a pod requests of a node, as the scheduler's NodeResourcesFit adds it up, and what a
node can give: CPU in millicores, memory in bytes, pod slots and GPUs per resource name.

The pod's request is the larger of the sum over its containers plus its sidecars (init containers
with ``restartPolicy: Always``) and each init container with the sidecars started before it;
``spec.overhead`` adds to it; pod-level ``resources.requests`` replace the CPU and memory sums.
Extended resources such as ``nvidia.com/gpu`` take the limit where no request is given.
Source: kubernetes/kubernetes ``pkg/api/v1/resource`` (PodRequests) and
``pkg/scheduler/framework/plugins/noderesources/fit.go`` at v1.37.2.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from decimal import ROUND_CEILING
from functools import lru_cache
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import as_list, as_mapping
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.quantity import QuantityError, parse_quantity

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
BASIC = (CPU, MEMORY)


@lru_cache(maxsize=4096)
def _amount(name: str, value: str) -> int:
    """A quantity as the scheduler counts it: CPU in millicores, anything else in units, rounded up."""
    try:
        parsed = parse_quantity(value)
    except QuantityError:
        return 0
    scaled = parsed * 1000 if name == CPU else parsed
    return max(int(scaled.to_integral_value(rounding=ROUND_CEILING)), 0)


def amount(name: str, value: object) -> int:
    if isinstance(value, bool):
        return 0
    if isinstance(value, (int, float)):
        value = repr(value)
    return _amount(name, value) if isinstance(value, str) else 0


def _wanted(name: str, is_gpu: Callable[[str], bool]) -> bool:
    return name in BASIC or is_gpu(name)


def container_requests(container: Mapping[str, Any], is_gpu: Callable[[str], bool]) -> dict[str, int]:
    resources = as_mapping(container.get("resources"))
    requests = as_mapping(resources.get("requests"))
    limits = as_mapping(resources.get("limits"))
    found: dict[str, int] = {}
    # A limit alone is the request too (the API server defaults it so for every resource).
    for source in (limits, requests):
        for name, value in source.items():
            if isinstance(name, str) and _wanted(name, is_gpu):
                found[name] = amount(name, value)
    return found


def _add(into: dict[str, int], more: Mapping[str, int]) -> None:
    for name, value in more.items():
        into[name] = into.get(name, 0) + value


def _peak(into: dict[str, int], other: Mapping[str, int]) -> None:
    for name, value in other.items():
        if value > into.get(name, 0):
            into[name] = value


def pod_requests(spec: Mapping[str, Any], is_gpu: Callable[[str], bool]) -> dict[str, int]:
    """CPU (millicores), memory (bytes) and GPUs (per resource) one pod asks a node for; zero amounts left out."""
    total: dict[str, int] = {}
    for container in map(as_mapping, as_list(spec.get("containers"))):
        _add(total, container_requests(container, is_gpu))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for container in map(as_mapping, as_list(spec.get("initContainers"))):
        own = container_requests(container, is_gpu)
        if container.get("restartPolicy") == "Always":
            _add(sidecars, own)
            continue
        with_sidecars = dict(sidecars)
        _add(with_sidecars, own)
        _peak(init_peak, with_sidecars)
    _add(total, sidecars)
    _peak(total, init_peak)
    pod_level = as_mapping(as_mapping(spec.get("resources")).get("requests"))
    for name in BASIC:
        if name in pod_level:
            total[name] = amount(name, pod_level[name])
    for name, value in as_mapping(spec.get("overhead")).items():
        if isinstance(name, str) and _wanted(name, is_gpu):
            total[name] = total.get(name, 0) + amount(name, value)
    return {name: value for name, value in total.items() if value > 0}


def node_allocatable(status: Mapping[str, Any], is_gpu: Callable[[str], bool]) -> dict[str, int]:
    """What a node offers the scheduler: CPU, memory, pod slots and GPUs (positive amounts)."""
    found = {}
    for name, value in as_mapping(status.get("allocatable")).items():
        if isinstance(name, str) and (name in BASIC or name == PODS or is_gpu(name)):
            found[name] = amount(name, value)
    return found
