# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What labeling reads and writes: one paginated node list, a node read again after a conflict,
and a JSON merge patch per node that needs one."""

from __future__ import annotations

from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import gpu_resource_matcher
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import ClusterError, error_context
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.paths import api_path
from ansible_collections.kubegpu.scheduling.plugins.module_utils.labels.plan import CompactNode, compact_node


def read_nodes(
    client: KubeClient, selector: str | None, names: list[str] | None
) -> tuple[list[CompactNode], list[str]]:
    """The considered nodes, compact, and the wanted names that match none."""
    is_gpu = gpu_resource_matcher()
    wanted = set(names) if names is not None else None
    nodes = []
    with error_context("cannot list nodes"):
        for item in client.list_items(api_path("v1", "nodes"), label_selector=selector):
            node = compact_node(item, is_gpu)
            if node is not None and (wanted is None or node.name in wanted):
                nodes.append(node)
    missing = sorted(wanted - {n.name for n in nodes}) if wanted is not None else []
    return nodes, missing


def reread_node(client: KubeClient, name: str) -> CompactNode | None:
    try:
        item = client.get(api_path("v1", "nodes", name))
    except ClusterError as exc:
        if exc.status == 404:
            return None
        raise
    return compact_node(item, gpu_resource_matcher())


def patch_node(client: KubeClient, name: str, patch: dict[str, Any]) -> dict[str, Any]:
    return client.patch_merge(api_path("v1", "nodes", name), patch)
