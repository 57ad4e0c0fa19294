# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_placement_info
short_description: Where GPU work fits now, why GPU pods are pending, and whether manifests would fit
version_added: 1.0.0
description:
  - Answers "0/12 nodes are available, Insufficient nvidia.com/gpu, yet GPUs are free" for the whole cluster.
  - B(The view.) Per pool (the GPU model, from O(model_label_keys), or the C(productName) of a DRA node's devices;
    split further by the values of O(pool_label_keys)), for each of O(sizes) GPUs per pod, how many such pods fit now
    and on which nodes, the largest number of GPUs one pod can get on one node, and the free GPUs stranded for that
    size, by why; V(unschedulable) (cordoned), V(taint) (a C(NoSchedule) or C(NoExecute) taint O(shape.tolerations)
    does not tolerate), V(selector) (the node does not match O(shape.node_selector)), V(cpu), V(memory) or V(pods)
    (the node has too little left for one pod of O(shape)), V(fragmented) (fewer than the size free on the node, or
    left over after the pods of that size). GPUs withdrawn (device-plugin capacity above allocatable, DRA devices
    tainted away) are counted apart. Free GPUs are the device plugin's (allocatable minus the limits of the pods bound
    to the node) where the node advertises the resource, else the DRA devices free for whole-device allocation (not
    held by a claim, not tainted, no MIG device or shared counter set of them held).
  - >-
    B(Pending GPU pods.) For each pod that no node took yet and that asks for GPUs (a GPU resource or ResourceClaims),
    the scheduler's filters node by node, in the order of its default profile and in its words (V(node(s\) were
    unschedulable), V(node(s\) had untolerated taint(s\)), V(node(s\) didn't match Pod's node
    affinity/selector), V(Insufficient nvidia.com/gpu), V(Insufficient cpu), V(Too many pods), V(cannot allocate all
    claims)), their sum as its FailedScheduling event writes it, and one reason with its remedy; a selector that no
    GPU node matches names the values of its keys that exist.
  - >-
    B(What-if.) With O(src) or O(definition) (manifests read as M(kubegpu.scheduling.gpu_pod_validate) reads them),
    each GPU pod template of the manifests (Deployments, Jobs, the custom resources the validator reads,
    ResourceClaimTemplates among them for claims) is weighed against the fleet as it is now, each object on its own:
    whether its replicas (or a Job's parallelism) fit, where, and if not why.
  - It models the default scheduler's NodeUnschedulable, TaintToleration, NodeAffinity, NodeResourcesFit and
    DynamicResources (whole devices) filters. It cannot know what another scheduler (C(schedulerName)) or preemption
    would do, nor evaluates host ports, volumes, topology spread or inter-pod affinity; it says so in a finding or a
    note rather than guessing.
  - Costs one paginated list each of nodes, unfinished pods, DeviceClasses, ResourceSlices, ResourceClaims and
    DeviceTaintRules, the lists of M(kubegpu.scheduling.gpu_node_facts).
author:
  - kubegpu.scheduling contributors (@kubegpu)
extends_documentation_fragment:
  - kubegpu.scheduling.options.gpu_resources
  - kubegpu.scheduling.options.sources
  - kubegpu.scheduling.options.page_size
  - kubegpu.scheduling.model_labels
  - kubegpu.scheduling.read_only
  - kubegpu.scheduling.connection
options:
  sizes:
    description: GPUs per pod the view answers for.
    type: list
    elements: int
    default: [1, 2, 4, 8]
  resource_names:
    description:
      - Extended resources that count as whole GPUs. The first is the one the sizes count, and on a DRA node the one a
        DeviceClass maps (C(extendedResourceName)); a pod that asks for any of them asks for GPUs.
      - The alias C(resource), one resource as a string, is deprecated and goes in 2.0.0.
    type: list
    elements: str
    default: [nvidia.com/gpu]
    aliases: [resource]
  pool_label_keys:
    description: Node labels that split each model's nodes into pools (a node pool, a zone, C(nvidia.com/gpu.clique)).
    type: list
    elements: str
    default: []
  shape:
    description: The rest of the pod the view places, besides its GPUs.
    type: dict
    default: {}
    suboptions:
      cpu:
        description: CPU each pod requests, as a quantity (V(8), V(500m)).
        type: str
      memory:
        description: Memory each pod requests, as a quantity (V(64Gi)).
        type: str
      tolerations:
        description: Tolerations of the pod (key, operator, value, effect), as in a pod spec.
        type: list
        elements: dict
        default: []
      node_selector:
        description: The pod's nodeSelector.
        type: dict
        default: {}
  pending:
    description: Explain the pending GPU pods.
    type: bool
    default: true
  per_node:
    description:
      - Return the per-node view in RV(placement.nodes).
      - The alias C(nodes) is deprecated and goes in 2.0.0.
    type: bool
    default: false
    aliases: [nodes]
"""

EXAMPLES = r"""
- name: Where do 1, 2, 4 and 8 GPU pods fit, per model and node pool
  kubegpu.scheduling.gpu_placement_info:
    pool_label_keys: [cloud.google.com/gke-nodepool]
    shape:
      cpu: "8"
      memory: 64Gi
      tolerations:
        - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
  register: placement

- name: Would these training jobs fit now
  kubegpu.scheduling.gpu_placement_info:
    src: k8s/training/
    pending: false
  register: whatif
"""

RETURN = r"""
placement:
  description: The view, the pending GPU pods and the what-if.
  returned: always
  type: dict
  contains:
    sizes:
      description: The sizes answered for.
      type: list
      elements: int
      returned: always
    resource:
      description: The GPU resource counted.
      type: str
      returned: always
    pools:
      description: >-
        Per pool, C(pool) (its name), C(nodes), C(gpus_free), C(withdrawn), C(largest) (most GPUs one pod gets on one
        node), C(fits) (per size, C(pods) that fit and C(nodes), node to count) and C(stranded) (per size, C(gpus) and
        C(by_reason)).
      type: list
      elements: dict
      returned: always
    fleet:
      description: The same for all GPU nodes together.
      type: dict
      returned: always
    nodes:
      description: >-
        Per GPU node (with O(per_node)), C(gpus_free), C(by_source), C(withdrawn), CPU, memory and pod slots free,
        C(blocked) (why no pod of the view's shape goes there) and C(fits) per size.
      type: list
      elements: dict
      returned: when per_node is true
    pending:
      description: >-
        Per pending GPU pod, C(pod), C(gpus), C(resource), C(reasons) (the scheduler's words, counted over nodes),
        C(message) (their sum, as the FailedScheduling event writes it), C(scheduler_said) (the pod's PodScheduled
        message), C(fits_on), C(reason), C(remedy) and C(findings).
      type: list
      elements: dict
      returned: always
    what_if:
      description: >-
        Per GPU pod template of the manifests, C(object), C(source), C(document), C(path), C(replicas), C(fits),
        C(pods_that_fit), C(fits_on) (the nodes that take the most), C(reasons), C(message), C(reason), C(remedy),
        C(findings). Where only some replicas fit, C(reasons) and C(message) are what the scheduler says of the
        replicas that stay Pending once those that fit are placed, and C(reason) says how many of how many fit.
      type: list
      elements: dict
      returned: always
    not_checked:
      description: Objects of the manifests the walker could not read pod templates from, with why.
      type: list
      elements: dict
      returned: always
    errors:
      description: Files or definitions that could not be loaded, with C(source), C(document), C(line) and C(message).
      type: list
      elements: dict
      returned: always
    findings:
      description: Findings of the view (stranded GPUs, fragmented pools) with C(kind), C(severity), C(message), C(remedy).
      type: list
      elements: dict
      returned: always
      contains:
        id: {description: "The registry id: a validator rule's code (V(KGPU101)), any other kind C(<check>.<name>)
            (V(device_plugin.no_gpu_capacity)); docs/findings.md lists them all.", type: str}
        severity: {description: "V(error), V(warning) or V(info): one scale for every check.", type: str}
        title: {description: "What the kind is, in a line.", type: str}
        message: {description: "What was found here.", type: str}
        remedy: {description: "What to do.", type: str}
        where: {description: "The places that apply, of C(node), C(device), C(pool), C(object) (C(Kind namespace/name)), C(subject),
            C(pod), C(config), C(source), C(document), C(path), C(line), C(container).", type: dict}
        kind: {description: "Deprecated, removed in 2.0.0 (use C(id)): the name the kind was declared with (docs/findings.md).", type: str}
        node: {description: "Deprecated, removed in 2.0.0 (use C(where.node)): the node, or null.", type: str}
        pool: {description: "Deprecated, removed in 2.0.0 (use C(where.pool)): the pool.", type: str}
        pod: {description: "Deprecated, removed in 2.0.0 (use C(where.pod)): the pod, as C(namespace/name).", type: str}
    notes:
      description: What the view cannot know, and DRA objects that could not be read.
      type: list
      elements: str
      returned: always
    api_requests:
      description: API requests the run made; the same as the top-level RV(api_requests).
      type: int
      returned: always
api_requests:
  description: The API requests the run made, pages and retries included.
  returned: always
  type: int
  sample: 6
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra_reads import read_dra
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import gpu_resource_matcher
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.module import (
    api_module,
    errors_fail,
    module_client,
    with_connection_options,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.options.groups import (
    GPU_RESOURCES,
    MODEL_LABELS,
    PAGE_SIZE,
    SOURCES,
    check_ranges,
    module_options,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.options import placement_options
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.reads import read_placement
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.summary import what_if_summary
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.manifests import load_manifests


def argument_spec() -> dict[str, Any]:
    spec = module_options(
        dict(
            sizes={"type": "list", "elements": "int", "default": [1, 2, 4, 8]},
            pool_label_keys={"type": "list", "elements": "str", "default": [], "no_log": False},
            shape={
                "type": "dict",
                "default": {},
                "options": {
                    "cpu": {"type": "str"},
                    "memory": {"type": "str"},
                    "tolerations": {"type": "list", "elements": "dict", "default": []},
                    "node_selector": {"type": "dict", "default": {}},
                },
            },
            pending={"type": "bool", "default": True},
            per_node={"type": "bool", "default": False},
        ),
        (GPU_RESOURCES, SOURCES, PAGE_SIZE, MODEL_LABELS),
        renamed={"resource": "resource_names", "nodes": "per_node"},
    )
    return with_connection_options(spec)


def run(module: AnsibleModule) -> dict[str, Any]:
    params = module.params
    check_ranges(params)
    if not params["resource_names"]:
        raise OptionError("resource_names must name at least one resource")
    counted = params["resource_names"][0]
    options = placement_options(
        params["sizes"], counted, params["model_label_keys"], params["pool_label_keys"], params["shape"]
    )
    is_gpu = gpu_resource_matcher(params["resource_names"])
    client = module_client(module)
    fleet, result = read_placement(client, options, is_gpu, read_dra, params["page_size"], params["pending"])
    if not params["per_node"]:
        del result["nodes"]
    result.update(what_if=[], not_checked=[], errors=[])
    if params["src"] or params["definition"] is not None:
        manifests = load_manifests(params["src"] or [], params["definition"])
        result.update(what_if_summary(manifests, fleet, is_gpu))
        result["errors"] = [e.to_dict() for e in manifests.errors]
    result["api_requests"] = client.request_count
    return result


def main() -> None:
    module = api_module(argument_spec())
    with errors_fail(module):
        result = run(module)
    module.exit_json(changed=False, placement=result, api_requests=result["api_requests"])


if __name__ == "__main__":
    main()
