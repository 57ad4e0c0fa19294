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

KINDS = (
    Kind(
        HELD_BY_BREAKER,
        WARNING,
        "Node held back by the breaker",
        "{reason}",
        "Repair and release the nodes of the pool already out of service first, or, if the pool can lose more "
        "GPUs at once, raise max_share; run again to quarantine it",
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
)
