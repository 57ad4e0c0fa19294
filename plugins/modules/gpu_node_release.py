# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_node_release
short_description: Release quarantined GPU nodes, only after a GPU proof pod succeeds on each
version_added: 1.0.0
description:
  - Releases GPU nodes this collection quarantined, one proof at a time per node, O(parallelism) nodes at once.
  - A node is the collection's to release only when it carries the collection's quarantine record, the
    annotation C(kubegpu.io/quarantine-record) (who quarantined it, why, when, and whether the collection
    cordoned it and set its taint). A node without it, or with a record that does not parse, is left as it is;
    it is listed in RV(not_quarantined), or in RV(not_ours) with a warning when it carries the quarantine taint
    C(kubegpu.io/quarantine:NoSchedule) or a record the collection cannot read.
  - First a proof pod runs on the node. It is the sample workload (the C(sample_workload) role's image, command
    and tolerations, see O(proof)) asking for all the node's C(nvidia.com/gpu), pinned to the node with a
    required node affinity on its name, so the scheduler still checks that the GPUs are allocatable and the
    taints tolerated. It tolerates the quarantine taint and the cordon (C(node.kubernetes.io/unschedulable)).
    It is labeled C(app.kubernetes.io/name=kubegpu-release-proof) and annotated
    C(kubegpu.io/release-proof-node=<node>), runs in O(namespace) (created when missing), and is deleted
    when it ends, whatever its outcome.
  - Only when the proof pod Succeeded is the node released, in one JSON patch (RFC 6902) that removes the
    quarantine taint if the record says the collection set it, uncordons the node only if the record says the
    collection cordoned it (a cordon someone else set before the quarantine stays, and is reported), and removes
    the record. The patch tests each of these and the record as read, so a node changed meanwhile is read again
    and decided again.
  - A node whose proof pod fails, or does not finish within O(proof_timeout) (not scheduled, still running),
    stays quarantined; RV(held) says why, with the pod's phase, exit code and reason, and the end of its log,
    and the task fails.
  - A node already released has no record, so running the task again sends no request that writes.
author:
  - kubegpu.scheduling contributors (@kubegpu)
extends_documentation_fragment:
  - kubegpu.scheduling.connection
  - kubegpu.scheduling.options.parallelism
options:
  names:
    description:
      - The nodes to release, by name. Names that match no node are listed in RV(missing) with a warning.
      - The earlier name O(nodes) is deprecated and will be removed in 2.0.0.
    type: list
    elements: str
    required: true
    aliases: [nodes]
  proof:
    description:
      - The proof pod. What is not given is the sample workload's (the C(sample_workload) role's defaults).
    type: dict
    suboptions:
      image:
        description:
          - The container image. Defaults to the sample workload's, the ACK guide's TensorFlow MNIST sample.
        type: str
      command:
        description:
          - The container command. Defaults to the sample workload's, a 1,000-step MNIST training.
        type: list
        elements: str
      resource:
        description:
          - The GPU resource the proof pod asks for.
        type: str
        default: nvidia.com/gpu
      gpus:
        description:
          - How many of O(proof.resource) the proof pod asks for. Defaults to all the node's (its capacity),
            so that every GPU of the node is proven.
        type: int
      tolerations:
        description:
          - Tolerations besides those of the quarantine taint and of the cordon, which the proof pod always has.
          - Defaults to the sample workload's, C(nvidia.com/gpu) C(Exists) C(NoSchedule).
        type: list
        elements: dict
      annotations:
        description:
          - Annotations of the proof pod, for example to keep a service mesh from injecting a sidecar that would
            keep it from completing.
        type: dict
  proof_timeout:
    description:
      - Seconds to wait for each proof pod to finish, from its creation (scheduling included).
    type: int
    default: 600
  namespace:
    description:
      - The namespace of the proof pods, created when missing.
    type: str
    default: kubegpu-release-proof
  log_lines:
    description:
      - How many lines from the end of a proof pod's log the result keeps.
    type: int
    default: 20
attributes:
  check_mode:
    support: full
    description:
      - Reads the nodes and returns the plan (the proof pod per node, what would be removed and what stays);
        runs no proof pod and sends no write.
  diff_mode:
    support: full
    description: Returns, per node released, its cordon, taints and quarantine record before and after.
notes:
  - Needs C(list), C(get) and C(patch) on C(nodes); C(get), C(create) and C(delete) on C(pods) and C(get) on
    C(pods/log) in O(namespace); C(get) and C(create) on C(namespaces) when O(namespace) does not exist.
  - The proof pod asks for whole devices through the extended resource. A node whose GPUs come through
    Dynamic Resource Allocation only has none in its capacity, and stays quarantined with a finding.
seealso:
  - name: GPU node release runbook
    description: The on-call path from a quarantined node back into service.
    link: https://github.com/kubegpu/scheduling/blob/main/docs/runbooks/gpu-failure.md
"""

EXAMPLES = r"""
- name: Show what releasing two nodes would do (proof pods, what is removed, what stays)
  kubegpu.scheduling.gpu_node_release:
    names: [gpu-a100-3, gpu-a100-7]
  check_mode: true
  diff: true

- name: Release them once the sample workload succeeds on each
  kubegpu.scheduling.gpu_node_release:
    names: [gpu-a100-3, gpu-a100-7]
    proof_timeout: 900
  register: release

- name: Prove with a short CUDA job on one GPU instead of the sample
  kubegpu.scheduling.gpu_node_release:
    names: [gpu-h100-1]
    proof:
      image: nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0
      command: [/cuda-samples/vectorAdd]
      gpus: 1
      annotations:
        sidecar.istio.io/inject: "false"
"""

RETURN = r"""
released:
  description: Nodes released (in check mode, that would be released once their proof pod succeeds).
  returned: always
  type: list
  elements: str
  sample: [gpu-a100-3]
held:
  description: Nodes that stay quarantined, and why.
  returned: always
  type: list
  elements: dict
  contains:
    node:
      description: The node name.
      type: str
    reason:
      description: Why it stays quarantined.
      type: str
    pod:
      description: The proof pod, C(namespace/name).
      type: str
    phase:
      description: The proof pod's phase when it was last read.
      type: str
    exit_code:
      description: Its container's exit code, when it ended.
      type: int
    exit_reason:
      description: Its container's reason (C(Error), C(OOMKilled), C(ContainerCreating)).
      type: str
    logs:
      description: The last O(log_lines) lines of its log.
      type: list
      elements: str
  sample:
    - node: gpu-a100-7
      reason: "proof pod kubegpu-release-proof/kubegpu-proof-gpu-a100-7-1c2d3e4f ended Failed on gpu-a100-7
        (exit code 1, Error); last log line: CUDA error: an illegal memory access was encountered; it stays
        quarantined"
      pod: kubegpu-release-proof/kubegpu-proof-gpu-a100-7-1c2d3e4f
      phase: Failed
      exit_code: 1
      exit_reason: Error
      logs: ["CUDA error: an illegal memory access was encountered"]
not_quarantined:
  description: Nodes without the collection's quarantine record, left as they are (a release already done, or
    never quarantined by it).
  returned: always
  type: list
  elements: str
  sample: [gpu-a100-1]
not_ours:
  description: Nodes with the quarantine taint but no record, or a record that does not parse, left as they are.
  returned: always
  type: list
  elements: dict
  sample:
    - node: gpu-a100-5
      reason: "gpu-a100-5: it carries the taint kubegpu.io/quarantine:NoSchedule but no
        kubegpu.io/quarantine-record annotation; left as it is"
missing:
  description: Names in O(names) that match no node.
  returned: always
  type: list
  elements: str
  sample: []
plan:
  description: Per node, the decision, what a release removes, what stays and why, the proof pod and the patch.
  returned: always
  type: list
  elements: dict
  contains:
    node:
      description: The node name.
      type: str
    verdict:
      description: What is done with the node.
      type: str
      choices: [release, not_quarantined, not_ours, no_such_node, cannot_prove]
    removes:
      description: What the release removes from the node.
      type: list
      elements: str
    keeps:
      description: What the release leaves because the collection did not set it.
      type: list
      elements: str
    proof_pod:
      description: The proof pod's manifest; null when no proof runs.
      type: dict
    patch:
      description: The JSON patch sent once the proof passed; null when none is sent.
      type: list
      elements: dict
  sample:
    - node: gpu-a100-3
      verdict: release
      removes: ["taint kubegpu.io/quarantine:NoSchedule", cordon, annotation kubegpu.io/quarantine-record]
      keeps: []
      proof_pod: {apiVersion: v1, kind: Pod, metadata: {name: kubegpu-proof-gpu-a100-3-5a6b7c8d}}
      patch:
        - {op: test, path: /metadata/annotations/kubegpu.io~1quarantine-record, value: "{...}"}
        - {op: remove, path: /metadata/annotations/kubegpu.io~1quarantine-record}
findings:
  description: Every finding, in the one shape of a finding; the kinds are listed in docs/findings.md.
  returned: always
  type: list
  elements: dict
  sample:
    - id: release.cordon_kept
      severity: info
      title: A cordon someone else set stays
      message: gpu-a100-3 was already cordoned when it was quarantined, the release leaves it cordoned
      remedy: Whoever cordoned it lifts it (kubectl uncordon gpu-a100-3) when their work is done.
      where:
        node: gpu-a100-3
      kind: release.cordon_kept
      node: gpu-a100-3
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
    pod: {description: "Deprecated, removed in 2.0.0 (use C(where.pod)): the pod, as C(namespace/name).", type: str}
counts:
  description: The number of nodes in each of the lists above.
  returned: always
  type: dict
  sample: {released: 1, held: 1, not_quarantined: 1, not_ours: 0, missing: 0}
changed:
  description: Whether a node was released (or would be, in check mode).
  returned: always
  type: bool
writes:
  description: The number of write requests sent (proof pods created and deleted, namespace, patches); 0 in
    check mode and when no node is the collection's to release.
  returned: always
  type: int
  sample: 3
api_requests:
  description: The API requests sent, reads and writes, retries included.
  returned: always
  type: int
diff:
  description:
    - Per node released, its cordon, taints and quarantine record before and after, as lines.
    - Ansible's diff callback prints it and removes it from the result.
  returned: in diff mode
  type: list
  elements: dict
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.module import with_connection_options
from ansible_collections.kubegpu.scheduling.plugins.module_utils.node_release.apply import PodCalls
from ansible_collections.kubegpu.scheduling.plugins.module_utils.node_release.release import (
    DEFAULT_LOG_LINES,
    DEFAULT_PROOF_TIMEOUT,
    PROOF_NAMESPACE,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.node_release.run import run_release
from ansible_collections.kubegpu.scheduling.plugins.module_utils.options.groups import (
    GROUPS,
    NODE_SELECTION,
    PARALLELISM,
    module_options,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.pod import lifecycle
from ansible_collections.kubegpu.scheduling.plugins.module_utils.pod.outcome import log_tail
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.module import run_write_module

OWN_OPTIONS: dict[str, dict[str, Any]] = {
    "names": dict(GROUPS[NODE_SELECTION]["names"], required=True),
    "proof": {
        "type": "dict",
        "options": {
            "image": {"type": "str"},
            "command": {"type": "list", "elements": "str"},
            "resource": {"type": "str", "default": "nvidia.com/gpu"},
            "gpus": {"type": "int"},
            "tolerations": {"type": "list", "elements": "dict"},
            "annotations": {"type": "dict"},
        },
    },
    "proof_timeout": {"type": "int", "default": DEFAULT_PROOF_TIMEOUT},
    "namespace": {"type": "str", "default": PROOF_NAMESPACE},
    "log_lines": {"type": "int", "default": DEFAULT_LOG_LINES},
}


def argument_spec() -> dict[str, Any]:
    return with_connection_options(module_options(OWN_OPTIONS, (PARALLELISM,), renamed={"nodes": "names"}))


def pod_calls(module: AnsibleModule, client: KubeClient) -> PodCalls:
    """The proof pods' I/O through the pod lifecycle of module_utils/pod/."""
    timeout, lines = module.params["proof_timeout"], module.params["log_lines"]
    return PodCalls(
        read=lambda namespace, name: lifecycle.read_pod(client, namespace, name),
        create=lambda body: lifecycle.create_pod(client, body["metadata"]["namespace"], body, timeout),
        delete=lambda namespace, name: lifecycle.delete_and_wait(client, namespace, name, timeout),
        logs=lambda namespace, name: log_tail(client, namespace, name, lines, module.warn) if lines else [],
        wait=lifecycle.wait_for,
        ensure_namespace=lambda namespace: lifecycle.ensure_namespace(client, namespace),
    )


def main() -> None:
    run_write_module(
        argument_spec(),
        lambda module, client: run_release(module.params, client, module.check_mode, pod_calls(module, client)),
    )


if __name__ == "__main__":
    main()
