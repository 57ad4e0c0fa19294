# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_node_quarantine
short_description: Quarantine failed GPU nodes, and evict only their GPU pods
version_added: 1.0.0
description:
  - Takes the nodes named in O(names) out of service for new work, the way an on-call runbook does it by hand,
    in one task that can be dry-run with C(--check --diff) and audited on the node afterwards.
  - Each node is cordoned (C(spec.unschedulable)), unless it is already, and gets the collection's taint
    C(kubegpu.io/quarantine:NoSchedule), and the annotation C(kubegpu.io/quarantine-record), a JSON record of who
    quarantined it (O(quarantined_by)), why (O(reason)), when, and whether this collection cordoned and tainted it.
    A node someone had cordoned already is recorded C(cordoned=false), so releasing it never uncordons it.
  - All of that is one JSON patch (RFC 6902) per node that changes, and none for a node that is quarantined
    already. Each patch first tests the node's cordon, taints and record against the values read, so a change by
    another client meanwhile is never overwritten; the node is read again and decided again. The status updates of
    node heartbeats never make a patch fail.
  - With O(evict=true), the pods that hold GPUs on those nodes are evicted through the Eviction API
    (C(policy/v1)), so PodDisruptionBudgets are honoured. A pod holds GPUs when its containers ask for a GPU
    resource (C(nvidia.com/gpu), MIG profiles, the sharing resources of time-slicing, HAMi, Volcano, ACK and
    others) or a ResourceClaim allocates it a device of a GPU DRA driver. DaemonSet pods (their controller puts
    them back), mirror pods of static pods (the API cannot evict them), finished pods and pods without GPUs stay.
  - A pod a budget keeps (the API server answers 429) is tried again with back-off until O(eviction_timeout), then
    reported in RV(blocked) with the budget's name and a warning; it is never deleted unless O(force_delete=true).
  - The breaker never takes more than O(max_share) of a pool's GPUs out of service, counting the nodes already
    quarantined or cordoned. Pools are the GPU model and, with O(pool_by), the values of node labels such as a
    node pool. Nodes are taken in the order of O(names); those that would go over are held back, in
    RV(held_back), with the pool and the numbers, and neither patched nor drained.
  - The taint is C(NoSchedule), never C(NoExecute), because a C(NoExecute) taint evicts pods past their budgets.
  - Reads one paginated list each of nodes, pods, PodDisruptionBudgets and the DRA objects
    (DeviceClasses, ResourceSlices, ResourceClaims, DeviceTaintRules), never an object on its own.
author:
  - kubegpu.scheduling contributors (@kubegpu)
extends_documentation_fragment:
  - kubegpu.scheduling.model_labels
  - kubegpu.scheduling.connection
  - kubegpu.scheduling.options.eviction
  - kubegpu.scheduling.options.parallelism
options:
  names:
    description:
      - The names of the nodes to quarantine, in the order the breaker takes them.
      - A name that matches no node is reported in RV(missing) and fails nothing.
      - The earlier name O(nodes) is deprecated and will be removed in 2.0.0.
    type: list
    elements: str
    required: true
    aliases: [nodes]
  reason:
    description:
      - Why the nodes are quarantined (an XID, a ticket), kept in the record on each node.
    type: str
    required: true
  quarantined_by:
    description:
      - Who quarantines them, kept in the record on each node.
    type: str
    default: kubegpu.scheduling
  max_share:
    description:
      - The largest share of a pool's GPUs out of service at once, quarantined or cordoned nodes included,
        above 0 and at most 1.
    type: float
    default: 0.5
  pool_by:
    description:
      - What a node's GPUs are pooled by for the breaker. V(model) is the GPU model (from O(model_label_keys), or
        the DRA devices' product name); any other entry is a node label key, such as
        V(cloud.google.com/gke-nodepool), whose value is the pool. A node counts in every pool listed.
    type: list
    elements: str
    default: [model]
attributes:
  check_mode:
    support: full
    description: Reads the cluster and returns the whole plan (nodes, taints, pods to evict, budgets in the way,
      what the breaker holds back); sends no write.
  diff_mode:
    support: full
    description: Returns, per node that changes, its cordon, taints and quarantine record before and after.
notes:
  - A rerun changes nothing on nodes already quarantined; with O(evict=true) it evicts the GPU pods still there,
    such as those a budget kept the last time.
  - Needs C(list) on C(nodes), C(pods) and C(poddisruptionbudgets) (group C(policy)), C(patch) on C(nodes), C(get)
    on C(nodes) when another client changes a node while it is patched, C(create) on C(pods/eviction) with
    O(evict=true), C(delete) on C(pods) with O(force_delete=true), and C(list) on the C(resource.k8s.io) objects
    for DRA nodes (without it, DRA GPUs are not counted and a warning says so).
seealso:
  - name: Kubernetes, API-initiated eviction
    description: The Eviction API, and how it honours PodDisruptionBudgets.
    link: https://kubernetes.io/docs/concepts/scheduling-eviction/api-eviction/
  - name: Kubernetes, safely drain a node
    description: What kubectl drain does, which this module does for GPU pods only.
    link: https://kubernetes.io/docs/tasks/administer-cluster/safely-drain-node/
"""

EXAMPLES = r"""
- name: Show what quarantining a node would do, and send nothing
  kubegpu.scheduling.gpu_node_quarantine:
    names: [gpu-node-17]
    reason: "XID 79 on GPU 3 (ticket OPS-1234)"
    quarantined_by: alice
    evict: true
  check_mode: true
  diff: true
  register: quarantine_plan

- name: Quarantine it and evict its GPU pods, waiting up to ten minutes for their budgets
  kubegpu.scheduling.gpu_node_quarantine:
    names: [gpu-node-17]
    reason: "XID 79 on GPU 3 (ticket OPS-1234)"
    quarantined_by: alice
    evict: true
    eviction_timeout: 600

- name: Quarantine failed nodes, at most a quarter of any node pool's GPUs at once
  kubegpu.scheduling.gpu_node_quarantine:
    names: "{{ failed_nodes }}"
    reason: "node condition AcceleratedHardwareReady=False"
    max_share: 0.25
    pool_by: [model, cloud.google.com/gke-nodepool]
"""

RETURN = r"""
nodes:
  description: The plan for each node asked, in the order asked.
  returned: always
  type: list
  elements: dict
  contains:
    node:
      description: The node name.
      type: str
    outcome:
      description: V(quarantine) (patched, or would be in check mode), V(unchanged) (quarantined already),
        V(held) (held back by the breaker) or V(missing) (no such node).
      type: str
    gpus:
      description: The node's GPUs, as the breaker counts them.
      type: int
    pools:
      description: The pools the node counts in, C(dimension=value).
      type: list
      elements: str
    cordon:
      description: Whether this run cordons the node.
      type: bool
    taint:
      description: Whether this run adds the quarantine taint.
      type: bool
    record:
      description: The quarantine record on the node after the run (by, reason, at, cordoned, tainted); null for
        nodes held back or missing.
      type: dict
    evict:
      description: The GPU pods to evict from it, each with the budgets that select it (name, disruptions_allowed,
        allows) and C(blocked_by), the budgets that would refuse the eviction now.
      type: list
      elements: dict
    left:
      description: GPU pods left on the node, with the reason (DaemonSet, mirror pod, being deleted).
      type: list
      elements: dict
    held_back:
      description: Why the breaker held the node back, or null.
      type: str
  sample:
    - node: gpu-node-17
      outcome: quarantine
      gpus: 8
      pools: [model=NVIDIA-H100-80GB-HBM3]
      cordon: true
      taint: true
      record: {by: alice, reason: XID 79, at: "2026-12-03T10:00:00Z", cordoned: true, tainted: true}
      evict:
        - pod: ml/train-0
          node: gpu-node-17
          gpus: {nvidia.com/gpu: 8}
          budgets: [{name: train, disruptions_allowed: 0, allows: false}]
          blocked_by: [train]
      left: [{pod: gpu-operator/nvidia-dcgm-exporter-x7, gpus: {nvidia.com/gpu: 1}, reason: "DaemonSet pod: its controller puts it back on the node"}]
      held_back: null
quarantined:
  description: Nodes cordoned, tainted or recorded by this run (would be, in check mode).
  returned: always
  type: list
  elements: str
  sample: [gpu-node-17]
unchanged:
  description: Nodes asked that were quarantined already.
  returned: always
  type: list
  elements: str
  sample: []
held_back:
  description: Nodes the breaker held back, with the pool that would go over its share and the numbers.
  returned: always
  type: list
  elements: dict
  sample:
    - node: gpu-node-18
      pool: model=NVIDIA-H100-80GB-HBM3
      reason: "pool model=NVIDIA-H100-80GB-HBM3: 24 of its 32 GPUs would be out of service, above the breaker's
        share 0.5 (at most 16; 16 already)"
missing:
  description: Names asked that match no node.
  returned: always
  type: list
  elements: str
  sample: []
failed_nodes:
  description: Nodes whose patch failed (or that were deleted meanwhile), with the error; their pods are not evicted.
  returned: always
  type: list
  elements: dict
  sample: []
not_attempted:
  description: Nodes not patched because the API server failed first.
  returned: always
  type: list
  elements: str
  sample: []
to_evict:
  description: The GPU pods of the nodes not held back, as C(namespace/name), whether or not O(evict) is set.
  returned: always
  type: list
  elements: str
  sample: [ml/train-0]
evicted:
  description: Pods evicted (or found gone already); empty in check mode and without O(evict).
  returned: always
  type: list
  elements: str
  sample: [ml/train-0]
blocked:
  description: Pods their budget kept until O(eviction_timeout), with the budgets and the API server's answer.
  returned: always
  type: list
  elements: dict
  sample:
    - pod: serve/llm-0
      node: gpu-node-17
      budgets: [llm]
      error: "POST /api/v1/namespaces/serve/pods/llm-0/eviction: 429 Too Many Requests: Cannot evict pod as it would
        violate the pod's disruption budget."
deleted:
  description: Pods deleted past their budget with O(force_delete=true).
  returned: always
  type: list
  elements: str
  sample: []
eviction_failed:
  description: Pods whose eviction failed for another reason, with the error.
  returned: always
  type: list
  elements: dict
  sample: []
pools:
  description: Per pool of the nodes asked, the GPUs out of service after the run (quarantined or cordoned) and
    the breaker's limit.
  returned: always
  type: dict
  sample: {model=NVIDIA-H100-80GB-HBM3: {out_of_service: 16, limit: 16}}
findings:
  description:
    - What the run reports, as findings of the kinds listed in docs/findings.md (C(quarantine.*)).
  returned: always
  type: list
  elements: dict
  sample:
    - id: quarantine.eviction_blocked_by_budget
      severity: error
      title: GPU pod kept on the node by its PodDisruptionBudget
      message: 'serve/llm-0 stays on gpu-node-17: PodDisruptionBudget serve/llm allowed no disruption within 300s (...)'
      remedy: 'Let the budget allow a disruption (scale the workload up, or wait for its other pods to be Ready) and
        run again; force_delete: true deletes the pod past its budget after the timeout'
      where:
        node: gpu-node-17
        subject: serve/llm-0
      kind: quarantine.eviction_blocked_by_budget
      node: gpu-node-17
      subject: serve/llm-0
      problem: 'serve/llm-0 stays on gpu-node-17: PodDisruptionBudget serve/llm allowed no disruption within 300s (...)'
  contains:
    id: {description: "The registry id: a validator rule's code (V(KGPU101)), any other kind C(<check>.<name>)
        (V(device_plugin.no_gpu_capacity)); docs/findings.md lists them all.", type: str}
    severity: {description: "V(error), V(warning) or V(info): one scale for every check.", type: str}
    title: {description: "What the kind is, in a line.", type: str}
    message: {description: "What was found here.", type: str}
    remedy: {description: "What to do.", type: str}
    where: {description: "The places that apply, of C(node), C(device), C(pool), C(object) (C(Kind namespace/name)), C(subject), C(pod),
        C(config), C(source), C(document), C(path), C(line), C(container).", type: dict}
    kind: {description: "Deprecated, removed in 2.0.0 (use C(id)): the name the kind was declared with (docs/findings.md).", type: str}
    node: {description: "Deprecated, removed in 2.0.0 (use C(where.node)): the node, or null.", type: str}
    subject: {description: "Deprecated, removed in 2.0.0 (use C(where.subject)): what the finding is about.", type: str}
    problem: {description: "Deprecated, removed in 2.0.0 (use C(message)): what is wrong.", type: str}
changed:
  description: Whether a node was cordoned, tainted or recorded, or a pod evicted or deleted (or would be, in check mode).
  returned: always
  type: bool
writes:
  description: The number of write requests sent (patches, evictions with their retries, deletions); 0 in check mode
    and on a rerun that finds everything done.
  returned: always
  type: int
  sample: 2
api_requests:
  description: The API requests sent, reads and writes, retries included.
  returned: always
  type: int
diff:
  description:
    - Per node that changes, its cordon, taints and quarantine record before and after.
    - Ansible's diff callback prints it and removes it from the result.
  returned: in diff mode
  type: list
  elements: dict
  sample:
    - before_header: node/gpu-node-17
      after_header: node/gpu-node-17
      before: "spec.unschedulable: false\n"
      after: "spec.unschedulable: true\nspec.taints: kubegpu.io/quarantine:NoSchedule\n..."
"""

from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.module import with_connection_options
from ansible_collections.kubegpu.scheduling.plugins.module_utils.node_quarantine.run import run_quarantine
from ansible_collections.kubegpu.scheduling.plugins.module_utils.options.groups import (
    EVICTION,
    GROUPS,
    MODEL_LABELS,
    NODE_SELECTION,
    PARALLELISM,
    module_options,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.breaker import DEFAULT_MAX_SHARE, MODEL_DIMENSION
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.module import run_write_module
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.ownership import DEFAULT_QUARANTINED_BY

OWN_OPTIONS: dict[str, dict[str, Any]] = {
    "names": dict(GROUPS[NODE_SELECTION]["names"], required=True),
    "reason": {"type": "str", "required": True},
    "quarantined_by": {"type": "str", "default": DEFAULT_QUARANTINED_BY},
    "max_share": {"type": "float", "default": DEFAULT_MAX_SHARE},
    "pool_by": {"type": "list", "elements": "str", "default": [MODEL_DIMENSION]},
}


def argument_spec() -> dict[str, Any]:
    return with_connection_options(
        module_options(OWN_OPTIONS, (EVICTION, PARALLELISM, MODEL_LABELS), renamed={"nodes": "names"})
    )


def main() -> None:
    run_write_module(argument_spec(), lambda module, client: run_quarantine(module.params, client, module.check_mode))


if __name__ == "__main__":
    main()
