# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the fleet facts read: one paginated list each of nodes, active pods, DeviceClasses,
ResourceSlices and ResourceClaims, projected page by page so that no page is kept."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.drivers import DriverRead
from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.facts import split_pods
from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.projection import project_pod
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra import DraObjects
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra_reads import read_dra
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.nodes import project_node
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.options import FleetOptions
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import error_context
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.paths import api_path
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import gc_paused
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.pods import pod_field_selector

MAX_WARNED_NAMES = 10


def node_field_selector(names: list[str] | None) -> str | None:
    """One wanted node can be selected by the server; several are filtered here (one list either way)."""
    return f"metadata.name={names[0]}" if names and len(names) == 1 else None


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


def read_fleet(
    client: KubeClient,
    options: FleetOptions,
    label_selector: str | None,
    names: list[str] | None,
    page_size: int,
    drivers: DriverRead | None = None,
) -> tuple[list[dict[str, Any]], list[Any], list[Any], DraObjects]:
    """The compact nodes, the GPU pods, the device-plugin and DRA kubelet-plugin pods, and the DRA
    objects: one list each of nodes, pods, DeviceClasses, ResourceSlices, ResourceClaims and
    DeviceTaintRules. With ``drivers``, what the driver view needs is kept from the same node and pod
    lists (and, where it asks for them, one list more each of NVIDIADrivers and DaemonSets)."""
    drivers = drivers or DriverRead()
    with error_context("cannot read the GPU fleet"), gc_paused():
        drivers.read_nvidia_drivers(client, page_size)
        node_items = client.list_items(
            api_path("v1", "nodes"),
            label_selector=label_selector,
            field_selector=node_field_selector(names),
            page_size=page_size,
        )
        nodes = compact_nodes(drivers.nodes_seen(node_items), options, names)
        pod_items = client.list_items(
            api_path("v1", "pods"), field_selector=pod_field_selector(names), page_size=page_size
        )
        pods, plugins = split_pods(project_pod(item, options) for item in drivers.pods_seen(pod_items))
        dra = read_dra(client, page_size)
        drivers.read_daemonsets(client, page_size)
    return nodes, pods, plugins, dra


def missing_names_warning(names: list[str] | None, nodes: list[dict[str, Any]], selector: str | None) -> str | None:
    missing = sorted(set(names or ()) - {n["name"] for n in nodes})
    if not missing:
        return None
    shown = ", ".join(missing[:MAX_WARNED_NAMES])
    more = f" and {len(missing) - MAX_WARNED_NAMES} more" if len(missing) > MAX_WARNED_NAMES else ""
    return f"no such node{' matching label_selectors' if selector else ''}: {shown}{more}"
