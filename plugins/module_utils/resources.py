# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which extended resource names are GPUs."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from fnmatch import fnmatchcase

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
