# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What an image sets in its environment: known CUDA families and user-given image env."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.visible_devices import VISIBLE_DEVICES
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError


@dataclass(frozen=True)
class ImageFamily:
    pattern: re.Pattern[str]
    description: str
    tag_pattern: re.Pattern[str] | None = None


_CUDA_ENV = {VISIBLE_DEVICES: "all"}
KNOWN_IMAGE_FAMILIES = (
    ImageFamily(re.compile(r"^(?:.+/)?nvidia/cuda$"), "the official CUDA image"),
    ImageFamily(re.compile(r"^nvcr\.io/nvidia/"), "an NVIDIA NGC image, built on the CUDA base image"),
    ImageFamily(re.compile(r"^nvidia/"), "an NVIDIA image, built on the CUDA base image"),
    ImageFamily(re.compile(r"^(?:.+/)?cuda(?:[-_][^/]*)?$"), "a CUDA image"),
    ImageFamily(re.compile(r"^pytorch/pytorch$"), "the PyTorch image"),
    ImageFamily(re.compile(r"^tensorflow/tensorflow$"), "the TensorFlow GPU image", re.compile(r"gpu")),
    ImageFamily(re.compile(r"^vllm/vllm-openai$"), "the vLLM image, built on the CUDA base image"),
    # ray-project/ray docker/base-deps: the GPU tags (-cu121, -gpu) are built FROM the nvidia/cuda images.
    ImageFamily(
        re.compile(r"^rayproject/ray(?:-ml|-llm)?$"),
        "a Ray GPU image, built on the CUDA base image",
        re.compile(r"(?:^|-)(?:cu\d{2,3}|gpu)(?:-|$)"),
    ),
)


def image_repository(image: str) -> tuple[str, str]:
    """Repository (lower case, Docker Hub defaults removed) and tag of an image reference."""
    ref = image.strip().split("@", 1)[0]
    slash, colon = ref.rfind("/"), ref.rfind(":")
    repo, tag = (ref[:colon], ref[colon + 1 :]) if colon > slash else (ref, "")
    repo = repo.lower()
    for prefix in ("docker.io/", "index.docker.io/", "registry-1.docker.io/"):
        if repo.startswith(prefix):
            repo = repo[len(prefix) :]
            break
    return repo.removeprefix("library/"), tag


def known_family(image: str) -> ImageFamily | None:
    repo, tag = image_repository(image)
    for family in KNOWN_IMAGE_FAMILIES:
        if family.pattern.search(repo) and (family.tag_pattern is None or family.tag_pattern.search(tag)):
            return family
    return None


@dataclass(frozen=True)
class ImageEnv:
    env: Mapping[str, str]
    source: str


class ImageCatalogue:
    """What the image's config env holds: the user's map first (exact, then globs), then known families."""

    def __init__(self, image_env: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self._exact: dict[str, dict[str, str]] = {}
        self._globs: list[tuple[str, dict[str, str]]] = []
        for image, env in (image_env or {}).items():
            values = {str(k): str(v) for k, v in env.items()} if isinstance(env, Mapping) else {}
            if any(c in image for c in "*?["):
                self._globs.append((image, values))
            else:
                self._exact[image] = values
        self._cache: dict[str, ImageEnv | None] = {}

    def lookup(self, image: str) -> ImageEnv | None:
        if image not in self._cache:
            self._cache[image] = self._find(image)
        return self._cache[image]

    def _find(self, image: str) -> ImageEnv | None:
        if image in self._exact:
            return ImageEnv(self._exact[image], "the image_env map")
        for pattern, env in self._globs:
            if fnmatchcase(image, pattern):
                return ImageEnv(env, f"the image_env map ({pattern})")
        family = known_family(image)
        return ImageEnv(_CUDA_ENV, family.description) if family else None


def image_env_map(data: Any, where: str) -> dict[str, dict[str, str]]:
    """Validate a map of image to env (name to value); values become strings."""
    if not isinstance(data, dict):
        raise OptionError(f"{where}: expected a map of image to env, got {type(data).__name__}")
    result: dict[str, dict[str, str]] = {}
    for image, env in data.items():
        if not isinstance(env, dict):
            raise OptionError(f"{where}: the env of image {image!r} must be a map of variable to value")
        result[str(image)] = {str(k): "" if v is None else str(v) for k, v in env.items()}
    return result
