# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_device_quarantine
short_description: Quarantine single failed DRA devices with DeviceTaintRules, and evict only their users
version_added: 1.0.0
description:
  - Takes the DRA devices named in O(devices) out of service, one C(resource.k8s.io/v1) DeviceTaintRule each,
    instead of the whole node, in one task that can be dry-run with C(--check --diff).
  - Each entry must name C(driver), C(pool) and C(device); an entry without one of them (a selector that picks
    more than one device, up to every device of the cluster) or naming a device no ResourceSlice publishes is
    refused, and then nothing is written for any device.
  - A rule is created with the taint effect C(None) first, so that the device taint eviction controller of
    kube-controller-manager reports what it selects and which pods it would evict; that report (waited for up to
    O(simulation_timeout)) is returned. Then the rule is switched to C(NoSchedule).
  - The rule is never C(NoExecute), because the controller deletes the pods of a C(NoExecute) taint past their
    PodDisruptionBudgets. With O(evict=true), the pods that hold the device (through a ResourceClaim they name, or
    the claim kube-scheduler made for an extended resource a DeviceClass serves) are evicted through the Eviction
    API (C(policy/v1)) instead; a pod its budget keeps is tried again with back-off until O(eviction_timeout), then
    named in RV(blocked) with its budget.
  - The rules are named C(kubegpu-device-<pool>-<device>-<hash>) and carry the label C(kubegpu.io/quarantine=device)
    and who, why and when as annotations. A rule of that name without the label is someone else's, and left alone.
  - With O(state=absent), only the collection's rules on the devices named are deleted.
  - Reads one paginated list each of ResourceSlices, DeviceTaintRules and, with O(state=present), ResourceClaims,
    pods and PodDisruptionBudgets.
author:
  - kubegpu.scheduling contributors (@kubegpu)
extends_documentation_fragment:
  - kubegpu.scheduling.connection
options:
  devices:
    description:
      - The devices to quarantine or release, as a ResourceSlice publishes them.
    type: list
    elements: dict
    required: true
    suboptions:
      driver:
        description: The DRA driver, such as V(gpu.nvidia.com).
        type: str
        required: true
      pool:
        description: The pool of the ResourceSlice (for node-local drivers, usually the node name).
        type: str
        required: true
      device:
        description: The device name in the ResourceSlice, such as V(gpu-3).
        type: str
        required: true
  state:
    description:
      - V(present) quarantines the devices; V(absent) deletes the collection's rules on them.
    type: str
    choices: [present, absent]
    default: present
  reason:
    description:
      - Why the devices are quarantined (an XID, a ticket), kept on each rule. Required with O(state=present).
    type: str
  quarantined_by:
    description:
      - Who quarantines them, kept on each rule.
    type: str
    default: kubegpu.scheduling
  taint_key:
    description:
      - The key of the device taint.
    type: str
    default: kubegpu.io/device-quarantine
  max_share:
    description:
      - The largest share of a device pool's GPUs (a driver's pool, one GPU a device) out of service at once,
        the devices the collection's rules already hold included, above 0 and at most 1. Devices are taken in
        the order of O(devices); one that would go over is held back, in RV(held_back), its rule not written.
    type: float
    default: 0.5
  evict:
    description:
      - Evict the pods that hold the devices, through the Eviction API. Without it they keep running; new pods
        are not given the devices.
    type: bool
    default: false
  eviction_timeout:
    description:
      - Seconds to keep trying the evictions a PodDisruptionBudget refuses.
    type: int
    default: 300
  simulation_timeout:
    description:
      - Seconds to wait, per rule created, for the controller's report on effect C(None); a warning says when it
        does not come, and the rule is switched all the same.
    type: int
    default: 30
attributes:
  check_mode:
    support: full
    description: Reads the cluster and returns the plan (rules to create, switch or delete, the users that would be
      evicted with their budgets, the devices refused); sends no write.
  diff_mode:
    support: full
    description: Returns, per rule that changes, its selector, taint and owner before and after.
notes:
  - A rerun changes nothing for devices quarantined already; with O(evict=true) it evicts the users still there,
    such as those a budget kept the last time.
  - Needs C(list) on C(resourceslices), C(resourceclaims) and C(devicetaintrules) (group C(resource.k8s.io)),
    C(create), C(get), C(patch) and C(delete) on C(devicetaintrules), C(list) on C(pods) and
    C(poddisruptionbudgets), and C(create) on C(pods/eviction) with O(evict=true).
seealso:
  - module: kubegpu.scheduling.gpu_node_quarantine
  - name: Kubernetes, device taints and tolerations
    description: DeviceTaintRules and their effects.
    link: https://kubernetes.io/docs/concepts/scheduling-eviction/dynamic-resource-allocation/#device-taints-and-tolerations
"""

EXAMPLES = r"""
- name: Show what quarantining GPU 3 of a node would do, and send nothing
  kubegpu.scheduling.gpu_device_quarantine:
    devices:
      - {driver: gpu.nvidia.com, pool: gpu-node-17, device: gpu-3}
    reason: "XID 79 on GPU 3 (ticket OPS-1234)"
    quarantined_by: alice
    evict: true
  check_mode: true
  diff: true

- name: Quarantine it and evict its users through the Eviction API
  kubegpu.scheduling.gpu_device_quarantine:
    devices:
      - {driver: gpu.nvidia.com, pool: gpu-node-17, device: gpu-3}
    reason: "XID 79 on GPU 3 (ticket OPS-1234)"
    evict: true

- name: Release it
  kubegpu.scheduling.gpu_device_quarantine:
    devices:
      - {driver: gpu.nvidia.com, pool: gpu-node-17, device: gpu-3}
    state: absent
"""

RETURN = r"""
devices:
  description: The plan and outcome for each device asked.
  returned: always
  type: list
  elements: dict
  contains:
    device:
      description: C(driver/pool/device).
      type: str
    node:
      description: The node of the ResourceSlice that publishes it, or null.
      type: str
    rule:
      description: The name of the device's DeviceTaintRule.
      type: str
    step:
      description: V(create), V(switch) (to NoSchedule), V(none), V(foreign) (a rule of that name that is not the
        collection's, left alone) or V(delete).
      type: str
    simulation:
      description: What the controller reported for effect C(None) (published, allocated, pods, namespaces), or null.
      type: dict
    users:
      description: The pods that hold the device, with their claim, how (V(claim) or V(extended_resource)) and their
        budgets.
      type: list
      elements: dict
    error:
      description: Why the rule could not be written, or null.
      type: str
  sample:
    - device: gpu.nvidia.com/gpu-node-17/gpu-3
      node: gpu-node-17
      rule: kubegpu-device-gpu-node-17-gpu-3-0a1b2c3d4e
      step: create
      simulation: {published: 1, allocated: 1, pods: 1, namespaces: 1}
      users: [{pod: ml/train-0, node: gpu-node-17, claim: train-0-gpu, through: claim, budgets: [], blocked_by: []}]
      error: null
refused:
  description: The entries refused (no ResourceSlice publishes the device); when any is, nothing is written.
  returned: always
  type: list
  elements: str
  sample: []
created:
  description: Rules created (would be, in check mode).
  returned: always
  type: list
  elements: str
  sample: [kubegpu-device-gpu-node-17-gpu-3-0a1b2c3d4e]
switched:
  description: Rules of the collection's switched to NoSchedule.
  returned: always
  type: list
  elements: str
  sample: []
deleted:
  description: Rules deleted with O(state=absent).
  returned: always
  type: list
  elements: str
  sample: []
unchanged:
  description: Rules already as asked.
  returned: always
  type: list
  elements: str
  sample: []
held_back:
  description: Devices the breaker held back (O(max_share)), with the reason; their rules are not written.
  returned: always
  type: list
  elements: dict
  sample:
    - rule: kubegpu-device-dra-h100-gpu-2-0a1b2c3d
      device: gpu.nvidia.com/dra-h100/gpu-2
      reason: "pool pool=gpu.nvidia.com/dra-h100: 3 of its 4 GPUs would be out of service, above the breaker's share 0.5 (at most 2; 2 already)"
foreign:
  description: Rules of the name the collection uses that are not the collection's, left alone.
  returned: always
  type: list
  elements: str
  sample: []
failed:
  description: Rules whose write failed, with the error.
  returned: always
  type: list
  elements: dict
  sample: []
to_evict:
  description: The users of the devices, C(namespace/name), whether or not O(evict) is set.
  returned: always
  type: list
  elements: str
  sample: [ml/train-0]
evicted:
  description: Pods evicted (or found gone already).
  returned: always
  type: list
  elements: str
  sample: [ml/train-0]
blocked:
  description: Pods their budget kept until O(eviction_timeout), with the budgets and the API server's answer.
  returned: always
  type: list
  elements: dict
  sample: [{pod: serve/llm-0, node: gpu-node-17, budgets: [llm], error: "429 Too Many Requests"}]
eviction_failed:
  description: Pods whose eviction failed for another reason.
  returned: always
  type: list
  elements: dict
  sample: []
findings:
  description: What the run reports, as findings of the kinds listed in docs/findings.md (C(quarantine.*)).
  returned: always
  type: list
  elements: dict
  sample:
    - id: quarantine.device_taint_simulation
      severity: info
      title: What the device taint eviction controller reported for effect None
      message: kubegpu-device-gpu-node-17-gpu-3-0a1b2c3d4e on gpu.nvidia.com/gpu-node-17/gpu-3 selects 1 published ...
      remedy: Nothing to do
      where:
        node: gpu-node-17
        subject: gpu.nvidia.com/gpu-node-17/gpu-3
      kind: quarantine.device_taint_simulation
      node: gpu-node-17
      subject: gpu.nvidia.com/gpu-node-17/gpu-3
      problem: kubegpu-device-gpu-node-17-gpu-3-0a1b2c3d4e on gpu.nvidia.com/gpu-node-17/gpu-3 selects 1 published ...
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
  description: Whether a device taint rule was created, switched or deleted, or a pod evicted (or would be, in check mode).
  returned: always
  type: bool
writes:
  description: The number of write requests sent; 0 in check mode and on a rerun that finds everything done.
  returned: always
  type: int
  sample: 3
api_requests:
  description: The API requests sent, reads and writes, retries included.
  returned: always
  type: int
diff:
  description: Per rule that changes, its selector, taint and owner before and after.
  returned: in diff mode
  type: list
  elements: dict
  sample: [{before_header: devicetaintrule/x, after_header: devicetaintrule/x, before: "", after: "taint: ..."}]
"""

from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_quarantine import device
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_quarantine.run import run_device_quarantine
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.module import with_connection_options
from ansible_collections.kubegpu.scheduling.plugins.module_utils.options.groups import EVICTION, GROUPS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.breaker import DEFAULT_MAX_SHARE
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.module import run_write_module
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.ownership import DEFAULT_QUARANTINED_BY

DEVICE_OPTIONS = {name: {"type": "str", "required": True} for name in device.SELECTOR_FIELDS}


def argument_spec() -> dict[str, Any]:
    # evict and eviction_timeout as the eviction group declares them; force_delete is not taken here.
    eviction = {name: dict(GROUPS[EVICTION][name]) for name in ("evict", "eviction_timeout")}
    return with_connection_options(
        dict(
            devices={"type": "list", "elements": "dict", "required": True, "options": DEVICE_OPTIONS},
            state={"type": "str", "choices": ["present", "absent"], "default": "present"},
            reason={"type": "str"},
            quarantined_by={"type": "str", "default": DEFAULT_QUARANTINED_BY},
            taint_key={"type": "str", "default": device.DEFAULT_TAINT_KEY, "no_log": False},
            simulation_timeout={"type": "int", "default": 30},
            max_share={"type": "float", "default": DEFAULT_MAX_SHARE},
            **eviction,
        )
    )


def main() -> None:
    run_write_module(
        argument_spec(),
        lambda module, client: run_device_quarantine(module.params, client, module.check_mode),
        required_if=[("state", "present", ("reason",))],
    )


if __name__ == "__main__":
    main()
