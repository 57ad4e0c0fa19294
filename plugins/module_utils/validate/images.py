# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What an image sets in its environment: known CUDA families (gpu/intent.py) and user-given image env."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.intent import known_family
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.visible_devices import VISIBLE_DEVICES
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError

_CUDA_ENV = {VISIBLE_DEVICES: "all"}


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
