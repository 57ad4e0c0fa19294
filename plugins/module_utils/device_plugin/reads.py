# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the device-plugin check reads: DaemonSets, nodes and plugin pods, each a paginated list,
projected as it is read."""

from __future__ import annotations

from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.projection import (
    compact_node,
    project_daemonset,
    project_plugin_pod,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.targets import (
    DaemonSetTarget,
    daemonset_list_namespaces,
    plugin_pod_queries,
    select_daemonsets,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.options import FleetOptions
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import error_context
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


def read_cluster(
    client: KubeClient, targets: list[DaemonSetTarget] | None, options: FleetOptions
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """The DaemonSets to check, the findings for targets that matched none, the nodes and the plugin pods."""
    with gc_paused():
        with error_context("cannot list DaemonSets"):
            listed = read_daemonsets(client, daemonset_list_namespaces(targets, options))
        daemonsets, missing = select_daemonsets(listed, targets, options)
        with error_context("cannot list nodes"):
            nodes = read_nodes(client, options, placement_label_keys(d["placement"] for d in daemonsets))
        with error_context("cannot list device-plugin pods"):
            plugin_pods = read_plugin_pods(client, plugin_pod_queries(options, daemonsets))
    return daemonsets, missing, nodes, plugin_pods
