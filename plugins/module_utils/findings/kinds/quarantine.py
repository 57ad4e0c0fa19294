# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a node quarantine run reports (gpu_node_quarantine): nodes the breaker held back or that do
not exist, node patches that failed, and pods that were not evicted (a budget in the way, a refusal),
left on the node on purpose, or deleted past their budget when asked. ``node`` and ``subject`` (the
pod, or the pool) are where it hit."""

from __future__ import annotations

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import CHECK_QUARANTINE, Kind
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.severity import ERROR, INFO, WARNING

QUARANTINE = (CHECK_QUARANTINE,)

HELD_BY_BREAKER = "quarantine.held_by_breaker"
NODE_NOT_FOUND = "quarantine.node_not_found"
NODE_PATCH_FAILED = "quarantine.node_patch_failed"
EVICTION_BLOCKED = "quarantine.eviction_blocked_by_budget"
EVICTION_FAILED = "quarantine.eviction_failed"
POD_LEFT = "quarantine.gpu_pod_left_on_node"
POD_DELETED = "quarantine.pod_deleted_past_budget"
DEVICE_NOT_PUBLISHED = "quarantine.device_not_published"
DEVICE_RULE_FOREIGN = "quarantine.device_rule_not_ours"
DEVICE_RULE_FAILED = "quarantine.device_rule_write_failed"
DEVICE_SIMULATION = "quarantine.device_taint_simulation"
DEVICE_SIMULATION_MISSING = "quarantine.device_taint_simulation_missing"

KINDS = (
    Kind(
        HELD_BY_BREAKER,
        WARNING,
        "Node or device held back by the breaker",
        "{reason}",
        "Repair and release the nodes or devices of the pool already out of service first, or, if the pool can "
        "lose more GPUs at once, raise max_share; run again to quarantine it",
        QUARANTINE,
    ),
    Kind(
        NODE_NOT_FOUND,
        ERROR,
        "No such node",
        "no node is named {node}",
        "Check the name (kubectl get nodes); nothing was done for it",
        QUARANTINE,
    ),
    Kind(
        NODE_PATCH_FAILED,
        ERROR,
        "The node could not be cordoned and tainted",
        "{error}",
        "Fix what the error names and run again: the node is patched in one request, so it is either "
        "quarantined whole or not at all, and its pods were not evicted",
        QUARANTINE,
    ),
    Kind(
        EVICTION_BLOCKED,
        ERROR,
        "GPU pod kept on the node by its PodDisruptionBudget",
        "{pod} stays on {node}: {budgets} allowed no disruption within {timeout}s ({detail})",
        "Let the budget allow a disruption (scale the workload up, or wait for its other pods to be Ready) and "
        "run again; force_delete: true deletes the pod past its budget after the timeout",
        QUARANTINE,
    ),
    Kind(
        EVICTION_FAILED,
        ERROR,
        "GPU pod not evicted",
        "{pod} on {node}: {error}",
        "Fix what the error names and run again: the node stays cordoned and tainted",
        QUARANTINE,
    ),
    Kind(
        POD_LEFT,
        INFO,
        "GPU pod left on the node",
        "{pod} holds {gpus} and is left: {reason}",
        "Nothing to do for the quarantine; stop the pod's DaemonSet or static manifest on the node if it must go",
        QUARANTINE,
    ),
    Kind(
        POD_DELETED,
        WARNING,
        "GPU pod deleted past its PodDisruptionBudget",
        "{pod} on {node} was deleted after {timeout}s, though {budgets} allowed no disruption (force_delete)",
        "Check the workload of the budget: it ran with fewer pods than its budget asks for",
        QUARANTINE,
    ),
    Kind(
        DEVICE_NOT_PUBLISHED,
        ERROR,
        "No ResourceSlice publishes the device",
        "{device}: no ResourceSlice publishes it, so a DeviceTaintRule on it would taint nothing now",
        "Check the driver, pool and device names (kubectl get resourceslices -o yaml); nothing was written for any "
        "device of the run",
        QUARANTINE,
    ),
    Kind(
        DEVICE_RULE_FOREIGN,
        WARNING,
        "A DeviceTaintRule of that name is not the collection's",
        "DeviceTaintRule {rule} for {device} exists without the label kubegpu.io/quarantine=device: left alone",
        "Find out who made it (kubectl get devicetaintrule {rule} -o yaml); delete or rename it if it is stale, "
        "and run again",
        QUARANTINE,
    ),
    Kind(
        DEVICE_RULE_FAILED,
        ERROR,
        "The DeviceTaintRule could not be written",
        "{rule} for {device}: {error}",
        "Fix what the error names and run again: the device's users were not evicted",
        QUARANTINE,
    ),
    Kind(
        DEVICE_SIMULATION,
        INFO,
        "What the device taint eviction controller reported for effect None",
        "{rule} on {device} selects {published} published and {allocated} allocated device(s); "
        "{pods} pod(s) in {namespaces} namespace(s) would be evicted",
        "Nothing to do: the rule was then switched to NoSchedule, and its users are evicted through the Eviction API "
        "when evict is set",
        QUARANTINE,
    ),
    Kind(
        DEVICE_SIMULATION_MISSING,
        WARNING,
        "No report of the device taint eviction controller",
        "{rule} on {device}: the controller reported nothing for effect None within {timeout}s",
        "Check that kube-controller-manager runs the device-taint-eviction-controller; the rule was switched to "
        "NoSchedule all the same, and the users the plan names are the ones evicted",
        QUARANTINE,
    ),
)
