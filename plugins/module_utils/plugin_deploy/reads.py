# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the device-plugin deployment reads: the namespace, one paginated list of nodes, the plugin's
pods, and the wait for a rollout (plan.py judges each look). Its objects are read and written as
write/owned.py reads and writes the collection's objects, under OWNER."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import (
    ClusterError,
    OptionError,
    error_context,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.paths import api_path
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.placement import node_taints
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import as_mapping, string_map
from ansible_collections.kubegpu.scheduling.plugins.module_utils.plugin_deploy.manifests import pod_selector
from ansible_collections.kubegpu.scheduling.plugins.module_utils.plugin_deploy.plan import (
    rollout_waiting,
    targeted_nodes,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.owned import Owner, object_key, read

OWNER = Owner("kubegpu-device-plugin", {"DaemonSet": "daemonsets", "ConfigMap": "configmaps"})


def require_namespace(client: KubeClient, namespace: str) -> None:
    try:
        with error_context(f"cannot read namespace {namespace}"):
            client.get(api_path("v1", "namespaces", namespace))
    except ClusterError as exc:
        if exc.status == 404:
            raise OptionError(f"namespace: {namespace!r} does not exist; create it first") from None
        raise


def compact_node(item: object) -> dict[str, Any] | None:
    """What placement and capacity read of a node: name, labels, taints, capacity."""
    metadata = as_mapping(as_mapping(item).get("metadata"))
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        return None
    return {
        "name": name,
        "labels": string_map(metadata.get("labels")),
        "taints": node_taints(as_mapping(as_mapping(item).get("spec"))),
        "capacity": string_map(as_mapping(as_mapping(item).get("status")).get("capacity")),
    }


def read_nodes(client: KubeClient) -> list[dict[str, Any]]:
    with error_context("cannot list nodes"):
        return [n for n in map(compact_node, client.list_items(api_path("v1", "nodes"))) if n is not None]


def read_pods(client: KubeClient, daemonset: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The pods of the DaemonSet: its selector in its namespace, owned by it."""
    name = daemonset["metadata"]["name"]
    path = api_path("v1", "pods", namespace=daemonset["metadata"]["namespace"])
    with error_context(f"cannot list the pods of {object_key(daemonset)}"):
        pods = client.list_items(path, label_selector=pod_selector(daemonset))
        return [
            p
            for p in pods
            if any(
                as_mapping(o).get("kind") == "DaemonSet" and as_mapping(o).get("name") == name
                for o in as_mapping(p.get("metadata")).get("ownerReferences") or []
            )
        ]


def wait_rollout(
    client: KubeClient,
    daemonset: Mapping[str, Any],
    placement: Mapping[str, Any],
    summary: Mapping[str, Any] | None,
    timeout: float,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[list[str], list[dict[str, Any]]]:
    """Look until every targeted node has a Ready pod of the current template and its capacity back,
    or the time is up: what is still waited for (empty: done) and the targeted nodes last read."""
    deadline = time.monotonic() + timeout
    while True:
        nodes = targeted_nodes(read_nodes(client), placement)
        waiting = rollout_waiting(read(client, OWNER, daemonset), read_pods(client, daemonset), nodes, summary)
        if not waiting or time.monotonic() >= deadline:
            return waiting, nodes
        sleep(1.0)
