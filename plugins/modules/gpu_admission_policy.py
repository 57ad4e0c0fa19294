#!/usr/bin/python
# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_admission_policy
short_description: Stop GPU bypasses at admission with ValidatingAdmissionPolicy, generated from the validator's rules
description:
  - Generates, from the rule table of M(kubegpu.scheduling.gpu_pod_validate), a
    C(ValidatingAdmissionPolicy) for the error rules that admission can decide and one for the warning
    rules, and their bindings, which leave out the exempt namespaces; optionally a
    C(MutatingAdmissionPolicy) that sets C(NVIDIA_VISIBLE_DEVICES=void) on every container that
    requests no GPU in any form (limits or DRA claims) and names no device variable in its own C(env).
  - The policies match Pods (CREATE), C(pods/ephemeralcontainers) (UPDATE, as C(kubectl debug) sends),
    and Deployments, StatefulSets, DaemonSets, ReplicaSets, Jobs and CronJobs (CREATE and UPDATE). A
    denial names the rule id, the container and the remedy.
  - They also match (CREATE and UPDATE) the custom-resource kinds whose templates are pod templates, at
    the versions the live audit reads, C(kubeflow.org) PyTorchJob, TFJob, MPIJob, XGBoostJob, PaddleJob and
    JAXJob; C(trainer.kubeflow.org) TrainingRuntime and ClusterTrainingRuntime; C(jobset.x-k8s.io) JobSet;
    C(leaderworkerset.x-k8s.io) LeaderWorkerSet; C(ray.io) RayCluster, RayJob and RayService;
    C(batch.volcano.sh) Job. A kind the cluster does not serve matches nothing.
  - Not matched, as their templates are not pod templates (admission sees the pods they make, and the live
    audit of M(kubegpu.scheduling.gpu_pod_validate) reads them), C(argoproj.io) Workflow, WorkflowTemplate,
    ClusterWorkflowTemplate and CronWorkflow; C(serving.kserve.io) InferenceService, ServingRuntime,
    ClusterServingRuntime, LLMInferenceService and LLMInferenceServiceConfig (inline pod specs);
    C(nvidia.com) DynamoGraphDeployment and DynamoComponentDeployment (v1alpha1 builds the main container
    from the component's fields); C(trainer.kubeflow.org) TrainJob.
  - Applies them with server-side apply and the field manager C(kubegpu-admission-policy), idempotently (each
    object is read and compared with its rendering first, and only objects that would change are sent), or
    renders them to files for GitOps with O(render_to), without contacting the cluster.
  - Every object carries the label C(app.kubernetes.io/managed-by=kubegpu.scheduling) and the digest of its
    rendering. When an object of one of the module's names exists without that label, nothing is written and
    the task fails naming it; O(state=absent) deletes only objects with the label and names the others in
    RV(left_alone).
  - Reports the API server's type-checking warnings of each policy and the actions it is in force with.
  - Admission cannot see an image's environment nor the contents of C(envFrom) sources; the mutating
    policy (O(mutating=true)) neutralises both, the live audit of M(kubegpu.scheduling.gpu_pod_validate)
    reports them.
version_added: 1.0.0
author:
  - kubegpu.scheduling contributors (@kubegpu)
extends_documentation_fragment:
  - kubegpu.scheduling.connection
attributes:
  check_mode:
    support: full
    description: Only reads are sent; the result says what would change.
  diff_mode:
    support: full
    description: Shows each changed object before (the cluster's values of the fields the module sets) and after.
options:
  state:
    description:
      - V(present) applies (or renders) the objects; V(absent) deletes every object the module makes.
    type: str
    choices: [present, absent]
    default: present
  enforcement:
    description:
      - How the error rules are enforced. V(warn) binds them with C(Warn) and C(Audit) (the first step of a
        rollout), V(deny) with C(Deny) and C(Audit) once the audit is clean.
    type: str
    choices: [warn, deny]
    default: warn
  warnings_enforcement:
    description:
      - How the warning rules are enforced, as O(enforcement).
    type: str
    choices: [warn, deny]
    default: warn
  exempt_namespaces:
    description:
      - Namespaces the bindings leave out (their namespace selector), where the GPU system components run.
      - Defaults to the namespaces of the GPU system components the collection knows (device plugins, GPU
        Operator, DRA drivers, DCGM exporter, ...), returned in RV(exempt_namespaces).
    type: list
    elements: str
  extra_exempt_namespaces:
    description:
      - More exempt namespaces, left out by the bindings as well, beside O(exempt_namespaces) or its default.
      - The exemptions are in the bindings' namespace selector, not in a params C(ConfigMap), since the API
        server stops following a C(ConfigMap) paramKind once no binding has used it for a moment (as a removal
        and reinstall does) and then judges by params as they were (kubernetes/kubernetes#130887).
    type: list
    elements: str
    default: []
  mutating:
    description:
      - Also make the C(MutatingAdmissionPolicy) that sets C(NVIDIA_VISIBLE_DEVICES=void) on containers and
        init containers that request no GPU, outside the exempt namespaces (Kubernetes 1.36 or later).
      - It leaves alone a container whose own C(env) sets C(NVIDIA_VISIBLE_DEVICES) or a MIG device variable
        (by value or C(valueFrom)), since mutating policies run before validating ones, and the validating policies
        refuse (or warn about) those with their rule's message, which a rewrite would hide.
      - With V(false) and O(state=present), a mutating policy made before is removed.
    type: bool
    default: false
  render_to:
    description:
      - A directory to write the objects to, one YAML file each, instead of applying them.
    type: path
notes:
  - Needs C(get), C(create), C(patch) and C(delete) on C(validatingadmissionpolicies) and
    C(validatingadmissionpolicybindings) (and the mutating ones with O(mutating=true)); C(create) because the first
    server-side apply of an object creates it. The ClusterRole C(kubegpu-admission-policy) of
    C(rbac/kubegpu-writer.yaml) grants exactly these.
  - Exemptions go by namespace, never by a controller's service account, which would exempt everyone who
    can create the workload.
requirements:
  - kubernetes >= 30.1.0
"""

EXAMPLES = r"""
- name: Warn about GPU bypasses first
  kubegpu.scheduling.gpu_admission_policy:
    enforcement: warn

- name: Deny them once the audit is clean
  kubegpu.scheduling.gpu_admission_policy:
    enforcement: deny
    extra_exempt_namespaces: [ml-platform]
  register: admission

- name: Write the objects for a GitOps repository
  kubegpu.scheduling.gpu_admission_policy:
    enforcement: deny
    render_to: "{{ playbook_dir }}/gitops/admission"

- name: Remove everything
  kubegpu.scheduling.gpu_admission_policy:
    state: absent
"""

RETURN = r"""
objects:
  description: The objects the module manages, as C(Kind [namespace/]name).
  returned: always
  type: list
  elements: str
changes:
  description: The objects created, changed or deleted (or that would be, in check mode).
  returned: always
  type: list
  elements: str
exempt_namespaces:
  description: The namespaces the bindings leave out.
  returned: always
  type: list
  elements: str
in_force:
  description: Per policy, the validation actions it is bound with; empty when it is not in force.
  returned: when applied
  type: dict
type_checking:
  description: Per policy, the API server's type-checking warnings (empty when there are none).
  returned: when applied
  type: dict
files:
  description: The files written (or that would be) with O(render_to).
  returned: with O(render_to)
  type: list
  elements: str
left_alone:
  description: With O(state=absent), objects of the module's names that the collection did not make, left as they are.
  returned: with O(state=absent)
  type: list
  elements: str
not_ours:
  description: The objects of the module's names that exist without the collection's label, when the task fails on them.
  returned: when the task fails on them
  type: list
  elements: str
changed:
  description: Whether an object (or file, with O(render_to)) was created, changed or deleted (or would be, in check mode).
  returned: always
  type: bool
writes:
  description: The write requests sent to the API server; 0 in check mode, with O(render_to), and when nothing changes.
  returned: always
  type: int
api_requests:
  description: The API requests sent, reads and writes, retries included.
  returned: always
  type: int
diff:
  description:
    - Per object that changes, the cluster's values of the fields the module sets before, and the module's after;
      of an object deleted, what it was.
    - Ansible's diff callback prints it and removes it from the result.
  returned: in diff mode
  type: list
  elements: dict
"""

from typing import Any  # noqa: E402

from ansible_collections.kubegpu.scheduling.plugins.module_utils.admission.policy import ENFORCEMENTS  # noqa: E402
from ansible_collections.kubegpu.scheduling.plugins.module_utils.admission.run import rendered, run  # noqa: E402
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.module import (  # noqa: E402
    with_connection_options,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.module import run_write_module  # noqa: E402


def argument_spec() -> dict[str, Any]:
    return with_connection_options(
        dict(
            state=dict(type="str", choices=["present", "absent"], default="present"),
            enforcement=dict(type="str", choices=list(ENFORCEMENTS), default="warn"),
            warnings_enforcement=dict(type="str", choices=list(ENFORCEMENTS), default="warn"),
            exempt_namespaces=dict(type="list", elements="str"),
            extra_exempt_namespaces=dict(type="list", elements="str", default=[]),
            mutating=dict(type="bool", default=False),
            render_to=dict(type="path"),
        )
    )


def main() -> None:
    run_write_module(argument_spec(), run, offline=rendered)


if __name__ == "__main__":
    main()
