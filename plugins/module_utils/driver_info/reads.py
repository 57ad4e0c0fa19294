# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the driver view and the pre-flight read: one paginated list each of nodes, pods,
PodDisruptionBudgets, DaemonSets, NVIDIADrivers (where served) and ResourceClaims (where served),
whatever the number of nodes; the pods kept are those bound to the GPU nodes selected, cut down to
the fields the pre-flight reads."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra import RESOURCE_API_VERSION, RESOURCE_CLAIMS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.driver_upgrade import (
    UPGRADE_STATE_LABEL,
    is_driver_daemonset,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.models import looks_like_gpu_node
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import gpu_quantities
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import ClusterError, error_context
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.paths import api_path
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import (
    as_list,
    as_mapping,
    gc_paused,
    string_map,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.pods import pod_field_selector

NVIDIA_DRIVER_API = "nvidia.com/v1alpha1"
NVIDIA_DRIVERS = "nvidiadrivers"
POD_STATUS_KEYS = ("phase", "resourceClaimStatuses", "extendedResourceClaimStatus")
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
CONTAINER_KEYS = ("name", "image", "resources", "securityContext")
POD_SPEC_KEYS = ("nodeName", "runtimeClassName", "resourceClaims")
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


@dataclass
class DriverObjects:
    nodes: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    budgets: list[dict[str, Any]] = field(default_factory=list)
    claims: list[dict[str, Any]] = field(default_factory=list)
    daemonsets: list[dict[str, Any]] = field(default_factory=list)
    nvidia_drivers: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _is_gpu(name: str) -> bool:
    return name == "nvidia.com/gpu" or name.startswith("nvidia.com/mig-")


def gpu_node(item: Mapping[str, Any]) -> bool:
    """A node with GPU capacity, GPU labels, or the upgrade controller's state label."""
    labels = string_map(as_mapping(item.get("metadata")).get("labels"))
    capacity = gpu_quantities(as_mapping(item.get("status")).get("capacity"), _is_gpu)
    return UPGRADE_STATE_LABEL in labels or looks_like_gpu_node(labels, capacity, _is_gpu)


def slim(item: Mapping[str, Any], status_keys: Iterable[str] = ()) -> dict[str, Any]:
    """An object without managedFields and with only the status keys named."""
    metadata = {k: v for k, v in as_mapping(item.get("metadata")).items() if k != "managedFields"}
    status = as_mapping(item.get("status"))
    kept = {k: status[k] for k in status_keys if k in status}
    return {"metadata": metadata, "spec": as_mapping(item.get("spec")), "status": kept}


def _container(container: Mapping[str, Any]) -> dict[str, Any]:
    kept = {k: container[k] for k in CONTAINER_KEYS if k in container}
    env = [e for e in as_list(container.get("env")) if str(as_mapping(e).get("name", "")).startswith("NVIDIA_")]
    if env:
        kept["env"] = env
    return kept


def preflight_pod(item: Mapping[str, Any]) -> dict[str, Any]:
    """A pod cut down to what the pre-flight reads: its name, labels, owners and mirror mark; its node, runtime
    class, claims and containers (name, image, resources, security context and the NVIDIA_* env); its phase
    and claim statuses."""
    metadata = as_mapping(item.get("metadata"))
    kept = {k: metadata[k] for k in ("name", "namespace", "labels", "ownerReferences") if k in metadata}
    if MIRROR_ANNOTATION in as_mapping(metadata.get("annotations")):
        kept["annotations"] = {MIRROR_ANNOTATION: metadata["annotations"][MIRROR_ANNOTATION]}
    spec = as_mapping(item.get("spec"))
    trimmed = {k: spec[k] for k in POD_SPEC_KEYS if k in spec}
    for name in CONTAINER_LISTS:
        if name in spec:
            trimmed[name] = [_container(as_mapping(c)) for c in as_list(spec[name])]
    status = as_mapping(item.get("status"))
    return {"metadata": kept, "spec": trimmed, "status": {k: status[k] for k in POD_STATUS_KEYS if k in status}}


def _optional(client: KubeClient, path: str, what: str, page_size: int) -> tuple[list[dict[str, Any]], str | None]:
    """A list that a cluster may not serve (404) or the reader may not read (403): empty, with a note."""
    try:
        return list(client.list_items(path, page_size=page_size)), None
    except ClusterError as exc:
        if exc.status == 404:
            return [], f"this cluster does not serve {what}"
        if exc.status == 403:
            return [], f"not allowed to list {what}"
        raise


def read_driver_objects(
    client: KubeClient, label_selector: str | None, names: list[str] | None, page_size: int
) -> DriverObjects:
    with error_context("cannot read the GPU drivers"), gc_paused():
        found = DriverObjects()
        wanted = set(names) if names else None
        single = f"metadata.name={names[0]}" if names and len(names) == 1 else None
        for item in client.list_items(
            api_path("v1", "nodes"), label_selector=label_selector, field_selector=single, page_size=page_size
        ):
            name = as_mapping(item.get("metadata")).get("name")
            if (wanted is None or name in wanted) and gpu_node(item):
                found.nodes.append({"metadata": slim(item)["metadata"]})
        on = {n["metadata"]["name"] for n in found.nodes}
        pods = client.list_items(api_path("v1", "pods"), field_selector=pod_field_selector(names), page_size=page_size)
        found.pods = [preflight_pod(p) for p in pods if as_mapping(p.get("spec")).get("nodeName") in on]
        budgets, budgets_note = _optional(
            client,
            api_path("policy/v1", "poddisruptionbudgets"),
            "policy/v1 poddisruptionbudgets: budgets that allow no disruption are not found",
            page_size,
        )
        found.budgets = [slim(b, ("disruptionsAllowed", "observedGeneration")) for b in budgets]
        found.daemonsets = [slim(d) for d in client.list_items(api_path("apps/v1", "daemonsets"), page_size=page_size)]
        drivers, note = _optional(
            client,
            api_path(NVIDIA_DRIVER_API, NVIDIA_DRIVERS),
            "nvidia.com/v1alpha1 NVIDIADrivers: no node is seen as managed by an NVIDIADriver without its pod",
            page_size,
        )
        found.nvidia_drivers = [slim(d) for d in drivers]
        claims, claims_note = _optional(
            client,
            api_path(RESOURCE_API_VERSION, RESOURCE_CLAIMS),
            f"{RESOURCE_API_VERSION} resourceclaims: DRA claim holders are not found",
            page_size,
        )
        found.claims = [slim(c, ("allocation", "reservedFor")) for c in claims]
        found.notes = [n for n in (budgets_note, note, claims_note) if n]
    return found


def driver_pods(objects: DriverObjects) -> list[dict[str, Any]]:
    return [p for p in objects.pods if is_driver_daemonset(string_map(p["metadata"].get("labels")))]


def driver_daemonsets(objects: DriverObjects) -> list[dict[str, Any]]:
    return [d for d in objects.daemonsets if is_driver_daemonset(string_map(d["metadata"].get("labels")))]
