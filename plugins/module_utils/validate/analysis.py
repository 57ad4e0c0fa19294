# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the rules read about one pod spec, worked out once: per container its GPU resources and
quantities, the DRA claims it uses, its environment as the kubelet builds it, its image's
environment, its device mounts and its privileges; for the pod whether it holds GPUs, how it is
annotated and whether it is a known GPU system component (the allow decision); for a
ResourceClaim or ResourceClaimTemplate the requests that ask for admin access."""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.component import Component
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.components import (
    NO_CATALOGUE,
    ComponentCatalogue,
    component_reason,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra import admin_access_requests
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.host_paths import (
    DRIVER_FILE_PREFIXES,
    GPU_HOST_DIRS,
    GPU_PATH_PARENTS,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.intent import GPU_NODE_LABEL_RE
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.other_accelerators import (
    NVIDIA_WORD_RE,
    names_other_accelerator,
    requirement_names_other,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.toolkit import DEVICE_LIST_MOUNT_ROOTS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.visible_devices import DEVICE_VARIABLES
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import as_list, as_mapping, as_text
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.workload_kinds import is_overlay
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.workloads import (
    ContainerSite,
    PodSpecSite,
    api_group,
    iter_containers,
    join_path,
    key_path,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.env import (
    EnvSources,
    EnvValue,
    ResolvedEnv,
    env_may_matter,
    resolve_env,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.images import ImageCatalogue, ImageEnv
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.quantities import (
    QuantityIssue,
    quantity_issues,
)


@dataclass(frozen=True)
class GpuQuantity:
    """One GPU quantity of a container, parsed (None when malformed)."""

    name: str
    value: Decimal | None
    path: str


@dataclass(frozen=True)
class Mount:
    """A volume mount that reaches GPUs: a device-list mount path, or a GPU host path volume."""

    path: str
    mount_path: str
    volume: str | None
    host_path: str | None = None  # set for a hostPath volume of GPU devices or driver files
    read_only: bool = False  # the volume mount says readOnly: true


@dataclass(slots=True)
class ContainerFacts:
    site: ContainerSite
    env: ResolvedEnv
    image_env: ImageEnv | None
    gpu_resources: list[str]
    has_gpu: bool
    resources_api_path: str
    limits: list[GpuQuantity]
    requests: list[GpuQuantity]
    mounts: list[Mount]
    escalations: list[tuple[str, str]]
    device_values: list[tuple[str, str, EnvValue]]  # (variable, what it grants, value)
    quantity_issues: list[QuantityIssue]  # what the API server says of the GPU quantities
    claims: list[str] = field(default_factory=list)  # the pod's resource claims the container uses
    parent_mounts: list[Mount] = field(default_factory=list)  # hostPath volumes of / or above the GPU paths

    @property
    def ephemeral(self) -> bool:
        return self.site.list_name == "ephemeralContainers"

    @property
    def who(self) -> str:
        return f"container {self.site.name!r}"


@dataclass(slots=True)
class PodFacts:
    site: PodSpecSite
    containers: list[ContainerFacts]
    has_gpu: bool
    is_gpu: Callable[[str], bool]
    allow_annotation: str
    allow_reason: str = ""
    allow_path: str | None = None  # where the allow annotation is, if the object carries it
    admin_requests: list[tuple[str, str]] = field(default_factory=list)  # (request, path) with admin access
    component: Component | None = None  # the GPU system component the pod spec runs, if it is one
    other_accelerator: str = ""  # what places the pod on another vendor's accelerator nodes, in words
    # An overlay template, merged into another object's before any pod exists (kube/workload_kinds.py):
    # what it lacks, a GPU limit above all, that object may give, so only what it holds is judged.
    merged: bool = False

    @property
    def allowed_because(self) -> str:
        """Why the pod's allowable findings are allowed ("" when they are not): the reason in its
        allow annotation, else the known GPU system component it runs."""
        if self.allow_reason:
            return self.allow_reason
        return component_reason(self.component) if self.component is not None else ""


def analyse(
    site: PodSpecSite,
    is_gpu: Callable[[str], bool],
    sources: EnvSources,
    images: ImageCatalogue,
    allow_annotation: str,
    components: ComponentCatalogue = NO_CATALOGUE,
) -> PodFacts:
    pod_claims = pod_claim_names(site.spec)
    shared = _SpecShared(
        gpu_host_path_volumes(site.spec), pod_claims, is_gpu, host_path_volumes(site.spec, parent_of_gpu_paths)
    )
    containers = [_container_facts(c, site, shared, sources, images) for c in iter_containers(site)]
    has_gpu = any(c.has_gpu for c in containers) or bool(pod_claims)
    reason, path = allow_annotation_of(site, allow_annotation)
    admin = admin_access_requests(site.claim_spec, site.path) if site.claim_spec is not None else []
    # Recognised by every container of the spec, the ephemeral ones a debug session adds included.
    component = components.recognise(site.spec) if containers else None
    other = other_accelerator_placement(site.spec, [n for c in containers for n in _resource_names(c.site)])
    merged = is_overlay(api_group(site.ref.api_version), site.ref.kind)
    return PodFacts(site, containers, has_gpu, is_gpu, allow_annotation, reason, path, admin, component, other, merged)


def _resource_names(container: ContainerSite) -> list[str]:
    resources = as_mapping(container.container.get("resources"))
    names = (*as_mapping(resources.get("limits")), *as_mapping(resources.get("requests")))
    return [n for n in names if isinstance(n, str)]


def other_accelerator_placement(spec: Mapping[str, Any], resource_names: list[str]) -> str:
    """What confines the pod to another vendor's accelerator nodes (gpu/other_accelerators.py), in
    words; "" when nothing does, or when the pod also asks for NVIDIA (a resource or runtime class
    that names it). A node selector entry or a required node affinity, every term of which names
    one (terms are alternatives), or a resource of another vendor's device plugin."""
    runtime = spec.get("runtimeClassName")
    if any(NVIDIA_WORD_RE.search(n) for n in resource_names) or (
        isinstance(runtime, str) and NVIDIA_WORD_RE.search(runtime)
    ):
        return ""
    for key, value in as_mapping(spec.get("nodeSelector")).items():
        if isinstance(key, str) and names_other_accelerator(f"{key}={as_text(value)}"):
            return f"node selector {key}={as_text(value)}"
    terms = [_other_requirement(t) for t in _required_terms(spec)]
    if terms and all(terms):
        return f"node affinity {' or '.join(terms)}"
    other = [n for n in resource_names if names_other_accelerator(n)]
    return f"resource {other[0]}" if other else ""


def _required_terms(spec: Mapping[str, Any]) -> list[Any]:
    node_affinity = as_mapping(as_mapping(spec.get("affinity")).get("nodeAffinity"))
    required = as_mapping(node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution"))
    return as_list(required.get("nodeSelectorTerms"))


def _other_requirement(term: object) -> str:
    """The requirement of a node selector term that names another vendor's accelerator ("" if none):
    In or Exists on such a key, or In with only such values."""
    for expression in as_list(as_mapping(term).get("matchExpressions")):
        key, operator, values = _requirement(expression)
        if operator in ("In", "Exists") and requirement_names_other(key, values):
            return f"{key} in ({', '.join(values)})" if values else f"{key} exists"
    return ""


def _requirement(expression: object) -> tuple[str, str, list[str]]:
    entry = as_mapping(expression)
    values = [v for v in as_list(entry.get("values")) if isinstance(v, str)]
    return as_text(entry.get("key")), as_text(entry.get("operator")), values


def pod_claim_names(spec: Mapping[str, Any]) -> set[str]:
    """The names of the pod's resource claims (each from a ResourceClaimTemplate or a ResourceClaim)."""
    names = (as_mapping(c).get("name") for c in as_list(spec.get("resourceClaims")))
    return {n for n in names if isinstance(n, str) and n}


@dataclass(frozen=True)
class _SpecShared:
    """What every container of a pod spec is judged with: the GPU hostPath volumes, the pod's claims
    and the GPU resource matcher."""

    volumes: Mapping[str, tuple[int, str]]
    claims: set[str]
    is_gpu: Callable[[str], bool]
    parent_volumes: Mapping[str, tuple[int, str]]


def _container_facts(
    container: ContainerSite, site: PodSpecSite, shared: _SpecShared, sources: EnvSources, images: ImageCatalogue
) -> ContainerFacts:
    c = container.container
    env = (
        resolve_env(c, container.path, site.ref.namespace, sources, site.pod_metadata)
        if env_may_matter(c)
        else ResolvedEnv()
    )
    image = c.get("image")
    image_env = images.lookup(image) if isinstance(image, str) and image else None
    facts = ContainerFacts(
        site=container,
        env=env,
        image_env=image_env,
        gpu_resources=[],
        has_gpu=False,
        resources_api_path="",
        limits=[],
        requests=[],
        mounts=device_mounts(container, shared.volumes),
        escalations=privilege_escalations(container),
        device_values=device_values(env),
        quantity_issues=[],
        parent_mounts=host_path_mounts(container, shared.parent_volumes),
    )
    resources = as_mapping(c.get("resources"))
    if resources:
        facts.claims = [n for n in map(_claim_name, as_list(resources.get("claims"))) if n in shared.claims]
        _read_resources(facts, resources, site, shared.is_gpu)
    return facts


def _claim_name(entry: object) -> str:
    name = as_mapping(entry).get("name")
    return name if isinstance(name, str) else ""


def _read_resources(
    facts: ContainerFacts, resources: Mapping[str, Any], site: PodSpecSite, is_gpu: Callable[[str], bool]
) -> None:
    container = facts.site
    limits = as_mapping(resources.get("limits"))
    requests = as_mapping(resources.get("requests"))
    facts.gpu_resources = [n for n in (*limits, *requests) if is_gpu(n)]
    # A DRA claim counts as a GPU request: which devices it gets is decided by its class, not here.
    has_claims = bool(facts.claims)
    facts.has_gpu = has_claims
    if not facts.gpu_resources:
        return
    api_path = site.api_path + container.path[len(site.path) :] + ".resources"
    facts.resources_api_path = api_path
    if facts.ephemeral:
        facts.has_gpu = True
        return
    path = f"{container.path}.resources"
    for section, quantities, target in (("limits", limits, facts.limits), ("requests", requests, facts.requests)):
        for name, raw in quantities.items():
            if is_gpu(name):
                where = key_path(f"{path}.{section}", name)
                value, issues = quantity_issues(raw, f"{api_path}.{section}", where, name)
                target.append(GpuQuantity(name, value, where))
                facts.quantity_issues += issues
    facts.has_gpu = has_claims or any(q.value is not None and q.value > 0 for q in facts.limits)


def device_values(env: ResolvedEnv) -> list[tuple[str, str, EnvValue]]:
    """(variable, what it grants, value) of each device variable the environment sets; an unknown
    envFrom source that may stand for several variables comes once."""
    if not env.values and not env.opaque:
        return []
    found = []
    seen_unknown: set[int] = set()
    for variable, verb in DEVICE_VARIABLES.items():
        value = env.values.get(variable) or env.opaque_source_for(variable)
        if value is None or id(value) in seen_unknown:
            continue
        if value.value is None:
            seen_unknown.add(id(value))
        found.append((variable, verb, value))
    return found


def allow_annotation_of(site: PodSpecSite, key: str) -> tuple[str, str | None]:
    """The reason given in the allow annotation (pod template first, then the object), and its path."""
    for metadata, base in (
        (site.pod_metadata, site.metadata_path),
        (site.object_metadata, join_path(site.prefix, "metadata")),
    ):
        annotations = as_mapping(metadata.get("annotations"))
        if key in annotations:
            value = annotations[key]
            return (value.strip() if isinstance(value, str) else ""), key_path(f"{base}.annotations", key)
    return "", None


def privilege_escalations(container: ContainerSite) -> list[tuple[str, str]]:
    security = as_mapping(container.container.get("securityContext"))
    if not security:
        return []
    base = f"{container.path}.securityContext"
    found = []
    if security.get("privileged") is True:
        found.append((f"{base}.privileged", "privileged: true"))
    added = as_list(as_mapping(security.get("capabilities")).get("add"))
    for index, capability in enumerate(added):
        if isinstance(capability, str) and capability.strip().upper().removeprefix("CAP_") in ("SYS_ADMIN", "ALL"):
            found.append((f"{base}.capabilities.add[{index}]", f"capability {capability}"))
    return found


def pod_gpu_intent(spec: Mapping[str, Any]) -> list[str]:
    """Signs in the pod's placement that it means NVIDIA GPUs: GPU label keys in its node selector,
    node affinity and tolerations, and an NVIDIA runtime class. A label that names another vendor's
    accelerator (accelerator=huawei-Ascend910, cloud.google.com/gke-tpu-accelerator) is no such sign."""
    signs = []
    for key, value in as_mapping(spec.get("nodeSelector")).items():
        gpu_label = isinstance(key, str) and GPU_NODE_LABEL_RE.search(key)
        if gpu_label and not names_other_accelerator(f"{key}={as_text(value)}"):
            signs.append(f"node selector {key}={value}")
    for key in _affinity_keys(spec):
        signs.append(f"node affinity on {key}")
    for toleration in as_list(spec.get("tolerations")):
        if isinstance(toleration, dict):
            words = f"{as_text(toleration.get('key'))} {as_text(toleration.get('value'))}"
            if GPU_NODE_LABEL_RE.search(words) and not names_other_accelerator(words):
                signs.append(f"toleration {words.strip()}")
    runtime = spec.get("runtimeClassName")
    if isinstance(runtime, str) and "nvidia" in runtime.lower():
        signs.append(f"runtimeClassName {runtime}")
    return signs


def _affinity_keys(spec: Mapping[str, Any]) -> Iterator[str]:
    node_affinity = as_mapping(as_mapping(spec.get("affinity")).get("nodeAffinity"))
    required = as_list(
        as_mapping(node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")).get("nodeSelectorTerms")
    )
    preferred = [
        as_mapping(p).get("preference")
        for p in as_list(node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution"))
    ]
    for term in (*required, *preferred):
        for expression in as_list(as_mapping(term).get("matchExpressions")):
            key, _operator, values = _requirement(expression)
            if GPU_NODE_LABEL_RE.search(key) and not requirement_names_other(key, values):
                yield key


def gpu_host_path_volumes(spec: Mapping[str, Any]) -> dict[str, tuple[int, str]]:
    """Volumes of GPU device or driver host paths, by name: (index, host path)."""
    return host_path_volumes(spec, gpu_host_path)


def host_path_volumes(spec: Mapping[str, Any], wanted: Callable[[str], bool]) -> dict[str, tuple[int, str]]:
    """The hostPath volumes whose path is wanted, by name: (index, host path)."""
    volumes: dict[str, tuple[int, str]] = {}
    for index, volume in enumerate(as_list(spec.get("volumes"))):
        if isinstance(volume, dict) and "hostPath" in volume and isinstance(volume.get("name"), str):
            host_path = as_text(as_mapping(volume.get("hostPath")).get("path"))
            if host_path and wanted(host_path):
                volumes[volume["name"]] = (index, host_path)
    return volumes


def parent_of_gpu_paths(path: str) -> bool:
    """/ or a directory above the device nodes and the driver roots (/run, /var/run, /usr/local, ...)."""
    normal = "/" + posixpath.normpath(path).lstrip("/") if path.startswith("/") else ""
    return normal in GPU_PATH_PARENTS


def gpu_host_path(path: str) -> bool:
    """Device nodes (/dev, /dev/nvidia*, /dev/char), the driver root (/run/nvidia) or driver files."""
    normal = posixpath.normpath(path) if path else ""
    if normal in ("/dev", "/dev/char") or normal.startswith("/dev/nvidia"):
        return True
    if any(normal == d or normal.startswith(d + "/") for d in GPU_HOST_DIRS):
        return True
    return posixpath.basename(normal).startswith(DRIVER_FILE_PREFIXES)


def device_list_mount(mount_path: str) -> bool:
    if "nvidia-container-devices" not in mount_path:
        return False
    normal = posixpath.normpath(mount_path)
    return any(normal == root or normal.startswith(root + "/") for root in DEVICE_LIST_MOUNT_ROOTS)


def device_mounts(container: ContainerSite, volumes: Mapping[str, tuple[int, str]]) -> list[Mount]:
    """The container's mounts under the toolkit's device-list root, and of GPU host path volumes."""
    found = []
    for index, mount in enumerate(as_list(container.container.get("volumeMounts"))):
        mount_path = as_text(as_mapping(mount).get("mountPath"))
        if isinstance(mount, dict) and device_list_mount(mount_path):
            found.append(Mount(f"{container.path}.volumeMounts[{index}].mountPath", mount_path, mount.get("name")))
    return found + host_path_mounts(container, volumes)


def host_path_mounts(container: ContainerSite, volumes: Mapping[str, tuple[int, str]]) -> list[Mount]:
    """The container's mounts of the given hostPath volumes, at the volume's path."""
    mounts = container.container.get("volumeMounts")
    if not volumes or not isinstance(mounts, list):
        return []
    spec_path = container.path.rsplit(".", 1)[0]
    found = []
    for mount in mounts:
        if not isinstance(mount, dict):
            continue
        entry = volumes.get(as_text(mount.get("name")))
        if entry is not None:
            volume_index, host_path = entry
            where = f"{spec_path}.volumes[{volume_index}].hostPath.path"
            read_only = mount.get("readOnly") is True
            found.append(Mount(where, as_text(mount.get("mountPath")), mount.get("name"), host_path, read_only))
    return found
