# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which extended resource names are GPUs, and how many GPUs a pod holds."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from fnmatch import fnmatchcase
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import as_list, as_mapping
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.quantity import gpu_count

MIG_RESOURCE_PATTERN = "nvidia.com/mig-*"


def gpu_quantities(resources: object, is_gpu: Callable[[str], bool]) -> dict[str, int]:
    return {
        name: gpu_count(value)
        for name, value in as_mapping(resources).items()
        if isinstance(name, str) and is_gpu(name) and gpu_count(value) > 0
    }


def containers_of(spec: Mapping[str, Any], kind: str) -> list[Mapping[str, Any]]:
    return [as_mapping(c) for c in as_list(spec.get(kind))]


def _container_gpus(container: Mapping[str, Any], is_gpu: Callable[[str], bool]) -> dict[str, int]:
    """GPU limits of a container; for extended resources a request alone means the same amount."""
    resources = as_mapping(container.get("resources"))
    limits = gpu_quantities(resources.get("limits"), is_gpu)
    requests = gpu_quantities(resources.get("requests"), is_gpu)
    return {**requests, **limits}


def is_sidecar(container: Mapping[str, Any]) -> bool:
    return container.get("restartPolicy") == "Always"


def pod_gpus(spec: Mapping[str, Any], is_gpu: Callable[[str], bool]) -> dict[str, int]:
    """The GPUs a pod holds per resource, as the scheduler computes a pod's request.

    Regular containers and sidecar init containers run together and add up; ordinary init
    containers run one at a time before them, so only the largest of those counts.
    """
    running: dict[str, int] = defaultdict(int)
    init_peak: dict[str, int] = defaultdict(int)
    for container in containers_of(spec, "containers"):
        for name, count in _container_gpus(container, is_gpu).items():
            running[name] += count
    for container in containers_of(spec, "initContainers"):
        for name, count in _container_gpus(container, is_gpu).items():
            if is_sidecar(container):
                running[name] += count
            else:
                init_peak[name] = max(init_peak[name], count)
    return {name: max(running[name], init_peak[name]) for name in sorted(set(running) | set(init_peak))}


NVIDIA_GPU = "nvidia.com/gpu"

# Whole GPUs, MIG slices, other vendors' whole GPUs, and the shared-GPU resources that
# ACK, the GPU Operator and HAMi advertise: all of them are scheduler-visible GPU use.
DEFAULT_GPU_RESOURCE_PATTERNS = (
    "nvidia.com/gpu",
    "nvidia.com/gpu.shared",
    "nvidia.com/mig-*",
    "*/gpu",
    "aliyun.com/gpu-mem",
    "aliyun.com/gpu-core.percentage",
    "nvidia.com/gpumem",
    "nvidia.com/gpucores",
)


def gpu_resource_matcher(extra: Iterable[str] = ()) -> Callable[[str], bool]:
    """A predicate telling whether a resource name is a GPU, given extra names or globs."""
    patterns = tuple(DEFAULT_GPU_RESOURCE_PATTERNS) + tuple(extra)
    exact = frozenset(p for p in patterns if not any(c in p for c in "*?["))
    globs = tuple(p for p in patterns if p not in exact)

    def is_gpu(name: str) -> bool:
        return name in exact or any(fnmatchcase(name, g) for g in globs)

    return is_gpu
