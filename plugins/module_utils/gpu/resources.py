# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which extended resource names are GPUs, and how many GPUs a pod holds."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from fnmatch import fnmatchcase
from functools import lru_cache
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import as_list, as_mapping
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.quantity import gpu_count

MIG_RESOURCE_PATTERN = "nvidia.com/mig-*"


def gpu_quantities(resources: object, is_gpu: Callable[[str], bool]) -> dict[str, int]:
    counts = {
        name: gpu_count(value)
        for name, value in as_mapping(resources).items()
        if isinstance(name, str) and is_gpu(name)
    }
    return {name: count for name, count in counts.items() if count > 0}


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

# Every extended resource by which a pod asks a device plugin for a GPU or a share of one. They
# answer "does it request a GPU"; only whole GPUs (FleetOptions.counts: nvidia.com/gpu and the MIG
# profiles) are added up as GPU counts, never MiB or percentages. Sources, as the projects name them:
# - NVIDIA/k8s-device-plugin: nvidia.com/gpu; nvidia.com/gpu.shared when time-slicing or MPS renames
#   shared replicas (renameByDefault); nvidia.com/mig-<profile> with the mixed MIG strategy.
# - AliyunContainerService/gpushare-device-plugin and gpushare-scheduler-extender (pkg/utils/const.go):
#   aliyun.com/gpu-mem (GiB of one GPU's memory) and aliyun.com/gpu-count; ACK's cGPU adds
#   aliyun.com/gpu-core.percentage (a percentage of one GPU's compute).
# - volcano-sh/devices (pkg/apis/const.go): volcano.sh/gpu-memory (MiB) and volcano.sh/gpu-number for
#   GPU sharing; its vGPU plugin: volcano.sh/vgpu-number, vgpu-memory (MiB), vgpu-memory-percentage
#   and vgpu-cores (percent).
# - Project-HAMi/HAMi (cmd/device-plugin flags, charts' device-config): nvidia.com/gpumem (MiB),
#   nvidia.com/gpumem-percentage and nvidia.com/gpucores (percent), beside nvidia.com/gpu.
# - ROCm/k8s-device-plugin: amd.com/gpu. Other vendors' whole GPUs are matched by */gpu.
# - intel/intel-device-plugins-for-kubernetes (cmd/gpu_plugin/README.md): gpu.intel.com/i915 and
#   gpu.intel.com/xe (one per GPU, by kernel driver); gpu.intel.com/millicores and
#   gpu.intel.com/memory.max (bytes), node labels that NFD turns into extended resources for sharing.
# - NVIDIA/kubevirt-gpu-device-plugin and the Kata sandbox device plugin the GPU Operator deploys for
#   passthrough GPUs (gpu.workload.config=vm-passthrough): nvidia.com/pgpu (its P_GPU_ALIAS default),
#   or without the alias nvidia.com/<device name> read from pci.ids, upper-cased, spaces as
#   underscores (pkg/device_plugin/device_plugin.go getDeviceName): the chip code, two letters and
#   three digits, first, as in nvidia.com/GA102GL_A10, nvidia.com/GH100_H100_PCIE, nvidia.com/TU104GL_TESLA_T4.
# The API server holds every one of them to the extended-resource rule: a whole number, and a request
# equal to the limit; so `aliyun.com/gpu-mem: 1024` and `nvidia.com/gpucores: 30` are valid quantities.
DEFAULT_GPU_RESOURCE_PATTERNS = (
    NVIDIA_GPU,
    "nvidia.com/gpu.shared",
    MIG_RESOURCE_PATTERN,
    "*/gpu",
    "aliyun.com/gpu-mem",
    "aliyun.com/gpu-count",
    "aliyun.com/gpu-core.percentage",
    "volcano.sh/gpu-memory",
    "volcano.sh/gpu-number",
    "volcano.sh/vgpu-number",
    "volcano.sh/vgpu-memory",
    "volcano.sh/vgpu-memory-percentage",
    "volcano.sh/vgpu-cores",
    "nvidia.com/gpumem",
    "nvidia.com/gpumem-percentage",
    "nvidia.com/gpucores",
    "gpu.intel.com/i915",
    "gpu.intel.com/xe",
    "gpu.intel.com/millicores",
    "gpu.intel.com/memory.max",
    "nvidia.com/pgpu",
    *(f"nvidia.com/{chip}[0-9][0-9][0-9]*" for chip in ("G[A-Z]", "TU", "AD")),
)


def gpu_resource_matcher(extra: Iterable[str] = ()) -> Callable[[str], bool]:
    """A predicate telling whether a resource name is a GPU, given extra names or globs. A cluster uses
    a handful of resource names in every pod, so each answer is kept (up to 1,024 names)."""
    patterns = tuple(DEFAULT_GPU_RESOURCE_PATTERNS) + tuple(extra)
    exact = frozenset(p for p in patterns if not any(c in p for c in "*?["))
    globs = tuple(p for p in patterns if p not in exact)

    @lru_cache(maxsize=1024)
    def is_gpu(name: str) -> bool:
        return name in exact or any(fnmatchcase(name, g) for g in globs)

    return is_gpu
