# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_device_plugin
short_description: Deploy NVIDIA's device plugin at a pinned release, its config checked before it reaches a node
version_added: 1.0.0
description:
  - Deploys the NVIDIA device plugin as NVIDIA publishes it, the static DaemonSet of a pinned release
    (C(deployments/static/nvidia-device-plugin.yml) of NVIDIA/k8s-device-plugin at the release's tag, with
    its toleration of C(nvidia.com/gpu:NoSchedule)), optionally GPU Feature Discovery's DaemonSet of the
    same release, and the plugin's config as a ConfigMap mounted as its C(--config-file).
  - The deployment sets the namespace, the nodes (O(node_selector)), the priority class, the update strategy
    (C(RollingUpdate) with O(max_unavailable)), and keeps the plugin off the nodes whose GPUs NVIDIA's DRA
    driver hands out (a node affinity C(NotIn) on O(dra_node_label)).
  - O(config) is checked first, offline, as M(kubegpu.scheduling.gpu_plugin_config_validate) checks it for the
    release deployed and for the static DaemonSet (which runs no MPS control daemon). A config with an
    error is refused and nothing is read from or written to the cluster.
  - Everything is read and decided before anything is written. Nothing is written when an object of the
    same name exists that the collection did not make (it carries no C(app.kubernetes.io/managed-by=kubegpu.scheduling)
    label), or when, on the nodes the plugin would run on, the device-plugin check of
    M(kubegpu.scheduling.gpu_device_plugin_validate) finds another device plugin (the GPU Operator's, a Helm
    release, ACK's, Google's, or a DaemonSet elsewhere).
  - Each object is compared with the cluster's first; only objects that would change are sent, with
    server-side apply and the field manager C(kubegpu-device-plugin). A rerun that changes nothing sends no
    write.
  - A change of release, config or options is rolled out node by node by the DaemonSet controller; with O(wait)
    the module then waits (up to O(wait_timeout) seconds) until every targeted node runs a Ready plugin pod of
    the current template and advertises GPU capacity again (the resources the config advertises).
  - O(state=absent) deletes the objects the module makes that carry the collection's label in O(namespace),
    and leaves anyone else's.
  - Finding kinds (RV(findings[].kind)), errors unless said otherwise. V(deploy_config_invalid),
    V(deploy_not_owned), V(deploy_already_served), V(deploy_no_target_nodes) (warning),
    V(deploy_rollout_incomplete).
author:
  - kubegpu.scheduling contributors (@kubegpu)
extends_documentation_fragment:
  - kubegpu.scheduling.connection
  - kubegpu.scheduling.options.waiting
options:
  state:
    description:
      - V(present) deploys; V(absent) removes what the module made.
    type: str
    choices: [present, absent]
    default: present
  version:
    description:
      - The release of the device plugin (and of GPU Feature Discovery).
    type: str
    choices: [v0.17.4, v0.18.2]
    default: v0.18.2
  namespace:
    description:
      - The namespace to deploy into. It must exist.
    type: str
    default: kube-system
  node_selector:
    description:
      - The labels of the nodes the plugin runs on (the DaemonSet's C(nodeSelector)).
      - Defaults to C(nvidia.com/gpu.present=true), the label GPU Feature Discovery's manifest selects GPU
        nodes by and the GPU Operator sets.
    type: dict
  dra_node_label:
    description:
      - Nodes where this label is V(true) are left out (NVIDIA's DRA driver serves their GPUs).
      - An empty string leaves out no node.
    type: str
    default: nvidia.com/dra-kubelet-plugin
  priority_class:
    description:
      - The pods' priority class; an empty string sets none.
    type: str
    default: system-node-critical
  max_unavailable:
    description:
      - How many targeted nodes (a number, or a percentage such as V(25%)) may be without a Ready plugin pod
        during a rollout.
    type: raw
    default: 1
  config:
    description:
      - The plugin's config file (C(version) V(v1)), as text or as a dictionary; none leaves the plugin's
        defaults (no sharing).
    type: raw
  feature_discovery:
    description:
      - Deploy GPU Feature Discovery's DaemonSet too, on the same nodes, reading the same config.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Reads and decides as a run does; sends no write and does not wait.
  diff_mode:
    support: full
    description: Per object that changes, the cluster's values of the fields the module sets, and the module's.
requirements:
  - PyYAML
notes:
  - Needs C(get) on C(namespaces); C(get), C(create), C(patch) and C(delete) on C(daemonsets) and C(configmaps) in
    O(namespace) (C(create) because the first server-side apply of an object creates it); C(list) on C(nodes),
    C(pods), C(daemonsets) and C(resourceslices) (the device-plugin check). The ClusterRoles C(kubegpu-device-plugin)
    of C(rbac/kubegpu-writer.yaml) and C(kubegpu-reader) of C(rbac/kubegpu-reader.yaml) grant exactly these.
seealso:
  - module: kubegpu.scheduling.gpu_plugin_config_validate
  - module: kubegpu.scheduling.gpu_device_plugin_validate
  - name: NVIDIA device plugin, deployments/static
    description: The published manifests the module deploys.
    link: https://github.com/NVIDIA/k8s-device-plugin/tree/main/deployments/static
"""

EXAMPLES = r"""
- name: Deploy the device plugin on the GPU pool, time-slicing each GPU four ways
  kubegpu.scheduling.gpu_device_plugin:
    version: v0.18.2
    namespace: nvidia-device-plugin
    node_selector:
      example.com/gpu-pool: training
    config:
      version: v1
      sharing:
        timeSlicing:
          resources:
            - name: nvidia.com/gpu
              replicas: 4
  register: plugin

- name: Show what an upgrade would change, without writing
  kubegpu.scheduling.gpu_device_plugin:
    version: v0.18.2
    namespace: nvidia-device-plugin
  check_mode: true
  diff: true

- name: Remove what the module deployed
  kubegpu.scheduling.gpu_device_plugin:
    state: absent
    namespace: nvidia-device-plugin
"""

RETURN = r"""
changes:
  description: The objects created, changed or deleted (would be, in check mode), as C(Kind namespace/name).
  returned: always
  type: list
  elements: str
  sample: [ConfigMap nvidia-device-plugin/nvidia-device-plugin-config]
objects:
  description: Every object the deployment consists of.
  returned: with O(state=present)
  type: list
  elements: str
release:
  description: The release deployed.
  returned: with O(state=present)
  type: str
  sample: v0.18.2
image:
  description: The plugin's image.
  returned: with O(state=present)
  type: str
  sample: nvcr.io/nvidia/k8s-device-plugin:v0.18.2
targeted_nodes:
  description: The nodes the plugin's DaemonSet runs on.
  returned: with O(state=present)
  type: list
  elements: str
rollout:
  description: Whether every targeted node runs a Ready pod of the current template with its capacity back,
    and what is still waited for, one line per node.
  returned: with O(state=present) and O(wait), not in check mode
  type: dict
  sample: {done: true, waiting: []}
capacity:
  description:
    - Per targeted node, the GPUs its labels count (C(nvidia.com/gpu.count) and the like), and per resource the
      config advertises the capacity expected (GPUs x replicas) and found.
  returned: with O(state=present)
  type: list
  elements: dict
  sample:
    - node: gpu-0
      gpus: 2
      resources: {nvidia.com/gpu: {expected: 8, capacity: 8}}
      as_expected: true
config:
  description: What the plugin advertises with the config (sharing strategy, MIG strategy, shared resources).
  returned: with O(config)
  type: dict
findings:
  description: Why the module refused to apply, or what the rollout left undone.
  returned: when it fails on them
  type: list
  elements: dict
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
left_alone:
  description: With O(state=absent), objects of the module's names that the collection did not make.
  returned: with O(state=absent)
  type: list
  elements: str
changed:
  description: Whether an object was created, changed or deleted (or would be, in check mode).
  returned: always
  type: bool
writes:
  description: The write requests sent; 0 in check mode and when nothing changes.
  returned: always
  type: int
api_requests:
  description: The API requests sent, reads and writes, pages and retries included.
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

from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.reads import read_cluster  # noqa: E402
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.targets import (  # noqa: E402
    check_options,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import NVIDIA_GPU  # noqa: E402
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.module import (  # noqa: E402
    with_connection_options,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.options.groups import (  # noqa: E402
    WAITING,
    module_options,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.plugin_config.sources import (  # noqa: E402
    ConfigSet,
    check_set,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.plugin_deploy.manifests import (  # noqa: E402
    DEFAULT_DRA_NODE_LABEL,
    DEFAULT_MAX_UNAVAILABLE,
    DEFAULT_NAMESPACE,
    DEFAULT_PRIORITY_CLASS,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.plugin_deploy.releases import (  # noqa: E402
    DEFAULT_RELEASE,
    RELEASES,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.plugin_deploy.run import (  # noqa: E402
    CONFIG_NAME,
    Checks,
    runner,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.module import run_write_module  # noqa: E402


def argument_spec() -> dict[str, Any]:
    own = dict(
        state={"type": "str", "choices": ["present", "absent"], "default": "present"},
        version={"type": "str", "choices": list(RELEASES), "default": DEFAULT_RELEASE},
        namespace={"type": "str", "default": DEFAULT_NAMESPACE},
        node_selector={"type": "dict"},
        dra_node_label={"type": "str", "default": DEFAULT_DRA_NODE_LABEL},
        priority_class={"type": "str", "default": DEFAULT_PRIORITY_CLASS},
        max_unavailable={"type": "raw", "default": DEFAULT_MAX_UNAVAILABLE},
        config={"type": "raw"},
        feature_discovery={"type": "bool", "default": False},
    )
    return with_connection_options(module_options(own, (WAITING,)))


def config_verdict(text: str, version: str) -> dict[str, Any]:
    """The config check of gpu_plugin_config_validate, for the release and the static DaemonSet."""
    return check_set(ConfigSet({CONFIG_NAME: text}, None, CONFIG_NAME), version, static_manifest=True)


def plugin_pods(client: Any) -> list[dict[str, Any]]:
    """The device-plugin pods the check of gpu_device_plugin_validate finds."""
    return read_cluster(client, None, check_options(NVIDIA_GPU, None)).plugin_pods


def main() -> None:
    run_write_module(argument_spec(), runner(Checks(config_verdict, plugin_pods)))


if __name__ == "__main__":
    main()
