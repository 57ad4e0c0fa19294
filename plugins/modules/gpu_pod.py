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
  - "With O(wait), the task waits until the pod runs (or completes), and with O(state=absent) until it is gone,
    for up to O(wait_timeout) seconds. On timeout the message names the scheduler's reason, for example
    C(0/9 nodes are available: 9 Insufficient nvidia.com/gpu)."
  - Validate the manifest first with M(kubegpu.scheduling.gpu_pod_validate); the
    C(sample_workload) role does both.
version_added: 1.0.0
author:
  - kubegpu.scheduling contributors (@kubegpu)
extends_documentation_fragment:
  - kubegpu.scheduling.connection
  - kubegpu.scheduling.options.waiting
  - kubegpu.scheduling.model_labels
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
      - The Pod (C(apiVersion=v1), C(kind=Pod), C(metadata.name), C(spec)), as a mapping or as a YAML string
        that holds that one mapping.
      - Required when O(state=present).
    type: raw
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
changed:
  description: Whether the pod was created, recreated or deleted (or would be, in check mode).
  returned: always
  type: bool
writes:
  description: The write requests sent (creations and deletions); 0 in check mode and when nothing changes.
  returned: always
  type: int
api_requests:
  description: The API requests sent, reads and writes, retries included.
  returned: always
  type: int
diff:
  description:
    - The digest of the manifest the existing pod was created from before, and the requested manifest after.
    - Ansible's diff callback prints it and removes it from the result.
  returned: in diff mode, when the pod changes
  type: dict
"""

from typing import Any  # noqa: E402

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.module import (  # noqa: E402
    with_connection_options,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.options.groups import (  # noqa: E402
    GROUPS,
    MODEL_LABELS,
    SOURCES,
    WAITING,
    module_options,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.pod.run import run  # noqa: E402
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.module import run_write_module  # noqa: E402


def argument_spec() -> dict[str, Any]:
    own = dict(
        definition=dict(GROUPS[SOURCES]["definition"]),
        name={"type": "str"},
        namespace={"type": "str"},
        state={"type": "str", "choices": ["present", "absent"], "default": "present"},
        create_namespace={"type": "bool", "default": False},
        recreate={"type": "bool", "default": False},
        logs={"type": "bool", "default": True},
        log_lines={"type": "int", "default": 100},
    )
    return with_connection_options(module_options(own, (WAITING, MODEL_LABELS)))


def main() -> None:
    run_write_module(
        argument_spec(),
        run,
        required_if=[("state", "present", ["definition"]), ("state", "absent", ["name", "definition"], True)],
    )


if __name__ == "__main__":
    main()
