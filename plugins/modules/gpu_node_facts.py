# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_node_facts
short_description: The GPU fleet as the Kubernetes API sees it, with its problems
version_added: 1.0.0
description:
  - Answers "which nodes have GPUs, and can the scheduler see them" for the whole cluster in one task, the
    check the Alibaba ACK guide does by hand with C(kubectl get nodes) and C(kubectl describe node).
  - A node is a GPU node when its labels name a GPU model (O(model_label_keys)), say a GPU is present
    (C(nvidia.com/gpu.present), NFD's C(feature.node.kubernetes.io/pci-10de.present)) or count GPUs
    (C(nvidia.com/gpu.count), C(aliyun.accelerator/nvidia_count)), or its capacity has one of O(resource_names)
    or a MIG resource C(nvidia.com/mig-*). Other nodes are left out.
  - Per GPU node, the model and the label it came from, the model as a valid label value, capacity,
    allocatable, unhealthy (capacity minus allocatable), allocated (the GPU limits of the pods bound to the node
    that have not finished), free, Ready, schedulable, taints, the driver and CUDA versions GPU Feature
    Discovery labels give, ACK's scheduling mode, the device-plugin pod and whether it is Ready, and the
    problems found, each with its reason.
  - "The problems are: V(GPU labels but no nvidia.com/gpu capacity), V(allocatable below capacity),
    V(no device-plugin pod), V(plugin pod not Ready), V(node not in default (exclusive) GPU scheduling mode)
    (C(ack.node.gpu.schedule) is set to something other than V(default)), V(allocated above allocatable) and
    V(pods on this node use GPUs outside the scheduler) (a container sets C(NVIDIA_VISIBLE_DEVICES) to a value
    the NVIDIA container toolkit reads as GPUs, V(all) or indexes or ids, in a pod without a GPU limit; the
    toolkit reads the comma-separated entries case-sensitively, and V(void), V(none) or no entry select none)."
  - For the fleet, totals per model, the GPU nodes that expose no GPU capacity, and all problems in one list.
  - Costs one paginated list of nodes and one paginated list of pods (field selector on the phase), whatever
    the size of the cluster; device-plugin pods are picked out of the same pod list by their labels. Only the
    fields the facts need are kept from each page.
author:
  - kubegpu.scheduling contributors (@kubegpu)
extends_documentation_fragment:
  - kubegpu.scheduling.model_labels
  - kubegpu.scheduling.read_only
  - kubegpu.scheduling.connection
options:
  resource_names:
    description:
      - Extended resources that count as whole GPUs in capacity, allocatable and allocated. MIG resources
        C(nvidia.com/mig-*) always count too.
      - The first name is the one problems speak of.
    type: list
    elements: str
    default: [nvidia.com/gpu]
  label_selector:
    description:
      - Only consider nodes that match this label selector, for example V(nvidia.com/gpu.present=true).
    type: str
  names:
    description:
      - Only consider these nodes. A name that matches no node is reported in a warning.
    type: list
    elements: str
  device_plugin:
    description:
      - How the device plugin's pods are recognised in the pod list.
    type: dict
    default: {}
    suboptions:
      namespaces:
        description:
          - Namespaces the plugin's pods may run in. Empty means any namespace.
        type: list
        elements: str
        default: []
      label_selectors:
        description:
          - A pod whose labels match any of these selectors is a device-plugin pod.
          - The defaults cover NVIDIA's static DaemonSet, its Helm chart, the GPU Operator, ACK's DaemonSet and
            static pods, and Google's plugin on GKE and Kubespray.
        type: list
        elements: str
        default:
          - name=nvidia-device-plugin-ds
          - app.kubernetes.io/name=nvidia-device-plugin
          - app=nvidia-device-plugin-daemonset
          - component=nvidia-device-plugin
          - k8s-app=nvidia-gpu-device-plugin
  exempt_pod_selectors:
    description:
      - Pods matching any of these label selectors may set C(NVIDIA_VISIBLE_DEVICES) without a GPU limit and
        are not reported as using GPUs outside the scheduler. Their GPU limits still count as allocated.
      - The default exempts the GPU Operator's own operands (DCGM, the exporter, GPU Feature Discovery, the
        validator, the toolkit, the MIG manager and the driver).
    type: list
    elements: str
    default:
      - "app in (nvidia-dcgm-exporter,nvidia-dcgm,gpu-feature-discovery,nvidia-operator-validator,\
        nvidia-container-toolkit-daemonset,nvidia-mig-manager,nvidia-driver-daemonset)"
  page_size:
    description:
      - Items per page of the node and pod lists.
    type: int
    default: 500
notes:
  - Read-only; always returns C(changed=false). Needs C(list) on nodes and on pods in all namespaces.
  - The facts are also set as C(ansible_facts.gpu_fleet).
"""

EXAMPLES = r"""
- name: Read the GPU fleet
  kubegpu.scheduling.gpu_node_facts:
  register: fleet

- name: Show the free GPUs per model
  ansible.builtin.debug:
    msg: "{{ item.key }}: {{ item.value.free }} of {{ item.value.allocatable }} free on {{ item.value.nodes }} nodes"
  loop: "{{ fleet.models | dict2items }}"

- name: Stop when a GPU node has a problem
  ansible.builtin.assert:
    that:
      - fleet.problems | length == 0
    fail_msg: "{{ fleet.problems | to_nice_yaml }}"

- name: Read one node pool, with the GPU Operator's plugin in its own namespace
  kubegpu.scheduling.gpu_node_facts:
    label_selector: nvidia.com/gpu.present=true
    device_plugin:
      namespaces: [gpu-operator]
      label_selectors: [app=nvidia-device-plugin-daemonset]

- name: Use the fact set by an earlier run
  ansible.builtin.debug:
    msg: "{{ ansible_facts.gpu_fleet.nodes_without_capacity }}"
"""

RETURN = r"""
nodes:
  description: One entry per GPU node, sorted by name.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Node name.
      type: str
      sample: gfd-h100
    model:
      description: The model named by the first of O(model_label_keys) that names one; null when none does.
      type: str
      sample: NVIDIA-H100-80GB-HBM3
    model_source:
      description: The label key the model came from.
      type: str
      sample: nvidia.com/gpu.product
    model_label_value:
      description: The model made a valid label value (invalid characters become C(-), at most 63 characters).
      type: str
      sample: NVIDIA-H100-80GB-HBM3
    mig_profile:
      description: The MIG profile GPU Feature Discovery appends under the single MIG strategy, else null.
      type: str
      sample: 1g.10gb
    label_gpu_count:
      description: The GPU count the node's labels state, else null.
      type: int
      sample: 8
    capacity:
      description: GPUs the kubelet registered (sum over the counted resources).
      type: int
      sample: 8
    allocatable:
      description: GPUs the device plugin reports healthy.
      type: int
      sample: 7
    unhealthy:
      description: Capacity minus allocatable.
      type: int
      sample: 1
    allocated:
      description: GPU limits of the pods bound to the node that are not Succeeded or Failed.
      type: int
      sample: 4
    free:
      description: Allocatable minus allocated, never below 0.
      type: int
      sample: 3
    resources:
      description: Capacity, allocatable and allocated per counted resource.
      type: dict
      sample: {nvidia.com/gpu: {capacity: 8, allocatable: 7, allocated: 4}}
    ready:
      description: Whether the node's Ready condition is True.
      type: bool
    schedulable:
      description: False when the node is cordoned.
      type: bool
    taints:
      description: The node's taints.
      type: list
      elements: dict
      sample: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
    driver_version:
      description: From C(nvidia.com/cuda.driver-version.full) (or the older split labels, or ACK's driver label).
      type: str
      sample: 550.54.15
    cuda_version:
      description: From C(nvidia.com/cuda.runtime-version.full) or the older split labels.
      type: str
      sample: "12.4"
    ack_scheduling_mode:
      description: The value of C(ack.node.gpu.schedule), else null.
      type: str
      sample: default
    device_plugin_pod:
      description: The device-plugin pod on the node (a Ready one first), as C(namespace/name), else null.
      type: str
      sample: kube-system/nvidia-device-plugin-daemonset-x7k2p
    device_plugin_ready:
      description: Whether a device-plugin pod on the node is Ready.
      type: bool
    device_plugin_pods:
      description: Every device-plugin pod on the node.
      type: list
      elements: str
    gpu_pods:
      description: Pods holding GPUs on the node, as C(namespace/name).
      type: list
      elements: str
    pods_outside_scheduler:
      description: Pods that ask for GPUs through C(NVIDIA_VISIBLE_DEVICES) without a GPU limit, and how.
      type: list
      elements: str
      sample: ["gpu-fleet/bypass-visible-devices (container main: NVIDIA_VISIBLE_DEVICES=all)"]
    gpu_signals:
      description: The labels and capacity that make this a GPU node.
      type: dict
      sample: {labels: [nvidia.com/gpu.product=Tesla-T4], capacity: [capacity nvidia.com/gpu=4]}
    problems:
      description: The node's problems, each with a stable C(kind), the C(problem) and the C(reason).
      type: list
      elements: dict
      sample: [{kind: allocatable_below_capacity, problem: allocatable below capacity,
                reason: "capacity 4, allocatable 3: 1 GPU(s) marked unhealthy by the device plugin"}]
models:
  description: Totals per model (V(unknown) for GPU nodes whose labels name none).
  returned: always
  type: dict
  sample:
    NVIDIA-H100-80GB-HBM3: {label_value: NVIDIA-H100-80GB-HBM3, nodes: 1, capacity: 8, allocatable: 8,
                            unhealthy: 0, allocated: 2, free: 6}
totals:
  description: Totals over all GPU nodes.
  returned: always
  type: dict
  sample: {nodes: 9, capacity: 35, allocatable: 34, unhealthy: 1, allocated: 4, free: 30}
nodes_without_capacity:
  description: GPU nodes that expose no GPU capacity to the scheduler.
  returned: always
  type: list
  elements: str
  sample: [gfd-a100-noplugin]
problems:
  description:
    - Every node's problems in one list, each with the C(node), a stable C(kind), the C(problem) and the C(reason).
    - "Kinds: V(no_gpu_capacity), V(allocatable_below_capacity), V(no_device_plugin_pod),
      V(device_plugin_not_ready), V(not_default_scheduling_mode), V(allocated_above_allocatable),
      V(gpu_use_outside_scheduler)."
  returned: always
  type: list
  elements: dict
  sample:
    - node: ack-t4-shared
      kind: not_default_scheduling_mode
      problem: node not in default (exclusive) GPU scheduling mode
      reason: ack.node.gpu.schedule=cgpu
api_requests:
  description: API requests the run made (one per page of each of the two lists, plus retries).
  returned: always
  type: int
  sample: 2
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.facts import summarise
from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.reads import missing_names_warning, read_fleet
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.device_plugins import (
    DEFAULT_DEVICE_PLUGIN_SELECTORS,
    DEFAULT_EXEMPT_POD_SELECTORS,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.models import DEFAULT_MODEL_LABEL_KEYS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.options import options_from_params
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import NVIDIA_GPU
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.module import (
    api_module,
    errors_fail,
    module_client,
    with_connection_options,
)


def argument_spec() -> dict[str, Any]:
    return with_connection_options(
        dict(
            resource_names={"type": "list", "elements": "str", "default": [NVIDIA_GPU]},
            label_selector={"type": "str"},
            names={"type": "list", "elements": "str"},
            model_label_keys={
                "type": "list",
                "elements": "str",
                "default": list(DEFAULT_MODEL_LABEL_KEYS),
                "no_log": False,
            },
            device_plugin={
                "type": "dict",
                "default": {},
                "options": {
                    "namespaces": {"type": "list", "elements": "str", "default": []},
                    "label_selectors": {
                        "type": "list",
                        "elements": "str",
                        "default": list(DEFAULT_DEVICE_PLUGIN_SELECTORS),
                    },
                },
            },
            exempt_pod_selectors={"type": "list", "elements": "str", "default": list(DEFAULT_EXEMPT_POD_SELECTORS)},
            page_size={"type": "int", "default": 500},
        )
    )


def run(module: AnsibleModule) -> dict[str, Any]:
    params = module.params
    if params["page_size"] < 1:
        raise OptionError(f"page_size must be at least 1, not {params['page_size']}")
    options = options_from_params(
        params["resource_names"], params["model_label_keys"], params["device_plugin"], params["exempt_pod_selectors"]
    )
    client = module_client(module)
    nodes, pods, plugins = read_fleet(client, options, params["label_selector"], params["names"], params["page_size"])
    warning = missing_names_warning(params["names"], nodes, params["label_selector"])
    if warning:
        module.warn(warning)
    facts = summarise(nodes, pods, plugins, options)
    facts["api_requests"] = client.request_count
    return facts


def main() -> None:
    module = api_module(argument_spec())
    with errors_fail(module):
        facts = run(module)
    module.exit_json(changed=False, ansible_facts={"gpu_fleet": facts}, **facts)


if __name__ == "__main__":
    main()
