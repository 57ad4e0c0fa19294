# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Signs that a container means to run GPU code, as data that the offline validator (Python
regular expressions) and the admission policies (CEL's RE2) read alike: words in an image or
command, node label keys of GPU nodes, and the image families built on the CUDA base image.
Every pattern here keeps to the syntax both engines share."""

from __future__ import annotations

import re

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.cuda_images import (
    KNOWN_IMAGE_FAMILIES,
    ImageFamily,
)

# Case-insensitive, searched anywhere in an image reference or a command line.
GPU_WORDS = r"cuda|nvidia|nvcc|dcgm|tensorrt|triton|gpu|\bcu\d{2,3}\b"
# Case-insensitive, searched in node label keys (and toleration keys and values).
GPU_NODE_LABEL = r"nvidia|gpu|accelerator|pci-(?:03\d\d_)?10de"
GPU_WORDS_RE = re.compile(GPU_WORDS, re.IGNORECASE)
GPU_NODE_LABEL_RE = re.compile(GPU_NODE_LABEL, re.IGNORECASE)
# The registry prefixes image_repository removes before a family's pattern is matched.
DOCKER_HUB_PREFIXES = ("docker.io/", "index.docker.io/", "registry-1.docker.io/")


def split_reference(image: str) -> tuple[str, str, str]:
    """Name, tag and digest of an image reference, as written (tag and digest empty where it has none)."""
    name, _at, digest = image.strip().partition("@")
    slash, colon = name.rfind("/"), name.rfind(":")
    if colon > slash:
        return name[:colon], name[colon + 1 :], digest
    return name, "", digest


def image_repository(image: str) -> tuple[str, str]:
    """Repository (lower case, Docker Hub defaults removed) and tag of an image reference."""
    repo, tag, _digest = split_reference(image)
    repo = repo.lower()
    for prefix in DOCKER_HUB_PREFIXES:
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
