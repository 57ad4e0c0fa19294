"""The DRA side of the simulated fleet: NVIDIA's DRA driver for GPUs as its Helm chart installs it
and as its kubelet plugin publishes a node's GPUs, built from the driver's source.

Sources, github.com/NVIDIA/k8s-dra-driver-gpu (now kubernetes-sigs/dra-driver-nvidia-gpu):
- ResourceSlices (@22407113785e78c7763b4637689a201eb39c6199): cmd/gpu-kubelet-plugin/driver.go
  publishResources (one slice per node, pool named after the node, driver gpu.nvidia.com),
  deviceinfo.go (device `gpu-<minor>` and its attributes), nvlib.go (pciBusID and pcieRoot),
  mig.go (static MIG `gpu-<minor>-mig-<profile without dots>-<GI profile id>-<start>`, attributes
  and capacities, the parent GPU not announced whole). See ../shared/reference/dra-examples.
- The kubelet-plugin DaemonSet: deployments/helm/nvidia-dra-driver-gpu/templates/kubeletplugin.yaml,
  templates/_helpers.tpl (labels) and values.yaml (node affinity, privileged containers).
- The DeviceClasses: dra/deviceclasses.yaml (rendered from the chart, with its source).

A simulated node has no driver: the slice stands for what the plugin would publish, and the real
kube-scheduler and kube-controller-manager allocate claims from it.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
DRIVER = "gpu.nvidia.com"
RESOURCE_API = "resource.k8s.io/v1"
CHART = "nvidia-dra-driver-gpu"
PLUGIN_COMPONENT_LABEL = f"{CHART}-component"
DRIVER_VERSION = "580.95.5"
CUDA_DRIVER_VERSION = "13.0.0"
# Per product: the architecture and compute capability nvidia-smi reports.
ARCHITECTURES = {"H100": ("Hopper", "9.0.0"), "A100": ("Ampere", "8.0.0"), "L4": ("Ada Lovelace", "8.9.0")}
# Static MIG profiles of an 80GB A100 (GI profile id, slices of memory, multiprocessors, memory):
# NVIDIA's MIG user guide, "A100 MIG profiles".
MIG_PROFILES = {
    "1g.10gb": (19, 1, 14, "9728Mi"),
    "2g.20gb": (14, 2, 28, "19968Mi"),
    "3g.40gb": (9, 4, 42, "40192Mi"),
    "7g.80gb": (0, 8, 98, "80896Mi"),
}
_UUIDS = uuid.UUID("8a5d0f1c-0000-4000-8000-6b7567707500")


def device_classes() -> list[dict[str, Any]]:
    return yaml.safe_load((HERE / "dra" / "deviceclasses.yaml").read_text())["items"]


def _uuid(prefix: str, *parts: object) -> str:
    return f"{prefix}-{uuid.uuid5(_UUIDS, '/'.join(map(str, parts)))}"


def _architecture(product: str) -> tuple[str, str]:
    return next((arch for chip, arch in ARCHITECTURES.items() if chip in product), ("Hopper", "9.0.0"))


def _common_attributes(product: str, minor: int) -> dict[str, dict[str, str]]:
    architecture, capability = _architecture(product)
    return {
        "productName": {"string": product},
        "brand": {"string": "Nvidia"},
        "architecture": {"string": architecture},
        "cudaComputeCapability": {"version": capability},
        "driverVersion": {"version": DRIVER_VERSION},
        "cudaDriverVersion": {"version": CUDA_DRIVER_VERSION},
        "resource.kubernetes.io/pciBusID": {"string": f"0000:{0x18 + 0x12 * minor:02x}:00.0"},
    }


def full_gpu(node: str, minor: int, product: str, memory: str) -> dict[str, Any]:
    attributes = {
        "type": {"string": "gpu"},
        "uuid": {"string": _uuid("GPU", node, minor)},
        **_common_attributes(product, minor),
    }
    return {"name": f"gpu-{minor}", "attributes": attributes, "capacity": {"memory": {"value": memory}}}


def mig_devices(node: str, minor: int, product: str, profile: str, count: int) -> list[dict[str, Any]]:
    """The MIG devices mig-parted made on one GPU: `count` of one profile, placed side by side."""
    gi_profile, slices, multiprocessors, memory = MIG_PROFILES[profile]
    devices = []
    for index in range(count):
        start = index * slices
        capacity = {
            "multiprocessors": {"value": str(multiprocessors)},
            "memory": {"value": memory},
            **{f"memorySlice{start + i}": {"value": "1"} for i in range(slices)},
        }
        attributes = {
            "type": {"string": "mig"},
            "uuid": {"string": _uuid("MIG", node, minor, start)},
            "parentUUID": {"string": _uuid("GPU", node, minor)},
            "profile": {"string": profile},
            **_common_attributes(product, minor),
        }
        name = f"gpu-{minor}-mig-{profile.replace('.', '')}-{gi_profile}-{start}"
        devices.append({"name": name, "attributes": attributes, "capacity": capacity})
    return devices


def node_devices(name: str, dra: dict[str, Any]) -> list[dict[str, Any]]:
    """What the kubelet plugin publishes for a node: whole GPUs, or the MIG devices of GPUs in MIG mode."""
    if dra["mig"]:
        return [
            device
            for minor in range(dra["gpus"])
            for device in mig_devices(name, minor, dra["product"], dra["mig"]["profile"], dra["mig"]["per_gpu"])
        ]
    return [full_gpu(name, minor, dra["product"], dra["memory"]) for minor in range(dra["gpus"])]


def resource_slice(name: str, dra: dict[str, Any], node_uid: str | None = None) -> dict[str, Any]:
    """The one ResourceSlice of a node, owned by its Node as the kubelet plugin's slices are."""
    metadata: dict[str, Any] = {"name": f"{name}-{DRIVER}"}
    if node_uid:
        metadata["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Node", "name": name, "uid": node_uid, "controller": True}
        ]
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceSlice",
        "metadata": metadata,
        "spec": {
            "driver": DRIVER,
            "nodeName": name,
            "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
            "devices": node_devices(name, dra),
        },
    }


def kubelet_plugin_daemonset(driver: dict[str, Any]) -> dict[str, Any]:
    """The chart's kubelet-plugin DaemonSet (GPUs only), on the nodes of driver['node_selector']."""
    selector = {PLUGIN_COMPONENT_LABEL: "kubelet-plugin"}
    labels = {"app.kubernetes.io/name": CHART, "app.kubernetes.io/instance": CHART, **selector}
    image = "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.3.0-rc.1"
    affinity_terms = [
        [{"key": "feature.node.kubernetes.io/pci-10de.present", "operator": "In", "values": ["true"]}],
        [{"key": "feature.node.kubernetes.io/cpu-model.vendor_id", "operator": "In", "values": ["NVIDIA"]}],
        [{"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}],
    ]
    env = [
        {"name": "LOG_VERBOSITY", "value": "4"},
        {"name": "NVIDIA_DRIVER_ROOT", "value": "/"},
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"},
        {"name": "CDI_ROOT", "value": "/var/run/cdi"},
        {"name": "NVIDIA_MIG_CONFIG_DEVICES", "value": "all"},
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
    ]
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": driver["name"], "namespace": driver["namespace"], "labels": dict(labels)},
        "spec": {
            "selector": {"matchLabels": selector},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                # The platform team's reason for the privileges the chart gives the plugin.
                "metadata": {
                    "labels": labels,
                    "annotations": {
                        "kubegpu.io/allow-bypass": "NVIDIA DRA driver kubelet plugin: it hands out the GPUs"
                    },
                },
                "spec": {
                    "priorityClassName": "system-node-critical",
                    "nodeSelector": driver["node_selector"],
                    "tolerations": driver["tolerations"],
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [{"matchExpressions": term} for term in affinity_terms]
                            }
                        }
                    },
                    "containers": [
                        {
                            "name": "gpus",
                            "image": image,
                            "command": ["bash", "-c"],
                            "args": ["gpu-kubelet-plugin -v $(LOG_VERBOSITY)"],
                            "securityContext": {"privileged": True},
                            "env": env,
                            "volumeMounts": [
                                {"name": "plugins-registry", "mountPath": "/var/lib/kubelet/plugins_registry"},
                                {"name": "plugins", "mountPath": "/var/lib/kubelet/plugins"},
                                {"name": "cdi", "mountPath": "/var/run/cdi"},
                            ],
                        }
                    ],
                    "volumes": [
                        {"name": "plugins-registry", "hostPath": {"path": "/var/lib/kubelet/plugins_registry"}},
                        {"name": "plugins", "hostPath": {"path": "/var/lib/kubelet/plugins"}},
                        {"name": "cdi", "hostPath": {"path": "/var/run/cdi"}},
                    ],
                },
            },
        },
    }


def claim_template(name: str, namespace: str, claim: dict[str, Any]) -> dict[str, Any]:
    """A ResourceClaimTemplate of one request, as the driver's quickstart writes them (gpu-test1.yaml)."""
    exactly = {"deviceClassName": claim["device_class"], "allocationMode": "ExactCount", "count": claim["count"]}
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}},
    }


def device_model(dra: dict[str, Any]) -> str:
    """The model a DRA node's devices name, as GPU Feature Discovery spells product names."""
    model = dra["product"].replace(" ", "-")
    return f"{model}-MIG-{dra['mig']['profile']}" if dra["mig"] else model


def device_count(dra: dict[str, Any]) -> int:
    return dra["gpus"] * (dra["mig"]["per_gpu"] if dra["mig"] else 1)
