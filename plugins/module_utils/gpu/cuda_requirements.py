# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The CUDA version a container needs and the oldest driver that gives it.

A CUDA image declares ``NVIDIA_REQUIRE_CUDA=cuda>=12.4 brand=tesla,driver>=470,driver<471 ...`` in its
config, and the NVIDIA container toolkit refuses to start it on a driver whose CUDA version is lower
("unsatisfied condition: cuda>=12.4"). Space-separated constraints are ORed and comma-separated ones
ANDed (NVIDIA/libnvidia-container, the ``NVIDIA_REQUIRE_*`` variables): the ``brand=...,driver>=...``
alternatives let data-center GPUs run the image on an older driver through the CUDA forward
compatibility package, so a driver inside one of those ranges satisfies the image too.
``NVIDIA_DISABLE_REQUIRE`` turns the check off.

Where the pod spec does not set the variable, the image tag says the CUDA version for the image
families below; an image whose CUDA version cannot be known is not judged.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.intent import image_repository
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.visible_devices import REQUIRE_CUDA
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import as_list, as_mapping, as_text

DISABLE_REQUIRE = "NVIDIA_DISABLE_REQUIRE"

# The oldest Linux x86_64 driver of each CUDA minor version: NVIDIA CUDA Toolkit Release Notes, table
# "CUDA Toolkit and Corresponding Driver Versions", column "Linux x86_64 Driver Version"
# (https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html), the first release of each minor.
MINIMUM_DRIVER: dict[tuple[int, int], str] = {
    (10, 0): "410.48",
    (10, 1): "418.39",
    (10, 2): "440.33",
    (11, 0): "450.36.06",
    (11, 1): "455.23",
    (11, 2): "460.27.03",
    (11, 3): "465.19.01",
    (11, 4): "470.42.01",
    (11, 5): "495.29.05",
    (11, 6): "510.39.01",
    (11, 7): "515.43.04",
    (11, 8): "520.61.05",
    (12, 0): "525.60.13",
    (12, 1): "530.30.02",
    (12, 2): "535.54.03",
    (12, 3): "545.23.06",
    (12, 4): "550.54.14",
    (12, 5): "555.42.02",
    (12, 6): "560.28.03",
    (12, 8): "570.26",
    (12, 9): "575.51.03",
    (13, 0): "580.65.06",
    (13, 1): "590.44.01",
}


@dataclass(frozen=True)
class TagPattern:
    """Image repositories (a regular expression over the repository, Docker Hub's prefix removed) whose tag says
    the CUDA version, and how (a regular expression with groups major and minor over the tag)."""

    repository: re.Pattern[str]
    tag: re.Pattern[str]
    source: str


TAG_PATTERNS = (
    TagPattern(
        re.compile(r"^(?:nvcr\.io/)?nvidia/cuda$"),
        re.compile(r"^(?P<major>\d+)\.(?P<minor>\d+)"),
        "the CUDA images' tags start with the CUDA version (nvidia/cuda:12.2.0-runtime-ubuntu22.04, "
        "gitlab.com/nvidia/container-images/cuda)",
    ),
    TagPattern(
        re.compile(r".*"),
        re.compile(r"(?:^|[-_])cuda(?P<major>\d+)\.(?P<minor>\d+)"),
        "PyTorch's images name the CUDA they are built on (pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime, "
        "pytorch/pytorch .github/workflows/docker-release.yml), as do many images built FROM nvidia/cuda",
    ),
    TagPattern(
        re.compile(r".*"),
        re.compile(r"(?:^|[-_])cu(?P<major>\d\d)(?P<minor>\d)(?:[-_.]|$)"),
        "Ray's GPU images and PyTorch's wheels name CUDA as cuXYZ (rayproject/ray:2.9.0-py310-cu121, "
        "ray-project/ray docker/base-deps)",
    ),
)

_CUDA_CONSTRAINT = re.compile(r"^cuda>=(\d+)\.(\d+)$")
_DRIVER_CONSTRAINT = re.compile(r"^driver(>=|<)(\d+(?:\.\d+)*)$")


@dataclass(frozen=True)
class CudaNeed:
    """What a container needs of the driver: CUDA major.minor, where that was read, and the driver
    ranges (major versions, low inclusive, high exclusive) its forward-compatibility alternatives accept."""

    cuda: tuple[int, int]
    source: str
    alternatives: tuple[tuple[int, int], ...] = ()

    @property
    def text(self) -> str:
        return f"{self.cuda[0]}.{self.cuda[1]}"


def minimum_driver(cuda: tuple[int, int]) -> str | None:
    """The oldest driver of that CUDA version, or of the next one listed when it is not listed; None
    when it is newer than the table."""
    for key in sorted(MINIMUM_DRIVER):
        if key >= cuda:
            return MINIMUM_DRIVER[key]
    return None


def _major(text: str) -> int:
    return int(text.split(".", 1)[0])


def parse_require_cuda(value: str) -> tuple[tuple[int, int] | None, tuple[tuple[int, int], ...]]:
    """The CUDA version of NVIDIA_REQUIRE_CUDA's cuda>= constraint and the driver ranges of its alternatives."""
    cuda = None
    ranges = []
    for alternative in value.split():
        low, high = None, None
        for constraint in alternative.split(","):
            found = _CUDA_CONSTRAINT.match(constraint)
            if found:
                cuda = (int(found[1]), int(found[2]))
            driver = _DRIVER_CONSTRAINT.match(constraint)
            if driver and driver[1] == ">=":
                low = _major(driver[2])
            elif driver:
                high = _major(driver[2])
        if low is not None:
            ranges.append((low, high if high is not None else 1 << 30))
    return cuda, tuple(ranges)


@lru_cache(maxsize=1024)
def image_cuda(image: str) -> tuple[tuple[int, int], str] | None:
    """The CUDA version an image's tag names, with why it is read so, or None."""
    repository, tag = image_repository(image)
    for pattern in TAG_PATTERNS:
        found = pattern.tag.search(tag) if pattern.repository.search(repository) else None
        if found:
            return (int(found["major"]), int(found["minor"])), pattern.source
    return None


def _env(container: Mapping[str, Any]) -> dict[str, str]:
    values = {}
    for entry in map(as_mapping, as_list(container.get("env"))):
        if isinstance(entry.get("name"), str) and isinstance(entry.get("value"), str):
            values[entry["name"]] = entry["value"]
    return values


def container_cuda_need(container: Mapping[str, Any]) -> CudaNeed | None:
    """What a container needs: NVIDIA_REQUIRE_CUDA as its env sets it, else its image tag's CUDA."""
    env = _env(container) if container.get("env") else {}
    if env.get(DISABLE_REQUIRE, "").lower() in ("1", "true", "yes"):
        return None
    if env.get(REQUIRE_CUDA):
        cuda, ranges = parse_require_cuda(env[REQUIRE_CUDA])
        if cuda is not None:
            return CudaNeed(cuda, f"{REQUIRE_CUDA}={env[REQUIRE_CUDA]}", ranges)
    found = image_cuda(as_text(container.get("image")))
    if found is None:
        return None
    return CudaNeed(found[0], f"image {as_text(container.get('image'))}: {found[1]}")


def unmet_need(containers: Iterable[Mapping[str, Any]], target: tuple[int, ...]) -> tuple[str, CudaNeed, str] | None:
    """The first container whose CUDA needs a driver newer than `target`: (its name, its need, that driver)."""
    for container in containers:
        need = container_cuda_need(container)
        if need is None:
            continue
        minimum = minimum_driver(need.cuda)
        if minimum is not None and _numbers(minimum) <= target:
            continue
        if any(low <= target[0] < high for low, high in need.alternatives):
            continue
        return as_text(container.get("name")), need, minimum or f"newer than {max(MINIMUM_DRIVER.values())}"
    return None


def _numbers(version: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in version.split("."))
