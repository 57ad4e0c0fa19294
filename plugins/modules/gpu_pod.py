#!/usr/bin/python
# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_pod
short_description: Run one GPU pod idempotently, wait for it, and read its logs
description:
  - Creates a Pod from O(definition) unless an identical one exists, waits until it is scheduled
    and running, reads its logs and reports the node and GPU model it landed on.
  - A pod's spec cannot be changed in place. When the requested manifest differs from the one the
    existing pod was created from, the pod is deleted and created again only with O(recreate=true);
    otherwise the task fails and leaves the pod as it is.
  - Whether the existing pod matches is decided by a digest of the requested manifest kept in the
    C(kubegpu.io/manifest-sha256) annotation, so server-side defaults never count as a change.
  - Validate the manifest first with M(kubegpu.scheduling.gpu_pod_validate); the
    C(sample_workload) role does both.
version_added: 1.0.0
author:
  - kubegpu.scheduling contributors (@kubegpu)
extends_documentation_fragment:
  - kubegpu.scheduling.connection
attributes:
  check_mode:
    support: full
    description: Nothing is sent to the cluster but reads; the result says what would change.
  diff_mode:
    support: full
    description: Shows the manifest before and after.
options:
  definition:
    description:
      - The Pod, as a mapping (C(apiVersion=v1), C(kind=Pod), C(metadata.name), C(spec)).
      - Required when O(state=present).
    type: dict
  name:
    description:
      - Name of the pod to remove when O(state=absent) and no O(definition) is given.
    type: str
  namespace:
    description:
      - Namespace of the pod. Defaults to the definition's namespace, then C(default).
    type: str
  state:
    description:
      - V(present) creates the pod (or keeps an identical one); V(absent) deletes it.
    type: str
    choices: [present, absent]
    default: present
  create_namespace:
    description:
      - Create the namespace when it does not exist (with O(state=present)).
    type: bool
    default: false
  recreate:
    description:
      - Delete and create the pod again when its manifest changed.
    type: bool
    default: false
  wait:
    description:
      - Wait until the pod runs (or completes), and until it is gone when O(state=absent).
    type: bool
    default: true
  wait_timeout:
    description:
      - "Seconds to wait. On timeout the message names the scheduler's reason, for example
        C(0/9 nodes are available: 9 Insufficient nvidia.com/gpu)."
    type: int
    default: 120
  logs:
    description:
      - Read the pod's logs once it runs and return them in RV(logs).
    type: bool
    default: true
  log_lines:
    description:
      - How many lines from the end of the log to return.
    type: int
    default: 100
  model_label_keys:
    description:
      - Node label keys that name the GPU model, in order, used to report RV(model).
      - Defaults to the keys M(kubegpu.scheduling.gpu_node_facts) uses.
    type: list
    elements: str
notes:
  - Needs C(get), C(create) and C(delete) on C(pods), C(get) on C(pods/log) in the namespace,
    C(get) on C(nodes), and C(get) and C(create) on C(namespaces) with O(create_namespace=true).
requirements:
  - kubernetes >= 30.1.0
"""

EXAMPLES = r"""
- name: Run the TensorFlow MNIST sample on an NVIDIA V100 node
  kubegpu.scheduling.gpu_pod:
    definition:
      apiVersion: v1
      kind: Pod
      metadata:
        name: tensorflow-mnist
        namespace: gpu-samples
      spec:
        restartPolicy: Never
        nodeSelector:
          accelerator: Tesla-V100-SXM2-16GB
        containers:
          - name: tensorflow-mnist
            image: registry.cn-beijing.aliyuncs.com/acs/tensorflow-mnist-sample:v1.5
            command: [python, tensorflow-sample-code/tfjob/docker/mnist/main.py, --max_steps=1000]
            resources:
              limits:
                nvidia.com/gpu: 1
  register: sample

- name: Show where it ran
  ansible.builtin.debug:
    msg: "{{ sample.node }} ({{ sample.model }}): {{ sample.logs | last }}"

- name: Remove the sample
  kubegpu.scheduling.gpu_pod:
    name: tensorflow-mnist
    namespace: gpu-samples
    state: absent
"""

RETURN = r"""
action:
  description: What was done.
  returned: always
  type: str
  sample: create
  choices: [create, unchanged, recreate, delete, absent]
phase:
  description: The pod's phase when the task ended.
  returned: when O(state=present)
  type: str
  sample: Running
node:
  description: The node the pod was scheduled to.
  returned: when O(state=present)
  type: str
  sample: ack-v100
model:
  description: The GPU model the node's labels name.
  returned: when O(state=present)
  type: str
  sample: Tesla-V100-SXM2-16GB
model_source:
  description: The node label the model came from.
  returned: when O(state=present)
  type: str
  sample: aliyun.accelerator/nvidia_name
logs:
  description:
    - The last O(log_lines) lines of the pod's log.
    - Empty, with a warning, when the node cannot serve them; a denied read (no C(get) on C(pods/log)) fails the task.
  returned: when O(state=present) and O(logs=true) and the pod ran
  type: list
  elements: str
  sample: ["Accuracy at step 999: 0.9703"]
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import (  # noqa: E402
    CheckFailed,
    OptionError,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.module import (  # noqa: E402
    api_module,
    errors_fail,
    module_client,
    with_connection_options,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.pod import lifecycle, outcome  # noqa: E402


def argument_spec() -> dict:
    return with_connection_options(
        dict(
            definition={"type": "dict"},
            name={"type": "str"},
            namespace={"type": "str"},
            state={"type": "str", "choices": ["present", "absent"], "default": "present"},
            create_namespace={"type": "bool", "default": False},
            recreate={"type": "bool", "default": False},
            wait={"type": "bool", "default": True},
            wait_timeout={"type": "int", "default": 120},
            logs={"type": "bool", "default": True},
            log_lines={"type": "int", "default": 100},
            model_label_keys={"type": "list", "elements": "str", "no_log": False},
        )
    )


def remove(module: AnsibleModule, client) -> dict:
    params = module.params
    definition = params["definition"] or {}
    name = params["name"] or (definition.get("metadata") or {}).get("name")
    if not name:
        raise OptionError("state=absent needs name or definition.metadata.name")
    namespace = params["namespace"] or (definition.get("metadata") or {}).get("namespace") or "default"
    existing = lifecycle.read_pod(client, namespace, name)
    if existing is None:
        return {"changed": False, "action": "absent"}
    if not module.check_mode:
        if params["wait"]:
            lifecycle.delete_and_wait(client, namespace, name, params["wait_timeout"])
        else:
            client.delete(lifecycle.pod_path(namespace, name))
    return {"changed": True, "action": "delete"}


def diff_of(existing: dict | None, definition: dict) -> dict:
    namespace, name = definition["metadata"]["namespace"], definition["metadata"]["name"]
    before = (existing or {}).get("metadata", {}).get("annotations", {}).get(lifecycle.DIGEST_ANNOTATION)
    return {
        "before_header": f"pod {namespace}/{name}",
        "after_header": f"pod {namespace}/{name}",
        "before": {"manifest-sha256": before} if existing else {},
        "after": definition,
    }


def apply(module: AnsibleModule, client) -> dict:
    params = module.params
    definition = lifecycle.checked_definition(params["definition"], params["namespace"])
    name, namespace = definition["metadata"]["name"], definition["metadata"]["namespace"]
    digest = lifecycle.manifest_digest(definition)
    existing = lifecycle.read_pod(client, namespace, name)
    action = lifecycle.plan_present(existing, digest, params["recreate"])
    if action == "conflict":
        raise CheckFailed(
            f"pod {namespace}/{name} exists with a different manifest and a pod's spec cannot be changed; "
            "set recreate=true to delete and create it again",
            result={"action": action},
        )
    result: dict = {"changed": action != "unchanged", "action": action}
    if module._diff and action != "unchanged":
        result["diff"] = diff_of(existing, definition)
    if module.check_mode:
        return result
    if params["create_namespace"] and action == "create":
        lifecycle.ensure_namespace(client, namespace)
    if action == "recreate":
        lifecycle.delete_and_wait(client, namespace, name, params["wait_timeout"])
    if action in ("create", "recreate"):
        lifecycle.create_pod(client, namespace, lifecycle.with_digest(definition, digest), params["wait_timeout"])
    watch = outcome.Watch(
        params["wait"], params["wait_timeout"], params["logs"], params["log_lines"], params["model_label_keys"]
    )
    return outcome.follow(client, definition, watch, result, module.warn)


def main() -> None:
    module = api_module(
        argument_spec(),
        required_if=[("state", "present", ["definition"]), ("state", "absent", ["name", "definition"], True)],
    )
    with errors_fail(module):
        client = module_client(module)
        result = apply(module, client) if module.params["state"] == "present" else remove(module, client)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
