# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the roll reads and writes: one paginated list of nodes per look, the failed pods (one
list, by field selector), a node read again when its patch no longer applies, one JSON patch per
node that changes, one deletion per pod that failed admission and a controller owns."""

from __future__ import annotations

from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.driver_roll.plan import RollNode, project_node
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.options import FleetOptions
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import error_context
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.patches import JsonPatch
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.paths import api_path


def read_nodes(client: KubeClient, fleet: FleetOptions) -> list[RollNode]:
    with error_context("cannot list nodes"):
        return [n for n in (project_node(item, fleet) for item in client.list_items(api_path("v1", "nodes"))) if n]


def reread_node(client: KubeClient, name: str, fleet: FleetOptions) -> RollNode | None:
    item = client.find(api_path("v1", "nodes", name))
    return None if item is None else project_node(item, fleet)


def patch_node(client: KubeClient, name: str, patch: JsonPatch) -> dict[str, Any]:
    return client.patch_json(api_path("v1", "nodes", name), patch)


def failed_pods(client: KubeClient) -> list[dict[str, Any]]:
    with error_context("cannot list failed pods"):
        return list(client.list_items(api_path("v1", "pods"), field_selector="status.phase=Failed"))


def delete_pod(client: KubeClient, pod: str) -> None:
    namespace, name = pod.split("/", 1)
    with error_context(f"cannot delete pod {pod}"):
        client.delete(api_path("v1", "pods", name, namespace=namespace))
