# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_node_label
short_description: Label GPU nodes with their accelerator model
version_added: 1.0.0
description:
  - Puts the label C(accelerator=<model>) (the key is configurable) on every GPU node, the label the
    Alibaba ACK guide tells users to select on with C(nodeSelector), in one task for the whole fleet.
  - The model comes from the first of O(model_label_keys) that names one, as GPU Feature Discovery,
    ACK, GKE, EKS and Karpenter label it. The value is that label's value made a valid label value
    (characters a label value may not hold become C(-), at most 63 characters), for example
    V(NVIDIA-H100-80GB-HBM3), V(Tesla-V100-SXM2-16GB) or V(nvidia-l4), unless O(value_overrides) maps it.
  - GPU Feature Discovery's C(-MIG-<profile>) and C(-SHARED) suffixes are kept, so that selecting on the
    model never sends a pod that wants whole GPUs to MIG slices or time-sliced GPUs.
  - A node is a GPU node when its labels name a GPU model, say a GPU is present or count GPUs, its
    capacity has a GPU resource such as C(nvidia.com/gpu), or ResourceSlices of NVIDIA's DRA driver publish
    GPUs on it.
  - A node whose GPUs come through Dynamic Resource Allocation carries no GPU Feature Discovery labels (the GPU
    Operator's DRA mode deploys none). When none of O(model_label_keys) names a model, its model comes from its
    devices' C(productName) in the newest generation of its ResourceSlices, spelled as GPU Feature Discovery
    spells it (V(NVIDIA-H100-80GB-HBM3)), with C(-MIG-<profile>) when all its devices are MIG devices of one
    profile. A cluster that does not serve C(resource.k8s.io/v1), or a reader not allowed to list
    ResourceSlices, gets a warning and labels from the node labels alone.
  - Reads the nodes with one paginated list and the ResourceSlices with another, then sends one JSON patch
    (RFC 6902) to each node whose label must change, and none to the others, O(parallelism) at a time.
  - The collection only rewrites or removes label values it wrote itself. It records them in the node
    annotation C(kubegpu.io/managed-labels) (a JSON object of label key to value), set in the same
    patch as the label. A value someone else wrote is reported in RV(conflicts) and left alone,
    unless O(force=true).
  - Each patch first tests the label and the ownership annotation against the values read, so a label
    written by another client after the nodes were read is never overwritten; the node is read again and
    decided again. Nothing else is a precondition, so the status updates of node heartbeats never make a
    patch fail, and a run sends one patch per node that changes.
author:
  - kubegpu.scheduling contributors (@kubegpu)
extends_documentation_fragment:
  - kubegpu.scheduling.model_labels
  - kubegpu.scheduling.connection
  - kubegpu.scheduling.options.node_selection
  - kubegpu.scheduling.options.parallelism
options:
  label_key:
    description:
      - The label to set, C([prefix/]name).
      - It is never read as a source of the model, even when it is listed in O(model_label_keys).
    type: str
    default: accelerator
  label_selectors:
    description:
      - Only consider the nodes that match all of these label selectors, for example
        V(node-role.kubernetes.io/gpu), as C(kubectl get nodes -l) takes them. Joined with C(,) into one selector.
      - The earlier name O(label_selector) (one selector) is deprecated and will be removed in 2.0.0.
    type: list
    elements: str
    default: []
    aliases: [label_selector]
  value_overrides:
    description:
      - Label values to use instead of the model names, keyed by the model name as the source label
        holds it or as made a valid label value, for example V(nvidia-tesla-p100) for V(Tesla-P100-PCIE-16GB).
      - Each value must be a valid label value.
    type: dict
  remove_from_non_gpu:
    description:
      - Remove the label from the considered nodes that are not GPU nodes, when the collection set it.
        A value someone else set is reported in RV(conflicts) and left in place, even with O(force=true).
      - A GPU node whose device plugin and labels are not up yet looks like a node without GPUs.
    type: bool
    default: false
  mixed_models:
    description:
      - What to do with a node whose model labels name different GPU models (after removing brand words
        and MIG or sharing suffixes, so V(NVIDIA-A100-SXM4-40GB) and V(nvidia-tesla-a100) agree).
      - V(skip) leaves the node as it is, with a warning naming the node and the models.
      - V(first) uses the first of O(model_label_keys) that names a model; such nodes are listed in
        RV(mixed_models).
    type: str
    choices: [skip, first]
    default: skip
  force:
    description:
      - Overwrite a label value on a GPU node that the collection did not set, and take it over.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Reads the nodes and reports what would change; sends no write.
  diff_mode:
    support: full
    description: Returns, per node that changes, the label before and after (C(key=value)).
notes:
  - If the API server fails while nodes are being patched (no answer, throttling beyond the retries,
    a write that is forbidden), no further patch is sent and the task fails with a message naming the
    nodes done and not done. Each node's label and its ownership record change in one request, so no
    node is half-labeled, and running the task again converges.
  - Needs C(list) and C(patch) on C(nodes), C(get) on C(nodes) when another client changes a node's label
    or ownership annotation while it is being patched, and C(list) on C(resourceslices) (group C(resource.k8s.io)) for DRA nodes.
seealso:
  - name: Alibaba ACK, use the default Kubernetes GPU scheduling
    description: The guide that labels GPU nodes C(accelerator=<model>) and selects on it.
    link: https://www.alibabacloud.com/help/en/ack/ack-managed-and-ack-dedicated/user-guide/use-gpu-scheduling-in-ack-clusters
"""

EXAMPLES = r"""
- name: Label every GPU node accelerator=<model>
  kubegpu.scheduling.gpu_node_label:
    kubeconfig: ~/.kube/config

- name: Use the ACK guide's value style and remove stale labels from nodes without GPUs
  kubegpu.scheduling.gpu_node_label:
    value_overrides:
      Tesla-P100-PCIE-16GB: nvidia-tesla-p100
      Tesla-V100-SXM2-16GB: nvidia-tesla-v100
    remove_from_non_gpu: true

- name: Label one node pool under a custom key, from the ACK label only
  kubegpu.scheduling.gpu_node_label:
    label_key: example.com/gpu-model
    model_label_keys:
      - aliyun.accelerator/nvidia_name
    label_selectors:
      - alibabacloud.com/nodepool-id=np1234

- name: Show what would change, per node
  kubegpu.scheduling.gpu_node_label:
  check_mode: true
  diff: true
  register: gpu_labels

- name: Fail when a node carries a model label this collection did not set
  ansible.builtin.assert:
    that:
      - gpu_labels.conflicts | length == 0
    fail_msg: "{{ gpu_labels.conflicts }}"
"""

RETURN = r"""
labeled:
  description: Nodes whose label was set or changed (would be, in check mode).
  returned: always
  type: list
  elements: str
  sample: [ack-a10-0, gfd-h100]
unlabeled:
  description: Nodes without GPUs whose label was removed (would be, in check mode).
  returned: always
  type: list
  elements: str
  sample: [cpu-7]
unchanged:
  description: Nodes left as they were because they already carry the right label, or have no GPUs.
  returned: always
  type: list
  elements: str
  sample: [cpu-0, gke-l4]
conflicts:
  description: Nodes whose label carries a value the collection did not set and that it left alone.
  returned: always
  type: list
  elements: dict
  contains:
    node:
      description: The node name.
      type: str
    current:
      description: The value on the node.
      type: str
    desired:
      description: The value the model gives, or null on a node without GPUs.
      type: str
    reason:
      description: Why the value was left alone.
      type: str
  sample:
    - node: gpu-3
      current: nvidia-tesla-v100
      desired: Tesla-V100-SXM2-16GB
      reason: accelerator=nvidia-tesla-v100 was not set by this collection (the model says Tesla-V100-SXM2-16GB)
skipped_nodes:
  description: Nodes left untouched because no label value can be decided for them, or that do not exist.
  returned: always
  type: list
  elements: dict
  contains:
    node:
      description: The node name.
      type: str
    reason:
      description: Why the node was skipped.
      type: str
    models:
      description: The model labels, on nodes skipped because they name different models.
      type: dict
      returned: when the labels name different models
  sample:
    - node: mixed-0
      reason: "labels name different GPU models: nvidia.com/gpu.product=NVIDIA-A100-SXM4-40GB,
        cloud.google.com/gke-accelerator=nvidia-l4"
      models:
        nvidia.com/gpu.product: NVIDIA-A100-SXM4-40GB
        cloud.google.com/gke-accelerator: nvidia-l4
mixed_models:
  description: With O(mixed_models=first), the nodes whose labels name different models, and the value used.
  returned: always
  type: list
  elements: dict
  sample:
    - node: mixed-0
      models:
        nvidia.com/gpu.product: NVIDIA-A100-SXM4-40GB
        cloud.google.com/gke-accelerator: nvidia-l4
      value: NVIDIA-A100-SXM4-40GB
failed_nodes:
  description: Nodes whose patch failed, with the error.
  returned: always
  type: list
  elements: dict
  contains:
    node:
      description: The node name.
      type: str
    error:
      description: What went wrong.
      type: str
  sample: [{node: gpu-9, error: "connection refused by the API server at https://127.0.0.1:6443"}]
not_attempted:
  description: Nodes that needed a patch that was not sent because the API server failed first.
  returned: always
  type: list
  elements: str
  sample: []
counts:
  description: The number of nodes in each of the lists above.
  returned: always
  type: dict
  sample: {labeled: 2, unlabeled: 0, unchanged: 6, conflicts: 0, skipped: 1, failed: 0, not_attempted: 0}
changed:
  description: Whether a node's label was set or removed (or would be, in check mode).
  returned: always
  type: bool
writes:
  description: The number of write requests sent, retries included; 0 in check mode and when nothing changes.
  returned: always
  type: int
  sample: 2
api_requests:
  description: The API requests sent, reads and writes, retries included.
  returned: always
  type: int
diff:
  description:
    - Per node that changes, the label before and after as C(key=value) lines (empty when absent).
    - Ansible's diff callback prints it and removes it from the result.
  returned: in diff mode
  type: list
  elements: dict
  sample:
    - before_header: node/gfd-h100
      after_header: node/gfd-h100
      before: ""
      after: "accelerator=NVIDIA-H100-80GB-HBM3\n"
"""

from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.module import with_connection_options
from ansible_collections.kubegpu.scheduling.plugins.module_utils.labels.plan import (
    DEFAULT_LABEL_KEY,
    MIXED_MODELS_CHOICES,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.labels.run import run_labeling
from ansible_collections.kubegpu.scheduling.plugins.module_utils.options.groups import (
    MODEL_LABELS,
    NODE_SELECTION,
    PARALLELISM,
    module_options,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.module import run_write_module

OWN_OPTIONS: dict[str, dict[str, Any]] = {
    "label_key": {"type": "str", "default": DEFAULT_LABEL_KEY, "no_log": False},
    "value_overrides": {"type": "dict"},
    "remove_from_non_gpu": {"type": "bool", "default": False},
    "mixed_models": {"type": "str", "choices": list(MIXED_MODELS_CHOICES), "default": "skip"},
    "force": {"type": "bool", "default": False},
}


def argument_spec() -> dict[str, Any]:
    options = module_options(
        OWN_OPTIONS, (NODE_SELECTION, PARALLELISM, MODEL_LABELS), renamed={"label_selector": "label_selectors"}
    )
    return with_connection_options(options)


def main() -> None:
    run_write_module(argument_spec(), lambda module, client: run_labeling(module.params, client, module.check_mode))


if __name__ == "__main__":
    main()
