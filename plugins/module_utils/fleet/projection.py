# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fields of a pod the fleet facts need: its GPUs, its role, and GPU use the scheduler misses."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.options import DEFAULT_OPTIONS, FleetOptions
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import containers_of, pod_gpus
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.visible_devices import (
    VISIBLE_DEVICES,
    selects_gpus,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import (
    as_list,
    as_mapping,
    as_text,
    condition_true,
    string_map,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.pods import FINISHED_POD_PHASES

ROLE_WORKLOAD = "workload"
ROLE_DEVICE_PLUGIN = "device_plugin"
ROLE_EXEMPT = "exempt"


def _visible_devices_setting(container: Mapping[str, Any]) -> str | None:
    """How a container sets NVIDIA_VISIBLE_DEVICES in `env` (the last entry wins), or None."""
    setting = None
    for entry in map(as_mapping, as_list(container.get("env"))):
        if entry.get("name") != VISIBLE_DEVICES:
            continue
        if "valueFrom" in entry:
            setting = f"{VISIBLE_DEVICES} from a reference"
        else:
            value = entry.get("value")
            value = value if isinstance(value, str) else ""
            setting = f"{VISIBLE_DEVICES}={value}" if selects_gpus(value) else None
    return setting


def visible_devices_findings(spec: Mapping[str, Any]) -> list[str]:
    """Containers that ask the NVIDIA runtime for GPUs through the environment."""
    findings = []
    for kind in ("initContainers", "containers", "ephemeralContainers"):
        for container in containers_of(spec, kind):
            setting = _visible_devices_setting(container)
            if setting:
                findings.append(f"container {container.get('name', '?')}: {setting}")
    return findings


def pod_role(namespace: str, labels: Mapping[str, str], options: FleetOptions) -> str:
    in_plugin_namespace = not options.plugin_namespaces or namespace in options.plugin_namespaces
    if in_plugin_namespace and any(s.matches(labels) for s in options.plugin_selectors):
        return ROLE_DEVICE_PLUGIN
    if any(s.matches(labels) for s in options.exempt_selectors):
        return ROLE_EXEMPT
    return ROLE_WORKLOAD


def project_pod(pod: object, options: FleetOptions = DEFAULT_OPTIONS) -> dict[str, Any] | None:
    """The fields of a Pod the facts need, or None for a pod that cannot affect them.

    A pod matters when it is bound to a node, not finished, and either is a device-plugin pod,
    holds GPUs, or asks for GPUs through NVIDIA_VISIBLE_DEVICES without holding any.
    """
    metadata = as_mapping(as_mapping(pod).get("metadata"))
    spec = as_mapping(as_mapping(pod).get("spec"))
    status = as_mapping(as_mapping(pod).get("status"))
    node = spec.get("nodeName")
    if not isinstance(node, str) or not node or status.get("phase") in FINISHED_POD_PHASES:
        return None
    namespace = as_text(metadata.get("namespace"))
    role = pod_role(namespace, string_map(metadata.get("labels")), options)
    gpus = pod_gpus(spec, options.is_gpu)
    bypass = visible_devices_findings(spec) if role == ROLE_WORKLOAD and not gpus else []
    if role != ROLE_DEVICE_PLUGIN and not gpus and not bypass:
        return None
    return {
        "namespace": namespace,
        "name": as_text(metadata.get("name")),
        "node": node,
        "role": role,
        "gpus": gpus,
        "bypass": bypass,
        "ready": condition_true(status, "Ready"),
    }
