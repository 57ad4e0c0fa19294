# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What device quarantine reads and writes: one paginated list each of ResourceSlices,
ResourceClaims, DeviceTaintRules, the active pods (of the devices' node when there is one) and
PodDisruptionBudgets; a rule read again while the controller's report is awaited; one create,
patch or delete per rule."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_quarantine.device import OWNER_LABEL
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra import (
    DEVICE_TAINT_RULES,
    RESOURCE_API_VERSION,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    project_slice,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import ClusterError, error_context
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.paths import api_path
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.pods import pod_field_selector
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.evictions import (
    Budget,
    CompactPod,
    project_pod,
    read_budgets,
)


@dataclass
class DeviceReads:
    slices: list[dict[str, Any]] = field(default_factory=list)
    claims: list[dict[str, Any]] = field(default_factory=list)
    rules: dict[str, dict[str, Any]] = field(default_factory=dict)
    pods: list[CompactPod] = field(default_factory=list)
    budgets: list[Budget] = field(default_factory=list)


def _rules_path(name: str | None = None) -> str:
    return api_path(RESOURCE_API_VERSION, DEVICE_TAINT_RULES, name)


def read_slices(client: KubeClient, page_size: int = 500) -> list[dict[str, Any]]:
    with error_context("cannot list ResourceSlices"):
        items = client.list_items(api_path(RESOURCE_API_VERSION, RESOURCE_SLICES), page_size=page_size)
        return [s for s in map(project_slice, items) if s is not None]


# Where DeviceTaintRules are not served, a device cannot be quarantined alone: the run stops before any write.
NOT_SERVED = (
    f"this cluster does not serve {DEVICE_TAINT_RULES} in {RESOURCE_API_VERSION} (on by default from Kubernetes "
    "1.37; before it behind the DRA device taint feature gates): a single device cannot be quarantined here, "
    "nothing was written; quarantine its node with gpu_node_quarantine"
)


def read_rules(client: KubeClient, page_size: int = 500) -> dict[str, dict[str, Any]]:
    """Every DeviceTaintRule by name: a rule of the name the collection would use may be someone else's."""
    try:
        with error_context("cannot list DeviceTaintRules"):
            items = list(client.list_items(_rules_path(), page_size=page_size))
    except ClusterError as exc:
        if exc.status == 404:
            raise ClusterError(NOT_SERVED, 404) from exc
        raise
    return {str(r["metadata"]["name"]): r for r in items if (r.get("metadata") or {}).get("name")}


def read_users(client: KubeClient, reads: DeviceReads, nodes: list[str], page_size: int = 500) -> None:
    """The claims, the active pods of `nodes` and the budgets, into `reads`."""
    with error_context("cannot list ResourceClaims"):
        reads.claims = list(client.list_items(api_path(RESOURCE_API_VERSION, RESOURCE_CLAIMS), page_size=page_size))
    wanted = frozenset(nodes)
    with error_context("cannot list pods"):
        items = client.list_items(api_path("v1", "pods"), field_selector=pod_field_selector(nodes), page_size=page_size)
        reads.pods = [p for p in (project_pod(item, wanted, lambda _resource: False) for item in items) if p]
    reads.budgets = read_budgets(client, page_size)


def get_rule(client: KubeClient, name: str) -> dict[str, Any] | None:
    return client.find(_rules_path(name))


def create_rule(client: KubeClient, body: dict[str, Any]) -> dict[str, Any]:
    return client.create(_rules_path(), body)


def switch_rule(client: KubeClient, rule: dict[str, Any], effect: str) -> dict[str, Any]:
    """The rule's taint effect changed; the resourceVersion read makes the API server refuse (409)
    a rule changed since, and the owner label is required, so a rule made foreign meanwhile is not changed."""
    metadata = rule["metadata"]
    body = {"metadata": {"resourceVersion": metadata["resourceVersion"]}, "spec": {"taint": {"effect": effect}}}
    if (metadata.get("labels") or {}).get(OWNER_LABEL) is None:
        raise ClusterError(f"DeviceTaintRule {metadata['name']} is not the collection's", 409)
    return client.patch_merge(_rules_path(metadata["name"]), body)


def delete_rule(client: KubeClient, name: str) -> None:
    client.delete(_rules_path(name))
