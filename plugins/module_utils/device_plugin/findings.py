# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kinds of device-plugin findings and how one is written."""

from __future__ import annotations

from typing import Any

# A plugin pod restarting this often is unstable even when it is Ready right now.
RESTART_WARNING_THRESHOLD = 5
KIND_NO_DEVICE_PLUGIN = "no_device_plugin_deployed"
KIND_DAEMONSET_MISSING = "daemonset_missing"
KIND_DAEMONSET_NOT_OBSERVED = "daemonset_generation_not_observed"
KIND_DAEMONSET_SELECTS_NO_NODE = "daemonset_selects_no_node"
KIND_DAEMONSET_NOT_SCHEDULED = "daemonset_pods_not_scheduled"
KIND_DAEMONSET_NOT_UPDATED = "daemonset_rollout_incomplete"
KIND_DAEMONSET_NOT_READY = "daemonset_pods_not_ready"
KIND_DAEMONSET_NOT_AVAILABLE = "daemonset_pods_not_available"
KIND_DAEMONSET_MISSCHEDULED = "daemonset_pods_misscheduled"
KIND_SEVERAL_DEPLOYMENTS = "several_device_plugin_deployments"
KIND_NO_GPU_NODES = "no_gpu_nodes"
KIND_NO_DRA_PLUGIN_POD = "no_dra_kubelet_plugin_pod"
KIND_DRA_PLUGIN_NOT_READY = "dra_kubelet_plugin_not_ready"
KIND_DRA_NO_SLICES = "dra_no_resource_slices"
KIND_DRA_NOT_READABLE = "dra_objects_not_readable"
KIND_NODE_NOT_READY = "node_not_ready"
KIND_NO_PLUGIN_POD = "no_device_plugin_pod"
KIND_SEVERAL_PLUGIN_PODS = "several_device_plugin_pods"
KIND_PLUGIN_NOT_READY = "device_plugin_not_ready"
KIND_PLUGIN_RESTARTING = "device_plugin_restarting"
KIND_NO_CAPACITY = "no_gpu_capacity"
KIND_UNHEALTHY_GPUS = "allocatable_below_capacity"
KIND_LABEL_COUNT_MISMATCH = "gpu_count_differs_from_labels"
KIND_HOST_FACTS_FAILED = "host_facts_failed"
KIND_HOST_NOT_A_NODE = "host_not_a_node"
KIND_HOST_GPUS_NOT_ADVERTISED = "host_gpus_not_advertised"
KIND_DRIVER_MISSING = "driver_not_found"
KIND_NVIDIA_SMI_FAILED = "nvidia_smi_failed"
KIND_HOST_GPU_COUNT_MISMATCH = "host_gpu_count_differs_from_capacity"
KIND_TOOLKIT_CONFIG_MISSING = "toolkit_config_not_found"
KIND_TOOLKIT_CONFIG_UNREADABLE = "toolkit_config_unreadable"
KIND_ENVVAR_ACCEPTED = "toolkit_accepts_visible_devices_env"
KIND_VOLUME_MOUNTS_OFF = "toolkit_volume_mounts_disabled"


def finding(
    severity: str, kind: str, subject: str, problem: str, remedy: str, node: str | None = None
) -> dict[str, Any]:
    return {"severity": severity, "kind": kind, "node": node, "subject": subject, "problem": problem, "remedy": remedy}
