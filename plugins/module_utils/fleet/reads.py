# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the fleet facts read: one paginated list each of nodes, active pods, DeviceClasses,
ResourceSlices and ResourceClaims, projected page by page so that no page is kept."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.facts import split_pods
from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.projection import project_pod
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra import (
    DEVICE_CLASSES,
    DEVICE_TAINT_RULES,
    RESOURCE_API_VERSION,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    DraObjects,
    project_claim,
    project_device_class,
    project_slice,
    project_taint_rule,
    taint_rules_unavailable_note,
    unavailable_note,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.nodes import project_node
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.options import FleetOptions
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import ClusterError, error_context
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.paths import api_path
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import gc_paused
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.pods import ACTIVE_POD_FIELD_SELECTOR

MAX_WARNED_NAMES = 10
# The resource.k8s.io lists the facts read, in order.
DRA_LISTS = (DEVICE_CLASSES, RESOURCE_SLICES, RESOURCE_CLAIMS, DEVICE_TAINT_RULES)


def node_field_selector(names: list[str] | None) -> str | None:
    """One wanted node can be selected by the server; several are filtered here (one list either way)."""
    return f"metadata.name={names[0]}" if names and len(names) == 1 else None


def pod_field_selector(names: list[str] | None) -> str:
    if names and len(names) == 1:
        return f"{ACTIVE_POD_FIELD_SELECTOR},spec.nodeName={names[0]}"
    return ACTIVE_POD_FIELD_SELECTOR


def compact_nodes(
    items: Iterable[dict[str, Any]], options: FleetOptions, names: list[str] | None
) -> list[dict[str, Any]]:
    wanted = set(names) if names is not None else None
    nodes = []
    for item in items:
        node = project_node(item, options)
        if node is not None and (wanted is None or node["name"] in wanted):
            nodes.append(node)
    return nodes


def _projected(
    client: KubeClient, resource: str, project: Callable[[Any], dict[str, Any] | None], page_size: int
) -> list[dict[str, Any]]:
    items = client.list_items(api_path(RESOURCE_API_VERSION, resource), page_size=page_size)
    return [p for p in map(project, items) if p is not None]


def read_dra(client: KubeClient, page_size: int) -> DraObjects:
    """DeviceClasses, GPU ResourceSlices, ResourceClaims and DeviceTaintRules, one paginated list each.

    A cluster that does not serve resource.k8s.io/v1 (404), or a reader that may not list it
    (403), gives no DRA objects and a note saying which; the lists after it are not sent.
    DeviceTaintRules are read last: where they are not served or not allowed, the other objects
    still count, with a note.
    """
    dra = DraObjects()
    for resource, project, into in (
        (DEVICE_CLASSES, project_device_class, dra.classes),
        (RESOURCE_SLICES, project_slice, dra.slices),
        (RESOURCE_CLAIMS, project_claim, dra.claims),
    ):
        try:
            into += _projected(client, resource, project, page_size)
        except ClusterError as exc:
            note = unavailable_note(exc.status, resource)
            if note is None:
                raise
            return DraObjects(unavailable=note)
    try:
        dra.taint_rules += _projected(client, DEVICE_TAINT_RULES, project_taint_rule, page_size)
    except ClusterError as exc:
        dra.taint_rules_unavailable = taint_rules_unavailable_note(exc.status)
        if dra.taint_rules_unavailable is None:
            raise
    return dra


def read_fleet(
    client: KubeClient, options: FleetOptions, label_selector: str | None, names: list[str] | None, page_size: int
) -> tuple[list[dict[str, Any]], list[Any], list[Any], DraObjects]:
    """The compact nodes, the GPU pods, the device-plugin and DRA kubelet-plugin pods, and the DRA
    objects: one list each of nodes, pods, DeviceClasses, ResourceSlices, ResourceClaims and
    DeviceTaintRules."""
    with error_context("cannot read the GPU fleet"), gc_paused():
        node_items = client.list_items(
            api_path("v1", "nodes"),
            label_selector=label_selector,
            field_selector=node_field_selector(names),
            page_size=page_size,
        )
        nodes = compact_nodes(node_items, options, names)
        pod_items = client.list_items(
            api_path("v1", "pods"), field_selector=pod_field_selector(names), page_size=page_size
        )
        pods, plugins = split_pods(project_pod(item, options) for item in pod_items)
        dra = read_dra(client, page_size)
    return nodes, pods, plugins, dra


def missing_names_warning(names: list[str] | None, nodes: list[dict[str, Any]], selector: str | None) -> str | None:
    missing = sorted(set(names or ()) - {n["name"] for n in nodes})
    if not missing:
        return None
    shown = ", ".join(missing[:MAX_WARNED_NAMES])
    more = f" and {len(missing) - MAX_WARNED_NAMES} more" if len(missing) > MAX_WARNED_NAMES else ""
    return f"no such node{' matching label_selector' if selector else ''}: {shown}{more}"
