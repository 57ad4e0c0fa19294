# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the device-plugin deployment reads and writes: the namespace, each of its objects as it
is, one paginated list of nodes, the plugin's pods, a server-side apply with the collection's field
manager, a deletion, and the wait for a rollout (plan.py judges each look)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
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
from ansible_collections.kubegpu.scheduling.plugins.module_utils.plugin_deploy.manifests import (
    object_key,
    pod_selector,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.plugin_deploy.plan import (
    rollout_waiting,
    targeted_nodes,
)

FIELD_MANAGER = "kubegpu-device-plugin"
RESOURCES = {"DaemonSet": "daemonsets", "ConfigMap": "configmaps"}


def object_path(obj: Mapping[str, Any]) -> str:
    metadata = obj["metadata"]
    return api_path(obj["apiVersion"], RESOURCES[obj["kind"]], metadata["name"], namespace=metadata["namespace"])


def require_namespace(client: KubeClient, namespace: str) -> None:
    try:
        with error_context(f"cannot read namespace {namespace}"):
            client.get(api_path("v1", "namespaces", namespace))
    except ClusterError as exc:
        if exc.status == 404:
            raise OptionError(f"namespace: {namespace!r} does not exist; create it first") from None
        raise


def read_object(client: KubeClient, obj: Mapping[str, Any]) -> dict[str, Any] | None:
    with error_context(f"cannot read {object_key(obj)}"):
        return client.find(object_path(obj))


def read_objects(client: KubeClient, objects: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any] | None]:
    return {object_key(obj): read_object(client, obj) for obj in objects}


def apply_object(client: KubeClient, obj: dict[str, Any]) -> dict[str, Any]:
    with error_context(f"cannot apply {object_key(obj)}"):
        return client.apply(object_path(obj), obj, FIELD_MANAGER)


def delete_object(client: KubeClient, obj: Mapping[str, Any]) -> None:
    with error_context(f"cannot delete {object_key(obj)}"):
        client.delete(object_path(obj))


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
        waiting = rollout_waiting(read_object(client, daemonset), read_pods(client, daemonset), nodes, summary)
        if not waiting or time.monotonic() >= deadline:
            return waiting, nodes
        sleep(1.0)
