# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bypass rules, one table entry each: id, name, severity, title, remedy, the message of a
finding, and the check that finds it.

A check takes the facts of one pod spec (analysis.PodFacts) and yields hits: the container (None
for the pod), the JSON path, and the fields its rule's message is written with. A new rule is a
check here and a row in RULES.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.severity import ERROR, WARNING
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra import GPU_SYSTEM_NAMESPACES
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
    PodFacts,
    pod_gpu_intent,
)

TOOL_NAME = "kubegpu.scheduling.gpu_pod_validate"
TOOL_VERSION = "1.0.0"
TOOL_URI = "https://github.com/kubegpu/scheduling"
DEFAULT_ALLOW_ANNOTATION = "kubegpu.io/allow-bypass"

# `cu121`: the CUDA build tag of Ray, PyTorch wheels and many images (rayproject/ray:2.9.0-py310-cu121).
_GPU_WORDS = re.compile(r"cuda|nvidia|nvcc|dcgm|tensorrt|triton|gpu|\bcu\d{2,3}\b", re.IGNORECASE)
_DEVICE_ANNOTATION_PREFIXES = ("cdi.k8s.io/", "devices.nri.io/")
_DEVICE_ANNOTATION_KEYS = ("io.kubernetes.cri-o.Devices",)
# GKE's NRI device injector (GoogleCloudPlatform/container-engine-accelerators, nri_device_injector):
# `devices.gke.io/container.<name>` lists device nodes (`- path: /dev/nvidia0`) to create in that container.
GKE_DEVICE_ANNOTATION_PREFIX = "devices.gke.io/container."
_NVIDIA_DEVICE_NODE = re.compile(r"/dev/nvidia[\w-]*")


@dataclass(frozen=True)
class Hit:
    container: ContainerSite | None
    path: str
    fields: dict[str, Any] = field(default_factory=dict)


Check = Callable[[PodFacts], Iterable[Hit]]


@dataclass(frozen=True)
class Admission:
    """How an admission policy decides a rule. ``findings`` is a CEL expression over the variables
    the policy defines (admission/cel.py: spec, containers, deviceEnv, gpuHostVolumes, podHasGpu,
    podAnnotations) that gives one line per finding, naming the container; it is empty when
    admission cannot decide the rule, and ``unseen`` says why."""

    findings: str = ""
    unseen: str = ""


API_SERVER_REFUSES = Admission(unseen="the API server's own validation refuses it before admission policies run")


@dataclass(frozen=True)
class Rule:
    id: str
    name: str
    severity: str
    title: str
    remedy: str
    message: str  # a finding's message: str.format over its hit's fields
    check: Check
    allowable: bool = True
    admission: Admission | None = None  # None: not yet said whether admission can decide it

    def describe(self, hit: Hit) -> str:
        return self.message.format(**hit.fields)


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


def visible_devices_unknown(pod: PodFacts) -> Iterator[Hit]:
    for c in pod.containers:
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
    if isinstance(image, str) and (c.image_env is not None or _GPU_WORDS.search(image)):
        signs.append(f"image {image}")
    command = " ".join(str(a) for a in (*as_list(container.get("command")), *as_list(container.get("args"))))
    tool = _GPU_WORDS.search(command)
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
        devices = sorted(set(_NVIDIA_DEVICE_NODE.findall(value))) if isinstance(value, str) else []
        if c is not None and not c.has_gpu and devices:
            where = key_path(f"{pod.site.metadata_path}.annotations", key)
            yield Hit(c.site, where, dict(key=key, who=c.who, devices=", ".join(devices)))


def device_annotation_without_gpu(pod: PodFacts) -> Iterator[Hit]:
    if not pod.site.pod_level or pod.has_gpu:
        return
    for key in as_mapping(pod.site.pod_metadata.get("annotations")):
        if isinstance(key, str) and (key.startswith(_DEVICE_ANNOTATION_PREFIXES) or key in _DEVICE_ANNOTATION_KEYS):
            yield Hit(None, key_path(f"{pod.site.metadata_path}.annotations", key), dict(key=key))


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


RULES: dict[str, Rule] = {
    rule.id: rule
    for rule in (
        Rule(
            "KGPU101",
            "visible-devices-without-gpu",
            ERROR,
            "NVIDIA_VISIBLE_DEVICES (or a MIG device variable) gives GPUs to a container that requests none",
            "Remove the variable and request GPUs in resources.limits (for example nvidia.com/gpu: 1); to keep a "
            "container away from GPUs set NVIDIA_VISIBLE_DEVICES=void.",
            "{shown} in {who} (from {origin}) {verb} {what}, but the container requests no GPU: the scheduler does "
            "not count them and places other GPU pods on the same cards",
            partial(gpu_selections, with_gpu=False),
            admission=Admission(
                'variables.deviceEnv.filter(e, !e.gpu && e.selecting.size() > 0).map(e, "container \'" + e.name + '
                '"\': " + e.selecting.join(\', \') + " selects GPUs, but the container requests none")'
            ),
        ),
        Rule(
            "KGPU102",
            "visible-devices-overrides-plugin",
            ERROR,
            "NVIDIA_VISIBLE_DEVICES (or a MIG device variable) overrides the GPUs the device plugin or a DRA "
            "driver assigned",
            "Remove the variable from the container: the device plugin, or the DRA driver for a resource claim, "
            "gives it the GPUs the scheduler counted.",
            "{shown} in {who} (from {origin}) overrides the GPUs {assigner} assigned for its {request}: it {verb} "
            "{what}, including GPUs the scheduler gave to other pods",
            partial(gpu_selections, with_gpu=True),
            admission=Admission(
                'variables.deviceEnv.filter(e, e.gpu && e.selecting.size() > 0).map(e, "container \'" + e.name + '
                '"\': " + e.selecting.join(\', \') + " overrides the GPUs assigned for its GPU limit or claim")'
            ),
        ),
        Rule(
            "KGPU103",
            "visible-devices-unknown",
            WARNING,
            "NVIDIA_VISIBLE_DEVICES (or a MIG device variable) may be set to a value that cannot be known here",
            "Set the variable from a literal value, or not at all; check the referenced source.",
            "{variable} in {who} comes from {origin}, whose value cannot be known here ({note}); if it names GPUs, "
            "the container gets them without the scheduler counting them",
            visible_devices_unknown,
            admission=Admission(
                'variables.deviceEnv.filter(e, e.unknown.size() > 0).map(e, "container \'" + e.name + "\': " + '
                "e.unknown.join(', ') + \" comes from valueFrom, whose value admission cannot know\")"
            ),
        ),
        Rule(
            "KGPU201",
            "gpu-device-host-path",
            ERROR,
            "A hostPath volume of GPU device nodes or driver files is mounted into a container",
            "Remove the hostPath volume and mount; request GPUs in resources.limits if the container has none: the "
            "NVIDIA container toolkit injects the driver files and the device nodes of exactly the GPUs the scheduler "
            "assigned.",
            "{who} mounts hostPath {host_path} (volume {volume!r}) at {mount_path}: {effect}",
            partial(gpu_mounts, host_path=True),
            admission=Admission(
                "variables.containers.filter(c, c.?volumeMounts.orValue([]).exists(m, m.name in variables.gpuHostVolumes))"
                '.map(c, "container \'" + c.name + "\' mounts hostPath volume " + '
                "c.volumeMounts.filter(m, m.name in variables.gpuHostVolumes).map(m, m.name).join(', '))"
            ),
        ),
        Rule(
            "KGPU202",
            "device-list-volume-mount",
            ERROR,
            "A volume is mounted under /var/run/nvidia-container-devices, where a hardened NVIDIA runtime reads "
            "device requests",
            "Remove the mount; only the device plugin may request devices this way.",
            "{who} mounts volume {volume!r} at {mount_path}: with accept-nvidia-visible-devices-as-volume-mounts the "
            "NVIDIA runtime reads this as a request for the GPUs named under it, which the scheduler does not count",
            partial(gpu_mounts, host_path=False),
            admission=Admission(
                "variables.containers.filter(c, c.?volumeMounts.orValue([]).exists(m, "
                'm.mountPath.matches(variables.deviceListMountRegex))).map(c, "container \'" + c.name + "\' mounts " + '
                "c.volumeMounts.filter(m, m.mountPath.matches(variables.deviceListMountRegex)).map(m, m.mountPath).join(', '))"
            ),
        ),
        Rule(
            "KGPU301",
            "privileged-gpu-container",
            ERROR,
            "A privileged container (privileged, SYS_ADMIN or ALL capabilities) shows GPU intent",
            "Drop privileged and the SYS_ADMIN/ALL capabilities and request GPUs in resources.limits. If the "
            "container must be privileged (a device plugin or driver), add the allow annotation with a reason.",
            "{who} runs with {how} and shows GPU intent ({signs}): a privileged container sees every /dev/nvidia* "
            "device of its node, so it can use GPUs the scheduler gave to other pods",
            partial(privileged_containers, with_intent=True),
            admission=Admission(
                unseen="GPU intent reads the image's configuration; Pod Security's baseline level forbids privileged"
            ),
        ),
        Rule(
            "KGPU302",
            "privileged-container",
            WARNING,
            "A privileged container (privileged, SYS_ADMIN or ALL capabilities) can reach every GPU of its node",
            "Drop privileged if it is not needed, or keep the pod off GPU nodes; add the allow annotation with a "
            "reason for system components.",
            "{who} runs with {how}; it shows no sign of GPU use, but on a GPU node it can reach every GPU",
            partial(privileged_containers, with_intent=False),
            admission=Admission(
                unseen="GPU intent reads the image's configuration; Pod Security's baseline level forbids privileged"
            ),
        ),
        Rule(
            "KGPU401",
            "gpu-request-without-limit",
            ERROR,
            "A GPU resource is requested without a limit; the API server rejects it",
            "Set the GPU in resources.limits (requests may be omitted: they default to the limits).",
            "{api_path}.limits: Required value: Limit must be set for non overcommitable resources ({name} is "
            "requested without a limit)",
            request_without_limit,
            allowable=False,
            admission=API_SERVER_REFUSES,
        ),
        Rule(
            "KGPU402",
            "gpu-request-not-equal-limit",
            ERROR,
            "A GPU request differs from its limit; the API server rejects it",
            "Set the GPU only in resources.limits, or make the request equal to the limit.",
            '{api_path}.requests: Invalid value: "{value}": must be equal to {name} limit of {limit}',
            request_not_equal_limit,
            allowable=False,
            admission=API_SERVER_REFUSES,
        ),
        Rule(
            "KGPU403",
            "gpu-quantity-not-whole",
            ERROR,
            "A GPU quantity is not a whole number",
            "Request whole GPUs (1, 2, ...), and whole units of a sharing resource (MiB, GiB or percent, as its "
            "device plugin counts them); for a share of a GPU use a shared-GPU or MIG resource.",
            "{message}",
            quantity_issue("KGPU403"),
            allowable=False,
            admission=API_SERVER_REFUSES,
        ),
        Rule(
            "KGPU404",
            "gpu-quantity-negative",
            ERROR,
            "A GPU quantity is negative; the API server rejects it",
            "Use a quantity of 0 or more.",
            "{message}",
            quantity_issue("KGPU404"),
            allowable=False,
            admission=API_SERVER_REFUSES,
        ),
        Rule(
            "KGPU405",
            "gpu-quantity-malformed",
            ERROR,
            "A GPU quantity is not a Kubernetes quantity; the API server rejects it",
            "Write the quantity as a whole number such as 1.",
            "{message}",
            quantity_issue("KGPU405"),
            allowable=False,
            admission=API_SERVER_REFUSES,
        ),
        Rule(
            "KGPU406",
            "pod-level-gpu-resources",
            ERROR,
            "A GPU resource is set in pod-level spec.resources; the API server rejects it",
            "Move the GPU to the resources.limits of the container that uses it.",
            '{api_path}.resources.{section}[{name}]: Unsupported value: "{name}": supported values: "cpu", "memory"',
            pod_level_gpu_resources,
            allowable=False,
            admission=API_SERVER_REFUSES,
        ),
        Rule(
            "KGPU407",
            "ephemeral-container-gpu-resources",
            ERROR,
            "An ephemeral container sets GPU resources; the API server rejects it",
            "Remove resources from the ephemeral container.",
            "{api_path}: Forbidden: cannot be set for an Ephemeral Container",
            ephemeral_container_gpu_resources,
            allowable=False,
            admission=API_SERVER_REFUSES,
        ),
        Rule(
            "KGPU501",
            "image-visible-devices-all",
            WARNING,
            "The image sets NVIDIA_VISIBLE_DEVICES=all (or is a legacy CUDA image) and the container requests no GPU",
            "Set NVIDIA_VISIBLE_DEVICES=void in the container env, or request the GPU in resources.limits.",
            "image {image} ({source}) {problem}",
            image_selects_gpus,
            admission=Admission(
                unseen="an image's configuration is not part of the object; the mutating policy covers it"
            ),
        ),
        Rule(
            "KGPU601",
            "nvidia-runtime-class-without-gpu",
            WARNING,
            "The pod uses an NVIDIA runtime class but requests no GPU",
            "Request GPUs in resources.limits, or remove runtimeClassName.",
            "runtimeClassName {runtime} runs the pod with the NVIDIA runtime, but no container requests a GPU; with "
            "an image or env that selects GPUs it gets them without the scheduler counting them",
            nvidia_runtime_class_without_gpu,
            admission=Admission(
                "!variables.podHasGpu && string(variables.spec.?runtimeClassName.orValue('')).lowerAscii().contains('nvidia') ? "
                '["runtimeClassName " + variables.spec.runtimeClassName + " runs the pod with the NVIDIA runtime"] : []'
            ),
        ),
        Rule(
            "KGPU602",
            "device-annotation-without-gpu",
            WARNING,
            "The pod carries device-injection annotations (CDI, NRI, CRI-O) but requests no GPU",
            "Remove the annotation and request GPUs in resources.limits.",
            "annotation {key} asks the container runtime to inject devices, which are not privilege-gated and not "
            "counted by the scheduler; no container in the pod requests a GPU",
            device_annotation_without_gpu,
            admission=Admission(
                "variables.podHasGpu ? [] : variables.podAnnotations.filter(k, "
                + " || ".join(
                    [f"k.startsWith('{p}')" for p in _DEVICE_ANNOTATION_PREFIXES]
                    + [f"k == '{k}'" for k in _DEVICE_ANNOTATION_KEYS]
                )
                + ').map(k, "annotation " + k + " asks the container runtime to inject devices")'
            ),
        ),
        Rule(
            "KGPU603",
            "gke-device-injection-without-gpu",
            ERROR,
            "GKE's device injection annotation gives NVIDIA device nodes to a container that requests no GPU",
            "Remove the devices.gke.io/container.<name> annotation and request GPUs in the container's "
            "resources.limits.",
            "annotation {key} has GKE's device injector create {devices} in {who}, which requests no GPU: it uses "
            "GPUs the scheduler does not count",
            gke_device_injection_without_gpu,
            admission=Admission(
                "variables.deviceEnv.filter(e, !e.gpu && string(variables.podAnnotations[?"
                f"{GKE_DEVICE_ANNOTATION_PREFIX!r} + e.name].orValue('')).matches('/dev/nvidia')).map(e, "
                f'"container \'" + e.name + "\' gets NVIDIA device nodes from annotation {GKE_DEVICE_ANNOTATION_PREFIX}" + e.name)'
            ),
        ),
        Rule(
            "KGPU701",
            "claim-admin-access",
            WARNING,
            "A ResourceClaim (or claim template) asks for admin access to devices outside the GPU system namespaces",
            "Remove adminAccess from the request: admin access is for monitoring and driver components, which run "
            "in the GPU system namespaces (kube-system, gpu-operator, the DRA driver's); Kubernetes grants it only "
            "in namespaces labeled resource.kubernetes.io/admin-access=true.",
            "{kind} request {request} asks for admin access in {where}: it reaches devices already allocated to "
            "other pods, which the scheduler does not count as used",
            admin_access_outside_system_namespaces,
            admission=Admission(unseen="Kubernetes grants admin access only in namespaces labeled for it"),
        ),
        Rule(
            "KGPU901",
            "allow-annotation-without-reason",
            WARNING,
            "The allow annotation has no reason, so it is not honoured",
            'Give the reason as the annotation value, for example: "NVIDIA device plugin".',
            "annotation {annotation} is set without a reason, so the findings of this object stand",
            allow_annotation_without_reason,
            admission=Admission(unseen="admission exempts namespaces, not annotated objects"),
        ),
    )
}
