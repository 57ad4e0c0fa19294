# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The checks of the bypass rules, keyed by kind id; each rule's id, name, severity, title,
message, remedy and admission CEL are its kind in findings/kinds/validator.py.

A check takes the facts of one pod spec (analysis.PodFacts) and yields hits: the container (None
for the pod), the JSON path, and the fields its kind's message is written with. A new rule is a
kind there and its check here, in CHECKS.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.catalogue import KINDS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import CHECK_VALIDATOR, Kind
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.device_annotations import (
    CDI_GPU_DEVICE,
    DEVICE_ANNOTATION_KEYS,
    DEVICE_ANNOTATION_PREFIXES,
    GKE_DEVICE_ANNOTATION_PREFIX,
    NVIDIA_DEVICE_NODE,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra import GPU_SYSTEM_NAMESPACES
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.intent import GPU_WORDS_RE
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.visible_devices import (
    ALL,
    CUDA_VERSION,
    DEVICE_VARIABLES,
    DEVICES,
    REQUIRE_CUDA,
    VISIBLE_DEVICES,
    VOID,
    device_selection,
    selects_gpus,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import as_list, as_mapping
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.quantity import format_quantity
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.workloads import ContainerSite, key_path
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.analysis import (
    ContainerFacts,
    Mount,
    PodFacts,
    pod_gpu_intent,
)

TOOL_NAME = "kubegpu.scheduling.gpu_pod_validate"
TOOL_VERSION = "1.0.0"
TOOL_URI = "https://github.com/kubegpu/scheduling"
DEFAULT_ALLOW_ANNOTATION = "kubegpu.io/allow-bypass"

# `cu121`: the CUDA build tag of Ray, PyTorch wheels and many images (rayproject/ray:2.9.0-py310-cu121).


@dataclass(frozen=True)
class Hit:
    """Where a validator check hit: the container (None for the pod), the JSON path, and the
    fields its kind's message is written with (registry.Hit once the checker adds the kind id)."""

    container: ContainerSite | None
    path: str
    fields: dict[str, Any] = field(default_factory=dict)


Check = Callable[[PodFacts], Iterable[Hit]]


# --- NVIDIA_VISIBLE_DEVICES and the MIG device variables ---------------------------------------


def gpu_selections(pod: PodFacts, with_gpu: bool) -> Iterator[Hit]:
    """Device variables that select GPUs, in containers that hold GPUs (or not)."""
    for c in pod.containers:
        if c.has_gpu != with_gpu:
            continue
        for variable, verb, value in c.device_values:
            selection = device_selection(value.value) if value.value is not None else None
            if selection in (ALL, DEVICES):
                shown = f"{variable}={value.value}" if not value.secret else f"{variable} ({value.shown()})"
                what = "every GPU of the node" if selection == ALL else "GPUs by index or id"
                fields = dict(shown=shown, who=c.who, origin=value.origin, verb=verb, what=what, **_assigned(c))
                yield Hit(c.site, value.path, fields)


def _assigned(c: ContainerFacts) -> dict[str, str]:
    """Who assigned the container's GPUs, and for what: its GPU limits, or else its DRA claims."""
    if c.gpu_resources or not c.claims:
        return dict(assigner="the device plugin", request=f"{', '.join(c.gpu_resources) or 'GPU'} limit")
    names = ", ".join(repr(n) for n in c.claims)
    return dict(assigner="the DRA driver", request=f"resource claim{'s' if len(c.claims) > 1 else ''} {names}")


def visible_devices_unknown(pod: PodFacts, with_gpu: bool) -> Iterator[Hit]:
    """Device variables whose value cannot be known here (valueFrom of a source not at hand or known
    only at run time, an unreadable envFrom source whose prefix leads to one), in containers that hold
    GPUs (or not: whatever the value, such a container asks the runtime for GPUs by name)."""
    for c in pod.containers:
        if c.has_gpu != with_gpu:
            continue
        for variable, _verb, value in c.device_values:
            if value.value is None:
                yield Hit(c.site, value.path, dict(variable=variable, who=c.who, origin=value.origin, note=value.note))


# --- devices reached through volumes ------------------------------------------------------------


def gpu_mounts(pod: PodFacts, host_path: bool) -> Iterator[Hit]:
    for c in pod.containers:
        for mount in c.mounts:
            if (mount.host_path is not None) == host_path:
                fields = dict(who=c.who, volume=mount.volume, mount_path=mount.mount_path, host_path=mount.host_path)
                yield Hit(c.site, mount.path, dict(fields, effect=_host_path_effect(c)))


def parent_mounts(pod: PodFacts) -> Iterator[Hit]:
    for c in pod.containers:
        for mount in c.parent_mounts:
            reach = parent_mount_reach(c, pod, mount)
            if reach is not None:
                fields = dict(who=c.who, volume=mount.volume, mount_path=mount.mount_path, host_path=mount.host_path)
                yield Hit(c.site, mount.path, dict(fields, effect=reach))


def parent_mount_reach(c: ContainerFacts, pod: PodFacts, mount: Mount) -> str | None:
    """How a hostPath of / or of a directory above the GPU paths gives the container GPU devices, in
    words; None when it does not. The device nodes under such a mount open only where the
    container's device cgroup allows them: runc and containerd allow an unprivileged container
    only its default devices (/dev/null, /dev/zero, ...) and the ones its GPUs were assigned, so
    /dev/nvidia* reached through a hostPath gives EPERM; a privileged container is allowed every
    device, and SYS_ADMIN (or ALL) lets one lift its device cgroup. So the mount reaches GPUs when the container is
    privileged; else, on a node of another vendor's accelerator, none are there; else when the
    mount is writable (it can change the driver root and the files that decide which GPUs
    containers get), or when the container shows GPU intent (the driver files are what it reads
    the mount for)."""
    if c.escalations:
        how = ", ".join(what for _path, what in c.escalations)
        return (
            f"it runs with {how}, which lets it open every device node of its node, so through the mount it reaches "
            "/dev/nvidia* of GPUs the scheduler gave to other pods"
        )
    if pod.other_accelerator:
        return None
    if not mount.read_only:
        return (
            "the mount is writable, so the container can change the driver root and the host files that decide which "
            "GPUs containers get"
        )
    signs = gpu_intent(c, pod)
    if signs:
        return (
            f"it shows GPU intent ({'; '.join(signs)}) and reads the driver through the mount; {_host_path_effect(c)}"
        )
    return None


def _host_path_effect(c: ContainerFacts) -> str:
    if c.has_gpu:
        return (
            "the NVIDIA container toolkit already injects the driver files and the device nodes of the GPUs it "
            "requests; device nodes reached through the host are not limited to those GPUs"
        )
    return (
        "it requests no GPU, so the GPU device nodes or driver files it reaches this way bypass the scheduler's count"
    )


# --- privileged containers ------------------------------------------------------------------------


def gpu_intent(c: ContainerFacts, pod: PodFacts) -> list[str]:
    """Why a container looks like it runs GPU code, in words; empty when nothing suggests it."""
    container = c.site.container
    signs = [f"GPU resource {name}" for name in c.gpu_resources]
    if as_list(as_mapping(container.get("resources")).get("claims")):
        signs.append("resource claims")
    signs += [
        f"env {name}"
        for name, v in c.env.values.items()
        if (name.startswith("NVIDIA_") or name == "CUDA_VISIBLE_DEVICES")
        and not (v.value is not None and device_selection(v.value) == VOID and name in DEVICE_VARIABLES)
    ]
    image = container.get("image")
    if isinstance(image, str) and (c.image_env is not None or GPU_WORDS_RE.search(image)):
        signs.append(f"image {image}")
    command = " ".join(str(a) for a in (*as_list(container.get("command")), *as_list(container.get("args"))))
    tool = GPU_WORDS_RE.search(command)
    if tool:
        signs.append(f"command mentions {tool[0]}")
    signs += pod_gpu_intent(pod.site.spec)
    return signs + [f"hostPath {m.host_path}" if m.host_path else f"mount at {m.mount_path}" for m in c.mounts]


def privileged_containers(pod: PodFacts, with_intent: bool) -> Iterator[Hit]:
    for c in pod.containers:
        if not c.escalations:
            continue
        signs = gpu_intent(c, pod)
        if bool(signs) == with_intent:
            how = ", ".join(what for _path, what in c.escalations)
            yield Hit(c.site, c.escalations[0][0], dict(who=c.who, how=how, signs="; ".join(signs)))


# --- GPU quantities the API server rejects --------------------------------------------------------


def request_without_limit(pod: PodFacts) -> Iterator[Hit]:
    for c in pod.containers:
        for request in c.requests:
            if all(limit.name != request.name for limit in c.limits):
                yield Hit(c.site, request.path, dict(api_path=c.resources_api_path, name=request.name))


def request_not_equal_limit(pod: PodFacts) -> Iterator[Hit]:
    for c in pod.containers:
        limits = {q.name: q.value for q in c.limits}
        for request in c.requests:
            limit = limits.get(request.name)
            if request.value is not None and limit is not None and request.value != limit:
                quantities = dict(value=format_quantity(request.value), limit=format_quantity(limit))
                yield Hit(c.site, request.path, dict(api_path=c.resources_api_path, name=request.name, **quantities))


def quantity_issue(rule_id: str) -> Check:
    """The check of one of the rules a malformed, negative or fractional quantity breaks; the API
    server's own message comes from quantities.py."""

    def check(pod: PodFacts) -> Iterator[Hit]:
        for c in pod.containers:
            for issue in c.quantity_issues:
                if issue.rule == rule_id:
                    yield Hit(c.site, issue.path, dict(message=issue.message))

    return check


def pod_level_gpu_resources(pod: PodFacts) -> Iterator[Hit]:
    resources = pod.site.spec.get("resources") if pod.site.pod_level else None
    if not isinstance(resources, dict):
        return
    for section in ("limits", "requests"):
        for name in filter(pod.is_gpu, as_mapping(resources.get(section))):
            where = key_path(f"{pod.site.path}.resources.{section}", name)
            yield Hit(None, where, dict(api_path=pod.site.api_path, section=section, name=name))


def ephemeral_container_gpu_resources(pod: PodFacts) -> Iterator[Hit]:
    ephemeral = [c for c in pod.containers if c.ephemeral and c.gpu_resources]
    return (Hit(c.site, f"{c.site.path}.resources", dict(api_path=c.resources_api_path)) for c in ephemeral)


# --- images, runtime classes and device annotations -------------------------------------------


def _merged(c: ContainerFacts, name: str) -> str:
    value = c.env.values.get(name)
    if value is not None:
        return value.value or ""
    return c.image_env.env.get(name, "") if c.image_env is not None else ""


def _image_problem(c: ContainerFacts) -> str | None:
    """How the image gives GPUs to a container that requests none and leaves the variable alone."""
    if c.image_env is None or c.has_gpu or c.env.lookup(VISIBLE_DEVICES) is not None:
        return None
    baked = c.image_env.env.get(VISIBLE_DEVICES)
    if baked is not None:
        if not selects_gpus(baked):
            return None
        return (
            f"sets {VISIBLE_DEVICES}={baked} and {c.who} requests no GPU and does not override it: it gets GPUs "
            "the scheduler does not count"
        )
    cuda = _merged(c, CUDA_VERSION)
    if not cuda or _merged(c, REQUIRE_CUDA):
        return None
    return (
        f"is a legacy CUDA image ({CUDA_VERSION}={cuda} without {REQUIRE_CUDA} or {VISIBLE_DEVICES}), for which "
        f"the NVIDIA runtime defaults to all GPUs; {c.who} requests no GPU"
    )


def image_selects_gpus(pod: PodFacts) -> Iterator[Hit]:
    for c in pod.containers:
        problem = _image_problem(c)
        if problem is not None and c.image_env is not None:
            fields = dict(image=c.site.container.get("image"), source=c.image_env.source, problem=problem)
            yield Hit(c.site, f"{c.site.path}.image", fields)


def nvidia_runtime_class_without_gpu(pod: PodFacts) -> Iterator[Hit]:
    runtime = pod.site.spec.get("runtimeClassName")
    if pod.site.pod_level and not pod.has_gpu and isinstance(runtime, str) and "nvidia" in runtime.lower():
        yield Hit(None, f"{pod.site.path}.runtimeClassName", dict(runtime=runtime))


def gke_device_injection_without_gpu(pod: PodFacts) -> Iterator[Hit]:
    """GKE's injector annotation naming a container that requests no GPU, with NVIDIA device nodes."""
    if not pod.site.pod_level:
        return
    by_name = {c.site.name: c for c in pod.containers}
    for key, value in as_mapping(pod.site.pod_metadata.get("annotations")).items():
        if not isinstance(key, str) or not key.startswith(GKE_DEVICE_ANNOTATION_PREFIX):
            continue
        c = by_name.get(key[len(GKE_DEVICE_ANNOTATION_PREFIX) :])
        devices = sorted(set(NVIDIA_DEVICE_NODE.findall(value))) if isinstance(value, str) else []
        if c is not None and not c.has_gpu and devices:
            where = key_path(f"{pod.site.metadata_path}.annotations", key)
            yield Hit(c.site, where, dict(key=key, who=c.who, devices=", ".join(devices)))


def device_annotation_without_gpu(pod: PodFacts) -> Iterator[Hit]:
    if not pod.site.pod_level or pod.has_gpu:
        return
    for key in as_mapping(pod.site.pod_metadata.get("annotations")):
        if isinstance(key, str) and (key.startswith(DEVICE_ANNOTATION_PREFIXES) or key in DEVICE_ANNOTATION_KEYS):
            yield Hit(None, key_path(f"{pod.site.metadata_path}.annotations", key), dict(key=key))


def device_annotation_beside_gpu(pod: PodFacts) -> Iterator[Hit]:
    """CDI device annotations that name GPU devices in a pod that holds GPUs: the runtime injects
    them on top of the GPUs the device plugin or DRA driver assigned."""
    if not pod.site.pod_level or not pod.has_gpu:
        return
    assigned = "; ".join(f"{c.who}: {_assigned(c)['request']}" for c in pod.containers if c.has_gpu)
    for key, value in as_mapping(pod.site.pod_metadata.get("annotations")).items():
        if not (isinstance(key, str) and isinstance(value, str) and key.startswith(DEVICE_ANNOTATION_PREFIXES)):
            continue
        devices = [f"{kind}={name}" for kind, name in CDI_GPU_DEVICE.findall(value)]
        if devices:
            what = "every GPU of the node" if any(d.endswith("=all") for d in devices) else "GPUs by name"
            fields = dict(key=key, devices=", ".join(devices), what=what, assigned=assigned)
            yield Hit(None, key_path(f"{pod.site.metadata_path}.annotations", key), fields)


# --- DRA claims ------------------------------------------------------------------------------------


def admin_access_outside_system_namespaces(pod: PodFacts) -> Iterator[Hit]:
    namespace = pod.site.ref.namespace
    if namespace in GPU_SYSTEM_NAMESPACES:
        return
    for request, path in pod.admin_requests:
        where = f"namespace {namespace}" if namespace else "the namespace it is applied to"
        yield Hit(None, path, dict(kind=pod.site.ref.kind, request=request or "(no name)", where=where))


def allow_annotation_without_reason(pod: PodFacts) -> Iterator[Hit]:
    if pod.allow_path is not None and not pod.allow_reason:
        yield Hit(None, pod.allow_path, dict(annotation=pod.allow_annotation))


def whole_pod(check: Check) -> Check:
    """A check that judges what a pod spec lacks (a GPU limit, a GPU at all), run on whole pod specs only:
    an overlay template (PodFacts.merged) lacks what the object it is merged into may give. The rest judge
    what a template holds (a device variable, a privileged container, a hostPath), overlay or not."""

    def judged(pod: PodFacts) -> Iterable[Hit]:
        return () if pod.merged else check(pod)

    return judged


# The check of each validator kind (findings/kinds/validator.py), by kind id.
CHECKS: dict[str, Check] = {
    "KGPU101": partial(gpu_selections, with_gpu=False),
    "KGPU102": partial(gpu_selections, with_gpu=True),
    "KGPU103": partial(visible_devices_unknown, with_gpu=True),
    "KGPU104": partial(visible_devices_unknown, with_gpu=False),
    "KGPU201": partial(gpu_mounts, host_path=True),
    "KGPU202": partial(gpu_mounts, host_path=False),
    "KGPU203": parent_mounts,
    "KGPU301": partial(privileged_containers, with_intent=True),
    "KGPU302": partial(privileged_containers, with_intent=False),
    "KGPU401": whole_pod(request_without_limit),
    "KGPU402": request_not_equal_limit,
    "KGPU403": quantity_issue("KGPU403"),
    "KGPU404": quantity_issue("KGPU404"),
    "KGPU405": quantity_issue("KGPU405"),
    "KGPU406": pod_level_gpu_resources,
    "KGPU407": ephemeral_container_gpu_resources,
    "KGPU501": whole_pod(image_selects_gpus),
    "KGPU601": whole_pod(nvidia_runtime_class_without_gpu),
    "KGPU602": whole_pod(device_annotation_without_gpu),
    "KGPU603": whole_pod(gke_device_injection_without_gpu),
    "KGPU604": device_annotation_beside_gpu,
    "KGPU701": admin_access_outside_system_namespaces,
    "KGPU901": allow_annotation_without_reason,
}

# The validator's kinds in the registry's order: id, name, severity, title, message, remedy, admission.
RULES: dict[str, Kind] = {kind.id: kind for kind in KINDS.of_check(CHECK_VALIDATOR)}
