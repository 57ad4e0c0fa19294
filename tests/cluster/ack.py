"""ACK's device plugin as a static pod, the way older Alibaba ACK clusters run it on their GPU nodes.

ACK's node-init script (`public::nvidia::deploy_static_pod`) copies nvidia-device-plugin.yml into
/etc/kubernetes/manifests on each GPU node; the kubelet runs it and shows it to the API server as a
mirror pod `nvidia-device-plugin-<node>` in kube-system, labelled `component=nvidia-device-plugin`,
annotated `kubernetes.io/config.source: file` and `kubernetes.io/config.mirror`, owned by its Node
(../shared/reference/gpu-conventions.md §2; ACK's "Use the MIG feature" and driver-upgrade pages).
The manifest's args include `--pass-device-specs` (ACK's MIG page edits it with
`sed 's/"--pass-device-specs"/"--pass-device-specs", "--mig-strategy=mixed"/'`), as in NVIDIA's
deployments/static/nvidia-device-plugin-compat-with-cpumanager.yml of that time, which ACK's copy
follows: args `--fail-on-init-error=false --pass-device-specs`, privileged, the kubelet's
device-plugins directory from the host. The plugin image comes from ACK's registry (acs/), and the
pod sets NVIDIA_VISIBLE_DEVICES=all on itself (reference, "ACK caveats").

KWOK has no kubelet to read a manifest, so the fleet creates each mirror pod as the kubelet would
(kubelet config/common.go: name suffix, config annotations, NoExecute toleration; mirror_client.go:
the Node as controller owner), and KWOK runs it like any pod bound to its node.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

NAMESPACE = "kube-system"
MANIFEST_NAME = "nvidia-device-plugin"
IMAGE = "registry-vpc.cn-hangzhou.aliyuncs.com/acs/k8s-device-plugin:v0.9.0-a5e4f5a-aliyun"
SELECTOR_LABELS = {"component": "nvidia-device-plugin"}
DEVICE_PLUGINS_DIR = "/var/lib/kubelet/device-plugins"


def manifest() -> dict[str, Any]:
    """/etc/kubernetes/manifests/nvidia-device-plugin.yml on an ACK GPU node."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": MANIFEST_NAME, "namespace": NAMESPACE, "labels": dict(SELECTOR_LABELS)},
        "spec": {
            "priorityClassName": "system-node-critical",
            "containers": [
                {
                    "name": "nvidia-device-plugin-ctr",
                    "image": IMAGE,
                    "args": ["--fail-on-init-error=false", "--pass-device-specs"],
                    "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}],
                    "securityContext": {"privileged": True},
                    "volumeMounts": [{"name": "device-plugin", "mountPath": DEVICE_PLUGINS_DIR}],
                }
            ],
            "volumes": [{"name": "device-plugin", "hostPath": {"path": DEVICE_PLUGINS_DIR}}],
        },
    }


def mirror_pod_name(node: str) -> str:
    return f"{MANIFEST_NAME}-{node}"


def mirror_pod(node: str, node_uid: str) -> dict[str, Any]:
    """The mirror pod the kubelet of `node` creates for the manifest."""
    pod = manifest()
    pod["metadata"]["name"] = mirror_pod_name(node)
    pod["spec"]["nodeName"] = node
    pod["spec"]["tolerations"] = [{"operator": "Exists", "effect": "NoExecute"}]
    # The kubelet's hash of the static pod: its uid, config.hash and the mirror annotation.
    digest = hashlib.md5(json.dumps(pod, sort_keys=True).encode(), usedforsecurity=False).hexdigest()
    pod["metadata"]["annotations"] = {
        "kubernetes.io/config.hash": digest,
        "kubernetes.io/config.mirror": digest,
        "kubernetes.io/config.seen": "2026-01-01T00:00:00.000000000Z",
        "kubernetes.io/config.source": "file",
    }
    pod["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid, "controller": True}
    ]
    return pod


def static_nodes(fleet: dict) -> list[str]:
    """The fleet's nodes that run the static pod (`ack_static_device_plugin: true`)."""
    return [n["name"] for n in fleet["nodes"] if n.get("ack_static_device_plugin")]
