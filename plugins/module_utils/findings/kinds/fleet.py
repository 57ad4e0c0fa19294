# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet facts' own problem kinds (gpu_node_facts): a problem's ``problem`` is its kind's title,
its ``reason`` the message, its ``remedy`` the remedy. The kinds the device-plugin check reports too
(no_gpu_capacity, allocatable_below_capacity, no_device_plugin_pod, device_plugin_not_ready,
dra_no_resource_slices) are declared once, in kinds/device_plugin.py, for both checks;
gpus_served_by_device_plugin_and_dra, which the device-plugin check reports too, is declared here
for both, so that its id stays the fleet's."""

from __future__ import annotations

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.kinds.device_plugin import FLEET_CASE
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import (
    CHECK_DEVICE_PLUGIN,
    CHECK_FLEET,
    Case,
    Kind,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.severity import ERROR, WARNING
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra import DUAL_STACK_MAPPED
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.models import (
    ACK_EXCLUSIVE_MODE,
    ACK_SCHEDULE_LABEL,
)

FLEET = (CHECK_FLEET,)
# NVIDIA's DRA driver: its GPU kubelet plugin "cannot be deployed alongside the standard GPU device
# plugin on the same node" (gpu/dra.py names the source).
_BOTH_WAYS = (
    "{resource} is in the node's allocatable (device plugin) and driver {driver} publishes {devices} "
    "GPU device(s) here in ResourceSlices: the scheduler counts the two apart, so pods asking either "
    "way can be given the same GPUs"
)
_ONE_OF_THE_TWO = (
    "keep one of the two on this node: NVIDIA's DRA driver says its GPU kubelet plugin cannot be deployed "
    "alongside the standard GPU device plugin on the same node (label the node "
    "nvidia.com/gpu.deploy.device-plugin=false for the GPU Operator, or take it out of the DRA kubelet "
    "plugin's nodeSelector)"
)

NOT_EXCLUSIVE = "not_default_scheduling_mode"
OVERALLOCATED = "allocated_above_allocatable"
OUTSIDE_SCHEDULER = "gpu_use_outside_scheduler"
DRA_PLUGIN_NOT_READY = "dra_plugin_not_ready"
SERVED_TWICE = "gpus_served_by_device_plugin_and_dra"
OVER_COMMITTED = "gpus_over_committed_by_device_plugin_and_dra"
DRA_DEVICE_GONE = "claim_on_unpublished_device"
DRA_DEVICE_TAINTED = "dra_devices_tainted"
CLAIMS_UNALLOCATABLE = "gpu_claims_unallocatable"
METRICS_NOT_COLLECTED = "gpu_metric_not_collected"

KINDS = (
    Kind(
        NOT_EXCLUSIVE,
        WARNING,
        "node not in default (exclusive) GPU scheduling mode",
        ACK_SCHEDULE_LABEL + "={mode}",
        "GPU pods on this node share GPUs (ACK GPU sharing): for whole, exclusive GPUs run them in a node pool "
        f"labeled {ACK_SCHEDULE_LABEL}={ACK_EXCLUSIVE_MODE}",
        FLEET,
    ),
    Kind(
        OVERALLOCATED,
        ERROR,
        "allocated above allocatable",
        "allocated {allocated}, allocatable {allocatable}",
        "pods hold more GPUs than the node offers (GPUs withdrawn after they were allocated): check the GPUs with "
        "nvidia-smi on the node and move the pods that cannot run to other nodes",
        FLEET,
    ),
    Kind(
        OUTSIDE_SCHEDULER,
        ERROR,
        "pods on this node use GPUs outside the scheduler",
        "{pods}",
        "request GPUs in resources.limits instead of setting NVIDIA_VISIBLE_DEVICES "
        "(kubegpu.scheduling.gpu_pod_validate names each finding and its remedy)",
        FLEET,
    ),
    Kind(
        DRA_PLUGIN_NOT_READY,
        ERROR,
        "DRA kubelet-plugin pod missing or not Ready",
        "not Ready: {pods}",
        "read the kubelet plugin's log (kubectl -n <namespace> logs <pod> -c gpus); the driver's DaemonSet "
        "must select this node (its nodeSelector and affinity) and nvidia-smi must work on the host",
        FLEET,
        cases={
            "no_pod": Case(
                message="ResourceSlices publish {devices} device(s) here, but no pod matching the DRA "
                "kubelet-plugin selectors is bound here"
            )
        },
    ),
    Kind(
        SERVED_TWICE,
        ERROR,
        "GPUs served by both the device plugin and a DRA driver",
        _BOTH_WAYS,
        _ONE_OF_THE_TWO,
        (CHECK_FLEET, CHECK_DEVICE_PLUGIN),
        cases={
            FLEET_CASE: Case(message=_BOTH_WAYS),
            DUAL_STACK_MAPPED: Case(
                message="{resource} is in the node's allocatable (device plugin) and DeviceClass "
                "{device_class} maps it to the DRA devices of driver {driver} published here"
            ),
        },
    ),
    Kind(
        OVER_COMMITTED,
        ERROR,
        "GPUs over-committed: pods hold them through both the device plugin and a DRA driver",
        "{plugin_pods} hold {plugin_gpus} {resource} (device plugin) and {claim_pods} hold claims on "
        "{claimed_devices} device(s) of driver {driver} (DRA), of the {allocatable} GPU(s) the device plugin "
        "advertises here: neither side knows of the other's pods",
        "pods may share a GPU they each believe is theirs: delete the pods of one side so that they are "
        "scheduled elsewhere, then " + _ONE_OF_THE_TWO,
        FLEET,
    ),
    Kind(
        DRA_DEVICE_GONE,
        ERROR,
        "claim allocated to a device no ResourceSlice publishes",
        "{devices}",
        "the device vanished after the claim was allocated (GPU lost, driver restarted, node replaced): "
        "delete the pods that hold the claim so that it is allocated again",
        FLEET,
    ),
    Kind(
        DRA_DEVICE_TAINTED,
        WARNING,
        "DRA GPU devices tainted NoSchedule or NoExecute",
        "{devices}",
        "the driver or an admin took the devices out of scheduling (an XID error, a lost GPU, a "
        "DeviceTaintRule): repair the GPU (nvidia-smi -q on the node), then the taint goes away",
        FLEET,
    ),
    Kind(
        CLAIMS_UNALLOCATABLE,
        WARNING,
        "GPU pod Pending: no node can allocate its claims",
        "{pod}: {message}",
        "compare the claim's requests (kubectl describe resourceclaim) with the free devices in the "
        "ResourceSlices: too many GPUs asked for, a selector no device meets, or all such GPUs taken",
        FLEET,
    ),
    Kind(
        METRICS_NOT_COLLECTED,
        WARNING,
        "GPU health metric not collected by the DCGM exporter",
        "{metric} has no series while the exporter is up: no {problem_kind} can be read from it",
        "the exporter's counters CSV leaves it out (ECC and retired pages are commented out by default): add the "
        "line '{csv_line}' to the CSV the exporter runs with (the GPU Operator: the ConfigMap named by "
        "dcgmExporter.config.name; dcgm-exporter: -f/--collectors) and restart the exporter",
        FLEET,
    ),
)
