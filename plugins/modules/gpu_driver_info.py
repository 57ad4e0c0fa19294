# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_driver_info
short_description: Where every GPU node's driver stands, and what will block upgrading it
version_added: 1.0.0
description:
  - B(The driver view.) Per GPU node (GPU capacity, GPU labels, or the GPU Operator's upgrade state label) the driver
    version (GPU Feature Discovery's C(nvidia.com/cuda.driver-version.*) labels, else the driver pod's image tag,
    else the selecting C(NVIDIADriver)'s C(spec.version)), who manages it (V(gpu-operator-clusterpolicy),
    V(nvidia-driver-cr) with the C(NVIDIADriver) that selects the node, or V(host)), the GPU Operator's upgrade state
    (the node label C(nvidia.com/gpu-driver-upgrade-state)) and how long it has been in it where the upgrade
    controller records the start (C(wait-for-jobs-required), C(validation-required)), and whether the driver pod
    runs its DaemonSet's current pod template (its C(pod-template-generation) against the DaemonSet's, the
    DaemonSet controller's own test).
  - >-
    B(The pre-flight.) Per node, the pods that will block a driver upgrade: V(gpu-use-without-request) (a pod that
    reaches GPUs through C(NVIDIA_VISIBLE_DEVICES), an nvidia runtime class or a privileged GPU image without holding
    a GPU: the upgrade controller does not see it, and the driver stays in use), V(gpu-daemonset-pod) (a pod of a
    DaemonSet that uses GPUs: a drain leaves DaemonSet pods in place; the driver's own and the GPU Operator's
    DaemonSets are left out), V(dra-claim-holder) (a pod holding an allocated ResourceClaim),
    V(budget-allows-no-disruption) (a PodDisruptionBudget of the pod allows no eviction now) and, with
    O(target_driver), V(cuda-needs-newer-driver) (a container's C(NVIDIA_REQUIRE_CUDA) as its env sets it, or the
    CUDA version its image tag names for C(nvidia/cuda), PyTorch's C(-cudaX.Y) and C(-cuXYZ) tags, needs a newer
    driver than the target by NVIDIA's table of CUDA toolkit and driver versions). An image whose CUDA version
    cannot be known is not a blocker.
  - Costs one paginated list each of nodes, pods, PodDisruptionBudgets, DaemonSets, C(NVIDIADrivers) and
    ResourceClaims, whatever the number of nodes; a cluster that does not serve C(NVIDIADrivers) or ResourceClaims
    (or a reader that may not list them, or PodDisruptionBudgets) gives a note and the rest.
  - Writes nothing.
author:
  - kubegpu.scheduling contributors (@kubegpu)
extends_documentation_fragment:
  - kubegpu.scheduling.options.node_selection
  - kubegpu.scheduling.options.page_size
  - kubegpu.scheduling.read_only
  - kubegpu.scheduling.connection
options:
  target_driver:
    description:
      - The driver version the upgrade goes to, for example V(580.65.06). Without it the CUDA check is left out.
    type: str
"""

EXAMPLES = r"""
- name: Where every GPU node's driver stands, and what blocks an upgrade to 580.65.06
  kubegpu.scheduling.gpu_driver_info:
    target_driver: "580.65.06"
  register: drivers

- name: Nodes ready to upgrade now
  ansible.builtin.debug:
    msg: "{{ drivers.drivers.nodes | selectattr('ready_to_upgrade') | map(attribute='node') | list }}"

- name: One pool only
  kubegpu.scheduling.gpu_driver_info:
    label_selectors: [cloud.google.com/gke-nodepool=a100]
    target_driver: "570.86.15"
"""

RETURN = r"""
drivers:
  description: The driver view and the pre-flight.
  returned: always
  type: dict
  contains:
    target_driver:
      description: O(target_driver), or null.
      type: str
      returned: always
    nodes:
      description: >-
        Per GPU node, C(node), C(version), C(managed_by), C(driver_resource) (the C(NVIDIADriver), or null),
        C(upgrade_state) (or null), C(state_since) (seconds in that state where the controller records its start,
        else null), C(pod_revision_current) (true, false, or null without a driver pod or its marks), C(pod) and
        C(daemonset) (C(namespace/name) of the driver pod and its DaemonSet, or null), C(blockers) (their number)
        and C(ready_to_upgrade) (no blocker).
      type: list
      elements: dict
      returned: always
    blockers:
      description: >-
        Per blocking pod and reason, C(node), C(namespace), C(pod), C(reason) (V(gpu-use-without-request),
        V(gpu-daemonset-pod), V(dra-claim-holder), V(budget-allows-no-disruption), V(cuda-needs-newer-driver)) and
        C(detail).
      type: list
      elements: dict
      returned: always
    counts:
      description: C(nodes), C(nodes_blocked), C(versions) (nodes per version), C(upgrade_states) (nodes per state),
        C(pods_not_current) and C(blockers) (per reason).
      type: dict
      returned: always
    notes:
      description: What could not be read, and what follows.
      type: list
      elements: str
      returned: always
report:
  description: The view as readable lines, one per node, then one per blocker.
  returned: always
  type: list
  elements: str
api_requests:
  description: API requests sent.
  returned: always
  type: int
  sample: 6
"""

import time
from typing import Any

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.kubegpu.scheduling.plugins.module_utils.driver_info.reads import read_driver_objects
from ansible_collections.kubegpu.scheduling.plugins.module_utils.driver_info.view import driver_report, report_lines
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.module import (
    api_module,
    errors_fail,
    module_client,
    with_connection_options,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.options.groups import (
    NODE_SELECTION,
    PAGE_SIZE,
    check_ranges,
    module_options,
)


def argument_spec() -> dict[str, Any]:
    spec = module_options(dict(target_driver={"type": "str"}), (NODE_SELECTION, PAGE_SIZE))
    return with_connection_options(spec)


def run(module: AnsibleModule) -> tuple[dict[str, Any], int]:
    params = module.params
    check_ranges(params)
    client = module_client(module)
    selector = ",".join(params["label_selectors"]) or None
    objects = read_driver_objects(client, selector, params["names"], params["page_size"])
    return driver_report(objects, params["target_driver"], time.time()), client.request_count


def main() -> None:
    module = api_module(argument_spec())
    with errors_fail(module):
        result, requests = run(module)
    module.exit_json(changed=False, drivers=result, report=report_lines(result), api_requests=requests)


if __name__ == "__main__":
    main()
