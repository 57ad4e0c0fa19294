# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a GPU node's driver stands: its version, who manages it (the GPU Operator's ClusterPolicy,
an NVIDIADriver resource, or the host), the upgrade controller's state on the node and since when,
and whether the driver pod runs the DaemonSet's current pod template.

The label and annotation names are the GPU Operator's upgrade controller's, from
NVIDIA/k8s-operator-libs ``pkg/upgrade/consts.go`` (commit 1090aefaaaa9287325120aac59e0021708e52359),
whose key formats take the driver name; the GPU Operator passes ``gpu``
(NVIDIA/gpu-operator ``controllers/upgrade_controller.go``). The start-time annotations hold
seconds since the epoch (``strconv.FormatInt(time.Now().Unix(), 10)`` in the library's pod and
validation managers).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.models import ACK_DRIVER_LABEL, driver_version
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import (
    as_list,
    as_mapping,
    as_text,
    string_map,
)

DRIVER_NAME = "gpu"  # the %s of the library's key formats, as the GPU Operator fills it
UPGRADE_STATE_LABEL = f"nvidia.com/{DRIVER_NAME}-driver-upgrade-state"  # UpgradeStateLabelKeyFmt
UPGRADE_SKIP_LABEL = f"nvidia.com/{DRIVER_NAME}-driver-upgrade.skip"  # UpgradeSkipNodeLabelKeyFmt
# UpgradeWaitForSafeDriverLoadAnnotationKeyFmt
SAFE_LOAD_ANNOTATION = f"nvidia.com/{DRIVER_NAME}-driver-upgrade.driver-wait-for-safe-load"
# UpgradeInitialStateAnnotationKeyFmt: the node was unschedulable before the upgrade began
INITIAL_UNSCHEDULABLE_ANNOTATION = f"nvidia.com/{DRIVER_NAME}-driver-upgrade.node-initial-state.unschedulable"
# UpgradeWaitForPodCompletionStartTimeAnnotationKeyFmt
WAIT_FOR_PODS_START_ANNOTATION = f"nvidia.com/{DRIVER_NAME}-driver-upgrade-wait-for-pod-completion-start-time"
# UpgradeValidationStartTimeAnnotationKeyFmt
VALIDATION_START_ANNOTATION = f"nvidia.com/{DRIVER_NAME}-driver-upgrade-validation-start-time"
# UpgradeRequestedAnnotationKeyFmt
UPGRADE_REQUESTED_ANNOTATION = f"nvidia.com/{DRIVER_NAME}-driver-upgrade-requested"
# The ClusterPolicy's own switch (NVIDIA/gpu-operator controllers/state_manager.go driverAutoUpgradeAnnotationKey)
AUTO_UPGRADE_ANNOTATION = "nvidia.com/gpu-driver-upgrade-enabled"

UPGRADE_REQUIRED = "upgrade-required"
UPGRADE_DONE = "upgrade-done"
UPGRADE_FAILED = "upgrade-failed"
VALIDATION_REQUIRED = "validation-required"
WAIT_FOR_JOBS_REQUIRED = "wait-for-jobs-required"
# The states in the order the controller moves a node through them (consts.go).
UPGRADE_STATES = (
    UPGRADE_REQUIRED,
    "cordon-required",
    WAIT_FOR_JOBS_REQUIRED,
    "pod-deletion-required",
    "drain-required",
    "node-maintenance-required",
    "post-maintenance-required",
    "pod-restart-required",
    VALIDATION_REQUIRED,
    "uncordon-required",
    UPGRADE_DONE,
    UPGRADE_FAILED,
)
TERMINAL_STATES = (UPGRADE_DONE, UPGRADE_FAILED)
# The states whose start the controller records on the node, and where.
STATE_START_ANNOTATIONS = {
    WAIT_FOR_JOBS_REQUIRED: WAIT_FOR_PODS_START_ANNOTATION,
    VALIDATION_REQUIRED: VALIDATION_START_ANNOTATION,
}
UPGRADE_ANNOTATIONS = (
    SAFE_LOAD_ANNOTATION,
    INITIAL_UNSCHEDULABLE_ANNOTATION,
    WAIT_FOR_PODS_START_ANNOTATION,
    VALIDATION_START_ANNOTATION,
    UPGRADE_REQUESTED_ANNOTATION,
)

# The driver DaemonSets: the ClusterPolicy's (NVIDIA/gpu-operator assets/state-driver/0500_daemonset.yaml) is
# app=nvidia-driver-daemonset; both it and an NVIDIADriver's (manifests/state-driver/0500_daemonset.yaml)
# carry app.kubernetes.io/component=nvidia-driver.
DRIVER_APP_LABEL = ("app", "nvidia-driver-daemonset")
DRIVER_COMPONENT_LABEL = ("app.kubernetes.io/component", "nvidia-driver")
# The DaemonSet controller marks each pod with the template generation it was made from, and the API
# server keeps the DaemonSet's in this annotation (kubernetes pkg/registry/apps/daemonset/strategy.go;
# pkg/controller/daemon/util IsPodUpdated compares them).
TEMPLATE_GENERATION_ANNOTATION = "deprecated.daemonset.template.generation"
TEMPLATE_GENERATION_LABEL = "pod-template-generation"
REVISION_HASH_LABEL = "controller-revision-hash"

NVIDIA_DRIVER_KIND = "NVIDIADriver"
CLUSTER_POLICY_KIND = "ClusterPolicy"
MANAGED_BY_CLUSTER_POLICY = "gpu-operator-clusterpolicy"
MANAGED_BY_NVIDIA_DRIVER = "nvidia-driver-cr"
MANAGED_BY_HOST = "host"

# The driver container image's tag starts with the driver version (nvcr.io/nvidia/driver:550.90.07-ubuntu22.04).
_IMAGE_VERSION = re.compile(r":(\d{3}(?:\.\d+){1,2})(?:-|$)")
# GFD's labels on the node (NVIDIA/k8s-device-plugin internal/lm/nvml.go): the full version, its parts, and
# the older split keys gpu/models.py reads too.
GFD_DRIVER_LABELS = (
    "nvidia.com/cuda.driver-version.full",
    "nvidia.com/cuda.driver-version.major",
    "nvidia.com/cuda.driver-version.minor",
    "nvidia.com/cuda.driver-version.revision",
    "nvidia.com/cuda.driver.major",
    "nvidia.com/cuda.driver.minor",
    "nvidia.com/cuda.driver.rev",
)
# Every label a driver version is read from: GFD's, then ACK's (gpu/models.py driver_version).
DRIVER_VERSION_LABELS = (*GFD_DRIVER_LABELS, ACK_DRIVER_LABEL)


@dataclass(frozen=True)
class DriverView:
    """One GPU node's driver: the version it runs, who manages it, the upgrade state and since when
    (seconds, where the controller records it), and whether its driver pod is on the DaemonSet's
    current template (None without a driver pod or without the marks to tell)."""

    node: str
    version: str | None
    managed_by: str
    driver_resource: str | None
    upgrade_state: str | None
    state_since: float | None
    pod_revision_current: bool | None
    pod: str | None = None  # namespace/name of the driver pod on the node
    daemonset: str | None = None  # namespace/name of its DaemonSet

    def as_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "managed_by": self.managed_by,
            "driver_resource": self.driver_resource,
            "upgrade_state": self.upgrade_state,
            "state_since": self.state_since,
            "pod_revision_current": self.pod_revision_current,
            "pod": self.pod,
            "daemonset": self.daemonset,
        }


def _meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    return as_mapping(obj.get("metadata"))


def _key(obj: Mapping[str, Any]) -> str:
    meta = _meta(obj)
    return f"{as_text(meta.get('namespace'))}/{as_text(meta.get('name'))}"


def is_driver_daemonset(labels: Mapping[str, str]) -> bool:
    """Whether an object's labels are those of a GPU Operator driver DaemonSet (or its pods)."""
    return any(labels.get(key) == value for key, value in (DRIVER_APP_LABEL, DRIVER_COMPONENT_LABEL))


def owner(obj: Mapping[str, Any], kind: str | None = None) -> tuple[str, str] | None:
    """The (kind, name) of the object's controller (or of its first owner of `kind`)."""
    for ref in map(as_mapping, as_list(_meta(obj).get("ownerReferences"))):
        if (kind is None and ref.get("controller")) or (kind is not None and ref.get("kind") == kind):
            return as_text(ref.get("kind")), as_text(ref.get("name"))
    return None


def parse_timestamp(text: str) -> float | None:
    """Seconds since the epoch from the controller's annotation (an integer), or an RFC 3339 time."""
    text = text.strip()
    if text.isdigit():
        return float(text)
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def state_since(state: str | None, annotations: Mapping[str, str], now: float) -> float | None:
    """How long the node has been in `state`, where the controller records when the state began."""
    key = STATE_START_ANNOTATIONS.get(state or "")
    started = parse_timestamp(annotations[key]) if key and annotations.get(key) else None
    return max(0.0, now - started) if started is not None else None


def image_driver_version(image: str) -> str | None:
    found = _IMAGE_VERSION.search(image.rsplit("/", 1)[-1])
    return found[1] if found else None


def selects_node(nvidia_driver: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Whether an NVIDIADriver's spec.nodeSelector (all its pairs) matches the node's labels."""
    selector = string_map(as_mapping(nvidia_driver.get("spec")).get("nodeSelector"))
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def selecting_driver(nvidia_drivers: Iterable[Mapping[str, Any]], labels: Mapping[str, str]) -> str | None:
    """The NVIDIADriver whose nodeSelector selects the node, else the default one (spec.default, no
    selector), else None (NVIDIA/gpu-operator deployments/gpu-operator/crds/nvidia.com_nvidiadrivers.yaml)."""
    fallback = None
    for item in nvidia_drivers:
        name = as_text(_meta(item).get("name"))
        if selects_node(item, labels):
            return name
        spec = as_mapping(item.get("spec"))
        if spec.get("default") is True and fallback is None:
            fallback = name
    return fallback


def template_generation(daemonset: Mapping[str, Any]) -> str | None:
    value = string_map(_meta(daemonset).get("annotations")).get(TEMPLATE_GENERATION_ANNOTATION)
    return value or None


def pod_current(pod: Mapping[str, Any], daemonset: Mapping[str, Any] | None) -> bool | None:
    """Whether a DaemonSet pod runs its DaemonSet's current template (the controller's own test: the
    pod's template generation against the DaemonSet's), or None when either mark is missing."""
    if daemonset is None:
        return None
    wanted = template_generation(daemonset)
    have = string_map(_meta(pod).get("labels")).get(TEMPLATE_GENERATION_LABEL)
    if not wanted or not have:
        return None
    return wanted == have


def _node_pod(node: str, pods: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    for pod in pods:
        if as_mapping(pod.get("spec")).get("nodeName") == node:
            return pod
    return None


def _pod_daemonset(pod: Mapping[str, Any], daemonsets: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    ref = owner(pod, "DaemonSet")
    if ref is None:
        return None
    namespace = _meta(pod).get("namespace")
    for ds in daemonsets:
        meta = _meta(ds)
        if meta.get("name") == ref[1] and meta.get("namespace") == namespace:
            return ds
    return None


def _pod_version(pod: Mapping[str, Any]) -> str | None:
    for container in map(as_mapping, as_list(as_mapping(pod.get("spec")).get("containers"))):
        version = image_driver_version(as_text(container.get("image")))
        if version:
            return version
    return None


def _manager(
    pod: Mapping[str, Any] | None, daemonset: Mapping[str, Any] | None, owned_by_resource: bool, resource: str | None
) -> str:
    """Who manages the node's driver. Without its DaemonSet at hand, the driver pod's app label tells: the
    ClusterPolicy's DaemonSet is app=nvidia-driver-daemonset, an NVIDIADriver's is named after the resource."""
    if owned_by_resource:
        return MANAGED_BY_NVIDIA_DRIVER
    if pod is None:
        return MANAGED_BY_NVIDIA_DRIVER if resource is not None else MANAGED_BY_HOST
    if daemonset is None and string_map(_meta(pod).get("labels")).get(DRIVER_APP_LABEL[0]) != DRIVER_APP_LABEL[1]:
        return MANAGED_BY_NVIDIA_DRIVER
    return MANAGED_BY_CLUSTER_POLICY


def driver_view(
    node: Mapping[str, Any],
    driver_pods: Iterable[Mapping[str, Any]],
    driver_daemonsets: Sequence[Mapping[str, Any]],
    nvidia_drivers: Sequence[Mapping[str, Any]],
    now: float,
) -> DriverView:
    """The driver view of one node (a Node object, or one trimmed to its name, labels and
    annotations) from the driver pods, the driver DaemonSets and the NVIDIADriver resources.

    The version is GFD's (what the loaded driver reports), else the driver pod's image tag, else
    the selecting NVIDIADriver's spec.version."""
    meta = _meta(node)
    name = as_text(meta.get("name"))
    labels = string_map(meta.get("labels"))
    annotations = string_map(meta.get("annotations"))
    pod = _node_pod(name, driver_pods)
    daemonset = _pod_daemonset(pod, driver_daemonsets) if pod is not None else None
    ds_owner = owner(daemonset, NVIDIA_DRIVER_KIND) if daemonset is not None else None
    resource = ds_owner[1] if ds_owner else selecting_driver(nvidia_drivers, labels)
    managed_by = _manager(pod, daemonset, ds_owner is not None, resource)
    if managed_by == MANAGED_BY_CLUSTER_POLICY:
        resource = None
    spec_version = next(
        (as_text(as_mapping(d.get("spec")).get("version")) for d in nvidia_drivers if _meta(d).get("name") == resource),
        "",
    )
    version = gfd_driver_version(labels) or (_pod_version(pod) if pod is not None else None) or spec_version or None
    state = labels.get(UPGRADE_STATE_LABEL) or None
    return DriverView(
        node=name,
        version=version,
        managed_by=managed_by,
        driver_resource=resource,
        upgrade_state=state,
        state_since=state_since(state, annotations, now),
        pod_revision_current=pod_current(pod, daemonset) if pod is not None else None,
        pod=_key(pod) if pod is not None else None,
        daemonset=_key(daemonset) if daemonset is not None else None,
    )


def gfd_driver_version(labels: Mapping[str, str]) -> str | None:
    """The driver version GFD labels the node with: the full label, the newer parts, or the older parts."""
    parts = [labels.get(k) for k in GFD_DRIVER_LABELS[1:4]]
    if not labels.get(GFD_DRIVER_LABELS[0]) and parts[0]:
        return ".".join(p for p in parts if p)
    return driver_version(labels)


def trimmed_node(node: Mapping[str, Any], extra_label_keys: Iterable[str] = ()) -> dict[str, Any]:
    """A Node cut down to what driver_view reads: its name, the driver and upgrade labels (and
    `extra_label_keys`, the keys the NVIDIADrivers select on) and the upgrade annotations."""
    meta = _meta(node)
    keys = {UPGRADE_STATE_LABEL, UPGRADE_SKIP_LABEL, *DRIVER_VERSION_LABELS, *extra_label_keys}
    labels = {k: v for k, v in string_map(meta.get("labels")).items() if k in keys}
    annotations = {k: v for k, v in string_map(meta.get("annotations")).items() if k in UPGRADE_ANNOTATIONS}
    return {"metadata": {"name": meta.get("name"), "labels": labels, "annotations": annotations}}


def selector_keys(nvidia_drivers: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """The node label keys the NVIDIADrivers select on."""
    keys: set[str] = set()
    for item in nvidia_drivers:
        keys.update(string_map(as_mapping(item.get("spec")).get("nodeSelector")))
    return frozenset(keys)


def version_key(version: str) -> tuple[int, ...]:
    """A driver version as numbers for comparing (550.54.15 -> (550, 54, 15)); non-numbers count as 0."""
    return tuple(int(part) if part.isdigit() else 0 for part in version.strip().split("."))
