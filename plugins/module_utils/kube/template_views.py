# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Custom resources whose pods are built from fields that are not a pod template, as the pod spec
their operator builds: the Trainer's container fields and its patches of the runtime's `node`
container, a Dynamo component's main container (`workload_kinds.py` names the upstream types)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import as_mapping, as_text
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.workload_kinds import TRAINER_NODE_CONTAINER

DYNAMO_DEFAULT_GPU = "nvidia.com/gpu"  # a Dynamo component's `gpuType` when it names none
DYNAMO_MAIN_CONTAINER = "main"


def trainer_fields(spec: Mapping[str, Any], keys: tuple[str, ...]) -> Mapping[str, Any]:
    """A TrainJob's trainer as a container: its `resourcesPerNode` are each node's container resources.

    Findings on those resources name `resources` in the path, where the TrainJob says `resourcesPerNode`.
    """
    view = dict(spec)
    for key in keys:
        fields = spec.get(key)
        if isinstance(fields, dict) and "resourcesPerNode" in fields and "resources" not in fields:
            view[key] = {**fields, "resources": fields["resourcesPerNode"]}
    return view


def node_with_resources(spec: Mapping[str, Any], resources: Mapping[str, Any]) -> dict[str, Any]:
    """A patch of the runtime's pod with the trainer's `resourcesPerNode` on the `node` container that sets none."""
    containers = spec.get("containers")
    if not isinstance(containers, list):
        return dict(spec)
    filled = [
        {**c, "resources": resources}
        if isinstance(c, dict) and c.get("name") == TRAINER_NODE_CONTAINER and "resources" not in c
        else c
        for c in containers
    ]
    return {**spec, "containers": filled}


def dynamo_resources(resources: Any) -> dict[str, Any]:
    """A Dynamo component's `resources` as a container's: `gpu` counts `gpuType` (default nvidia.com/gpu)."""
    translated: dict[str, Any] = {}
    for part in ("limits", "requests"):
        item = as_mapping(as_mapping(resources).get(part))
        amounts = {k: item[k] for k in ("cpu", "memory") if k in item}
        if item.get("gpu") not in (None, ""):
            amounts[as_text(item.get("gpuType")) or DYNAMO_DEFAULT_GPU] = item["gpu"]
        amounts.update(as_mapping(item.get("custom")))
        if amounts:
            translated[part] = amounts
    return translated


def dynamo_main_container(component: Mapping[str, Any], graph_env: Any) -> dict[str, Any]:
    """The main container the operator builds: `mainContainer` with the graph's and the component's
    `envs` before its own env, and the component's `resources` under its own."""
    main = dict(as_mapping(as_mapping(component.get("extraPodSpec")).get("mainContainer")))
    main.setdefault("name", DYNAMO_MAIN_CONTAINER)
    env = [
        e for source in (graph_env, component.get("envs"), main.get("env")) if isinstance(source, list) for e in source
    ]
    if env:
        main["env"] = env
    resources = dynamo_resources(component.get("resources"))
    own = as_mapping(main.get("resources"))
    for part in ("limits", "requests"):
        if part in resources or isinstance(own.get(part), dict):
            resources[part] = {**resources.get(part, {}), **as_mapping(own.get(part))}
    if resources:
        main["resources"] = {**own, **resources}
    return main


def dynamo_pod(component: Mapping[str, Any], graph_env: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """A Dynamo component's pod spec (`extraPodSpec` with its built main container) and pod metadata."""
    pod_spec = {k: v for k, v in as_mapping(component.get("extraPodSpec")).items() if k != "mainContainer"}
    pod_spec["mainContainer"] = dynamo_main_container(component, graph_env)
    extra = as_mapping(component.get("extraPodMetadata"))
    metadata = {
        "annotations": {**as_mapping(component.get("annotations")), **as_mapping(extra.get("annotations"))},
        "labels": {**as_mapping(component.get("labels")), **as_mapping(extra.get("labels"))},
    }
    return pod_spec, metadata
