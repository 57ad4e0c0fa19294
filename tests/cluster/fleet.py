"""The simulated GPU fleet: read fleet.yaml, check it, and turn it into API objects."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node"
NOT_READY_ANNOTATION = "kubegpu.test/not-ready"
GPU = "nvidia.com/gpu"

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_NODE_KEYS = {"name", "count", "gpus", "allocatable_gpus", "labels", "taints", "cpu", "memory"}
_POD_KEYS = {"name", "node", "gpus", "env"}


class FleetError(ValueError):
    """A fleet file that cannot be used; the message names the file and the problem."""


def _fail(source: Path, where: str, problem: str) -> FleetError:
    return FleetError(f"{source}: {where}: {problem}")


def _check_mapping(value: Any, source: Path, where: str) -> dict:
    if not isinstance(value, dict):
        raise _fail(source, where, f"expected a mapping, got {type(value).__name__}")
    return value


def _check_keys(value: Any, allowed: set[str], source: Path, where: str) -> dict:
    mapping = _check_mapping(value, source, where)
    unknown = set(mapping) - allowed
    if unknown:
        raise _fail(source, where, f"unknown keys {sorted(unknown)}; allowed: {sorted(allowed)}")
    return mapping


def _check_string_map(value: Any, source: Path, where: str) -> dict[str, str]:
    mapping = _check_mapping(value, source, where)
    for key, item in mapping.items():
        if not isinstance(key, str) or not isinstance(item, str):
            raise _fail(source, f"{where}.{key}", "keys and values must be strings (quote numbers)")
    return mapping


def _check_count(value: Any, source: Path, where: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _fail(source, where, f"expected a whole number >= {minimum}, got {value!r}")
    return value


def _check_name(value: Any, source: Path, where: str) -> str:
    if not isinstance(value, str) or not _NAME.match(value) or len(value) > 63:
        raise _fail(source, where, f"{value!r} is not a valid name (lowercase letters, digits, '-')")
    return value


def _node_specs(raw: Any, source: Path) -> list[dict]:
    if not isinstance(raw, list) or not raw:
        raise _fail(source, "nodes", "expected a non-empty list of nodes")
    expanded = []
    for index, item in enumerate(raw):
        where = f"nodes[{index}]"
        spec = _check_keys(item, _NODE_KEYS, source, where)
        name = _check_name(spec.get("name"), source, f"{where}.name")
        gpus = _check_count(spec.get("gpus", 0), source, f"{where}.gpus")
        allocatable = _check_count(spec.get("allocatable_gpus", gpus), source, f"{where}.allocatable_gpus")
        if allocatable > gpus:
            raise _fail(source, f"{where}.allocatable_gpus", f"{allocatable} is above gpus ({gpus})")
        labels = _check_string_map(spec.get("labels", {}), source, f"{where}.labels")
        taints = spec.get("taints", [])
        if not isinstance(taints, list) or not all(
            isinstance(t, dict) and "key" in t and "effect" in t for t in taints
        ):
            raise _fail(source, f"{where}.taints", "expected a list of {key, value, effect}")
        count = _check_count(spec.get("count", 1), source, f"{where}.count", minimum=1)
        names = [name] if "count" not in spec else [f"{name}-{i}" for i in range(count)]
        for node_name in names:
            expanded.append(
                {
                    "name": node_name,
                    "gpus": gpus if "gpus" in spec else None,
                    "allocatable_gpus": allocatable,
                    "labels": labels,
                    "taints": taints,
                    "cpu": str(spec.get("cpu", "64")),
                    "memory": str(spec.get("memory", "512Gi")),
                }
            )
    seen: set[str] = set()
    for node in expanded:
        if node["name"] in seen:
            raise _fail(source, "nodes", f"node name {node['name']!r} is used twice")
        seen.add(node["name"])
    return expanded


def _pod_specs(raw: Any, source: Path, node_names: set[str]) -> tuple[str, list[dict]]:
    section = _check_mapping(raw, source, "pods")
    namespace = _check_name(section.get("namespace", "gpu-fleet"), source, "pods.namespace")
    items = section.get("items", [])
    if not isinstance(items, list):
        raise _fail(source, "pods.items", "expected a list")
    pods = []
    for index, item in enumerate(items):
        where = f"pods.items[{index}]"
        spec = _check_keys(item, _POD_KEYS, source, where)
        node = spec.get("node")
        if node not in node_names:
            raise _fail(source, f"{where}.node", f"{node!r} is not a node of this fleet")
        pods.append(
            {
                "name": _check_name(spec.get("name"), source, f"{where}.name"),
                "node": node,
                "gpus": _check_count(spec.get("gpus", 0), source, f"{where}.gpus"),
                "env": _check_string_map(spec.get("env", {}), source, f"{where}.env"),
            }
        )
    return namespace, pods


def load(path: Path) -> dict:
    """Read and check a fleet file; raise FleetError naming the file and the problem."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise FleetError(f"{path}: cannot read: {exc.strerror}") from exc
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise FleetError(f"{path}: not valid YAML: {exc}") from exc
    doc = _check_mapping(raw, path, "top level")
    plugin = _check_mapping(doc.get("device_plugin"), path, "device_plugin")
    nodes = _node_specs(doc.get("nodes"), path)
    namespace, pods = _pod_specs(doc.get("pods", {}), path, {n["name"] for n in nodes})
    return {
        "device_plugin": {
            "namespace": _check_name(plugin.get("namespace"), path, "device_plugin.namespace"),
            "name": _check_name(plugin.get("name"), path, "device_plugin.name"),
            "node_selector": _check_string_map(plugin.get("node_selector", {}), path, "device_plugin.node_selector"),
        },
        "nodes": nodes,
        "pod_namespace": namespace,
        "pods": pods,
    }


def node_object(spec: dict) -> dict:
    """A KWOK-managed Node whose status already carries its GPU capacity."""
    resources = {"cpu": spec["cpu"], "memory": spec["memory"], "pods": "110"}
    capacity = dict(resources)
    allocatable = dict(resources)
    if spec["gpus"] is not None:
        capacity[GPU] = str(spec["gpus"])
        allocatable[GPU] = str(spec["allocatable_gpus"])
    labels = {
        "kubernetes.io/hostname": spec["name"],
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "type": "kwok",
        **spec["labels"],
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": spec["name"],
            "labels": labels,
            "annotations": {FAKE_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {"taints": spec["taints"]} if spec["taints"] else {},
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "kubeletVersion": "fake",
                "kubeProxyVersion": "fake",
            },
        },
    }


def device_plugin_daemonset(plugin: dict) -> dict:
    """A DaemonSet shaped like NVIDIA's static deployment (nvidia-device-plugin.yml)."""
    labels = {"name": "nvidia-device-plugin-ds"}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": plugin["name"], "namespace": plugin["namespace"]},
        "spec": {
            "selector": {"matchLabels": labels},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": plugin["node_selector"],
                    "tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}],
                    "priorityClassName": "system-node-critical",
                    "containers": [
                        {
                            "name": "nvidia-device-plugin-ctr",
                            "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.0",
                            "env": [{"name": "FAIL_ON_INIT_ERROR", "value": "false"}],
                            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                            "volumeMounts": [{"name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins"}],
                        }
                    ],
                    "volumes": [{"name": "device-plugin", "hostPath": {"path": "/var/lib/kubelet/device-plugins"}}],
                },
            },
        },
    }


def fleet_pod(spec: dict, namespace: str) -> dict:
    container: dict[str, Any] = {
        "name": "main",
        "image": "nvidia/cuda:12.4.1-base-ubuntu22.04",
        "command": ["sleep", "infinity"],
    }
    if spec["gpus"]:
        container["resources"] = {"limits": {GPU: str(spec["gpus"])}}
    if spec["env"]:
        container["env"] = [{"name": k, "value": v} for k, v in spec["env"].items()]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": spec["name"],
            "namespace": namespace,
            "labels": {"app.kubernetes.io/part-of": "gpu-fleet"},
        },
        "spec": {
            "nodeName": spec["node"],
            "tolerations": [{"key": GPU, "operator": "Exists"}],
            "containers": [container],
        },
    }
