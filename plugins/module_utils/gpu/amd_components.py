# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The AMD GPU system components of the built-in catalogue: ROCm's device plugin and node labeller,
and the operands of the AMD GPU Operator."""

from __future__ import annotations

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.component import (
    ANY_ARGUMENTS,
    Component,
    with_flags,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.published_commands import (
    AMD_DEVICE_PLUGIN,
    AMD_KMM_DEVICE_PLUGIN,
    AMD_NODE_LABELLER,
    AMD_OPERAND_WAITS,
    AMD_WAIT_DRIVER,
)

# The AMD GPU Operator builds its operands' DaemonSets in Go; each waits for the driver in a busybox
# init container (commonConfig.initContainerImage may name another).
_AMD_SOURCE = "ROCm/gpu-operator "
_AMD_NAMESPACES = ("kube-amd-gpu",)
_AMD_INIT_IMAGES = ("busybox",)
_AMD_WAITS = tuple(("sh", "-c", wait) for wait in AMD_OPERAND_WAITS)

AMD_COMPONENTS: tuple[Component, ...] = (
    Component(
        "AMD GPU device plugin",
        ("rocm/k8s-device-plugin",),
        (("./k8s-node-labeller", ANY_ARGUMENTS),),
        entrypoint_args=True,
        namespaces=("kube-system",),
        source="ROCm/k8s-device-plugin k8s-ds-amdgpu-dp.yaml, k8s-ds-amdgpu-labeller.yaml",
    ),
    Component(
        "AMD GPU Operator device config manager",
        ("rocm/device-config-manager",),
        tuple(("sh", "-c", wait) for wait in AMD_WAIT_DRIVER),
        namespaces=("kube-amd-gpu",),
        source="ROCm/gpu-operator example/configManager/daemonset.yaml, internal/configmanager/configmanager.go",
        helper_images=("busybox",),
    ),
    Component(
        "AMD GPU Operator device plugin",
        ("rocm/k8s-device-plugin",),
        (with_flags("sh", "-c", AMD_DEVICE_PLUGIN), ("sh", "-c", AMD_KMM_DEVICE_PLUGIN), *_AMD_WAITS),
        namespaces=_AMD_NAMESPACES,
        source=_AMD_SOURCE + "internal/plugin/plugin.go, internal/kmmmodule/kmmmodule.go",
        helper_images=_AMD_INIT_IMAGES,
    ),
    Component(
        "AMD GPU Operator node labeller",
        ("rocm/k8s-device-plugin", "rocm/k8s-node-labeller"),
        (*(with_flags("sh", "-c", labeller) for labeller in AMD_NODE_LABELLER), *_AMD_WAITS),
        namespaces=_AMD_NAMESPACES,
        source=_AMD_SOURCE + "internal/nodelabeller/nodelabeller.go",
        helper_images=_AMD_INIT_IMAGES,
    ),
    Component(
        "AMD GPU Operator metrics exporter",
        ("rocm/device-metrics-exporter",),
        _AMD_WAITS,
        # The exporter binds to localhost behind kube-rbac-proxy when rbacConfig is enabled.
        entrypoint_args=True,
        namespaces=_AMD_NAMESPACES,
        source=_AMD_SOURCE + "internal/metricsexporter/metricsexporter.go",
        helper_images=(*_AMD_INIT_IMAGES, "brancz/kube-rbac-proxy"),
    ),
    Component(
        "AMD GPU Operator test runner",
        ("rocm/test-runner",),
        _AMD_WAITS,
        namespaces=_AMD_NAMESPACES,
        source=_AMD_SOURCE + "internal/testrunner/testrunner.go",
        helper_images=_AMD_INIT_IMAGES,
    ),
)
