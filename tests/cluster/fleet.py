"""The simulated GPU fleet: read fleet.yaml, check it, and turn it into API objects.

Nodes get their GPUs from the device plugin (`gpus`: nvidia.com/gpu in the node's status) or
through NVIDIA's DRA driver (`dra`: devices in a ResourceSlice, see dra.py). Pods on DRA nodes,
and pods with a `claim`, go through the real scheduler; the others are bound to their node.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from . import dra as dra_objects
from . import gpu_operator, versions

FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node"
NOT_READY_ANNOTATION = "kubegpu.test/not-ready"
GPU = "nvidia.com/gpu"

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_NODE_KEYS = {
    "name",
    "count",
    "gpus",
    "allocatable_gpus",
    "labels",
    "taints",
    "cpu",
    "memory",
    "dra",
    "ack_static_device_plugin",
}
_DRA_KEYS = {"product", "gpus", "memory", "mig"}
_MIG_KEYS = {"profile", "per_gpu"}
_POD_KEYS = {"name", "node", "gpus", "env", "claim", "pending"}
_CLAIM_KEYS = {"device_class", "count"}


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


def _dra_spec(raw: Any, source: Path, where: str) -> dict | None:
    """The DRA GPUs of a node: `gpus` of `product`, whole or split into static MIG devices."""
    if raw is None:
        return None
    spec = _check_keys(raw, _DRA_KEYS, source, where)
    product = spec.get("product")
    if not isinstance(product, str) or not product.strip():
        raise _fail(source, f"{where}.product", "expected the GPU's product name, as nvidia-smi prints it")
    mig = None
    if "mig" in spec:
        mig = _check_keys(spec["mig"], _MIG_KEYS, source, f"{where}.mig")
        if mig.get("profile") not in dra_objects.MIG_PROFILES:
            raise _fail(source, f"{where}.mig.profile", f"expected one of {sorted(dra_objects.MIG_PROFILES)}")
        mig = {
            "profile": mig["profile"],
            "per_gpu": _check_count(mig.get("per_gpu"), source, f"{where}.mig.per_gpu", 1),
        }
    return {
        "product": product,
        "gpus": _check_count(spec.get("gpus"), source, f"{where}.gpus", 1),
        "memory": str(spec.get("memory", "80Gi")),
        "mig": mig,
    }


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
        dra = _dra_spec(spec.get("dra"), source, f"{where}.dra")
        static_plugin = spec.get("ack_static_device_plugin", False)
        if not isinstance(static_plugin, bool):
            raise _fail(source, f"{where}.ack_static_device_plugin", f"expected true or false, got {static_plugin!r}")
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
                    "dra": dra,
                    "ack_static_device_plugin": static_plugin,
                }
            )
    seen: set[str] = set()
    for node in expanded:
        if node["name"] in seen:
            raise _fail(source, "nodes", f"node name {node['name']!r} is used twice")
        seen.add(node["name"])
    return expanded


def _claim_spec(raw: Any, source: Path, where: str) -> dict | None:
    if raw is None:
        return None
    claim = _check_keys(raw, _CLAIM_KEYS, source, where)
    device_class = claim.get("device_class")
    if not isinstance(device_class, str) or not device_class:
        raise _fail(source, f"{where}.device_class", "expected a DeviceClass name")
    return {"device_class": device_class, "count": _check_count(claim.get("count", 1), source, f"{where}.count", 1)}


def _pod_specs(raw: Any, source: Path, nodes: list[dict]) -> tuple[str, list[dict]]:
    section = _check_mapping(raw, source, "pods")
    namespace = _check_name(section.get("namespace", "gpu-fleet"), source, "pods.namespace")
    items = section.get("items", [])
    if not isinstance(items, list):
        raise _fail(source, "pods.items", "expected a list")
    dra_nodes = {n["name"] for n in nodes if n["dra"]}
    pods = []
    for index, item in enumerate(items):
        where = f"pods.items[{index}]"
        spec = _check_keys(item, _POD_KEYS, source, where)
        claim = _claim_spec(spec.get("claim"), source, f"{where}.claim")
        node = spec.get("node")
        if node not in {n["name"] for n in nodes} and not (node is None and claim):
            raise _fail(source, f"{where}.node", f"{node!r} is not a node of this fleet")
        pods.append(
            {
                "name": _check_name(spec.get("name"), source, f"{where}.name"),
                "node": node,
                "gpus": _check_count(spec.get("gpus", 0), source, f"{where}.gpus"),
                "env": _check_string_map(spec.get("env", {}), source, f"{where}.env"),
                "claim": claim,
                # Pods on DRA nodes and pods with claims are placed by the scheduler, which allocates the claims.
                "scheduled": bool(claim) or node in dra_nodes,
                "pending": spec.get("pending") is True,
            }
        )
    return namespace, pods


def needs(pod: dict, nodes: list[dict]) -> set[str]:
    """The features of versions.NOT_SERVED a fleet pod needs: a device-plugin GPU limit on a DRA node is
    served from a DeviceClass's extendedResourceName."""
    dra_nodes = {n["name"] for n in nodes if n["dra"]}
    return {versions.DRA_EXTENDED_RESOURCES} if pod["gpus"] and not pod["claim"] and pod["node"] in dra_nodes else set()


def for_release(spec: dict, release: str) -> dict:
    """The fleet as a cluster of `release` can hold it: without the pods that need what the release does
    not serve by default, each named in `left_out` with what is missing."""
    missing = versions.not_served(release)
    kept, left_out = [], []
    for pod in spec["pods"]:
        lacking = sorted(needs(pod, spec["nodes"]) & missing.keys())
        if lacking:
            left_out.append(f"pod {pod['name']} left out: Kubernetes {release} does not serve {missing[lacking[0]]}")
        else:
            kept.append(pod)
    return {**spec, "pods": kept, "left_out": left_out}


def _dra_driver(raw: Any, source: Path, nodes: list[dict]) -> dict | None:
    if raw is None:
        if any(n["dra"] for n in nodes):
            raise _fail(source, "dra_driver", "nodes with `dra` need the driver's namespace, name and node_selector")
        return None
    driver = _check_mapping(raw, source, "dra_driver")
    tolerations = driver.get("tolerations", [])
    if not isinstance(tolerations, list) or not all(isinstance(t, dict) for t in tolerations):
        raise _fail(source, "dra_driver.tolerations", "expected a list of tolerations")
    return {
        "namespace": _check_name(driver.get("namespace"), source, "dra_driver.namespace"),
        "name": _check_name(driver.get("name"), source, "dra_driver.name"),
        "node_selector": _check_string_map(driver.get("node_selector", {}), source, "dra_driver.node_selector"),
        "tolerations": tolerations,
    }


def load(path: Path, release: str | None = None) -> dict:
    """Read and check a fleet file, for the Kubernetes release the local cluster runs (versions.kubernetes()
    unless given; see for_release); raise FleetError naming the file and the problem."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise FleetError(f"{path}: cannot read: {exc.strerror}") from exc
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise FleetError(f"{path}: not valid YAML: {exc}") from exc
    doc = _check_mapping(raw, path, "top level")
    plugin = _check_mapping(doc.get("device_plugin"), path, "device_plugin")
    nodes = _node_specs(doc.get("nodes"), path)
    namespace, pods = _pod_specs(doc.get("pods", {}), path, nodes)
    spec = {
        "dra_driver": _dra_driver(doc.get("dra_driver"), path, nodes),
        "gpu_operator": gpu_operator.parse(
            doc.get("gpu_operator"), "gpu_operator", lambda where, problem: _fail(path, where, problem)
        ),
        "device_plugin": {
            "namespace": _check_name(plugin.get("namespace"), path, "device_plugin.namespace"),
            "name": _check_name(plugin.get("name"), path, "device_plugin.name"),
            "node_selector": _check_string_map(plugin.get("node_selector", {}), path, "device_plugin.node_selector"),
        },
        "nodes": nodes,
        "pod_namespace": namespace,
        "pods": pods,
    }
    try:
        return for_release(spec, release or versions.kubernetes())
    except versions.UnknownRelease as exc:
        raise FleetError(str(exc)) from exc


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


def claim_template_name(spec: dict) -> str:
    return f"{spec['name']}-gpu"


def fleet_pod(spec: dict, namespace: str) -> dict:
    """A fleet pod: bound to its node, or, on a DRA node or with a claim, placed by the scheduler."""
    container: dict[str, Any] = {
        "name": "main",
        "image": "nvidia/cuda:12.4.1-base-ubuntu22.04",
        "command": ["sleep", "infinity"],
    }
    if spec["gpus"]:
        container["resources"] = {"limits": {GPU: str(spec["gpus"])}}
    if spec["env"]:
        container["env"] = [{"name": k, "value": v} for k, v in spec["env"].items()]
    pod_spec: dict[str, Any] = {"tolerations": [{"operator": "Exists", "effect": "NoSchedule"}]}
    if spec.get("claim"):
        container.setdefault("resources", {})["claims"] = [{"name": "gpu"}]
        pod_spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": claim_template_name(spec)}]
    if not spec.get("scheduled"):
        pod_spec = {"nodeName": spec["node"], "tolerations": [{"key": GPU, "operator": "Exists"}]}
    elif spec["node"]:
        pod_spec["nodeSelector"] = {"kubernetes.io/hostname": spec["node"]}
    pod_spec["containers"] = [container]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": spec["name"],
            "namespace": namespace,
            "labels": {"app.kubernetes.io/part-of": "gpu-fleet"},
        },
        "spec": pod_spec,
    }


def fleet_claim_template(spec: dict, namespace: str) -> dict | None:
    return (
        dra_objects.claim_template(claim_template_name(spec), namespace, spec["claim"]) if spec.get("claim") else None
    )


# --- what the fleet file says about DRA nodes, for the tests' expectations --------------------------


def dra_nodes(fleet: dict) -> list[dict]:
    return [n for n in fleet["nodes"] if n["dra"]]


def dra_gpus_held(pod: dict) -> int:
    """GPUs a scheduled pod holds through DRA: its claim's count, or its nvidia.com/gpu limit."""
    if pod["pending"]:
        return 0
    return pod["claim"]["count"] if pod["claim"] else pod["gpus"]


def expected_dra_node(spec: dict, fleet: dict) -> dict:
    """Model, capacity, allocatable, allocated and free of a DRA node, from the fleet file alone."""
    capacity = dra_objects.device_count(spec["dra"])
    allocated = sum(dra_gpus_held(p) for p in fleet["pods"] if p["node"] == spec["name"] and p["scheduled"])
    return {
        "model": dra_objects.device_model(spec["dra"]),
        "capacity": capacity,
        "allocatable": capacity,
        "allocated": allocated,
        "free": capacity - allocated,
    }


def pending_pods(fleet: dict) -> list[dict]:
    return [p for p in fleet["pods"] if p["pending"]]
