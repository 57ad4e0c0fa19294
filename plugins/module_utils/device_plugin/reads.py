# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the device-plugin check reads: DaemonSets, nodes, plugin pods and GPU ResourceSlices,
each a paginated list, projected as it is read."""

from __future__ import annotations

from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.projection import (
    ClusterReads,
    compact_node,
    project_daemonset,
    project_plugin_pod,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.targets import (
    DaemonSetTarget,
    daemonset_list_namespaces,
    is_dra_daemonset,
    plugin_pod_queries,
    select_daemonsets,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra import (
    RESOURCE_API_VERSION,
    RESOURCE_SLICES,
    project_slice,
    unavailable_note,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.options import FleetOptions
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import ClusterError, error_context
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.paths import api_path, collection_paths
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.placement import placement_label_keys
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import gc_paused, namespaced_name
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.pods import ACTIVE_POD_FIELD_SELECTOR


def read_daemonsets(client: KubeClient, namespaces: list[str] | None) -> list[dict[str, Any]]:
    paths = collection_paths("apps/v1", "daemonsets", namespaces)
    return [ds for path in paths for ds in map(project_daemonset, client.list_items(path)) if ds is not None]


def read_nodes(client: KubeClient, options: FleetOptions, label_keys: frozenset[str]) -> list[dict[str, Any]]:
    items = client.list_items(api_path("v1", "nodes"))
    return [n for n in (compact_node(item, options, label_keys) for item in items) if n is not None]


def read_plugin_pods(client: KubeClient, queries: list[tuple[str | None, str]]) -> list[dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for namespace, selector in queries:
        items = client.list_items(
            api_path("v1", "pods", namespace=namespace),
            label_selector=selector,
            field_selector=ACTIVE_POD_FIELD_SELECTOR,
        )
        for pod in map(project_plugin_pod, items):
            if pod is not None:
                found[namespaced_name(pod)] = pod
    return list(found.values())


def read_slices(client: KubeClient) -> tuple[list[dict[str, Any]] | None, str | None]:
    """The GPU ResourceSlices; None and a note when the cluster does not serve them or the reader may not list them."""
    try:
        items = client.list_items(api_path(RESOURCE_API_VERSION, RESOURCE_SLICES))
        return [s for s in map(project_slice, items) if s is not None], None
    except ClusterError as exc:
        note = unavailable_note(
            exc.status,
            RESOURCE_SLICES,
            "nodes whose GPUs come through DRA are checked for their kubelet-plugin pod only",
            "grant list on resourceslices (the kubegpu-reader role in rbac/ does)",
        )
        if note is None:
            raise
        return None, note


def read_cluster(client: KubeClient, targets: list[DaemonSetTarget] | None, options: FleetOptions) -> ClusterReads:
    """The DaemonSets to check, the findings for targets that matched none, the nodes, the plugin pods
    (device plugin and DRA kubelet plugin), the DRA driver's DaemonSets and the GPU ResourceSlices."""
    with gc_paused():
        with error_context("cannot list DaemonSets"):
            listed = read_daemonsets(client, daemonset_list_namespaces(targets, options))
        daemonsets, missing = select_daemonsets(listed, targets, options)
        dra_daemonsets = [d for d in listed if is_dra_daemonset(d, options)]
        with error_context("cannot list nodes"):
            nodes = read_nodes(client, options, placement_label_keys(d["placement"] for d in daemonsets))
        with error_context("cannot list ResourceSlices"):
            slices, note = read_slices(client)
        queries = plugin_pod_queries(options, [*daemonsets, *dra_daemonsets])
        if slices and not dra_daemonsets:
            # GPUs are published through DRA, but not by a DaemonSet found here: look for its pods anywhere.
            queries += [(None, s.text) for s in options.dra_plugin_selectors]
        with error_context("cannot list device-plugin pods"):
            plugin_pods = read_plugin_pods(client, queries)
    return ClusterReads(daemonsets, missing, nodes, plugin_pods, dra_daemonsets, slices, note)
