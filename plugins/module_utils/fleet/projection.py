# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fields of a pod the fleet facts need: its GPUs, its role, GPU use the scheduler misses, and
GPU pods the scheduler cannot place because no node can allocate their claims."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra import UNALLOCATABLE_CLAIMS_MESSAGE
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
ROLE_DRA_PLUGIN = "dra_plugin"
ROLE_EXEMPT = "exempt"
ROLE_UNALLOCATABLE = "unallocatable"


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


def pod_role(
    namespace: str, labels: Mapping[str, str], options: FleetOptions, spec: Mapping[str, Any] | None = None
) -> str:
    """The pod's role by its labels; a pod that runs a known GPU system component (judged by its
    images and commands, see gpu/components.py) is exempt whatever its labels."""
    in_plugin_namespace = not options.plugin_namespaces or namespace in options.plugin_namespaces
    if in_plugin_namespace and any(s.matches(labels) for s in options.plugin_selectors):
        return ROLE_DEVICE_PLUGIN
    if any(s.matches(labels) for s in options.dra_plugin_selectors):
        return ROLE_DRA_PLUGIN
    if any(s.matches(labels) for s in options.exempt_selectors):
        return ROLE_EXEMPT
    if spec is not None and options.components.recognise(spec) is not None:
        return ROLE_EXEMPT
    return ROLE_WORKLOAD


def dra_served_resources(status: Mapping[str, Any]) -> set[str]:
    """Extended resources the scheduler served from a DRA claim (KEP-5004): they count through the claim."""
    mappings = as_list(as_mapping(status.get("extendedResourceClaimStatus")).get("requestMappings"))
    return {name for name in (as_mapping(m).get("resourceName") for m in mappings) if isinstance(name, str)}


def claim_names(spec: Mapping[str, Any], status: Mapping[str, Any]) -> list[str]:
    """The ResourceClaims a pod uses: named in its spec, made from its templates, or made for its extended resources."""
    names = [as_mapping(c).get("resourceClaimName") for c in as_list(spec.get("resourceClaims"))]
    names += [as_mapping(c).get("resourceClaimName") for c in as_list(status.get("resourceClaimStatuses"))]
    names.append(as_mapping(status.get("extendedResourceClaimStatus")).get("resourceClaimName"))
    return list(dict.fromkeys(n for n in names if isinstance(n, str) and n))


def unschedulable_for_claims(status: Mapping[str, Any]) -> str | None:
    """The scheduler's message when it found no node that can allocate the pod's claims."""
    for condition in map(as_mapping, as_list(status.get("conditions"))):
        message = as_text(condition.get("message"))
        if (
            condition.get("type") == "PodScheduled"
            and condition.get("status") == "False"
            and UNALLOCATABLE_CLAIMS_MESSAGE in message
        ):
            return message
    return None


def _unallocatable_pod(
    metadata: Mapping[str, Any], spec: Mapping[str, Any], status: Mapping[str, Any], options: FleetOptions
) -> dict[str, Any] | None:
    message = unschedulable_for_claims(status)
    if message is None:
        return None
    return {
        "namespace": as_text(metadata.get("namespace")),
        "name": as_text(metadata.get("name")),
        "node": None,
        "role": ROLE_UNALLOCATABLE,
        "gpus": pod_gpus(spec, options.is_gpu),
        "claims": claim_names(spec, status),
        "bypass": [],
        "ready": False,
        "message": message,
    }


NO_BYPASS: list[str] = []  # shared by every pod without a bypass finding: read, never changed


@lru_cache(maxsize=256)
def shared_gpus(items: tuple[tuple[str, int], ...]) -> dict[str, int]:
    """One dict for all the pods that hold the same GPUs (most hold one `nvidia.com/gpu`): read, never changed."""
    return dict(items)


def project_pod(pod: object, options: FleetOptions = DEFAULT_OPTIONS) -> dict[str, Any] | None:
    """The fields of a Pod the facts need, or None for a pod that cannot affect them.

    A pod matters when it is bound to a node, not finished, and either is a device-plugin or
    DRA kubelet-plugin pod, holds GPUs, or asks for GPUs through NVIDIA_VISIBLE_DEVICES without
    holding any; or when it is not bound because no node can allocate its claims. GPUs the
    scheduler served from a DRA claim are not counted here: they count through the claim.
    """
    metadata = as_mapping(as_mapping(pod).get("metadata"))
    spec = as_mapping(as_mapping(pod).get("spec"))
    status = as_mapping(as_mapping(pod).get("status"))
    node = spec.get("nodeName")
    if status.get("phase") in FINISHED_POD_PHASES:
        return None
    if not isinstance(node, str) or not node:
        return _unallocatable_pod(metadata, spec, status, options)
    namespace = as_text(metadata.get("namespace"))
    role = pod_role(namespace, string_map(metadata.get("labels")), options, spec)
    served_by_dra = dra_served_resources(status)
    gpus = {name: count for name, count in pod_gpus(spec, options.is_gpu).items() if name not in served_by_dra}
    claims = claim_names(spec, status)
    bypass = visible_devices_findings(spec) if role == ROLE_WORKLOAD and not gpus and not claims else []
    if role not in (ROLE_DEVICE_PLUGIN, ROLE_DRA_PLUGIN) and not gpus and not bypass:
        return None
    # A fleet's pods share a few namespaces, nodes and GPU requests: one object each, not one per pod.
    return {
        "namespace": sys.intern(namespace),
        "name": as_text(metadata.get("name")),
        "node": sys.intern(node),
        "role": role,
        "gpus": shared_gpus(tuple(gpus.items())),
        "bypass": bypass or NO_BYPASS,
        "ready": condition_true(status, "Ready"),
    }
