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
    (C(nvidia.com/gpu.count), C(aliyun.accelerator/nvidia_count)), its capacity has one of O(resource_names)
    or a MIG resource C(nvidia.com/mig-*), or it has GPUs through Dynamic Resource Allocation (ResourceSlices of
    NVIDIA's DRA driver C(gpu.nvidia.com), or a pod of its kubelet plugin, recognised by the labels its Helm chart
    gives it, C(nvidia-dra-driver-gpu-component=kubelet-plugin) or C(dra-driver-nvidia-gpu-component=kubelet-plugin)).
    Other nodes are left out.
  - Per GPU node, the model and the label it came from (on a DRA node without a model label, the
    C(productName) of its devices, spelled as GPU Feature Discovery spells it), the model as a valid label value,
    capacity, allocatable, unhealthy (capacity minus allocatable), allocated, free, the same per source
    (device plugin and DRA), Ready, schedulable, taints, the driver and CUDA versions GPU Feature Discovery labels
    give, ACK's scheduling mode, the device-plugin pod and whether it is Ready, the number of DRA devices and the
    tainted ones (or all, O(dra_devices=all)) with their model, UUID, memory, MIG profile and the claims that hold
    them, and the problems found, each with its reason.
  - B(Device plugin.) Capacity and allocatable are the node's O(resource_names) and MIG resources; allocated is the
    GPU limits of the pods bound to the node that have not finished.
  - B(DRA.) Capacity is the devices the newest generation of each pool publishes, a physical GPU counted once
    (devices that share a counter set, and the MIG devices of a GPU also published whole, are alternatives, not a
    sum; a static MIG device counts as one, as C(nvidia.com/mig-*) does); allocatable leaves out devices tainted
    V(NoSchedule) or V(NoExecute); allocated is the devices the claims' C(status.allocation.devices.results) name
    (results with C(adminAccess) do not hold a device); free is neither. A pod whose O(resource_names) the scheduler
    served from a DRA claim (C(status.extendedResourceClaimStatus)) counts once, through that claim, never against
    the device plugin.
  - "The problems are: V(GPU labels but no nvidia.com/gpu capacity), V(allocatable below capacity),
    V(no device-plugin pod), V(plugin pod not Ready), V(node not in default (exclusive) GPU scheduling mode)
    (C(ack.node.gpu.schedule) is set to something other than V(default)), V(allocated above allocatable) and
    V(pods on this node use GPUs outside the scheduler) (a container sets C(NVIDIA_VISIBLE_DEVICES) to a value
    the NVIDIA container toolkit reads as GPUs, V(all) or indexes or ids, in a pod without a GPU limit or claim; the
    toolkit reads the comma-separated entries case-sensitively, and V(void), V(none) or no entry select none).
    On a DRA node the first and third are not raised; instead V(DRA kubelet-plugin pod missing or not Ready),
    V(DRA kubelet plugin publishes no ResourceSlice), V(GPUs served by both the device plugin and a DRA driver)
    (the device plugin's GPU resource and a GPU driver's ResourceSlices on one node, mapped by a DeviceClass or
    not), V(GPUs over-committed: pods hold them through both the device plugin and a DRA driver) (instead,
    when pods hold GPUs both ways there),
    V(DRA GPU devices tainted NoSchedule or NoExecute) and V(claim allocated to a device no ResourceSlice
    publishes). For the cluster, V(GPU pod Pending: no node can allocate its claims) (the scheduler says
    C(cannot allocate all claims) of a pod with GPU limits or a claim on a GPU DeviceClass) and, with O(prometheus),
    V(GPU health metric not collected by the DCGM exporter). Every problem carries a C(remedy)."
  - B(Drivers.) Per GPU node, C(driver), where its driver stands (O(driver_upgrade)); the problems V(GPU driver upgrade stuck),
    V(GPU driver upgrade failed), V(GPU driver versions mixed within one pool) (one GPU model) and
    V(driver pod not on its DaemonSet's current template). M(kubegpu.scheduling.gpu_driver_info) says more.
  - For the fleet, totals per model and in all (each also per source), the GPU nodes that expose no GPU
    capacity, all problems in one list, and notes.
  - Costs one paginated list each of nodes, pods (field selector on the phase), DeviceClasses, ResourceSlices,
    ResourceClaims and DeviceTaintRules, whatever the size of the cluster; device-plugin and DRA kubelet-plugin pods
    are picked out of the same pod list by their labels. Only the fields the facts need are kept from each page.
  - A DeviceTaintRule taints the devices its selector picks (driver, pool, device) as a taint in the ResourceSlice
    does. Where DeviceTaintRules are not served or not allowed, only the slices' taints count, with a note.
  - A cluster that does not serve C(resource.k8s.io/v1), or a reader not allowed to list it, gets the facts from
    the device plugin alone and a note in RV(ansible_facts.gpu_fleet.notes) saying which; the run does not fail.
    A pool with fewer ResourceSlices than it announces (C(resourceSliceCount)) is still being written, and is a note
    too.
author:
  - kubegpu.scheduling contributors (@kubegpu)
extends_documentation_fragment:
  - kubegpu.scheduling.options.gpu_resources
  - kubegpu.scheduling.options.node_selection
  - kubegpu.scheduling.options.page_size
  - kubegpu.scheduling.model_labels
  - kubegpu.scheduling.options.system_components
  - kubegpu.scheduling.health
  - kubegpu.scheduling.options.prometheus
  - kubegpu.scheduling.options.driver_upgrade
  - kubegpu.scheduling.read_only
  - kubegpu.scheduling.connection
options:
  label_selectors:
    description:
      - Only consider the nodes that match all of these label selectors, for example V(nvidia.com/gpu.present=true),
        as C(kubectl get nodes -l) takes them. Joined with C(,) into one selector.
      - The alias C(label_selector), one selector as a string, is deprecated and goes in 2.0.0.
    type: list
    elements: str
    default: []
    aliases: [label_selector]
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
  dra_devices:
    description:
      - Which DRA devices each node's C(dra.devices) lists. V(problems), the devices that carry a taint (the ones
        its problems are about); V(all), every device the node's ResourceSlices publish, with the claims that hold
        it.
      - The counts (C(capacity), C(allocatable), C(allocated), C(free), per node, per model and in all, and
        C(by_source)), C(dra.device_count) and C(dra.pods) cover every device either way.
    type: str
    choices: [problems, all]
    default: problems
notes:
  - Read-only; always returns C(changed=false). Needs C(list) on nodes and on pods in all namespaces, and on
    C(deviceclasses), C(resourceslices), C(resourceclaims) and C(devicetaintrules) (group C(resource.k8s.io)) to
    count DRA GPUs.
  - The facts are returned once, as C(ansible_facts.gpu_fleet) (host facts of the host the task ran for, and
    C(ansible_facts.gpu_fleet) of a registered result). At a thousand nodes they are megabytes, and Ansible copies a
    module's result several times on its way to the play.
"""

EXAMPLES = r"""
- name: Read the GPU fleet
  kubegpu.scheduling.gpu_node_facts:

- name: Show the free GPUs per model
  ansible.builtin.debug:
    msg: "{{ item.key }}: {{ item.value.free }} of {{ item.value.allocatable }} free on {{ item.value.nodes }} nodes"
  loop: "{{ ansible_facts.gpu_fleet.models | dict2items }}"

- name: Stop when a GPU node has a problem
  ansible.builtin.assert:
    that:
      - ansible_facts.gpu_fleet.problems | length == 0
    fail_msg: "{{ ansible_facts.gpu_fleet.problems | to_nice_yaml }}"

- name: Read one node pool, with the GPU Operator's plugin in its own namespace
  kubegpu.scheduling.gpu_node_facts:
    label_selectors: [nvidia.com/gpu.present=true]
    device_plugin:
      namespaces: [gpu-operator]
      label_selectors: [app=nvidia-device-plugin-daemonset]

- name: Exempt an in-house GPU agent that reads every GPU, known by its image and command
  kubegpu.scheduling.gpu_node_facts:
    system_components:
      extra:
        - name: Acme GPU health agent
          images: [platform/acme-gpu-agent]
          commands:
            - [/usr/bin/acme-gpu-agent, "..."]

- name: Judge health also by a node-problem-detector condition, and expect 8 GPUs on every H100 node
  kubegpu.scheduling.gpu_node_facts:
    health:
      signals: [{condition: GPUXIDProblem, producer: node-problem-detector, severity: degraded}]
      expected_gpus: {NVIDIA-H100-80GB-HBM3: 8}

- name: Read another cluster's fleet into a variable of its own
  kubegpu.scheduling.gpu_node_facts:
    kubeconfig: ~/.kube/staging
  register: staging

- name: Show its nodes without GPU capacity
  ansible.builtin.debug:
    msg: "{{ staging.ansible_facts.gpu_fleet.nodes_without_capacity }}"
"""

RETURN = r"""
ansible_facts:
  description: The facts, set as host facts of the host the task ran for.
  returned: always
  type: dict
  contains:
    gpu_fleet:
      description: The GPU fleet.
      returned: always
      type: dict
      contains:
        nodes:
          description: One entry per GPU node, sorted by name.
          returned: always
          type: list
          elements: dict
          contains:
            name: {description: Node name., type: str, sample: gfd-h100}
            model:
              description: The model named by the first of O(model_label_keys) that names one; null when none does.
              type: str
              sample: NVIDIA-H100-80GB-HBM3
            model_source:
              description: The label key the model came from, or V(ResourceSlice productName) on a DRA node without one.
              type: str
              sample: nvidia.com/gpu.product
            model_label_value:
              description: The model made a valid label value (invalid characters become C(-), at most 63 characters).
              type: str
              sample: NVIDIA-H100-80GB-HBM3
            mig_profile:
              description: >-
                The MIG profile GPU Feature Discovery appends under the single MIG strategy, or that every DRA device of the
                node has, else null.
              type: str
              sample: 1g.10gb
            label_gpu_count: {description: "The GPU count the node's labels state, else null.", type: int, sample: 8}
            capacity:
              description: GPUs the kubelet registered (sum over the counted resources), plus the GPUs DRA drivers publish.
              type: int
              sample: 8
            allocatable: {description: "GPUs the device plugin reports healthy, plus DRA GPUs not tainted away.", type: int, sample: 7}
            unhealthy: {description: Capacity minus allocatable., type: int, sample: 1}
            allocated:
              description: >-
                GPU limits of the pods bound to the node that are not Succeeded or Failed, plus the DRA GPUs allocated claims
                hold.
              type: int
              sample: 4
            free: {description: "Allocatable minus allocated, never below 0, per source, added up.", type: int, sample: 3}
            resources:
              description: Capacity, allocatable and allocated per counted resource of the device plugin.
              type: dict
              sample: {nvidia.com/gpu: {capacity: 8, allocatable: 7, allocated: 4}}
            gpu_sources: {description: "Where the node's GPUs come from, V(device_plugin) and V(dra).", type: list, elements: str}
            by_source:
              description: Capacity, allocatable, allocated and free per source, V(device_plugin) and V(dra).
              type: dict
              sample:
                device_plugin: {capacity: 0, allocatable: 0, allocated: 0, free: 0}
                dra: {capacity: 4, allocatable: 4, allocated: 3, free: 1}
            dra:
              description:
                - What DRA says of the node. C(readable) is false when the DRA objects could not be read.
                - "C(device_count) is the devices of a GPU driver the node's ResourceSlices publish. C(devices) lists those
                  that carry a taint (with O(dra_devices=all), every one), each with C(name), C(driver), C(pool), C(type)
                  (V(gpu), V(mig), V(vfio)), C(model), C(product_name), C(uuid), C(parent_uuid), C(memory),
                  C(mig_profile), C(allocated), the C(claims) that hold it, its C(taints), and its C(health): V(failed)
                  when a taint keeps pods away (V(NoSchedule), V(NoExecute)), V(degraded) when its taints only report
                  (V(None)), else V(healthy)."
                - C(pods) are the pods the allocated devices are reserved for; C(kubelet_plugin_pods) and
                  C(kubelet_plugin_ready) the driver's kubelet plugin here; C(slices) the ResourceSlices that name the node;
                  C(served_by_both), C(tainted_devices) and C(missing_devices) what its problems are about.
                - C(served_by_both), per device-plugin resource beside a GPU driver's devices, has C(resource),
                  C(allocatable), C(driver), C(devices), C(device_class) (the classes mapping it, else V(null)),
                  C(plugin_pods), C(plugin_gpus), C(claim_pods), C(claimed_devices) and C(over_committed).
              type: dict
              sample:
                {readable: true, is_dra_node: true, drivers: [gpu.nvidia.com], slices: 1, device_count: 8,
                 devices: [{name: gpu-7, driver: gpu.nvidia.com, pool: dra-h100, type: gpu, model: NVIDIA-H100-80GB-HBM3,
                            product_name: NVIDIA H100 80GB HBM3, uuid: GPU-4d5c8a0e-0000-0000-0000-000000000007,
                            parent_uuid: null, memory: 80Gi, mig_profile: null, allocated: false, claims: [],
                            taints: [{key: example.com/maintenance, value: hbm-errors, effect: NoExecute}], health: failed}],
                 pods: [ml/trainer-0], kubelet_plugin_pods: [nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin-7xk2p],
                 kubelet_plugin_ready: true, served_by_both: [], tainted_devices: [], missing_devices: []}
            ready: {description: "Whether the node's Ready condition is True.", type: bool}
            schedulable: {description: False when the node is cordoned., type: bool}
            taints:
              description: The node's taints.
              type: list
              elements: dict
              sample: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
            addresses:
              description: >-
                The node's C(InternalIP), C(ExternalIP) and C(Hostname) addresses from C(status.addresses), in the order the
                node publishes them.
              type: list
              elements: dict
              sample: [{type: InternalIP, address: 10.0.105.29}, {type: ExternalIP, address: 3.139.58.222},
                       {type: Hostname, address: ip-10-0-105-29.us-east-2.compute.internal}]
            provider_id: {description: "The node's C(spec.providerID), the cloud's name for the machine, else null.", type: str}
            zone:
              description: >-
                From C(topology.kubernetes.io/zone), else the deprecated C(failure-domain.beta.kubernetes.io/zone), else null.
              type: str
              sample: us-east-2c
            region:
              description: >-
                From C(topology.kubernetes.io/region), else the deprecated C(failure-domain.beta.kubernetes.io/region), else
                null.
              type: str
              sample: us-east-2
            instance_type:
              description: >-
                From C(node.kubernetes.io/instance-type), else the deprecated C(beta.kubernetes.io/instance-type), else null.
              type: str
              sample: p4d.24xlarge
            driver_version:
              description: From C(nvidia.com/cuda.driver-version.full) (or the older split labels, or ACK's driver label).
              type: str
              sample: 550.54.15
            driver:
              description: C(version), C(managed_by), C(driver_resource), C(upgrade_state), C(state_since),
                C(pod_revision_current), C(pod), C(daemonset), as M(kubegpu.scheduling.gpu_driver_info) gives them.
              type: dict
            cuda_version: {description: From C(nvidia.com/cuda.runtime-version.full) or the older split labels., type: str, sample: "12.4"}
            ack_scheduling_mode: {description: "The value of C(ack.node.gpu.schedule), else null.", type: str, sample: default}
            device_plugin_pod:
              description: The device-plugin pod on the node (a Ready one first), as C(namespace/name), else null.
              type: str
              sample: kube-system/nvidia-device-plugin-daemonset-x7k2p
            device_plugin_ready: {description: Whether a device-plugin pod on the node is Ready., type: bool}
            device_plugin_pods: {description: Every device-plugin pod on the node., type: list, elements: str}
            gpu_pods:
              description: Pods holding GPUs on the node (by GPU limits, or through DRA claims), as C(namespace/name).
              type: list
              elements: str
            pods_outside_scheduler:
              description: Pods that ask for GPUs through C(NVIDIA_VISIBLE_DEVICES) without a GPU limit, and how.
              type: list
              elements: str
              sample: ["gpu-fleet/bypass-visible-devices (container main: NVIDIA_VISIBLE_DEVICES=all)"]
            gpu_signals:
              description: The labels, capacity and DRA devices that make this a GPU node.
              type: dict
              sample: {labels: [nvidia.com/gpu.product=Tesla-T4], capacity: [capacity nvidia.com/gpu=4], dra_devices: 0}
            health:
              description:
                - The node's C(status), V(healthy), V(unknown), V(degraded) or V(failed), and C(problems), each in the one
                  shape of a finding with the C(status) it gives the node.
                - With O(prometheus), C(metrics) says what the DCGM exporter's metrics said of the node.
                - "Kinds: V(gpu_health_condition), V(gpu_health_taint), V(gpus_withdrawn), V(gpus_below_expected),
                  V(gpu_plugin_not_ready), V(gpu_devices_tainted), and from the metrics V(gpu_xid_error),
                  V(gpu_ecc_uncorrectable), V(gpu_row_remap_failed), V(gpu_row_remap_pending),
                  V(gpu_retired_pages_pending), V(gpus_missing_from_metrics), V(gpu_metrics_unknown)."
              type: dict
              sample: {status: failed, problems: [{id: health.gpus_withdrawn, severity: error, title: GPUs withdrawn by the device plugin,
                       message: "nvidia.com/gpu: capacity 8, allocatable 6 (2 withdrawn)", remedy: "...", where: {node: gpu-3}, status: failed}]}
              contains:
                status: {description: "V(healthy), V(unknown), V(degraded) or V(failed): the worst of its problems' statuses.", type: str}
                metrics:
                  description:
                    - With O(prometheus) only. C(gpus), the GPUs the exporter reports; C(sample_age_seconds), the age of
                      the oldest of its GPUs' newest samples; C(workload_xids), the XIDs a program caused (each with
                      C(gpu), C(uuid), C(xid), C(meaning), C(metric)), never a problem; C(unknown), why the metrics could
                      not judge the node, or null.
                  type: dict
                  sample: {gpus: 8, sample_age_seconds: 4.2, workload_xids: [{gpu: "3", uuid: GPU-5b5e..., xid: 13,
                           meaning: graphics engine exception, metric: DCGM_FI_DEV_XID_ERRORS}], unknown: null}
                problems:
                  description: The node's health problems, in the one shape of a finding.
                  type: list
                  elements: dict
                  contains:
                    <<: &fleet_problem
                      id: {description: "The registry id: a validator rule's code (V(KGPU101)), any other kind C(<check>.<name>)
                          (V(device_plugin.no_gpu_capacity)); docs/findings.md lists them all.", type: str}
                      severity: {description: "V(error), V(warning) or V(info): one scale for every check.", type: str}
                      title: {description: "What the kind is, in a line.", type: str}
                      message: {description: "What was found here.", type: str}
                      remedy: {description: "What to do.", type: str}
                      where: {description: "The places that apply, of C(node), C(device), C(pool), C(object) (C(Kind namespace/name)),
                          C(subject), C(pod), C(config), C(source), C(document), C(path), C(line), C(container).", type: dict}
                      kind: {description: "Deprecated, removed in 2.0.0 (use C(id)): the name the kind was declared with (docs/findings.md).", type: str}
                      problem: {description: "Deprecated, removed in 2.0.0 (use C(title)): what the problem is.", type: str}
                      reason: {description: "Deprecated, removed in 2.0.0 (use C(message)): why it was found.", type: str}
                    status: {description: "The health it gives the node, V(degraded), V(failed) or V(unknown), apart from its C(severity).", type: str}
            problems:
              description: The node's problems, each in the one shape of a finding.
              type: list
              elements: dict
              sample: [{id: device_plugin.allocatable_below_capacity, severity: error, title: allocatable below capacity,
                        message: "capacity 4, allocatable 3: 1 GPU(s) marked unhealthy by the device plugin",
                        remedy: "find the GPU with nvidia-smi -q on the node and repair or replace it, then restart the
                                 device-plugin pod: a GPU stays unhealthy until the plugin restarts", where: {}}]
              contains: *fleet_problem
        models:
          description: >-
            Totals per model (V(unknown) for GPU nodes whose labels and devices name none), both sources added, and per
            source in C(by_source).
          returned: always
          type: dict
          sample:
            NVIDIA-H100-80GB-HBM3: {label_value: NVIDIA-H100-80GB-HBM3, nodes: 2, capacity: 12, allocatable: 12,
                                    unhealthy: 0, allocated: 5, free: 7,
                                    by_source: {device_plugin: {capacity: 8, allocatable: 8, allocated: 2, free: 6},
                                                dra: {capacity: 4, allocatable: 4, allocated: 3, free: 1}}}
        totals:
          description: Totals over all GPU nodes, both sources added, and per source in C(by_source).
          returned: always
          type: dict
          sample: {nodes: 9, capacity: 35, allocatable: 34, unhealthy: 1, allocated: 4, free: 30,
                   by_source: {device_plugin: {capacity: 35, allocatable: 34, allocated: 4, free: 30},
                               dra: {capacity: 0, allocatable: 0, allocated: 0, free: 0}}}
        drivers: {description: "Nodes per driver C(versions), C(upgrade_states), C(managed_by); C(pods_not_current).",
                  returned: always, type: dict}
        nodes_without_capacity:
          description: GPU nodes that expose no GPU capacity to the scheduler.
          returned: always
          type: list
          elements: str
          sample: [gfd-a100-noplugin]
        problems:
          description:
            - Every node's problems in one list, each in the one shape of a finding. Problems of no node (a GPU pod no
              node can allocate) have no C(node) in their C(where).
            - "Kinds: V(no_gpu_capacity), V(allocatable_below_capacity), V(no_device_plugin_pod),
              V(device_plugin_not_ready), V(not_default_scheduling_mode), V(allocated_above_allocatable),
              V(gpu_use_outside_scheduler), V(dra_plugin_not_ready), V(dra_no_resource_slices),
              V(gpus_served_by_device_plugin_and_dra), V(gpus_over_committed_by_device_plugin_and_dra),
              V(claim_on_unpublished_device), V(dra_devices_tainted),
              V(gpu_claims_unallocatable), V(gpu_metric_not_collected) (with O(prometheus): a health metric the DCGM
              exporter does not collect), V(driver_upgrade_stuck), V(driver_upgrade_failed), V(driver_versions_mixed),
              V(driver_pod_not_current)."
          returned: always
          type: list
          elements: dict
          sample:
            - id: fleet.not_default_scheduling_mode
              severity: warning
              title: node not in default (exclusive) GPU scheduling mode
              message: ack.node.gpu.schedule=cgpu
              remedy: >-
                GPU pods on this node share GPUs (ACK GPU sharing): for whole, exclusive GPUs run them in a node
                pool labeled ack.node.gpu.schedule=default
              where: {node: ack-t4-shared}
          contains:
            <<: *fleet_problem
            node: {description: "Deprecated, removed in 2.0.0 (use C(where.node)): the node, or null.", type: str}
        health:
          description: How many GPU nodes are V(healthy), V(unknown), V(degraded) and V(failed) (each node's C(health.status)).
          returned: always
          type: dict
          sample: {healthy: 7, unknown: 0, degraded: 1, failed: 1}
        metrics:
          description:
            - What the read of the DCGM exporter's metrics through Prometheus said of the fleet. C(url); C(at), the
              instant the queries were evaluated at (seconds since the epoch); C(window); C(queries), the fixed number of
              queries; C(requests), those sent; C(error), why Prometheus could not be read, or null; C(not_collected),
              the health metrics without series while the exporter is up; C(targets_down), the exporter's scrape
              targets that are down and name no GPU node; C(unknown), the GPU nodes the metrics could not judge.
          returned: when O(prometheus) is given
          type: dict
          sample: {source: prometheus, url: "http://prometheus-operated.monitoring.svc:9090", at: 1764928800.0, window: 10m,
                   queries: 5, requests: 5, error: null, not_collected: [DCGM_FI_DEV_ECC_DBE_VOL_TOTAL], targets_down: [],
                   unknown: []}
        dra:
          description: >-
            The DRA objects read: whether they could be (C(readable)), the DeviceClasses, the extended resources they map,
            and how many GPU ResourceSlices, ResourceClaims and allocated claims there are.
          returned: always
          type: dict
          sample: {readable: true, device_classes: [gpu.nvidia.com, mig.nvidia.com, vfio.gpu.nvidia.com],
                   extended_resources: {gpu.nvidia.com: nvidia.com/gpu}, resource_slices: 2, resource_claims: 4, allocated_claims: 3}
        notes:
          description: >-
            What limits the facts without being a problem of the fleet: DRA objects that could not be read (not served, or
            not allowed), pools still being published.
          returned: always
          type: list
          elements: str
          sample:
            - >-
              not allowed to list "deviceclasses" (apiGroup "resource.k8s.io"): GPUs from DRA drivers are not counted; the
              facts come from the device plugin alone; grant list on deviceclasses, resourceslices and resourceclaims (the
              kubegpu-reader role in rbac/ does)
        api_requests:
          description: >-
            API requests the run made (one per page of each of the five lists, fewer when resource.k8s.io cannot be read,
            plus retries).
          returned: always
          type: int
          sample: 5
api_requests:
  description: API requests the run made, as in C(ansible_facts.gpu_fleet.api_requests).
  returned: always
  type: int
  sample: 5
"""

import time
from dataclasses import replace
from typing import Any

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.drivers import DriverRead, add_driver_view
from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.facts import summarise
from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.prometheus_reads import (
    prometheus_source,
    read_beside,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.reads import missing_names_warning, read_fleet
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.device_plugins import (
    DEFAULT_DEVICE_PLUGIN_SELECTORS,
    DEFAULT_EXEMPT_POD_SELECTORS,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.health_table import (
    health_argument_spec,
    health_table_from_option,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.options import options_from_params
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.module import (
    api_module,
    errors_fail,
    module_client,
    with_connection_options,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.options.groups import (
    DRIVER_UPGRADE,
    GPU_RESOURCES,
    MODEL_LABELS,
    NODE_SELECTION,
    PAGE_SIZE,
    PROMETHEUS,
    SYSTEM_COMPONENTS,
    check_ranges,
    module_options,
)


def argument_spec() -> dict[str, Any]:
    spec = module_options(
        dict(
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
            dra_devices={"type": "str", "choices": ["problems", "all"], "default": "problems"},
            health=health_argument_spec(),
        ),
        (GPU_RESOURCES, NODE_SELECTION, PAGE_SIZE, MODEL_LABELS, SYSTEM_COMPONENTS, PROMETHEUS, DRIVER_UPGRADE),
        renamed={"label_selector": "label_selectors"},
    )
    return with_connection_options(spec)


def joined_selector(selectors: list[str]) -> str | None:
    """One label selector of all of `selectors` (the API server ANDs its comma-separated parts)."""
    return ",".join(s for s in selectors if s) or None


def run(module: AnsibleModule) -> dict[str, Any]:
    params = module.params
    check_ranges(params)
    options = options_from_params(
        params["resource_names"],
        params["model_label_keys"],
        params["device_plugin"],
        params["exempt_pod_selectors"],
        params["system_components"],
    )
    options = replace(
        options, all_dra_devices=params["dra_devices"] == "all", health=health_table_from_option(params["health"])
    )
    source = prometheus_source(params["prometheus"]) if params["prometheus"] else None
    client = module_client(module)
    selector = joined_selector(params["label_selectors"])
    drivers = DriverRead(objects=params["driver_upgrade"]["read_objects"])
    fleet, metrics = read_beside(
        source, lambda: read_fleet(client, options, selector, params["names"], params["page_size"], drivers)
    )
    nodes, pods, plugins, dra = fleet
    for warning in (missing_names_warning(params["names"], nodes, selector), metrics and metrics.error):
        if warning:
            module.warn(warning)
    facts = summarise(nodes, pods, plugins, options, dra, metrics)
    add_driver_view(facts, drivers, time.time(), params["driver_upgrade"]["stuck_after"])
    facts["api_requests"] = client.request_count
    return facts


def main() -> None:
    module = api_module(argument_spec())
    with errors_fail(module):
        facts = run(module)
    module.exit_json(changed=False, ansible_facts={"gpu_fleet": facts}, api_requests=facts["api_requests"])


if __name__ == "__main__":
    main()
