# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The validator's bypass rules (gpu_pod_validate, the offline CLI, the admission policies): one
kind each. The check that finds each is in validate/rules.py under the same id; ``admission`` is
the CEL over the variables of admission/cel.py that lists a kind's findings at admission, or the
reason admission cannot decide it."""

from __future__ import annotations

import json

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import (
    API_SERVER_REFUSES,
    CHECK_VALIDATOR,
    Admission,
    Kind,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.severity import ERROR, WARNING
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.device_annotations import (
    CDI_GPU_DEVICE_PATTERN,
    DEVICE_ANNOTATION_KEYS,
    DEVICE_ANNOTATION_PREFIXES,
    GKE_DEVICE_ANNOTATION_PREFIX,
)

VALIDATOR = (CHECK_VALIDATOR,)
_CDI_KEY = " || ".join(
    [f"k.startsWith('{p}')" for p in DEVICE_ANNOTATION_PREFIXES] + [f"k == '{k}'" for k in DEVICE_ANNOTATION_KEYS]
)


def refused(kind_id: str, name: str, title: str, message: str, remedy: str) -> Kind:
    """A kind of GPU quantity the API server itself refuses: an error, never waived by the allow
    annotation, and left to the API server at admission. Its message is the server's own."""
    return Kind(kind_id, ERROR, title, message, remedy, VALIDATOR, name, False, API_SERVER_REFUSES)


KINDS = (
    Kind(
        "KGPU101",
        ERROR,
        "NVIDIA_VISIBLE_DEVICES (or a MIG device variable) gives GPUs to a container that requests none",
        "{shown} in {who} (from {origin}) {verb} {what}, but the container requests no GPU: the scheduler does "
        "not count them and places other GPU pods on the same cards",
        "Remove the variable and request GPUs in resources.limits (for example nvidia.com/gpu: 1); to keep a "
        "container away from GPUs set NVIDIA_VISIBLE_DEVICES=void.",
        VALIDATOR,
        "visible-devices-without-gpu",
        admission=Admission(
            'variables.deviceEnv.filter(e, !e.gpu && e.selecting.size() > 0).map(e, "container \'" + e.name + '
            '"\': " + e.selecting.join(\', \') + " selects GPUs, but the container requests none")'
        ),
    ),
    Kind(
        "KGPU102",
        ERROR,
        "NVIDIA_VISIBLE_DEVICES (or a MIG device variable) overrides the GPUs the device plugin or a DRA "
        "driver assigned",
        "{shown} in {who} (from {origin}) overrides the GPUs {assigner} assigned for its {request}: it {verb} "
        "{what}, including GPUs the scheduler gave to other pods",
        "Remove the variable from the container: the device plugin, or the DRA driver for a resource claim, "
        "gives it the GPUs the scheduler counted.",
        VALIDATOR,
        "visible-devices-overrides-plugin",
        admission=Admission(
            'variables.deviceEnv.filter(e, e.gpu && e.selecting.size() > 0).map(e, "container \'" + e.name + '
            '"\': " + e.selecting.join(\', \') + " overrides the GPUs assigned for its GPU limit or claim")'
        ),
    ),
    Kind(
        "KGPU103",
        WARNING,
        "NVIDIA_VISIBLE_DEVICES (or a MIG device variable) in a container with GPUs may be set to a value that "
        "cannot be known here",
        "{variable} in {who} comes from {origin}, whose value cannot be known here ({note}); if it names GPUs, "
        "the container gets them beside the GPUs assigned for its GPU limit or claim, without the scheduler "
        "counting them",
        "Remove the variable: the device plugin, or the DRA driver for a resource claim, gives the container the "
        "GPUs the scheduler counted. If it must stay, set it from a literal value.",
        VALIDATOR,
        "visible-devices-unknown",
        admission=Admission(
            'variables.deviceEnv.filter(e, e.gpu && e.unknown.size() > 0).map(e, "container \'" + e.name + "\': " + '
            "e.unknown.join(', ') + \" comes from valueFrom, whose value admission cannot know\")"
        ),
    ),
    Kind(
        "KGPU104",
        ERROR,
        "NVIDIA_VISIBLE_DEVICES (or a MIG device variable) is set from a value that cannot be known here in a "
        "container that requests no GPU",
        "{variable} in {who} comes from {origin}, whose value cannot be known here ({note}), and the container "
        "requests no GPU: whatever the value, the container asks the runtime for GPUs by name, and any GPU it "
        "names is used without the scheduler counting it",
        "Request GPUs in resources.limits (for example nvidia.com/gpu: 1) and remove the variable; to keep a "
        "container away from GPUs set NVIDIA_VISIBLE_DEVICES=void as a literal value. A ConfigMap or Secret key "
        "(or another valueFrom) cannot be read at admission and may change after it, so it is never trusted to "
        "hold void.",
        VALIDATOR,
        "visible-devices-unknown-without-gpu",
        admission=Admission(
            'variables.deviceEnv.filter(e, !e.gpu && e.unknown.size() > 0).map(e, "container \'" + e.name + "\': " + '
            "e.unknown.join(', ') + \" comes from valueFrom, whose value admission cannot know, and the \" + "
            '"container requests no GPU")'
        ),
    ),
    Kind(
        "KGPU201",
        ERROR,
        "A hostPath volume of GPU device nodes or driver files is mounted into a container",
        "{who} mounts hostPath {host_path} (volume {volume!r}) at {mount_path}: {effect}",
        "Remove the hostPath volume and mount; request GPUs in resources.limits if the container has none: the "
        "NVIDIA container toolkit injects the driver files and the device nodes of exactly the GPUs the scheduler "
        "assigned.",
        VALIDATOR,
        "gpu-device-host-path",
        admission=Admission(
            "variables.containers.filter(c, c.?volumeMounts.orValue([]).exists(m, m.name in variables.gpuHostVolumes))"
            '.map(c, "container \'" + c.name + "\' mounts hostPath volume " + '
            "c.volumeMounts.filter(m, m.name in variables.gpuHostVolumes).map(m, m.name).join(', '))"
        ),
    ),
    Kind(
        "KGPU202",
        ERROR,
        "A volume is mounted under /var/run/nvidia-container-devices, where a hardened NVIDIA runtime reads "
        "device requests",
        "{who} mounts volume {volume!r} at {mount_path}: with accept-nvidia-visible-devices-as-volume-mounts the "
        "NVIDIA runtime reads this as a request for the GPUs named under it, which the scheduler does not count",
        "Remove the mount; only the device plugin may request devices this way.",
        VALIDATOR,
        "device-list-volume-mount",
        admission=Admission(
            "variables.containers.filter(c, c.?volumeMounts.orValue([]).exists(m, "
            'm.mountPath.matches(variables.deviceListMountRegex))).map(c, "container \'" + c.name + "\' mounts " + '
            "c.volumeMounts.filter(m, m.mountPath.matches(variables.deviceListMountRegex)).map(m, m.mountPath).join(', '))"
        ),
    ),
    Kind(
        "KGPU203",
        ERROR,
        "A hostPath volume of / or of a directory above the GPU device nodes or driver files is mounted into a "
        "container that is privileged, mounts it writable or shows GPU intent",
        "{who} mounts hostPath {host_path} (volume {volume!r}) at {mount_path}, which holds the node's /dev/nvidia* "
        "device nodes or its driver root under it: {effect}",
        "Mount only the host directory the container needs, never / or a parent of /dev, /run/nvidia or the driver "
        "install directory; an agent that must read the host's root mounts it readOnly: true, unprivileged and "
        "with no sign of GPU use. A container that uses GPUs requests them in resources.limits and gets the driver "
        "from the NVIDIA container toolkit. A GPU system component that needs the host root gets the allow "
        "annotation with a reason.",
        VALIDATOR,
        "gpu-parent-host-path",
        admission=Admission(
            'variables.gpuParentMounts.map(p, "container \'" + p.name + "\' mounts hostPath volume " + '
            "p.volumes.join(', ') + \" of / or a directory above the GPU device nodes or driver files, \" + "
            '"privileged, writable or with GPU intent")'
        ),
    ),
    Kind(
        "KGPU301",
        ERROR,
        "A privileged container (privileged, SYS_ADMIN or ALL capabilities) shows GPU intent",
        "{who} runs with {how} and shows GPU intent ({signs}): a privileged container sees every /dev/nvidia* "
        "device of its node, so it can use GPUs the scheduler gave to other pods",
        "Drop privileged and the SYS_ADMIN/ALL capabilities and request GPUs in resources.limits. If the "
        "container must be privileged (a device plugin or driver), add the allow annotation with a reason.",
        VALIDATOR,
        "privileged-gpu-container",
        admission=Admission(
            'variables.privilegedGpuIntent.map(n, "container \'" + n + "\' runs privileged (privileged, SYS_ADMIN or '
            'ALL capabilities) and shows GPU intent")'
        ),
    ),
    Kind(
        "KGPU302",
        WARNING,
        "A privileged container (privileged, SYS_ADMIN or ALL capabilities) can reach every GPU of its node",
        "{who} runs with {how}; it shows no sign of GPU use, but on a GPU node it can reach every GPU",
        "Drop privileged if it is not needed, or keep the pod off GPU nodes; add the allow annotation with a "
        "reason for system components.",
        VALIDATOR,
        "privileged-container",
        admission=Admission(
            unseen="it is a warning about what the pod lacks, which offline reads include (the image_env option, "
            "envFrom sources) and admission does not; Pod Security's baseline level forbids privileged"
        ),
    ),
    refused(
        "KGPU401",
        "gpu-request-without-limit",
        "A GPU resource is requested without a limit; the API server rejects it",
        "{api_path}.limits: Required value: Limit must be set for non overcommitable resources ({name} is "
        "requested without a limit)",
        "Set the GPU in resources.limits (requests may be omitted: they default to the limits).",
    ),
    refused(
        "KGPU402",
        "gpu-request-not-equal-limit",
        "A GPU request differs from its limit; the API server rejects it",
        '{api_path}.requests: Invalid value: "{value}": must be equal to {name} limit of {limit}',
        "Set the GPU only in resources.limits, or make the request equal to the limit.",
    ),
    refused(
        "KGPU403",
        "gpu-quantity-not-whole",
        "A GPU quantity is not a whole number",
        "{message}",
        "Request whole GPUs (1, 2, ...), and whole units of a sharing resource (MiB, GiB or percent, as its "
        "device plugin counts them); for a share of a GPU use a shared-GPU or MIG resource.",
    ),
    refused(
        "KGPU404",
        "gpu-quantity-negative",
        "A GPU quantity is negative; the API server rejects it",
        "{message}",
        "Use a quantity of 0 or more.",
    ),
    refused(
        "KGPU405",
        "gpu-quantity-malformed",
        "A GPU quantity is not a Kubernetes quantity; the API server rejects it",
        "{message}",
        "Write the quantity as a whole number such as 1.",
    ),
    refused(
        "KGPU406",
        "pod-level-gpu-resources",
        "A GPU resource is set in pod-level spec.resources; the API server rejects it",
        '{api_path}.resources.{section}[{name}]: Unsupported value: "{name}": supported values: "cpu", "memory"',
        "Move the GPU to the resources.limits of the container that uses it.",
    ),
    refused(
        "KGPU407",
        "ephemeral-container-gpu-resources",
        "An ephemeral container sets GPU resources; the API server rejects it",
        "{api_path}: Forbidden: cannot be set for an Ephemeral Container",
        "Remove resources from the ephemeral container.",
    ),
    Kind(
        "KGPU501",
        WARNING,
        "The image sets NVIDIA_VISIBLE_DEVICES=all (or is a legacy CUDA image) and the container requests no GPU",
        "image {image} ({source}) {problem}",
        "Set NVIDIA_VISIBLE_DEVICES=void in the container env, or request the GPU in resources.limits.",
        VALIDATOR,
        "image-visible-devices-all",
        admission=Admission(unseen="an image's configuration is not part of the object; the mutating policy covers it"),
    ),
    Kind(
        "KGPU601",
        WARNING,
        "The pod uses an NVIDIA runtime class but requests no GPU",
        "runtimeClassName {runtime} runs the pod with the NVIDIA runtime, but no container requests a GPU; with "
        "an image or env that selects GPUs it gets them without the scheduler counting them",
        "Request GPUs in resources.limits, or remove runtimeClassName.",
        VALIDATOR,
        "nvidia-runtime-class-without-gpu",
        admission=Admission(
            "!variables.podHasGpu && string(variables.spec.?runtimeClassName.orValue('')).lowerAscii().contains('nvidia') ? "
            '["runtimeClassName " + variables.spec.runtimeClassName + " runs the pod with the NVIDIA runtime"] : []'
        ),
    ),
    Kind(
        "KGPU602",
        WARNING,
        "The pod carries device-injection annotations (CDI, NRI, CRI-O) but requests no GPU",
        "annotation {key} asks the container runtime to inject devices, which are not privilege-gated and not "
        "counted by the scheduler; no container in the pod requests a GPU",
        "Remove the annotation and request GPUs in resources.limits.",
        VALIDATOR,
        "device-annotation-without-gpu",
        admission=Admission(
            f"variables.podHasGpu ? [] : variables.podAnnotations.filter(k, {_CDI_KEY})"
            '.map(k, "annotation " + k + " asks the container runtime to inject devices")'
        ),
    ),
    Kind(
        "KGPU603",
        ERROR,
        "GKE's device injection annotation gives NVIDIA device nodes to a container that requests no GPU",
        "annotation {key} has GKE's device injector create {devices} in {who}, which requests no GPU: it uses "
        "GPUs the scheduler does not count",
        "Remove the devices.gke.io/container.<name> annotation and request GPUs in the container's resources.limits.",
        VALIDATOR,
        "gke-device-injection-without-gpu",
        admission=Admission(
            "variables.deviceEnv.filter(e, !e.gpu && string(variables.podAnnotations[?"
            f"{GKE_DEVICE_ANNOTATION_PREFIX!r} + e.name].orValue('')).matches('/dev/nvidia')).map(e, "
            f'"container \'" + e.name + "\' gets NVIDIA device nodes from annotation {GKE_DEVICE_ANNOTATION_PREFIX}" + e.name)'
        ),
    ),
    Kind(
        "KGPU604",
        ERROR,
        "A CDI device annotation names GPUs beside the GPUs the pod was assigned",
        "annotation {key} asks the container runtime for {devices} ({what}) beside the GPUs the scheduler "
        "assigned ({assigned}): the runtime injects them on top, including GPUs the scheduler gave to other pods",
        "Remove the annotation: the device plugin, or the DRA driver for a resource claim, injects the GPUs the "
        "scheduler counted (as CDI devices where it is configured to).",
        VALIDATOR,
        "cdi-annotation-beside-gpu",
        admission=Admission(
            "variables.podHasGpu ? variables.podAnnotations.filter(k, "
            f"({' || '.join(f'k.startsWith({p!r})' for p in DEVICE_ANNOTATION_PREFIXES)}) && "
            f"string(variables.podAnnotations[k]).matches({json.dumps(CDI_GPU_DEVICE_PATTERN)}))"
            '.map(k, "annotation " + k + " names GPU devices beside the GPUs the pod was assigned") : []'
        ),
    ),
    Kind(
        "KGPU701",
        WARNING,
        "A ResourceClaim (or claim template) asks for admin access to devices outside the GPU system namespaces",
        "{kind} request {request} asks for admin access in {where}: it reaches devices already allocated to "
        "other pods, which the scheduler does not count as used",
        "Remove adminAccess from the request: admin access is for monitoring and driver components, which run "
        "in the GPU system namespaces (kube-system, gpu-operator, the DRA driver's); Kubernetes grants it only "
        "in namespaces labeled resource.kubernetes.io/admin-access=true.",
        VALIDATOR,
        "claim-admin-access",
        admission=Admission(unseen="Kubernetes grants admin access only in namespaces labeled for it"),
    ),
    Kind(
        "KGPU901",
        WARNING,
        "The allow annotation has no reason, so it is not honoured",
        "annotation {annotation} is set without a reason, so the findings of this object stand",
        'Give the reason as the annotation value, for example: "NVIDIA device plugin".',
        VALIDATOR,
        "allow-annotation-without-reason",
        admission=Admission(unseen="admission exempts namespaces, not annotated objects"),
    ),
)
