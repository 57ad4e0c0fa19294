# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What node quarantine reads and writes: one paginated list each of nodes, pods (active ones, on
the asked node when there is one), PodDisruptionBudgets and the DRA objects the fleet facts read;
a node read again when its patch no longer applies, and one JSON patch per node that changes (the
evictions are write/evictions.py's)."""

from __future__ import annotations

from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra_fleet import dra_fleet
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra_reads import read_dra
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import error_context
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.patches import JsonPatch
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.paths import api_path
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import gc_paused
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.pods import pod_field_selector
from ansible_collections.kubegpu.scheduling.plugins.module_utils.node_quarantine.plan import (
    CompactNode,
    QuarantineOptions,
    QuarantineReads,
    dra_holders,
    project_node,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.evictions import project_pod, read_budgets


def read_quarantine(
    client: KubeClient, asked: list[str], options: QuarantineOptions, page_size: int = 500
) -> QuarantineReads:
    """Every node (the breaker counts each pool's GPUs), the pods on the asked nodes, every budget and
    the DRA objects: one list each, no object read on its own."""
    wanted = frozenset(asked)
    is_gpu = options.fleet.is_gpu
    with gc_paused():
        with error_context("cannot list nodes"):
            items = client.list_items(api_path("v1", "nodes"), page_size=page_size)
            nodes = [n for n in (project_node(item, options) for item in items) if n is not None]
        with error_context("cannot list pods"):
            items = client.list_items(
                api_path("v1", "pods"), field_selector=pod_field_selector(asked), page_size=page_size
            )
            pods = [p for p in (project_pod(item, wanted, is_gpu) for item in items) if p is not None]
        budgets = read_budgets(client, page_size)
        with error_context("cannot read the DRA objects"):
            dra = read_dra(client, page_size)
    return QuarantineReads(nodes, pods, budgets, dra_fleet(dra), dra_holders(dra.claims))


def reread_node(client: KubeClient, name: str, options: QuarantineOptions) -> CompactNode | None:
    item = client.find(api_path("v1", "nodes", name))
    if item is None:
        return None
    return project_node(item, options)


def patch_node(client: KubeClient, name: str, patch: JsonPatch) -> dict[str, Any]:
    return client.patch_json(api_path("v1", "nodes", name), patch)
