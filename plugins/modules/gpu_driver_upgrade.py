# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_driver_upgrade
short_description: Plan and guard a rolling GPU driver upgrade, on host drivers or with the GPU Operator
version_added: 1.0.0
description:
  - The steps of the C(kubegpu.scheduling.driver_upgrade) role, one O(action) per task; the role composes them
    with M(kubegpu.scheduling.gpu_node_quarantine) and M(kubegpu.scheduling.gpu_node_release).
  - V(plan) (read only) selects the nodes (O(names), or O(label_selectors)), leaves out with the reason those
    without GPUs, those carrying the GPU Operator's skip label C(nvidia.com/gpu-driver-upgrade.skip=true) set by
    someone else, those whose GFD driver label is at O(target_version) already, those whose upgrade to it failed
    before, and those the pre-flight finds blocked (GPU use without a request, GPU DaemonSet pods, DRA claim
    holders, budgets that allow no disruption, CUDA needing a newer driver; in host mode the pods of DaemonSets
    do not block, since the host tasks own the node, and are listed in RV(daemonset_pods)). The others come in
    ordered batches,
    the O(canary) first, then O(max_unavailable) nodes each, no batch taking more of a pool's GPUs out of service
    than O(max_share) (nodes cordoned before counted).
  - V(settle) (host mode, after the host tasks) waits until each node in O(names) publishes its GPU count of
    O(expected_gpus) again (allocatable), deletes the pods on them that failed admission
    (C(UnexpectedAdmissionError)) and that a controller owns, and lists the bare ones without deleting them.
    A node whose GPUs are not back fails the task and keeps the failure in its annotation C(kubegpu.io/driver-upgrade).
  - V(hold) puts the GPU Operator's skip label on the nodes in O(names), recorded as the roll's own in the
    annotation C(kubegpu.io/driver-upgrade); V(start) takes off the roll's own skip label (never another's), so
    the operator's upgrade controller upgrades those nodes; V(wait) watches their state label
    C(nvidia.com/gpu-driver-upgrade-state) until every node is C(upgrade-done), one is C(upgrade-failed) (the task
    fails naming the node and its state, recorded on it) or O(wait_timeout) passes (the nodes still on their way
    are named with their state).
  - V(fail) records O(reason) as the failure of the nodes in O(names).
  - Each node write is a guarded JSON patch that tests what it was decided on.
author:
  - kubegpu.scheduling contributors (@kubegpu)
extends_documentation_fragment:
  - kubegpu.scheduling.model_labels
  - kubegpu.scheduling.connection
  - kubegpu.scheduling.options.node_selection
  - kubegpu.scheduling.options.parallelism
  - kubegpu.scheduling.options.waiting
options:
  action:
    description: The step to run.
    type: str
    choices: [plan, settle, hold, start, wait, fail]
    default: plan
  mode:
    description: V(host) for drivers installed on the hosts, V(operator) for drivers the GPU Operator manages.
    type: str
    choices: [host, operator]
    default: host
  target_version:
    description: The driver version to upgrade to, as GFD labels it (C(nvidia.com/cuda.driver-version.full)).
    type: str
    required: true
  max_unavailable:
    description: Nodes per batch after the canary, a number (V(2)) or a share of the nodes to upgrade (V(20%)).
    type: raw
    default: 1
  canary:
    description: Nodes in the first batch, upgraded and proven before any other.
    type: int
    default: 1
  max_share:
    description: The largest share of a pool's GPUs out of service at once, cordoned nodes included, above 0 and at most 1.
    type: float
    default: 0.5
  pool_by:
    description: What GPUs are pooled by for O(max_share), V(model) or node label keys.
    type: list
    elements: str
    default: [model]
  max_fail_percentage:
    description: The share of the planned nodes, in percent, that may fail before the roll stops (RV(fail_budget)).
    type: int
    default: 0
  expected_gpus:
    description: With V(settle), the GPUs each node had before (the plan's RV(expected_gpus)).
    type: dict
  reason:
    description: With V(fail), why the nodes' upgrade failed.
    type: str
attributes:
  check_mode:
    support: full
    description: Reads and returns the plan, or what a step would write; sends no write and does not wait.
  diff_mode:
    support: full
    description: Returns, per node patched, the skip label and the roll's record before and after.
notes:
  - Needs C(list) on C(nodes), C(pods), C(daemonsets), C(poddisruptionbudgets) and C(resourceclaims), C(patch) and
    C(get) on C(nodes), C(delete) on C(pods), as the ClusterRole C(kubegpu-driver-upgrade) of rbac/kubegpu-writer.yaml grants.
"""

EXAMPLES = r"""
- name: Plan an upgrade of the A100 pool, the canary first, then two nodes at a time
  kubegpu.scheduling.gpu_driver_upgrade:
    target_version: "570.133.20"
    label_selectors: [nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB]
    max_unavailable: "2"
  register: roll
"""

RETURN = r"""
batches:
  description: 'V(plan): the batches in order, the canary first.'
  returned: success
  type: list
  elements: list
  sample:
  - - gpu-1
  - - gpu-2
    - gpu-3
canary:
  description: 'V(plan): the first batch.'
  returned: success
  type: list
  elements: str
nodes:
  description: 'V(plan): every node to upgrade, in order.'
  returned: success
  type: list
  elements: str
skipped:
  description: 'V(plan): nodes left out, with the reason.'
  returned: success
  type: list
  elements: dict
missing:
  description: Names that match no node.
  returned: success
  type: list
  elements: str
daemonset_pods:
  description: 'V(plan), host mode: per planned node, what the pre-flight finds on the pods of DaemonSets there,
    which the host tasks must stop (a reboot does).'
  returned: success
  type: dict
expected_gpus:
  description: 'V(plan): each planned node''s allocatable GPUs now.'
  returned: success
  type: dict
batch_size:
  description: 'V(plan): nodes per batch after the canary.'
  returned: success
  type: int
fail_budget:
  description: 'V(plan): how many nodes may fail before the roll stops.'
  returned: success
  type: int
back:
  description: 'V(settle): nodes whose GPUs are back.'
  returned: success
  type: list
  elements: str
not_back:
  description: 'V(settle): nodes whose GPUs are not, with the reason.'
  returned: success
  type: list
  elements: dict
deleted_pods:
  description: 'V(settle): pods that failed admission and were deleted (a controller owns them).'
  returned: success
  type: list
  elements: dict
bare_pods:
  description: 'V(settle): pods that failed admission without a controller, listed only.'
  returned: success
  type: list
  elements: dict
held:
  description: 'V(hold): nodes the skip label was put on.'
  returned: success
  type: list
  elements: str
started:
  description: 'V(start): nodes the roll''s skip label was taken off.'
  returned: success
  type: list
  elements: str
done:
  description: 'V(wait): nodes at upgrade-done.'
  returned: success
  type: list
  elements: str
failed:
  description: 'V(wait): nodes at upgrade-failed, with the state.'
  returned: success
  type: list
  elements: dict
waiting:
  description: 'V(wait): nodes still on their way, with the state.'
  returned: success
  type: list
  elements: dict
kept_cordons:
  description: 'V(wait): nodes the operator found unschedulable before (their cordon is theirs).'
  returned: success
  type: list
  elements: str
recorded:
  description: Nodes the failure was recorded on.
  returned: success
  type: list
  elements: str
changed:
  description: Whether a node was patched or a pod deleted (or would be, in check mode); never for V(plan).
  returned: always
  type: bool
diff:
  description: Per node patched, the skip label and the roll's record before and after.
  returned: in diff mode
  type: list
  elements: dict
writes:
  description: Write requests sent; 0 in check mode and for V(plan).
  returned: always
  type: int
api_requests:
  description: API requests sent.
  returned: always
  type: int
"""

from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.driver_roll.plan import MODES
from ansible_collections.kubegpu.scheduling.plugins.module_utils.driver_roll.run import ACTIONS, run_roll
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.module import with_connection_options
from ansible_collections.kubegpu.scheduling.plugins.module_utils.options.groups import (
    MODEL_LABELS,
    NODE_SELECTION,
    PARALLELISM,
    WAITING,
    module_options,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.breaker import DEFAULT_MAX_SHARE, MODEL_DIMENSION
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.module import run_write_module

OWN_OPTIONS: dict[str, dict[str, Any]] = {
    "action": {"type": "str", "choices": list(ACTIONS), "default": ACTIONS[0]},
    "mode": {"type": "str", "choices": list(MODES), "default": MODES[0]},
    "target_version": {"type": "str", "required": True},
    "max_unavailable": {"type": "raw", "default": 1},
    "canary": {"type": "int", "default": 1},
    "max_share": {"type": "float", "default": DEFAULT_MAX_SHARE},
    "pool_by": {"type": "list", "elements": "str", "default": [MODEL_DIMENSION]},
    "max_fail_percentage": {"type": "int", "default": 0},
    "expected_gpus": {"type": "dict"},
    "reason": {"type": "str"},
}


def argument_spec() -> dict[str, Any]:
    return with_connection_options(module_options(OWN_OPTIONS, (NODE_SELECTION, WAITING, PARALLELISM, MODEL_LABELS)))


def main() -> None:
    run_write_module(argument_spec(), lambda module, client: run_roll(module.params, client, module.check_mode))


if __name__ == "__main__":
    main()
