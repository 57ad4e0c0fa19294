# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a release reads and writes on nodes: one paginated node list, a node read again when its
patch no longer applies, and one JSON patch per node released."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import error_context
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.paths import api_path
from ansible_collections.kubegpu.scheduling.plugins.module_utils.node_release.release import (
    JsonPatch,
    ReleaseNode,
    compact_node,
)


def read_nodes(client: KubeClient, names: Sequence[str]) -> tuple[list[ReleaseNode], list[str]]:
    """The named nodes, compact, in the order named, and the names that match none."""
    wanted = set(names)
    found: dict[str, ReleaseNode] = {}
    with error_context("cannot list nodes"):
        for item in client.list_items(api_path("v1", "nodes")):
            node = compact_node(item)
            if node is not None and node.name in wanted:
                found[node.name] = node
    ordered = list(dict.fromkeys(names))
    return [found[n] for n in ordered if n in found], [n for n in ordered if n not in found]


def reread_node(client: KubeClient, name: str) -> ReleaseNode | None:
    item = client.find(api_path("v1", "nodes", name))
    if item is None:
        return None
    return compact_node(item)


def patch_node(client: KubeClient, name: str, patch: JsonPatch) -> dict[str, Any]:
    return client.patch_json(api_path("v1", "nodes", name), patch)
