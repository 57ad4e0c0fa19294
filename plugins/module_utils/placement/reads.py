# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What placement reads: one paginated list of nodes and one of unfinished pods (the DRA objects
come from the same lists the fleet facts make, read by the caller), projected page by page."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra import DraObjects
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import error_context
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.paths import api_path
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import gc_paused
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.pods import ACTIVE_POD_FIELD_SELECTOR
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.fleet import (
    Fleet,
    PlacementOptions,
    fleet_of,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.projection import project_node, project_pod
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.summary import placement_summary

ReadDra = Callable[[KubeClient, int], DraObjects]


def read_nodes_and_pods(
    client: KubeClient, is_gpu: Callable[[str], bool], page_size: int
) -> tuple[list[dict[str, Any]], dict[str, dict[str, int]], list[dict[str, Any]]]:
    """The projected nodes, what the bound pods take from each node, and the GPU pods no node took yet."""
    usage: dict[str, dict[str, int]] = {}
    pending: list[dict[str, Any]] = []
    with error_context("cannot read the nodes and pods for placement"), gc_paused():
        nodes = [
            n
            for n in (project_node(i, is_gpu) for i in client.list_items(api_path("v1", "nodes"), page_size=page_size))
            if n is not None
        ]
        for item in client.list_items(
            api_path("v1", "pods"), field_selector=ACTIVE_POD_FIELD_SELECTOR, page_size=page_size
        ):
            pod = project_pod(item, is_gpu, usage)
            if pod is not None:
                pending.append(pod)
    return nodes, usage, pending


def read_placement(
    client: KubeClient,
    options: PlacementOptions,
    is_gpu: Callable[[str], bool],
    read_dra: ReadDra,
    page_size: int,
    pending: bool = True,
) -> tuple[Fleet, dict[str, Any]]:
    """The fleet as placement sees it, and its summary: the view and (with `pending`) the pending GPU
    pods. `read_dra` gives the DRA objects (gpu/dra_reads.py's read_dra, or the ones another check read
    from the same lists)."""
    nodes, usage, waiting = read_nodes_and_pods(client, is_gpu, page_size)
    with error_context("cannot read the DRA objects for placement"):
        dra = read_dra(client, page_size)
    fleet = fleet_of(nodes, usage, dra, options)
    return fleet, placement_summary(fleet, waiting if pending else [], options, is_gpu, dra)
