# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pre-flight of the roll: what will block the upgrade on each selected node (gpu/driver_preflight.py),
from one list each of pods, PodDisruptionBudgets, DaemonSets and ResourceClaims.

In host mode the pods of DaemonSets do not block: the host tasks own the node (a reboot stops them, and
their DaemonSet starts them again); they are returned apart, per node, for the plan to show. With the GPU
Operator they block, since its drain leaves DaemonSet pods in place (gpu-operator#2570)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.driver_roll.plan import (
    HOST,
    RollNode,
    RollOptions,
    select,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.driver_preflight import (
    gpu_daemonsets,
    prepare,
    upgrade_blockers,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.driver_upgrade import owner
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import ClusterError, error_context
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.paths import api_path
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.selectors import LabelSelector

DRA_API_VERSIONS = ("resource.k8s.io/v1", "resource.k8s.io/v1beta2", "resource.k8s.io/v1beta1")


def _list(client: KubeClient, api_version: str, resource: str) -> list[dict[str, Any]]:
    with error_context(f"cannot list {resource}"):
        return list(client.list_items(api_path(api_version, resource)))


def read_claims(client: KubeClient) -> tuple[list[dict[str, Any]], list[str]]:
    """The ResourceClaims of the newest DRA version served; none (with a note) where none is."""
    for version in DRA_API_VERSIONS:
        try:
            return list(client.list_items(api_path(version, "resourceclaims"))), []
        except ClusterError as exc:
            if exc.status not in (403, 404):
                raise
    return [], ["ResourceClaims could not be listed: DRA claim holders are not looked for"]


Preflight = tuple[dict[str, list[str]], dict[str, list[str]], list[str]]


def read_blockers(
    client: KubeClient,
    nodes: Sequence[RollNode],
    names: Sequence[str],
    selectors: Sequence[LabelSelector],
    options: RollOptions,
) -> Preflight:
    """Per selected node, what blocks its upgrade, in words; in host mode, apart, what the DaemonSet pods on
    it would block; and notes on what could not be read."""
    chosen = {n.name for n in select(nodes, names, selectors)[0]}
    if not chosen:
        return {}, {}, []
    pods = [p for p in _list(client, "v1", "pods") if (p.get("spec") or {}).get("nodeName") in chosen]
    budgets = _list(client, "policy/v1", "poddisruptionbudgets")
    daemonsets = gpu_daemonsets(_list(client, "apps/v1", "daemonsets"))
    claims, notes = read_claims(client)
    by_node: dict[str, list[Any]] = defaultdict(list)
    for pod in pods:
        by_node[pod["spec"]["nodeName"]].append(pod)
    prepared = prepare(budgets, claims)  # once for every node
    of_daemonsets = {(p["metadata"].get("namespace"), p["metadata"].get("name")) for p in pods if owner(p, "DaemonSet")}
    found: dict[str, list[str]] = {}
    apart: dict[str, list[str]] = {}
    for name in sorted(chosen):
        for b in upgrade_blockers(name, by_node[name], prepared, claims, daemonsets, options.target_version):
            kept = options.mode == HOST and (b.namespace, b.pod) in of_daemonsets
            (apart if kept else found).setdefault(name, []).append(f"{b.namespace}/{b.pod}: {b.reason}: {b.detail}")
    return found, apart, notes
