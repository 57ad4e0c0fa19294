# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What an image sets in its environment: the user's image env, the image's own config read from its
registry (when that read is on), the known CUDA families (gpu/cuda_images.py), and names that make an
image likely a CUDA build (a pattern match, said so in the finding)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.cuda_images import likely_cuda
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.intent import image_repository, known_family
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.visible_devices import VISIBLE_DEVICES
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError

_CUDA_ENV = {VISIBLE_DEVICES: "all"}


@dataclass(frozen=True)
class ImageEnv:
    env: Mapping[str, str]
    source: str


# What the image's own config says, read from its registry: its env (None where it has no NVIDIA or CUDA
# variable, so the offline verdict is lifted), or None for the read as a whole where it could not be made
# (the offline verdict stands).
ConfigReader = Callable[[str], "ImageEnv | None | NotRead"]


@dataclass(frozen=True)
class NotRead:
    """The image's config could not be read (the reader's notes say why); the offline verdict stands."""

    reason: str


class ImageCatalogue:
    """What the image's config env holds: the user's map first (exact, then globs), then known families."""

    def __init__(
        self, image_env: Mapping[str, Mapping[str, Any]] | None = None, reader: ConfigReader | None = None
    ) -> None:
        self._reader = reader
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
        if self._reader is not None:
            read = self._reader(image)
            if not isinstance(read, NotRead):
                return read
        return offline_image_env(image)


def offline_image_env(image: str) -> ImageEnv | None:
    """What the image's name says of its env: a known CUDA family, else a likely CUDA build by its name
    or tag (a pattern match, said so in the source), else nothing."""
    family = known_family(image)
    if family is not None:
        return ImageEnv(_CUDA_ENV, family.description)
    likely = likely_cuda(*image_repository(image))
    return ImageEnv(_CUDA_ENV, likely.note()) if likely is not None else None


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
