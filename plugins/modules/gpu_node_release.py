# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_node_release
short_description: Release quarantined GPU nodes, only after a GPU proof pod succeeds on each
version_added: 1.1.0
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
options:
  nodes:
    description:
      - The nodes to release, by name. Names that match no node are listed in RV(missing) with a warning.
    type: list
    elements: str
    required: true
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
  parallelism:
    description:
      - How many nodes are proven at once.
    type: int
    default: 8
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
    nodes: [gpu-a100-3, gpu-a100-7]
  check_mode: true
  diff: true

- name: Release them once the sample workload succeeds on each
  kubegpu.scheduling.gpu_node_release:
    nodes: [gpu-a100-3, gpu-a100-7]
    proof_timeout: 900
  register: release

- name: Prove with a short CUDA job on one GPU instead of the sample
  kubegpu.scheduling.gpu_node_release:
    nodes: [gpu-h100-1]
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
  description: Names in O(nodes) that match no node.
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
  description: Every finding, each with C(kind), C(severity), C(title), C(message), C(remedy), C(node) and,
    for a proof, C(pod); the kinds are listed in docs/findings.md.
  returned: always
  type: list
  elements: dict
  sample:
    - kind: release.cordon_kept
      severity: info
      title: A cordon someone else set stays
      message: gpu-a100-3 was already cordoned when it was quarantined, the release leaves it cordoned
      remedy: Whoever cordoned it lifts it (kubectl uncordon gpu-a100-3) when their work is done.
      node: gpu-a100-3
counts:
  description: The number of nodes in each of the lists above.
  returned: always
  type: dict
  sample: {released: 1, held: 1, not_quarantined: 1, not_ours: 0, missing: 0}
writes:
  description: The number of write requests sent (proof pods created and deleted, namespace, patches); 0 in
    check mode and when no node is the collection's to release.
  returned: always
  type: int
  sample: 3
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

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import (
    ClusterError,
    OptionError,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.module import (
    api_module,
    exit_with_result,
    module_client,
    with_connection_options,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.pod import lifecycle
from ansible_collections.kubegpu.scheduling.plugins.module_utils.pod.outcome import log_tail
from ansible_collections.kubegpu.scheduling.plugins.module_utils.node_release.release import (
    DEFAULT_LOG_LINES,
    DEFAULT_PROOF_TIMEOUT,
    PROOF_NAMESPACE,
    ReleasePlan,
    Verdict,
    build_proof_options,
    missing_plan,
    plan_release,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.node_release.reads import (
    patch_node,
    read_nodes,
    reread_node,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.node_release.run import (
    NodeCalls,
    NodeResult,
    PodCalls,
    failure_message,
    planned,
    release_all,
    summarize,
)

MAX_PARALLELISM = 64


def argument_spec() -> dict[str, Any]:
    return with_connection_options(
        dict(
            nodes={"type": "list", "elements": "str", "required": True},
            proof={
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
            proof_timeout={"type": "int", "default": DEFAULT_PROOF_TIMEOUT},
            namespace={"type": "str", "default": PROOF_NAMESPACE},
            log_lines={"type": "int", "default": DEFAULT_LOG_LINES},
            parallelism={"type": "int", "default": 8},
        )
    )


def check_params(params: dict[str, Any]) -> None:
    if not params["nodes"] or not all(params["nodes"]):
        raise OptionError("nodes must name at least one node, and no name may be empty")
    if params["proof_timeout"] < 1:
        raise OptionError(f"proof_timeout must be at least 1 second, not {params['proof_timeout']}")
    if params["log_lines"] < 0:
        raise OptionError(f"log_lines must not be negative, not {params['log_lines']}")
    if not 1 <= params["parallelism"] <= MAX_PARALLELISM:
        raise OptionError(f"parallelism must be between 1 and {MAX_PARALLELISM}, not {params['parallelism']}")


def pod_calls(module: AnsibleModule, client: Any, timeout: float) -> PodCalls:
    lines = module.params["log_lines"]
    return PodCalls(
        read=lambda namespace, name: lifecycle.read_pod(client, namespace, name),
        create=lambda body: lifecycle.create_pod(client, body["metadata"]["namespace"], body, timeout),
        delete=lambda namespace, name: lifecycle.delete_and_wait(client, namespace, name, timeout),
        logs=lambda namespace, name: log_tail(client, namespace, name, lines, module.warn) if lines else [],
        wait=lifecycle.wait_for,
    )


def run(module: AnsibleModule) -> dict[str, Any]:
    params = module.params
    check_params(params)
    options = build_proof_options(params["proof"], params["namespace"])
    client = module_client(module)
    nodes, missing = read_nodes(client, params["nodes"])
    decided: dict[str, ReleasePlan] = {n.name: plan_release(n, options) for n in nodes}
    decided.update({name: missing_plan(name) for name in missing})
    plans = [decided[name] for name in dict.fromkeys(params["nodes"])]
    results: list[NodeResult]
    if module.check_mode:
        results = planned(plans)
    else:
        if any(p.verdict is Verdict.RELEASE for p in plans):
            lifecycle.ensure_namespace(client, options.namespace)
        results = release_all(
            plans,
            pod_calls(module, client, params["proof_timeout"]),
            NodeCalls(
                send=lambda name, patch: patch_node(client, name, patch),
                reread=lambda name: reread_node(client, name),
                replan=lambda node: plan_release(node, options),
            ),
            params["proof_timeout"],
            parallelism=params["parallelism"],
            errors=(ClusterError,),
        )
    summary = summarize(results, module.check_mode)
    diff = summary.pop("diff")
    result: dict[str, Any] = dict(summary, changed=bool(summary["released"]), writes=client.write_count)
    if module._diff:
        result["diff"] = diff
    for entry in summary["not_ours"]:
        module.warn(entry["reason"])
    if summary["missing"]:
        module.warn("no such node: " + ", ".join(summary["missing"]))
    return result


def main() -> None:
    module = api_module(argument_spec())
    exit_with_result(module, run, failure_message)


if __name__ == "__main__":
    main()
