# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_device_plugin_validate
short_description: Verify the GPU device plugin and the driver on every GPU node
version_added: 1.0.0
description:
  - Checks that every GPU node can hand out its GPUs to the scheduler, and says for each node what
    is wrong and what to do, as the troubleshooting of the Alibaba ACK GPU scheduling guide does.
  - B(DaemonSets.) Each device-plugin DaemonSet has processed its latest spec
    (C(status.observedGeneration >= metadata.generation)), has as many pods scheduled, updated,
    Ready and available as it desires, and none misscheduled. A DaemonSet that desires no pod while
    nodes look like GPU nodes fails, with the labels its nodeSelector or node affinity misses on them.
  - B(Deployments recognised.) NVIDIA's static DaemonSet (pods C(name=nvidia-device-plugin-ds)), its
    Helm chart (C(app.kubernetes.io/name=nvidia-device-plugin)), the GPU Operator
    (C(app=nvidia-device-plugin-daemonset)), ACK's ack-nvidia-device-plugin DaemonSet and ACK's static
    pods (C(component=nvidia-device-plugin); static pods by their mirror-pod annotations), and Google's
    plugin on GKE and Kubespray (C(k8s-app=nvidia-gpu-device-plugin)).
  - B(GPU nodes.) A node is a GPU node when its labels name a GPU model, say a GPU is present or count
    GPUs, or its capacity has one of O(resource_names). Each has exactly one Ready device-plugin pod,
    capacity of O(resource_names) above zero, allocatable equal to capacity, and the GPU count its labels
    state (a warning when they differ).
  - B(GPUs through DRA.) NVIDIA's DRA driver for GPUs is the other way a node's GPUs reach the scheduler. Its
    kubelet-plugin DaemonSet (pods C(nvidia-dra-driver-gpu-component=kubelet-plugin), or
    C(dra-driver-nvidia-gpu-component=kubelet-plugin) from the kubernetes-sigs chart) publishes each node's GPUs
    as ResourceSlices of driver C(gpu.nvidia.com). A node with such slices, or with a kubelet-plugin pod, is a DRA
    GPU node, where its plugin pod runs and is Ready, and slices name it. When it has no device-plugin pod and no
    capacity of O(resource_names), the device-plugin checks are not made on it, so a healthy DRA node has no finding.
    The driver's DaemonSets are checked as the plugin's are, and listed in RV(dra_daemonsets).
  - B(GPU hosts.) With O(host_facts), the driver is found and C(nvidia-smi) works on each host, the
    host's GPU count matches its node's capacity, and the NVIDIA Container Toolkit hardening settings
    are reported (as warnings, or errors with O(require_hardening=true)).
  - Reads the cluster with a fixed number of list calls, whatever the number of nodes, each paginated
    with C(limit)/C(continue) - one for DaemonSets (all namespaces, or those in O(device_plugin.namespaces)
    or named in O(daemonsets)), one for nodes, one for ResourceSlices, and one per device-plugin pod selector
    and per DRA kubelet-plugin DaemonSet found (or per kubelet-plugin selector, when slices are published
    and no such DaemonSet was found). A cluster that does not serve C(resource.k8s.io/v1), or a reader not
    allowed to list ResourceSlices, gets an V(info) finding and the checks of the device plugin alone.
  - Fails with the report when anything is wrong (any finding of severity C(error)), or at the severity
    O(fail_on) names; with O(fail_on=never) it only reports.
author:
  - kubegpu.scheduling contributors (@kubegpu)
extends_documentation_fragment:
  - kubegpu.scheduling.options.fail_on
  - kubegpu.scheduling.read_only
  - kubegpu.scheduling.connection
options:
  daemonsets:
    description:
      - The device-plugin DaemonSets to check, each by O(daemonsets[].namespace) and O(daemonsets[].name),
        or by O(daemonsets[].label_selector) (matched against the DaemonSets' labels and their pod template
        labels). Each entry that finds no DaemonSet is an error.
      - When not set or empty, every DaemonSet whose pod template matches one of O(device_plugin.label_selectors) is
        checked, in any namespace (or in O(device_plugin.namespaces)).
    type: list
    elements: dict
    suboptions:
      namespace:
        description:
          - The namespace; required with O(daemonsets[].name). With a label selector, limits it to this namespace.
        type: str
      name:
        description:
          - The DaemonSet name, for example V(nvidia-device-plugin-daemonset).
        type: str
      label_selector:
        description:
          - A label selector, for example V(app.kubernetes.io/name=nvidia-device-plugin).
        type: str
  device_plugin:
    description:
      - How to find device-plugin pods and, when O(daemonsets) is not set, their DaemonSets.
    type: dict
    suboptions:
      namespaces:
        description:
          - Only look in these namespaces. Default is all namespaces.
        type: list
        elements: str
      label_selectors:
        description:
          - Pod label selectors of the device plugin. The default covers NVIDIA's static DaemonSet
            (V(name=nvidia-device-plugin-ds)), its Helm chart (V(app.kubernetes.io/name=nvidia-device-plugin)),
            the GPU Operator (V(app=nvidia-device-plugin-daemonset)), ACK's DaemonSet and static pods
            (V(component=nvidia-device-plugin)) and Google's plugin (V(k8s-app=nvidia-gpu-device-plugin)).
          - The pods of each checked DaemonSet are found by its own selector as well.
        type: list
        elements: str
  host_facts:
    description:
      - Results of M(kubegpu.scheduling.gpu_host_facts) keyed by host name, to fold in the driver check.
        A host is matched to the node of the same name, or of the same first DNS label.
      - A value that is a failed or unreachable task result is reported as an error on that host.
    type: dict
  report_only:
    description:
      - Never fail; return the verdict and the report only. V(true) is the same as O(fail_on=never).
      - Deprecated, removed in version 2.0.0 of kubegpu.scheduling; use O(fail_on=never) instead.
    type: bool
  require_hardening:
    description:
      - Report NVIDIA Container Toolkit settings that let unprivileged pods take GPUs through
        C(NVIDIA_VISIBLE_DEVICES) as errors rather than warnings.
    type: bool
    default: false
  resource_names:
    description:
      - The extended resources the device plugin advertises, that count as whole GPUs. MIG resources
        C(nvidia.com/mig-*) count too.
      - The first name is the one findings speak of.
      - The alias C(resource_name), one resource as a string, is deprecated and goes in 2.0.0.
    type: list
    elements: str
    default: [nvidia.com/gpu]
    aliases: [resource_name]
notes:
  - Needs C(list) on C(daemonsets), C(nodes) and C(pods), and on C(resourceslices) (group C(resource.k8s.io))
    to check DRA nodes.
  - Right after a kubelet restart a node's GPU capacity is 0 until the plugin registers again; use
    C(retries) and C(until) on the task to allow for that.
seealso:
  - module: kubegpu.scheduling.gpu_host_facts
  - name: Alibaba ACK, use the default Kubernetes GPU scheduling
    description: The guide whose troubleshooting the findings follow.
    link: https://www.alibabacloud.com/help/en/ack/ack-managed-and-ack-dedicated/user-guide/use-gpu-scheduling-in-ack-clusters
"""

EXAMPLES = r"""
- name: Check the device plugin on every GPU node
  kubegpu.scheduling.gpu_device_plugin_validate:
    kubeconfig: ~/.kube/config

- name: Check the GPU Operator's device plugin, and report only
  kubegpu.scheduling.gpu_device_plugin_validate:
    daemonsets:
      - namespace: gpu-operator
        name: nvidia-device-plugin-daemonset
    fail_on: never
  register: plugin_check

- name: Show the report
  ansible.builtin.debug:
    msg: "{{ plugin_check.report }}"

- name: Gather driver facts on the GPU hosts
  kubegpu.scheduling.gpu_host_facts:
  delegate_to: "{{ item }}"
  loop: "{{ groups['gpu_hosts'] }}"
  register: host_results

- name: Check the plugin and the driver on every GPU host
  kubegpu.scheduling.gpu_device_plugin_validate:
    host_facts: "{{ dict(host_results.results | map(attribute='item') | zip(host_results.results)) }}"
    require_hardening: true
"""

RETURN = r"""
healthy:
  description: Whether no finding has severity C(error).
  returned: always
  type: bool
  sample: false
deployments:
  description: The deployments of the device plugin found.
  returned: always
  type: list
  elements: dict
  contains:
    key:
      description: >-
        V(nvidia-static), V(nvidia-helm), V(gpu-operator), V(ack-managed), V(ack-static), V(gke), V(custom), or for
        the kubelet plugin of NVIDIA's DRA driver V(nvidia-dra-driver) or V(dra-driver-nvidia-gpu).
      type: str
    title:
      description: A readable name.
      type: str
    daemonsets:
      description: Its DaemonSets, as C(namespace/name).
      type: list
      elements: str
    static_pods:
      description: The number of static (mirror) pods.
      type: int
  sample:
    - key: nvidia-static
      title: NVIDIA device plugin, static DaemonSet
      daemonsets: [kube-system/nvidia-device-plugin-daemonset]
      static_pods: 0
daemonsets:
  description: Status of each checked DaemonSet.
  returned: always
  type: list
  elements: dict
  sample:
    - namespace: kube-system
      name: nvidia-device-plugin-daemonset
      deployment: nvidia-static
      generation: 1
      observed_generation: 1
      desired: 7
      current: 7
      updated: 7
      ready: 7
      available: 7
      misscheduled: 0
      node_selector: {nvidia.com/gpu.deploy.device-plugin: "true"}
      healthy: true
      problems: []
dra_daemonsets:
  description: Status of each kubelet-plugin DaemonSet of NVIDIA's DRA driver, in the shape of RV(daemonsets).
  returned: always
  type: list
  elements: dict
  sample:
    - namespace: nvidia-dra-driver-gpu
      name: nvidia-dra-driver-gpu-kubelet-plugin
      deployment: nvidia-dra-driver
      generation: 1
      observed_generation: 1
      desired: 2
      current: 2
      updated: 2
      ready: 2
      available: 2
      misscheduled: 0
      node_selector: {nvidia.com/dra-kubelet-plugin: "true"}
      healthy: true
      problems: []
nodes:
  description: The verdict for each GPU node.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: The node name.
      type: str
    ready:
      description: Whether the node is Ready.
      type: bool
    capacity:
      description: GPU capacity (O(resource_names) plus MIG resources).
      type: int
    allocatable:
      description: Allocatable GPUs.
      type: int
    label_gpu_count:
      description: The GPU count the node's labels state, if any.
      type: int
    plugin_pods:
      description: The device-plugin pods bound to the node, with C(pod), C(ready), C(phase), C(reason),
        C(restarts), C(static) and C(deployment).
      type: list
      elements: dict
    plugin_ready:
      description: Whether exactly one device-plugin pod runs there and it is Ready.
      type: bool
    host:
      description: What the host facts say about the driver, when given for this node.
      type: dict
    gpu_sources:
      description: How the node's GPUs reach the scheduler, V(device_plugin) and V(dra).
      type: list
      elements: str
    dra:
      description: >-
        The DRA kubelet-plugin pods on the node (C(kubelet_plugin_pods)), whether one is Ready
        (C(kubelet_plugin_ready)), and how many ResourceSlices name it and GPU devices they publish.
      type: dict
    healthy:
      description: Whether no finding of severity C(error) is about this node.
      type: bool
    problems:
      description: The kinds of the findings about this node.
      type: list
      elements: str
  sample:
    - name: gfd-a100-noplugin
      ready: true
      capacity: 0
      allocatable: 0
      label_gpu_count: 8
      plugin_pods: []
      plugin_ready: false
      host: null
      healthy: false
      problems: [no_device_plugin_pod, no_gpu_capacity]
      gpu_sources: [device_plugin]
      dra: {kubelet_plugin_pods: [], kubelet_plugin_ready: false, slices: 0, devices: 0}
findings:
  description: Everything found wrong, errors first.
  returned: always
  type: list
  elements: dict
  sample:
    - id: device_plugin.no_device_plugin_pod
      severity: error
      title: no device-plugin pod
      message: no device-plugin pod runs on this GPU node
      remedy: >-
        the DaemonSet kube-system/nvidia-device-plugin-daemonset does not select this node: its nodeSelector
        requires nvidia.com/gpu.deploy.device-plugin=true. Fix: kubectl label node gfd-a100-noplugin
        nvidia.com/gpu.deploy.device-plugin=true --overwrite
      where:
        node: gfd-a100-noplugin
        subject: node gfd-a100-noplugin
      kind: no_device_plugin_pod
      node: gfd-a100-noplugin
      subject: node gfd-a100-noplugin
      problem: no device-plugin pod runs on this GPU node
  contains:
    id: {description: "The registry id: a validator rule's code (V(KGPU101)), any other kind C(<check>.<name>)
        (V(device_plugin.no_gpu_capacity)); docs/findings.md lists them all.", type: str}
    severity: {description: "V(error), V(warning) or V(info): one scale for every check.", type: str}
    title: {description: "What the kind is, in a line.", type: str}
    message: {description: "What was found here.", type: str}
    remedy: {description: "What to do.", type: str}
    where: {description: "The places that apply, of C(node), C(device), C(pool), C(object) (C(Kind namespace/name)), C(subject), C(pod),
        C(config), C(source), C(document), C(path), C(line), C(container).", type: dict}
    kind:
      description:
        - "Deprecated, removed in 2.0.0 (use C(id)): the name the kind was declared with (docs/findings.md)."
        - "Kinds: V(no_gpu_nodes), V(no_device_plugin_deployed), V(several_device_plugin_deployments),
          V(dra_objects_not_readable), V(daemonset_missing), V(daemonset_generation_not_observed),
          V(daemonset_selects_no_node), V(daemonset_pods_not_scheduled),
          V(daemonset_rollout_incomplete), V(daemonset_pods_not_ready), V(daemonset_pods_not_available),
          V(daemonset_pods_misscheduled), V(node_not_ready), V(no_device_plugin_pod),
          V(several_device_plugin_pods), V(device_plugin_not_ready), V(device_plugin_restarting),
          V(no_gpu_capacity), V(allocatable_below_capacity), V(gpu_count_differs_from_labels),
          V(no_dra_kubelet_plugin_pod), V(dra_kubelet_plugin_not_ready), V(dra_no_resource_slices),
          V(gpus_served_by_device_plugin_and_dra), V(host_facts_failed), V(host_not_a_node), V(host_gpus_not_advertised), V(driver_not_found),
          V(nvidia_smi_failed), V(host_gpu_count_differs_from_capacity), V(toolkit_config_not_found),
          V(toolkit_config_unreadable), V(toolkit_accepts_visible_devices_env),
          V(toolkit_volume_mounts_disabled) (docs/findings.md has their severities and titles)."
      type: str
    node: {description: "Deprecated, removed in 2.0.0 (use C(where.node)): the node, or null.", type: str}
    subject: {description: "Deprecated, removed in 2.0.0 (use C(where.subject)): what the finding is about.", type: str}
    problem: {description: "Deprecated, removed in 2.0.0 (use C(message)): what is wrong.", type: str}
counts:
  description: >-
    GPU nodes, DaemonSets and plugin pods seen, DRA GPU nodes, DRA DaemonSets and kubelet-plugin pods, and
    findings per severity.
  returned: always
  type: dict
  sample: {gpu_nodes: 10, daemonsets: 1, plugin_pods: 7, dra_nodes: 2, dra_daemonsets: 1, dra_plugin_pods: 2,
           error: 3, warning: 0, info: 0}
report:
  description:
    - The readable report as a list of lines - which node, what is wrong, what to do.
    - One line per item, as every module's C(report) is (it was one string before).
  returned: always
  type: list
  elements: str
  sample:
    - "GPU device plugin check FAILED: 1 error, 0 warnings (2 GPU nodes, 1 DaemonSet, 1 plugin pod)"
    - "Deployment: NVIDIA device plugin (upstream)"
api_requests:
  description: The number of API requests sent, pages and retries included.
  returned: always
  type: int
  sample: 7
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.reads import read_cluster
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.targets import (
    check_options,
    daemonset_targets,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.verdict import evaluate
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.fail_on import (
    REPORT_ONLY_OPTION,
    effective_fail_on,
    fails,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import CheckFailed
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.module import (
    api_module,
    errors_fail,
    module_client,
    with_connection_options,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.options.groups import (
    FAIL_ON,
    GPU_RESOURCES,
    module_options,
)


def argument_spec() -> dict[str, Any]:
    spec = module_options(
        dict(
            daemonsets={
                "type": "list",
                "elements": "dict",
                "options": {
                    "namespace": {"type": "str"},
                    "name": {"type": "str"},
                    "label_selector": {"type": "str"},
                },
            },
            device_plugin={
                "type": "dict",
                "options": {
                    "namespaces": {"type": "list", "elements": "str"},
                    "label_selectors": {"type": "list", "elements": "str"},
                },
            },
            host_facts={"type": "dict"},
            report_only=dict(REPORT_ONLY_OPTION),
            require_hardening={"type": "bool", "default": False},
        ),
        (GPU_RESOURCES, FAIL_ON),
        renamed={"resource_name": "resource_names"},
    )
    return with_connection_options(spec)


def run(module: AnsibleModule) -> dict[str, Any]:
    params = module.params
    options = check_options(params["resource_names"], params["device_plugin"])
    targets = daemonset_targets(params["daemonsets"])
    client = module_client(module)
    read = read_cluster(client, targets, options)
    result = evaluate(read, options, params["host_facts"], params["require_hardening"])
    result["api_requests"] = client.request_count
    return result


def main() -> None:
    module = api_module(argument_spec())
    with errors_fail(module):
        result = run(module)
        fail_on = effective_fail_on(module.params)
        if any(fails(f["severity"], fail_on) for f in result["findings"]):
            raise CheckFailed("\n".join(result["report"]), result=dict(changed=False, **result))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
