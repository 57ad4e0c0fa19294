# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What labeling reads and writes: one paginated node list, one of GPU ResourceSlices (the model
of nodes whose GPUs come through DRA), a node read again when its patch no longer applies, and
a JSON patch per node that needs one."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra import (
    RESOURCE_API_VERSION,
    RESOURCE_SLICES,
    current_pools,
    devices_by_node,
    model_from_devices,
    project_slice,
    unavailable_note,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import gpu_resource_matcher
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import ClusterError, error_context
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.patches import JsonPatch
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
    item = client.find(api_path("v1", "nodes", name))
    if item is None:
        return None
    return compact_node(item, gpu_resource_matcher())


def patch_node(client: KubeClient, name: str, patch: JsonPatch) -> dict[str, Any]:
    return client.patch_json(api_path("v1", "nodes", name), patch)


def read_dra_models(client: KubeClient) -> tuple[dict[str, str], str | None]:
    """The model each node's DRA devices name, from one paginated list of ResourceSlices; with a
    cluster that does not serve them, or a reader not allowed to list them, none and a warning."""
    try:
        with error_context("cannot list ResourceSlices"):
            slices = [
                s for s in map(project_slice, client.list_items(api_path(RESOURCE_API_VERSION, RESOURCE_SLICES))) if s
            ]
    except ClusterError as exc:
        warning = unavailable_note(
            exc.status,
            RESOURCE_SLICES,
            "nodes whose GPUs come through DRA are labeled from their labels alone",
            "grant list on resourceslices (the kubegpu-node-labeler role in rbac/ does)",
        )
        if warning is None:
            raise
        return {}, warning
    models = {}
    for node, devices in devices_by_node(current_pools(slices).slices).items():
        model = model_from_devices(devices).model
        if model:
            models[node] = model
    return models, None


def with_dra_model(node: CompactNode | None, models: Mapping[str, str]) -> CompactNode | None:
    return replace(node, dra_model=models.get(node.name)) if node is not None else None
