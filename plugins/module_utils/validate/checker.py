# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The checks of one pod spec, compiled once for a run."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.severity import WARNING
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import gpu_resource_matcher
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.toolkit import DEVICE_LIST_MOUNT_ROOTS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.visible_devices import (
    CUDA_VERSION,
    DEVICE_VARIABLES,
    REQUIRE_CUDA,
    VISIBLE_DEVICES,
    device_selection,
    selects_gpus,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import as_list, as_mapping, as_text
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.quantity import format_quantity
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.workloads import (
    ContainerSite,
    ObjectRef,
    PodSpecSite,
    iter_containers,
    join_path,
    key_path,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.env import (
    EnvSources,
    NoEnvSources,
    ResolvedEnv,
    env_may_matter,
    resolve_env,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.images import ImageCatalogue, ImageEnv
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.quantities import (
    QuantityIssue,
    quantity_issues,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.rules import (
    DEFAULT_ALLOW_ANNOTATION,
    RULES,
    Allowed,
    Finding,
)

_GPU_HOST_DIRS = ("/dev/char", "/run/nvidia", "/var/run/nvidia", "/home/kubernetes/bin/nvidia", "/usr/local/nvidia")
_DRIVER_FILE_PREFIXES = ("libnvidia", "libcuda", "nvidia-smi")
_DEVICE_ANNOTATION_PREFIXES = ("cdi.k8s.io/", "devices.nri.io/")
_DEVICE_ANNOTATION_KEYS = ("io.kubernetes.cri-o.Devices",)
_GPU_WORDS = re.compile(r"cuda|nvidia|nvcc|dcgm|tensorrt|triton|gpu", re.IGNORECASE)
_GPU_NODE_LABEL = re.compile(r"nvidia|gpu|accelerator|pci-(?:03\d\d_)?10de", re.IGNORECASE)


@dataclass(frozen=True)
class RuleConfig:
    gpu_resources: tuple[str, ...] = ()
    image_env: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    allow_annotation: str = DEFAULT_ALLOW_ANNOTATION
    skip_rules: frozenset[str] = frozenset()


def unknown_rules(rule_ids: Iterable[str]) -> list[str]:
    return sorted(r for r in rule_ids if r not in RULES)


@dataclass
class ContainerFacts:
    site: ContainerSite
    env: ResolvedEnv
    has_gpu: bool
    gpu_resources: list[str]
    image_env: ImageEnv | None


class PodChecker:
    """The rules, compiled once for a run: a cached GPU-name matcher and image catalogue."""

    def __init__(self, config: RuleConfig | None = None, sources: EnvSources | None = None) -> None:
        self.config = config or RuleConfig()
        self.sources: EnvSources = sources or NoEnvSources()
        self.images = ImageCatalogue(self.config.image_env)
        matcher = gpu_resource_matcher(self.config.gpu_resources)
        self._gpu_names: dict[str, bool] = {}
        self._matcher = matcher

    def is_gpu(self, name: str) -> bool:
        known = self._gpu_names.get(name)
        if known is None:
            known = self._gpu_names[name] = isinstance(name, str) and self._matcher(name)
        return known

    # -- one pod spec ---------------------------------------------------------------------------

    def check(self, site: PodSpecSite) -> tuple[list[Finding], list[Allowed]]:
        findings: list[Finding] = []
        emit = _Emitter(site.ref, findings)
        api_prefix = site.api_path
        containers = [self._container_facts(c, site, emit, api_prefix) for c in iter_containers(site)]
        pod_has_gpu = any(c.has_gpu for c in containers) or bool(as_list(site.spec.get("resourceClaims")))
        volumes = gpu_host_path_volumes(site.spec)
        for facts in containers:
            self._env_rules(facts, emit)
            self._image_rule(facts, emit)
            mounts = _device_mounts(facts.site, volumes, emit)
            self._privilege_rule(facts, site, mounts, emit)
        if site.pod_level:
            self._pod_level_resources(site, emit, api_prefix)
            _runtime_class_rule(site, pod_has_gpu, emit)
            _annotation_rule(site, pod_has_gpu, emit)
        return self._apply_allow(site, findings)

    def _container_facts(
        self, container: ContainerSite, site: PodSpecSite, emit: _Emitter, api_prefix: str
    ) -> ContainerFacts:
        resources = as_mapping(container.container.get("resources"))
        api_path = api_prefix + container.path[len(site.path) :] + ".resources"
        gpu_names: list[str] = []
        has_gpu = False
        if resources:
            gpu_names, has_gpu = self._resource_rules(resources, container, api_path, emit)
        c = container.container
        env = (
            resolve_env(c, container.path, site.ref.namespace, self.sources, site.pod_metadata)
            if env_may_matter(c)
            else ResolvedEnv()
        )
        image = c.get("image")
        image_env = self.images.lookup(image) if isinstance(image, str) and image else None
        return ContainerFacts(container, env, has_gpu, gpu_names, image_env)

    def _resource_rules(
        self, resources: Mapping[str, Any], container: ContainerSite, api_path: str, emit: _Emitter
    ) -> tuple[list[str], bool]:
        limits = as_mapping(resources.get("limits"))
        requests = as_mapping(resources.get("requests"))
        gpu_names = [n for n in (*limits, *requests) if self.is_gpu(n)]
        has_claims = bool(as_list(resources.get("claims")))
        if not gpu_names:
            return [], has_claims
        path = f"{container.path}.resources"
        if container.list_name == "ephemeralContainers":
            emit(container, "KGPU407", path, f"{api_path}: Forbidden: cannot be set for an Ephemeral Container")
            return gpu_names, True
        parsed_limits: dict[str, Decimal | None] = {}
        for name, raw in limits.items():
            if self.is_gpu(name):
                value, issues = quantity_issues(raw, f"{api_path}.limits", key_path(f"{path}.limits", name), name)
                parsed_limits[name] = value
                emit.issues(container, issues)
        for name, raw in requests.items():
            if not self.is_gpu(name):
                continue
            value, issues = quantity_issues(raw, f"{api_path}.requests", key_path(f"{path}.requests", name), name)
            emit.issues(container, issues)
            request_path = key_path(f"{path}.requests", name)
            if name not in limits:
                emit(
                    container,
                    "KGPU401",
                    request_path,
                    f"{api_path}.limits: Required value: Limit must be set for non overcommitable resources "
                    f"({name} is requested without a limit)",
                )
            else:
                limit = parsed_limits.get(name)
                if value is not None and limit is not None and value != limit:
                    emit(
                        container,
                        "KGPU402",
                        request_path,
                        f'{api_path}.requests: Invalid value: "{format_quantity(value)}": must be equal to {name} '
                        f"limit of {format_quantity(limit)}",
                    )
        has_gpu = has_claims or any(v is not None and v > 0 for v in parsed_limits.values())
        return gpu_names, has_gpu

    def _pod_level_resources(self, site: PodSpecSite, emit: _Emitter, api_prefix: str) -> None:
        resources = as_mapping(site.spec.get("resources"))
        for section in ("limits", "requests"):
            for name in as_mapping(resources.get(section)):
                if self.is_gpu(name):
                    emit(
                        None,
                        "KGPU406",
                        key_path(f"{site.path}.resources.{section}", name),
                        f'{api_prefix}.resources.{section}[{name}]: Unsupported value: "{name}": supported values: '
                        '"cpu", "memory"',
                    )

    def _env_rules(self, facts: ContainerFacts, emit: _Emitter) -> None:
        reported_sources: set[int] = set()
        for variable, verb in DEVICE_VARIABLES.items():
            value = facts.env.values.get(variable) or facts.env.opaque_source_for(variable)
            if value is None or id(value) in reported_sources:
                continue
            who = f"container {facts.site.name!r}"
            if value.value is None:
                reported_sources.add(id(value))  # one unknown source may stand for several variables
                emit(
                    facts.site,
                    "KGPU103",
                    value.path,
                    f"{variable} in {who} comes from {value.origin}, whose value cannot be known here "
                    f"({value.note}); if it names GPUs, the container gets them without the scheduler counting them",
                )
                continue
            selection = device_selection(value.value)
            if selection not in ("all", "devices"):
                continue
            what = "every GPU of the node" if selection == "all" else "GPUs by index or id"
            shown = f"{variable}={value.value}" if not value.secret else f"{variable} ({value.shown()})"
            if facts.has_gpu:
                emit(
                    facts.site,
                    "KGPU102",
                    value.path,
                    f"{shown} in {who} (from {value.origin}) overrides the GPUs the device plugin assigned for "
                    f"its {', '.join(facts.gpu_resources) or 'GPU'} limit: it {verb} {what}, including GPUs the "
                    "scheduler gave to other pods",
                )
            else:
                emit(
                    facts.site,
                    "KGPU101",
                    value.path,
                    f"{shown} in {who} (from {value.origin}) {verb} {what}, but the container requests no GPU: "
                    "the scheduler does not count them and places other GPU pods on the same cards",
                )

    def _image_rule(self, facts: ContainerFacts, emit: _Emitter) -> None:
        image_env = facts.image_env
        if image_env is None or facts.has_gpu or facts.env.lookup(VISIBLE_DEVICES) is not None:
            return
        image = facts.site.container.get("image")
        path = f"{facts.site.path}.image"
        baked = image_env.env.get(VISIBLE_DEVICES)
        if baked is not None:
            if selects_gpus(baked):
                emit(
                    facts.site,
                    "KGPU501",
                    path,
                    f"image {image} ({image_env.source}) sets {VISIBLE_DEVICES}={baked} and container "
                    f"{facts.site.name!r} requests no GPU and does not override it: it gets GPUs the scheduler "
                    "does not count",
                )
            return
        cuda = _merged(facts.env, image_env.env, CUDA_VERSION)
        if cuda and not _merged(facts.env, image_env.env, REQUIRE_CUDA):
            emit(
                facts.site,
                "KGPU501",
                path,
                f"image {image} ({image_env.source}) is a legacy CUDA image ({CUDA_VERSION}={cuda} without "
                f"{REQUIRE_CUDA} or {VISIBLE_DEVICES}), for which the NVIDIA runtime defaults to all GPUs; "
                f"container {facts.site.name!r} requests no GPU",
            )

    def _privilege_rule(
        self, facts: ContainerFacts, site: PodSpecSite, device_mounts: list[str], emit: _Emitter
    ) -> None:
        escalations = privilege_escalations(facts.site)
        if not escalations:
            return
        path = escalations[0][0]
        how = ", ".join(what for _path, what in escalations)
        signs = self.gpu_intent(facts, site) + device_mounts
        who = f"container {facts.site.name!r}"
        if signs:
            emit(
                facts.site,
                "KGPU301",
                path,
                f"{who} runs with {how} and shows GPU intent ({'; '.join(signs)}): a privileged container sees "
                "every /dev/nvidia* device of its node, so it can use GPUs the scheduler gave to other pods",
            )
        else:
            emit(
                facts.site,
                "KGPU302",
                path,
                f"{who} runs with {how}; it shows no sign of GPU use, but on a GPU node it can reach every GPU",
            )

    def gpu_intent(self, facts: ContainerFacts, site: PodSpecSite) -> list[str]:
        """Why a container looks like it runs GPU code, in words; empty when nothing suggests it."""
        c = facts.site.container
        signs = [f"GPU resource {name}" for name in facts.gpu_resources]
        if as_list(as_mapping(c.get("resources")).get("claims")):
            signs.append("resource claims")
        signs += [
            f"env {name}"
            for name, v in facts.env.values.items()
            if (name.startswith("NVIDIA_") or name == "CUDA_VISIBLE_DEVICES")
            and not (v.value is not None and device_selection(v.value) == "void" and name in DEVICE_VARIABLES)
        ]
        image = c.get("image")
        if isinstance(image, str) and (facts.image_env is not None or _GPU_WORDS.search(image)):
            signs.append(f"image {image}")
        command = " ".join(str(a) for a in (*as_list(c.get("command")), *as_list(c.get("args"))))
        tool = _GPU_WORDS.search(command)
        if tool:
            signs.append(f"command mentions {tool[0]}")
        return signs + pod_gpu_intent(site.spec)

    def _apply_allow(self, site: PodSpecSite, findings: list[Finding]) -> tuple[list[Finding], list[Allowed]]:
        skip = self.config.skip_rules
        if skip:
            findings = [f for f in findings if f.rule not in skip]
        key = self.config.allow_annotation
        reason, path = _allow_reason(site, key)
        if path is None:
            return findings, []
        if not reason:
            kept = findings
            if "KGPU901" not in skip:
                kept = kept + [
                    Finding(
                        "KGPU901",
                        WARNING,
                        site.ref,
                        None,
                        path,
                        f"annotation {key} is set without a reason, so the findings of this object stand",
                        RULES["KGPU901"].remedy,
                    )
                ]
            return kept, []
        allowed = [Allowed(f, reason) for f in findings if RULES[f.rule].allowable]
        return [f for f in findings if not RULES[f.rule].allowable], allowed


class _Emitter:
    """Collects findings for one object, filling in the rule's severity and remedy."""

    def __init__(self, ref: ObjectRef, sink: list[Finding]) -> None:
        self.ref = ref
        self.sink = sink

    def __call__(self, container: ContainerSite | None, rule_id: str, path: str, message: str) -> None:
        rule = RULES[rule_id]
        self.sink.append(
            Finding(rule_id, rule.severity, self.ref, container.name if container else None, path, message, rule.remedy)
        )

    def issues(self, container: ContainerSite, issues: list[QuantityIssue]) -> None:
        for issue in issues:
            self(container, issue.rule, issue.path, issue.message)


def _merged(env: ResolvedEnv, image_env: Mapping[str, str], name: str) -> str:
    value = env.values.get(name)
    if value is not None:
        return value.value or ""
    return image_env.get(name, "")


def _allow_reason(site: PodSpecSite, key: str) -> tuple[str, str | None]:
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
    signs = []
    for key, value in as_mapping(spec.get("nodeSelector")).items():
        if isinstance(key, str) and _GPU_NODE_LABEL.search(key):
            signs.append(f"node selector {key}={value}")
    for key in _affinity_keys(spec):
        signs.append(f"node affinity on {key}")
    for toleration in as_list(spec.get("tolerations")):
        if isinstance(toleration, dict):
            words = f"{as_text(toleration.get('key'))} {as_text(toleration.get('value'))}"
            if _GPU_NODE_LABEL.search(words):
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
            key = as_mapping(expression).get("key")
            if isinstance(key, str) and _GPU_NODE_LABEL.search(key):
                yield key


def gpu_host_path_volumes(spec: Mapping[str, Any]) -> dict[str, tuple[int, str]]:
    """Volumes of GPU device or driver host paths, by name: (index, host path)."""
    volumes: dict[str, tuple[int, str]] = {}
    for index, volume in enumerate(as_list(spec.get("volumes"))):
        if isinstance(volume, dict) and "hostPath" in volume and isinstance(volume.get("name"), str):
            host_path = as_text(as_mapping(volume.get("hostPath")).get("path"))
            if host_path and gpu_host_path(host_path):
                volumes[volume["name"]] = (index, host_path)
    return volumes


def gpu_host_path(path: str) -> bool:
    """Device nodes (/dev, /dev/nvidia*, /dev/char), the driver root (/run/nvidia) or driver files."""
    normal = posixpath.normpath(path) if path else ""
    if normal in ("/dev", "/dev/char") or normal.startswith("/dev/nvidia"):
        return True
    if any(normal == d or normal.startswith(d + "/") for d in _GPU_HOST_DIRS):
        return True
    return posixpath.basename(normal).startswith(_DRIVER_FILE_PREFIXES)


def device_list_mount(mount_path: str) -> bool:
    if "nvidia-container-devices" not in mount_path:
        return False
    normal = posixpath.normpath(mount_path)
    return any(normal == root or normal.startswith(root + "/") for root in DEVICE_LIST_MOUNT_ROOTS)


def _device_mounts(container: ContainerSite, volumes: Mapping[str, tuple[int, str]], emit: _Emitter) -> list[str]:
    mounts = container.container.get("volumeMounts")
    if not isinstance(mounts, list) or not mounts:
        return []
    spec_path = container.path.rsplit(".", 1)[0]
    found = []
    for index, mount in enumerate(mounts):
        if not isinstance(mount, dict):
            continue
        mount_path = as_text(mount.get("mountPath"))
        if device_list_mount(mount_path):
            emit(
                container,
                "KGPU202",
                f"{container.path}.volumeMounts[{index}].mountPath",
                f"container {container.name!r} mounts volume {mount.get('name')!r} at {mount_path}: with "
                "accept-nvidia-visible-devices-as-volume-mounts the NVIDIA runtime reads this as a request for "
                "the GPUs named under it, which the scheduler does not count",
            )
            found.append(f"mount at {mount_path}")
        entry = volumes.get(as_text(mount.get("name"))) if volumes else None
        if entry is not None:
            volume_index, host_path = entry
            emit(
                container,
                "KGPU201",
                f"{spec_path}.volumes[{volume_index}].hostPath.path",
                f"container {container.name!r} mounts hostPath {host_path} (volume {mount.get('name')!r}) at "
                f"{mount_path}: GPU device nodes or driver files reached this way bypass the scheduler's GPU count",
            )
            found.append(f"hostPath {host_path}")
    return found


def _runtime_class_rule(site: PodSpecSite, pod_has_gpu: bool, emit: _Emitter) -> None:
    runtime = site.spec.get("runtimeClassName")
    if not pod_has_gpu and isinstance(runtime, str) and "nvidia" in runtime.lower():
        emit(
            None,
            "KGPU601",
            f"{site.path}.runtimeClassName",
            f"runtimeClassName {runtime} runs the pod with the NVIDIA runtime, but no container requests a GPU; "
            "with an image or env that selects GPUs it gets them without the scheduler counting them",
        )


def _annotation_rule(site: PodSpecSite, pod_has_gpu: bool, emit: _Emitter) -> None:
    if pod_has_gpu:
        return
    annotations = as_mapping(site.pod_metadata.get("annotations"))
    if not annotations:
        return
    base = f"{site.metadata_path}.annotations"
    for key in annotations:
        if isinstance(key, str) and (key.startswith(_DEVICE_ANNOTATION_PREFIXES) or key in _DEVICE_ANNOTATION_KEYS):
            emit(
                None,
                "KGPU602",
                key_path(base, key),
                f"annotation {key} asks the container runtime to inject devices, which are not privilege-gated "
                "and not counted by the scheduler; no container in the pod requests a GPU",
            )
