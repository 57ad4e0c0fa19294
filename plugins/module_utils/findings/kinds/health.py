# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The health view's problem kinds (gpu_node_facts' ``health.problems``): the kind ids are the
judge's (gpu/health.py). A problem that leaves the node failed is an error; one that leaves it
degraded is the ``degraded`` case, a warning."""

from __future__ import annotations

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import CHECK_HEALTH, Case, Kind
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.severity import ERROR, WARNING
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dcgm_signals import (
    GPU_ECC_UNCORRECTABLE,
    GPU_METRICS_UNKNOWN,
    GPU_RETIRED_PAGES_PENDING,
    GPU_ROW_REMAP_FAILED,
    GPU_ROW_REMAP_PENDING,
    GPU_XID_ERROR,
    GPUS_MISSING_FROM_METRICS,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.health import (
    GPU_DEVICES_TAINTED,
    GPU_HEALTH_CONDITION,
    GPU_HEALTH_TAINT,
    GPU_PLUGIN_NOT_READY,
    GPUS_BELOW_EXPECTED,
    GPUS_WITHDRAWN,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.health_table import DEGRADED

HEALTH = (CHECK_HEALTH,)
DEGRADED_CASE = DEGRADED
_DEGRADED = {DEGRADED_CASE: Case(severity=WARNING)}
# What every repair ends with: the node takes GPU work again only once a GPU job passes on it.
_THEN_PROVE = (
    "keep new GPU work off the node (cordon it, or the collection's quarantine), repair it, and let it take "
    "GPU work again only after a GPU job passes on it"
)

KINDS = (
    Kind(
        GPU_HEALTH_CONDITION,
        ERROR,
        "GPU health condition reported",
        "{producer}: {condition}={status} ({reason}): {message}",
        "read the condition's reason and message (kubectl describe node), follow the action its producer "
        f"recommends, then {_THEN_PROVE}",
        HEALTH,
        cases=_DEGRADED,
    ),
    Kind(
        GPU_HEALTH_TAINT,
        ERROR,
        "GPU health taint on the node",
        "{producer}: taint {taint}",
        "the producer judged the node's GPUs bad and keeps pods off it: find why in its node conditions and "
        f"events, {_THEN_PROVE}; the producer removes its taint itself",
        HEALTH,
        cases=_DEGRADED,
    ),
    Kind(
        GPUS_WITHDRAWN,
        ERROR,
        "GPUs withdrawn by the device plugin",
        "{resource}: capacity {capacity}, allocatable {allocatable} ({withdrawn} withdrawn)",
        "the device plugin marked GPUs unhealthy: pods already on them are not touched, and they stay withdrawn "
        "until the plugin restarts; find them with nvidia-smi -q on the node (Xid errors in the kernel log), "
        f"{_THEN_PROVE}, and restart the device-plugin pod",
        HEALTH,
        cases=_DEGRADED,
    ),
    Kind(
        GPUS_BELOW_EXPECTED,
        ERROR,
        "fewer GPUs than expected",
        "{capacity} registered, {expected} expected ({expected_source})",
        "a GPU the node should have is not seen (fallen off the bus, Xid 79, or not bound by the driver): "
        f"compare nvidia-smi -L with lspci on the host, {_THEN_PROVE}",
        HEALTH,
        cases=_DEGRADED,
    ),
    Kind(
        GPU_PLUGIN_NOT_READY,
        ERROR,
        "GPU plugin pod not Ready",
        "{plugin}, not Ready: {pods}",
        "the kubelet cannot hand out this node's GPUs to new pods: read the pod's events and log (kubectl -n "
        "<namespace> describe pod, logs), check nvidia-smi on the host, and restart the pod once the GPUs answer",
        HEALTH,
    ),
    Kind(
        GPU_DEVICES_TAINTED,
        ERROR,
        "DRA GPU devices tainted",
        "{count} device(s): {devices}",
        "the DRA driver or an admin (a DeviceTaintRule) took the devices out of use: find the failed GPU "
        "(nvidia-smi -q on the node), repair or replace it; the driver removes its taint, an admin's rule is "
        "deleted by the admin",
        HEALTH,
        cases=_DEGRADED,
    ),
    Kind(
        GPU_XID_ERROR,
        ERROR,
        "GPU XID error in the DCGM exporter's metrics",
        "GPU {gpu} ({uuid}): XID {xid}, {meaning} ({metric} at {at}, new within {window})",
        "the GPU reported a hardware or firmware fault: read the XID's entry in NVIDIA's XID catalogue and the "
        f"kernel log on the node (dmesg | grep -i xid), {_THEN_PROVE}",
        HEALTH,
        cases=_DEGRADED,
    ),
    Kind(
        GPU_ECC_UNCORRECTABLE,
        ERROR,
        "uncorrectable GPU memory errors",
        "GPU {gpu} ({uuid}): {metric} rose by {value} within {window} (at {at})",
        "an uncorrectable memory error killed the work on the GPU: reset the GPU (or reboot the node) to retire "
        f"or remap the bad memory, check nvidia-smi -q -d ROW_REMAPPER,PAGE_RETIREMENT, {_THEN_PROVE}",
        HEALTH,
        cases=_DEGRADED,
    ),
    Kind(
        GPU_ROW_REMAP_FAILED,
        ERROR,
        "GPU memory row remapping failed",
        "GPU {gpu} ({uuid}): {metric} = {value} (at {at})",
        "the GPU has no spare memory rows left (XID 64): it cannot be repaired in place; keep work off the node "
        "and replace the GPU (RMA)",
        HEALTH,
    ),
    Kind(
        GPU_ROW_REMAP_PENDING,
        WARNING,
        "GPU memory row remap pending",
        "GPU {gpu} ({uuid}): {metric} = {value} (at {at})",
        "a bad memory row is recorded and takes effect at the next GPU reset: drain the GPU's work, reset the GPU "
        f"(nvidia-smi -r) or reboot the node, {_THEN_PROVE}",
        HEALTH,
    ),
    Kind(
        GPU_RETIRED_PAGES_PENDING,
        WARNING,
        "GPU memory pages pending retirement",
        "GPU {gpu} ({uuid}): {metric} = {value} (at {at})",
        "bad memory pages are retired at the next GPU reset: drain the GPU's work, reset the GPU or reboot the "
        f"node, {_THEN_PROVE}",
        HEALTH,
    ),
    Kind(
        GPUS_MISSING_FROM_METRICS,
        WARNING,
        "GPUs missing from the DCGM exporter's metrics",
        "{in_metrics} GPU(s) in {metric}, {expected} expected ({expected_source})",
        "a GPU the node should have is not reported by the exporter (fallen off the bus, Xid 79, or not seen by "
        f"the driver): compare nvidia-smi -L with lspci on the host, {_THEN_PROVE}",
        HEALTH,
    ),
    Kind(
        GPU_METRICS_UNKNOWN,
        WARNING,
        "GPU health unknown: no usable DCGM exporter metrics",
        "{reason}",
        "until the exporter's metrics reach Prometheus again the node's GPUs are not judged by them: check the "
        "dcgm-exporter pod on the node (kubectl -n <namespace> logs), its scrape target in Prometheus (Status > "
        "Targets), and the prometheus option (URL, credentials)",
        HEALTH,
    ),
)
