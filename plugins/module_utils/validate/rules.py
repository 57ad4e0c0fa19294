# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bypass rules: id, severity, title and remedy of each, and the findings they give."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.severity import ERROR, WARNING
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.workloads import ObjectRef

TOOL_NAME = "kubegpu.scheduling.gpu_pod_validate"
TOOL_VERSION = "1.0.0"
TOOL_URI = "https://github.com/kubegpu/scheduling"
DEFAULT_ALLOW_ANNOTATION = "kubegpu.io/allow-bypass"


@dataclass(frozen=True)
class Rule:
    id: str
    name: str
    severity: str
    title: str
    remedy: str
    allowable: bool = True


RULES: dict[str, Rule] = {
    rule.id: rule
    for rule in (
        Rule(
            "KGPU101",
            "visible-devices-without-gpu",
            ERROR,
            "NVIDIA_VISIBLE_DEVICES (or a MIG device variable) gives GPUs to a container that requests none",
            "Remove the variable and request GPUs in resources.limits (for example nvidia.com/gpu: 1); "
            "to keep a container away from GPUs set NVIDIA_VISIBLE_DEVICES=void.",
        ),
        Rule(
            "KGPU102",
            "visible-devices-overrides-plugin",
            ERROR,
            "NVIDIA_VISIBLE_DEVICES (or a MIG device variable) overrides the GPUs the device plugin assigned",
            "Remove the variable from the container: the device plugin sets it to the GPUs the scheduler counted.",
        ),
        Rule(
            "KGPU103",
            "visible-devices-unknown",
            WARNING,
            "NVIDIA_VISIBLE_DEVICES (or a MIG device variable) may be set to a value that cannot be known here",
            "Set the variable from a literal value, or not at all; check the referenced source.",
        ),
        Rule(
            "KGPU201",
            "gpu-device-host-path",
            ERROR,
            "A hostPath volume of GPU device nodes or driver files is mounted into a container",
            "Remove the hostPath volume and request GPUs in resources.limits; the NVIDIA runtime injects "
            "devices and driver files for the GPUs the scheduler assigned.",
        ),
        Rule(
            "KGPU202",
            "device-list-volume-mount",
            ERROR,
            "A volume is mounted under /var/run/nvidia-container-devices, where a hardened NVIDIA runtime reads "
            "device requests",
            "Remove the mount; only the device plugin may request devices this way.",
        ),
        Rule(
            "KGPU301",
            "privileged-gpu-container",
            ERROR,
            "A privileged container (privileged, SYS_ADMIN or ALL capabilities) shows GPU intent",
            "Drop privileged and the SYS_ADMIN/ALL capabilities and request GPUs in resources.limits. "
            "If the container must be privileged (a device plugin or driver), add the allow annotation with a reason.",
        ),
        Rule(
            "KGPU302",
            "privileged-container",
            WARNING,
            "A privileged container (privileged, SYS_ADMIN or ALL capabilities) can reach every GPU of its node",
            "Drop privileged if it is not needed, or keep the pod off GPU nodes; add the allow annotation "
            "with a reason for system components.",
        ),
        Rule(
            "KGPU401",
            "gpu-request-without-limit",
            ERROR,
            "A GPU resource is requested without a limit; the API server rejects it",
            "Set the GPU in resources.limits (requests may be omitted: they default to the limits).",
            False,
        ),
        Rule(
            "KGPU402",
            "gpu-request-not-equal-limit",
            ERROR,
            "A GPU request differs from its limit; the API server rejects it",
            "Set the GPU only in resources.limits, or make the request equal to the limit.",
            False,
        ),
        Rule(
            "KGPU403",
            "gpu-quantity-not-whole",
            ERROR,
            "A GPU quantity is not a whole number",
            "Request whole GPUs (1, 2, ...); for a share of a GPU use a shared-GPU or MIG resource.",
            False,
        ),
        Rule(
            "KGPU404",
            "gpu-quantity-negative",
            ERROR,
            "A GPU quantity is negative; the API server rejects it",
            "Use a quantity of 0 or more.",
            False,
        ),
        Rule(
            "KGPU405",
            "gpu-quantity-malformed",
            ERROR,
            "A GPU quantity is not a Kubernetes quantity; the API server rejects it",
            "Write the quantity as a whole number such as 1.",
            False,
        ),
        Rule(
            "KGPU406",
            "pod-level-gpu-resources",
            ERROR,
            "A GPU resource is set in pod-level spec.resources; the API server rejects it",
            "Move the GPU to the resources.limits of the container that uses it.",
            False,
        ),
        Rule(
            "KGPU407",
            "ephemeral-container-gpu-resources",
            ERROR,
            "An ephemeral container sets GPU resources; the API server rejects it",
            "Remove resources from the ephemeral container.",
            False,
        ),
        Rule(
            "KGPU501",
            "image-visible-devices-all",
            WARNING,
            "The image sets NVIDIA_VISIBLE_DEVICES=all (or is a legacy CUDA image) and the container requests no GPU",
            "Set NVIDIA_VISIBLE_DEVICES=void in the container env, or request the GPU in resources.limits.",
        ),
        Rule(
            "KGPU601",
            "nvidia-runtime-class-without-gpu",
            WARNING,
            "The pod uses an NVIDIA runtime class but requests no GPU",
            "Request GPUs in resources.limits, or remove runtimeClassName.",
        ),
        Rule(
            "KGPU602",
            "device-annotation-without-gpu",
            WARNING,
            "The pod carries device-injection annotations (CDI, NRI, CRI-O) but requests no GPU",
            "Remove the annotation and request GPUs in resources.limits.",
        ),
        Rule(
            "KGPU901",
            "allow-annotation-without-reason",
            WARNING,
            "The allow annotation has no reason, so it is not honoured",
            'Give the reason as the annotation value, for example: "NVIDIA device plugin".',
        ),
    )
}


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: str
    ref: ObjectRef
    container: str | None
    path: str
    message: str
    remedy: str
    line: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "name": RULES[self.rule].name if self.rule in RULES else self.rule,
            "severity": self.severity,
            "kind": self.ref.kind,
            "namespace": self.ref.namespace,
            "object_name": self.ref.name,
            "container": self.container,
            "path": self.path,
            "message": self.message,
            "remedy": self.remedy,
            "source": self.ref.source,
            "document": self.ref.document,
            "line": self.line if self.line is not None else self.ref.line,
        }


@dataclass(frozen=True)
class Allowed:
    finding: Finding
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {**self.finding.to_dict(), "allowed_reason": self.reason}
