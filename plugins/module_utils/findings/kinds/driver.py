# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the GPU drivers stand, as the fleet facts report it (gpu_node_facts, the fleet report): an
upgrade stuck in a state the GPU Operator's upgrade controller should have left, an upgrade that
failed, driver versions mixed within one pool, and a driver pod on an older pod template than its
DaemonSet's. The label and annotation names are in gpu/driver_upgrade.py, with their source."""

from __future__ import annotations

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import CHECK_FLEET, Kind
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.severity import ERROR, WARNING
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.driver_upgrade import (
    UPGRADE_SKIP_LABEL,
    UPGRADE_STATE_LABEL,
)

FLEET = (CHECK_FLEET,)

UPGRADE_STUCK = "driver_upgrade_stuck"
UPGRADE_FAILED = "driver_upgrade_failed"
VERSIONS_MIXED = "driver_versions_mixed"
POD_NOT_CURRENT = "driver_pod_not_current"

KINDS = (
    Kind(
        UPGRADE_STUCK,
        WARNING,
        "GPU driver upgrade stuck",
        UPGRADE_STATE_LABEL + "={state} for {since} (longer than {limit})",
        "the GPU Operator's upgrade controller has not moved this node on: read its log (the gpu-operator pod) and "
        "the driver pod's; in wait-for-jobs-required or pod-deletion-required a pod still uses the GPUs "
        "(kubegpu.scheduling.gpu_driver_info names what blocks the upgrade); in validation-required the "
        "operator validator pod on the node has not passed",
        FLEET,
    ),
    Kind(
        UPGRADE_FAILED,
        ERROR,
        "GPU driver upgrade failed",
        UPGRADE_STATE_LABEL + "=upgrade-failed",
        "read the driver pod's log on this node (kubectl -n <operator namespace> logs <driver pod> --all-containers); "
        "once fixed, the controller retries when the label is set to upgrade-required, or label the node "
        + UPGRADE_SKIP_LABEL
        + "=true to leave it out",
        FLEET,
    ),
    Kind(
        VERSIONS_MIXED,
        WARNING,
        "GPU driver versions mixed within one pool",
        "pool {pool}: {versions}",
        "nodes of one pool run different drivers, so a CUDA image may start on some and fail on others: finish or "
        "roll the upgrade (kubegpu.scheduling.gpu_driver_info shows each node's driver and what blocks it)",
        FLEET,
    ),
    Kind(
        POD_NOT_CURRENT,
        WARNING,
        "driver pod not on its DaemonSet's current template",
        "driver pod {pod} runs an older pod template than its DaemonSet {daemonset}",
        "the driver DaemonSet updates on delete: the GPU Operator's upgrade controller replaces the pod when automatic "
        "upgrades are on (the ClusterPolicy's driver.upgradePolicy.autoUpgrade); otherwise drain the node and delete "
        "the pod",
        FLEET,
    ),
)
