# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the optional registry read decides, as pure functions: where an image reference points (registry,
repository, tag or digest), which manifest of an index is the linux/amd64 image, how the registry asks to
be authenticated (its WWW-Authenticate challenge) and which pull-secret credentials answer it, and what
the image's own config env says of its GPUs. The HTTP reads are in registry_reads.py."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.intent import DOCKER_HUB_PREFIXES, split_reference
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.visible_devices import VISIBLE_DEVICES
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.images import ImageEnv, NotRead

# Docker Hub's names as image references write them, and the registry that serves them.
DOCKER_HUB_NAMES = tuple(p.rstrip("/") for p in DOCKER_HUB_PREFIXES)
DOCKER_HUB_REGISTRY = DOCKER_HUB_NAMES[-1]

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
MANIFEST_ACCEPT = ", ".join((OCI_INDEX, OCI_MANIFEST, DOCKER_LIST, DOCKER_MANIFEST))
INDEX_TYPES = (OCI_INDEX, DOCKER_LIST)
PLATFORM = ("linux", "amd64")

# The variables of an image's config that speak of GPUs: the NVIDIA runtime's and the CUDA images'.
_GPU_VARIABLE = re.compile(r"^(?:NVIDIA_[A-Z_]+|CUDA_VERSION)$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_CHALLENGE_PARAM = re.compile(r'(\w+)="([^"]*)"')


@dataclass(frozen=True)
class RegistrySettings:
    """The image_registry option: off by default; per-request timeout and total budget in seconds."""

    read: bool = False
    timeout: float = 5.0
    budget: float = 30.0
    insecure_registries: tuple[str, ...] = ()
    cache_dir: str | None = None
    credentials: Mapping[str, tuple[str, str]] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class ImageRef:
    registry: str  # host[:port] the API is served from
    repository: str
    reference: str  # a tag, or a digest (sha256:...)

    def manifest_path(self, reference: str | None = None) -> str:
        return f"/v2/{self.repository}/manifests/{reference or self.reference}"

    def blob_path(self, digest: str) -> str:
        return f"/v2/{self.repository}/blobs/{digest}"


def parse_image(image: str) -> ImageRef:
    """The registry, repository and reference of an image reference, as a container runtime reads it:
    the first part is a registry when it has a dot or a port or is localhost, else Docker Hub (whose
    one-part names are under library/); no tag is the tag latest."""
    name, tag, digest = split_reference(image)
    first, _slash, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        registry, repository = first, rest
    else:
        registry, repository = DOCKER_HUB_REGISTRY, name
    if registry in DOCKER_HUB_NAMES:
        registry = DOCKER_HUB_REGISTRY
        if "/" not in repository:
            repository = f"library/{repository}"
    return ImageRef(registry, repository.lower(), digest or tag or "latest")


def platform_manifest(index: Mapping[str, Any]) -> str | None:
    """The digest of the linux/amd64 image of an OCI index or Docker manifest list."""
    for entry in index.get("manifests") or []:
        platform = entry.get("platform") or {} if isinstance(entry, Mapping) else {}
        if (platform.get("os"), platform.get("architecture")) == PLATFORM and isinstance(entry.get("digest"), str):
            return str(entry["digest"])
    return None


def config_digest(manifest: Mapping[str, Any]) -> str:
    config = manifest.get("config")
    digest = config.get("digest") if isinstance(config, Mapping) else None
    if not isinstance(digest, str) or not _DIGEST.match(digest):
        raise ValueError("the manifest names no sha256 config digest")
    return digest


@dataclass(frozen=True)
class Challenge:
    scheme: str  # bearer or basic
    params: Mapping[str, str]


def parse_challenge(header: str | None) -> Challenge | None:
    """A WWW-Authenticate header: Bearer realm="...",service="...",scope="..." or Basic realm="..."."""
    if not header:
        return None
    scheme, _space, rest = header.strip().partition(" ")
    return Challenge(scheme.lower(), dict(_CHALLENGE_PARAM.findall(rest)))


def token_url(challenge: Challenge, ref: ImageRef) -> str:
    """Where to ask for a pull token: the challenge's realm with its service and this repository's scope."""
    realm = challenge.params.get("realm", "")
    if not realm.startswith(("https://", "http://")):
        raise ValueError(f"the registry's token realm {realm!r} is not an http(s) URL")
    query = {k: v for k, v in challenge.params.items() if k == "service"}
    query["scope"] = challenge.params.get("scope") or f"repository:{ref.repository}:pull"
    return f"{realm}{'&' if '?' in realm else '?'}{urlencode(query)}"


def basic_header(credentials: tuple[str, str]) -> str:
    return "Basic " + base64.b64encode(f"{credentials[0]}:{credentials[1]}".encode()).decode("ascii")


def _host_of(key: str) -> str:
    host = re.sub(r"^[a-z]+://", "", key.strip().lower()).split("/", 1)[0]
    return DOCKER_HUB_REGISTRY if host in DOCKER_HUB_NAMES else host


def docker_config_credentials(data: Any, where: str) -> dict[str, tuple[str, str]]:
    """The registry credentials of a pull secret's .dockerconfigjson ({"auths": {registry: {auth} or
    {username, password}}}), by registry host."""
    auths = data.get("auths") if isinstance(data, Mapping) else None
    if not isinstance(auths, Mapping):
        raise OptionError(f"{where}: expected a .dockerconfigjson with an auths map")
    found: dict[str, tuple[str, str]] = {}
    for key, entry in auths.items():
        if not isinstance(entry, Mapping):
            continue
        user, password = entry.get("username"), entry.get("password")
        if isinstance(entry.get("auth"), str):
            try:
                user, _colon, password = base64.b64decode(entry["auth"]).decode("utf-8").partition(":")
            except (binascii.Error, UnicodeDecodeError):
                raise OptionError(f"{where}: the auth of {key} is not base64 of user:password") from None
        if isinstance(user, str) and isinstance(password, str):
            found[_host_of(str(key))] = (user, password)
    return found


def config_env(config: Mapping[str, Any]) -> dict[str, str]:
    """The env of an image config (config.Env, NAME=value lines), the last of a name winning."""
    inner = config.get("config")
    lines = inner.get("Env") if isinstance(inner, Mapping) else None
    env: dict[str, str] = {}
    for line in lines or []:
        if isinstance(line, str):
            name, _equals, value = line.partition("=")
            env[name] = value
    return env


def gpu_env(env: Mapping[str, str]) -> dict[str, str]:
    """The NVIDIA and CUDA variables of an image's env: all that is kept of a config (the rest may hold
    what the image's author did not mean to share)."""
    return {name: value for name, value in env.items() if _GPU_VARIABLE.match(name)}


def registry_verdict(env: Mapping[str, str], registry: str, digest: str) -> ImageEnv | None:
    """What the image's own config says: its NVIDIA and CUDA variables where it has any (the rules read
    NVIDIA_VISIBLE_DEVICES, or a legacy CUDA_VERSION), else nothing: a verdict from its name is lifted."""
    gpu_vars = gpu_env(env)
    if not gpu_vars:
        return None
    value = gpu_vars.get(VISIBLE_DEVICES)
    says = f"sets {VISIBLE_DEVICES}={value}" if value is not None else f"sets no {VISIBLE_DEVICES}"
    return ImageEnv(gpu_vars, f"the image's config {says}, read from the registry {registry}, digest {digest}")


def lifted_note(image: str, registry: str, digest: str) -> str:
    return (
        f"image {image}: its config (read from the registry {registry}, digest {digest}) sets no "
        f"{VISIBLE_DEVICES}; the verdict from its name is lifted"
    )


def not_read(image: str, registry: str, error: str) -> NotRead:
    return NotRead(
        f"image {image}: its config could not be read from the registry {registry} ({error}); "
        "the verdict from its name stands"
    )
