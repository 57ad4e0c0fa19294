# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The device-plugin check's kinds (gpu_device_plugin_validate): the cluster, the plugin's DaemonSets,
each GPU node, the DRA kubelet plugin and each GPU host.

The five kinds the fleet facts (gpu_node_facts) report too are declared here once, for both
checks: their title is the fleet's problem text, and their case ``fleet`` the fleet's reason and
remedy. A finding's ``problem`` is its message; ``subject`` and ``node`` are where it hit.
"""

from __future__ import annotations

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import (
    CHECK_DEVICE_PLUGIN,
    CHECK_FLEET,
    Case,
    Kind,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.severity import ERROR, INFO, WARNING
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.device_plugins import (
    ACK_STATIC_MANIFEST,
    REGISTERED_LOG_LINE,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.toolkit import ENVVAR_KEY, VOLUME_MOUNTS_KEY

DEVICE_PLUGIN = (CHECK_DEVICE_PLUGIN,)
BOTH = (CHECK_DEVICE_PLUGIN, CHECK_FLEET)
FLEET_CASE = "fleet"  # the case of a shared kind as the fleet facts report it
REQUIRED = "required"  # the toolkit's hardening is required (require_hardening): an error, not a warning

NO_DEVICE_PLUGIN = "no_device_plugin_deployed"
DAEMONSET_MISSING = "daemonset_missing"
DAEMONSET_NOT_OBSERVED = "daemonset_generation_not_observed"
DAEMONSET_SELECTS_NO_NODE = "daemonset_selects_no_node"
DAEMONSET_NOT_SCHEDULED = "daemonset_pods_not_scheduled"
DAEMONSET_NOT_UPDATED = "daemonset_rollout_incomplete"
DAEMONSET_NOT_READY = "daemonset_pods_not_ready"
DAEMONSET_NOT_AVAILABLE = "daemonset_pods_not_available"
DAEMONSET_MISSCHEDULED = "daemonset_pods_misscheduled"
SEVERAL_DEPLOYMENTS = "several_device_plugin_deployments"
NO_GPU_NODES = "no_gpu_nodes"
NO_DRA_PLUGIN_POD = "no_dra_kubelet_plugin_pod"
DRA_PLUGIN_NOT_READY = "dra_kubelet_plugin_not_ready"
DRA_NO_SLICES = "dra_no_resource_slices"
DRA_NOT_READABLE = "dra_objects_not_readable"
NODE_NOT_READY = "node_not_ready"
NO_PLUGIN_POD = "no_device_plugin_pod"
SEVERAL_PLUGIN_PODS = "several_device_plugin_pods"
PLUGIN_NOT_READY = "device_plugin_not_ready"
PLUGIN_RESTARTING = "device_plugin_restarting"
NO_CAPACITY = "no_gpu_capacity"
UNHEALTHY_GPUS = "allocatable_below_capacity"
LABEL_COUNT_MISMATCH = "gpu_count_differs_from_labels"
HOST_FACTS_FAILED = "host_facts_failed"
HOST_NOT_A_NODE = "host_not_a_node"
HOST_GPUS_NOT_ADVERTISED = "host_gpus_not_advertised"
DRIVER_MISSING = "driver_not_found"
NVIDIA_SMI_FAILED = "nvidia_smi_failed"
HOST_GPU_COUNT_MISMATCH = "host_gpu_count_differs_from_capacity"
TOOLKIT_CONFIG_MISSING = "toolkit_config_not_found"
TOOLKIT_CONFIG_UNREADABLE = "toolkit_config_unreadable"
ENVVAR_ACCEPTED = "toolkit_accepts_visible_devices_env"
VOLUME_MOUNTS_OFF = "toolkit_volume_mounts_disabled"

DEPLOY_PLUGIN_REMEDY = (
    "deploy one: on ACK install the ack-nvidia-device-plugin component from the cluster's add-ons; "
    "elsewhere NVIDIA's device plugin (kubectl create -f "
    "https://raw.githubusercontent.com/NVIDIA/k8s-device-plugin/v0.17.0/deployments/static/nvidia-device-plugin.yml, "
    "or its Helm chart nvdp/nvidia-device-plugin) or the NVIDIA GPU Operator"
)
HARDENING_REMEDY = (
    f"set {ENVVAR_KEY} = false and {VOLUME_MOUNTS_KEY} = true in the toolkit's config.toml, and run "
    "the device plugin with DEVICE_LIST_STRATEGY=volume-mounts (Helm: --set deviceListStrategy=volume-mounts; "
    "GPU Operator: toolkit env ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED=false and device plugin env "
    "DEVICE_LIST_STRATEGY=volume-mounts), so that only GPUs the scheduler assigned reach a container"
)
_HARDENING_CASES = {REQUIRED: Case(severity=ERROR)}
_CHECK_PLUGIN = "gpu_device_plugin_validate names why and what to do on this node"
_SELECTS_NO_NODE = "selects no node (0 pods desired) while {gpu_nodes} node(s) look like GPU nodes"
_SELECTION_CHECK = "check its nodeSelector/affinity against the GPU nodes' labels: "
_SMI_FAILS = "the driver is present ({version}) but nvidia-smi "

_CLUSTER = (
    Kind(
        NO_GPU_NODES,
        INFO,
        "No GPU node",
        "no node looks like a GPU node (no GPU model or count labels, no {resource} capacity)",
        "nothing to check on nodes; if GPU nodes were expected, check that they joined the cluster and carry "
        "their provider's GPU labels",
        DEVICE_PLUGIN,
    ),
    Kind(
        NO_DEVICE_PLUGIN,
        ERROR,
        "No device plugin deployed",
        "no device plugin found ({gpu_nodes} GPU node(s), no device-plugin DaemonSet or pod)",
        DEPLOY_PLUGIN_REMEDY,
        DEVICE_PLUGIN,
    ),
    Kind(
        SEVERAL_DEPLOYMENTS,
        WARNING,
        "Several deployments of the device plugin",
        "several deployments of the device plugin: {titles}",
        "keep one per node: two plugins on one node advertise the same GPUs twice (the per-node findings "
        "name any node that runs two)",
        DEVICE_PLUGIN,
    ),
    Kind(
        DRA_NOT_READABLE,
        INFO,
        "DRA objects not readable",
        "{note}",
        "nothing to do when the cluster has no DRA GPUs; otherwise grant list on resourceslices "
        "(apiGroup resource.k8s.io) so that DRA nodes are checked",
        DEVICE_PLUGIN,
    ),
)

_DAEMONSETS = (
    Kind(
        DAEMONSET_MISSING,
        ERROR,
        "A DaemonSet named in the daemonsets option is missing",
        "not found",
        "deploy the device plugin there, or correct namespace and name in the daemonsets option "
        "(kubectl get daemonsets -A | grep -i device-plugin lists the candidates)",
        DEVICE_PLUGIN,
        cases={
            "selector": Case(
                message="no DaemonSet found",
                remedy="check the selector against the DaemonSets' labels and pod template labels "
                "(kubectl get daemonsets -A --show-labels); "
                "leave the daemonsets option unset to find the known deployments by their pod labels",
            )
        },
    ),
    Kind(
        DAEMONSET_NOT_OBSERVED,
        ERROR,
        "DaemonSet status is stale",
        "status is stale: generation {generation}, observed generation {observed}",
        "the DaemonSet controller has not processed the latest spec yet: run the check again in a minute; "
        "if it stays, check that kube-controller-manager is running and healthy",
        DEVICE_PLUGIN,
    ),
    Kind(
        DAEMONSET_SELECTS_NO_NODE,
        ERROR,
        "The DaemonSet selects no node",
        _SELECTS_NO_NODE,
        _SELECTION_CHECK + "{reasons}. Fix: {fixes}",
        DEVICE_PLUGIN,
        cases={
            "matching": Case(
                remedy=_SELECTION_CHECK + "they match, so the DaemonSet controller has not placed its pods yet; "
                "{describe} shows why"
            ),
            "served": Case(
                severity=INFO,
                message=_SELECTS_NO_NODE + ", all of them served by another plugin pod",
                remedy="nothing to do when it is meant for other nodes (as GKE's DaemonSets per machine type); "
                "delete it if unused",
            ),
        },
    ),
    Kind(
        DAEMONSET_NOT_SCHEDULED,
        ERROR,
        "DaemonSet pods not scheduled",
        "{current} of {desired} pods scheduled",
        "{describe} shows why pods are not created (events); the per-node findings name the nodes",
        DEVICE_PLUGIN,
    ),
    Kind(
        DAEMONSET_NOT_UPDATED,
        ERROR,
        "DaemonSet rollout incomplete",
        "rollout incomplete: {updated} of {desired} pods run the current template",
        "wait for the rollout: kubectl -n {namespace} rollout status daemonset {name}; "
        "with updateStrategy OnDelete, delete the old pods so that they are recreated",
        DEVICE_PLUGIN,
    ),
    Kind(
        DAEMONSET_NOT_READY,
        ERROR,
        "DaemonSet pods not Ready",
        "{ready} of {desired} pods Ready",
        "see the per-node findings for the pods that are not Ready and read their logs",
        DEVICE_PLUGIN,
    ),
    Kind(
        DAEMONSET_NOT_AVAILABLE,
        WARNING,
        "DaemonSet pods not available",
        "{available} of {desired} pods available",
        "pods are Ready but not yet available (minReadySeconds): run the check again shortly",
        DEVICE_PLUGIN,
    ),
    Kind(
        DAEMONSET_MISSCHEDULED,
        ERROR,
        "DaemonSet pods misscheduled",
        "{misscheduled} pod(s) run on nodes the DaemonSet no longer selects",
        "the controller removes them; if they stay, {describe} and compare the nodes' labels and taints "
        "with its nodeSelector, affinity and tolerations",
        DEVICE_PLUGIN,
    ),
)

_NODES = (
    Kind(
        NODE_NOT_READY,
        WARNING,
        "Node not Ready",
        "node is not Ready",
        "its kubelet does not report: check it on the node (systemctl status kubelet; journalctl -u kubelet)",
        DEVICE_PLUGIN,
    ),
    Kind(
        NO_PLUGIN_POD,
        ERROR,
        "no device-plugin pod",
        "no device-plugin pod runs on this GPU node",
        "{why}",
        BOTH,
        cases={
            FLEET_CASE: Case(
                message="no pod matching the device-plugin selectors is bound here",
                remedy=_CHECK_PLUGIN + " (a DaemonSet that does not select it, ACK static pods, no plugin deployed)",
            )
        },
    ),
    Kind(
        SEVERAL_PLUGIN_PODS,
        ERROR,
        "Several device-plugin pods on one node",
        "{count} device-plugin pods: {listed}",
        "two deployments of the device plugin serve the same GPUs ({owners}): keep one, and delete the "
        "other or change its nodeSelector so that it no longer selects this node",
        DEVICE_PLUGIN,
        cases={
            "static_and_daemonset": Case(
                remedy="ACK clusters upgraded to 1.32 can run both the static pod and the ack-nvidia-device-plugin "
                f"DaemonSet: on the node move {ACK_STATIC_MANIFEST} out of /etc/kubernetes/manifests so that only "
                "the DaemonSet's pod serves the GPUs"
            )
        },
    ),
    Kind(
        PLUGIN_NOT_READY,
        ERROR,
        "plugin pod not Ready",
        "device-plugin pod {pod} is not Ready ({state})",
        "read its log: kubectl -n {namespace} logs {name} (a healthy plugin logs "
        f'"{REGISTERED_LOG_LINE}"); check the driver on the node with nvidia-smi; '
        '"Failed to initialize NVML: Unknown Error" after systemctl daemon-reload (Ubuntu 22.04, RHEL 9.3) '
        "goes away when the pod restarts; {restart}",
        BOTH,
        cases={
            FLEET_CASE: Case(
                message="not Ready: {pods}",
                remedy="read the plugin pod's log (kubectl -n <namespace> logs <pod>) and check the driver on the "
                "node with nvidia-smi; " + _CHECK_PLUGIN,
            )
        },
    ),
    Kind(
        PLUGIN_RESTARTING,
        WARNING,
        "Device-plugin pod restarting",
        "device-plugin pod {pod} has restarted {restarts} times",
        "read the log of its previous run: kubectl -n {namespace} logs {name} --previous; "
        "repeated NVML or driver errors there point at the driver on the node (check nvidia-smi)",
        DEVICE_PLUGIN,
    ),
    Kind(
        NO_CAPACITY,
        ERROR,
        "GPU labels but no {resource} capacity",
        "no {resource} capacity",
        "the plugin runs but has not registered GPUs with the kubelet: its log should show "
        f'"{REGISTERED_LOG_LINE}"; "No devices found" or NVML errors there mean the driver is not '
        "usable (check nvidia-smi on the node); right after a kubelet restart capacity stays 0 until the "
        "plugin registers again, so run the check again in a minute",
        BOTH,
        cases={
            "plugin_not_ready": Case(
                remedy="fix the device-plugin pod on this node first (see its finding); capacity appears once it "
                "registers"
            ),
            FLEET_CASE: Case(
                message="labels {labels}; capacity 0",
                remedy="the device plugin has not registered GPUs on this node: " + _CHECK_PLUGIN,
            ),
        },
    ),
    Kind(
        UNHEALTHY_GPUS,
        ERROR,
        "allocatable below capacity",
        "allocatable {allocatable} below capacity {capacity}: {unhealthy} GPU(s) marked unhealthy",
        'the device plugin marks a GPU unhealthy after XID or ECC errors (its log: "XidCriticalError ... marking '
        'device as unhealthy"); find the GPU with nvidia-smi -q on the node (on ACK, ack-node-problem-detector '
        "events name it) and repair or replace it; a GPU stays unhealthy until the plugin restarts, so then "
        "{restart}",
        BOTH,
        cases={
            FLEET_CASE: Case(
                message="capacity {capacity}, allocatable {allocatable}: {unhealthy} GPU(s) marked unhealthy by "
                "the device plugin",
                remedy="find the GPU with nvidia-smi -q on the node and repair or replace it, then restart the "
                "device-plugin pod: a GPU stays unhealthy until the plugin restarts",
            )
        },
    ),
    Kind(
        LABEL_COUNT_MISMATCH,
        WARNING,
        "GPU count differs from the labels",
        "labels state {stated} GPU(s) ({key}), capacity is {capacity}",
        "nvidia-smi -L on the node lists the GPUs the driver sees: a GPU missing there needs a hardware check; "
        "if all are listed, the plugin has not registered them all: {restart}",
        DEVICE_PLUGIN,
    ),
)

_DRA = (
    Kind(
        NO_DRA_PLUGIN_POD,
        ERROR,
        "No DRA kubelet-plugin pod",
        "ResourceSlices publish {devices} GPU device(s) here, but no DRA kubelet-plugin pod runs here",
        "the slices are left from a plugin that stopped: check that the driver's kubelet-plugin DaemonSet "
        "selects this node (kubectl get daemonsets -A | grep kubelet-plugin, then describe it)",
        DEVICE_PLUGIN,
    ),
    Kind(
        DRA_PLUGIN_NOT_READY,
        ERROR,
        "DRA kubelet-plugin pod not Ready",
        "DRA kubelet-plugin pod {pod} is not Ready ({phase})",
        "read its log: kubectl -n {namespace} logs {name} -c gpus; NVML errors there point at the driver "
        "on the node (check nvidia-smi); the plugin publishes the node's GPUs once it is Ready",
        DEVICE_PLUGIN,
    ),
    Kind(
        DRA_NO_SLICES,
        ERROR,
        "DRA kubelet plugin publishes no ResourceSlice",
        "the DRA kubelet plugin runs here but no ResourceSlice of a GPU driver names this node",
        "read the plugin's log (kubectl -n {namespace} logs {name} -c gpus): it "
        "publishes the GPUs NVML finds; kubectl get resourceslices --field-selector "
        "spec.nodeName={node} lists what it published",
        BOTH,
        cases={
            FLEET_CASE: Case(
                message="no ResourceSlice of a GPU driver names this node; kubelet plugin: {plugins}",
                remedy="the plugin has not published its GPUs: its log names the NVML or driver error; kubectl get "
                "resourceslices --field-selector spec.nodeName=<node> lists what it published",
            )
        },
    ),
)

_HOSTS = (
    Kind(
        HOST_FACTS_FAILED,
        ERROR,
        "No host facts",
        "gpu_host_facts failed: {msg}",
        "make the host reachable for Ansible (ansible -m ansible.builtin.ping <host>) and run "
        "kubegpu.scheduling.gpu_host_facts on it",
        DEVICE_PLUGIN,
        cases={
            "unreachable": Case(message="host unreachable: {msg}"),
            "skipped": Case(message="gpu_host_facts was skipped on this host"),
            "not_facts": Case(message="not a gpu_host_facts result"),
        },
    ),
    Kind(
        HOST_NOT_A_NODE,
        WARNING,
        "Host is not a node",
        "no node of this name in the cluster",
        "name the host in the inventory as its node is named (or by the same short name), or check that "
        "it joined the cluster (kubectl get nodes)",
        DEVICE_PLUGIN,
    ),
    Kind(
        HOST_GPUS_NOT_ADVERTISED,
        ERROR,
        "Host GPUs not advertised",
        "the host has {gpu_count} GPU(s), but node {node} has no GPU labels and no {resource} capacity",
        "{why}",
        DEVICE_PLUGIN,
    ),
    Kind(
        DRIVER_MISSING,
        ERROR,
        "No NVIDIA driver",
        "no NVIDIA driver found (looked for {looked})",
        "install the driver: on ACK a GPU node pool installs it (pin a version with the node-pool label "
        "ack.aliyun.com/nvidia-driver-version, or follow ACK's custom driver guide); with the GPU Operator "
        "check the nvidia-driver-daemonset pod on this node; elsewhere install NVIDIA's driver for the running "
        "kernel and load it (modprobe nvidia, or reboot)",
        DEVICE_PLUGIN,
    ),
    Kind(
        NVIDIA_SMI_FAILED,
        ERROR,
        "nvidia-smi fails",
        _SMI_FAILS + "fails: {error}",
        'run nvidia-smi on the host: "couldn\'t communicate with the NVIDIA driver" means the loaded '
        "kernel module does not match the installed driver (reboot after a driver upgrade, or reinstall "
        "the driver for the running kernel); on ACK follow the driver upgrade guide for the node",
        DEVICE_PLUGIN,
        cases={
            "not_found": Case(
                message=_SMI_FAILS + "was not found",
                remedy="install the driver's utilities (nvidia-smi), or give gpu_host_facts its path (nvidia_smi); "
                "the GPU Operator's containerized driver keeps it under /run/nvidia/driver",
            )
        },
    ),
    Kind(
        HOST_GPU_COUNT_MISMATCH,
        ERROR,
        "Host GPU count differs from capacity",
        "nvidia-smi lists {host_count} GPU(s), node {node} has {resource} capacity {capacity}",
        "the device plugin has not registered every GPU: read its log for devices it skipped, and restart "
        "the device-plugin pod on this node",
        DEVICE_PLUGIN,
        cases={
            "shared": Case(
                severity=WARNING,
                remedy="the node advertises more GPUs than the host has: time-slicing or MPS sharing is on "
                "(nvidia.com/gpu.replicas), so pods that ask for a whole GPU share one; turn sharing off in the "
                "device plugin's config for exclusive scheduling",
            )
        },
    ),
    Kind(
        TOOLKIT_CONFIG_MISSING,
        WARNING,
        "No NVIDIA Container Toolkit config",
        "no NVIDIA Container Toolkit config found ({looked}): its defaults let unprivileged pods take GPUs "
        "through NVIDIA_VISIBLE_DEVICES",
        f"create the config with the toolkit (nvidia-ctk config --in-place) and {HARDENING_REMEDY}",
        DEVICE_PLUGIN,
        cases=_HARDENING_CASES,
    ),
    Kind(
        TOOLKIT_CONFIG_UNREADABLE,
        WARNING,
        "NVIDIA Container Toolkit config unreadable",
        "{path} cannot be read: {error}",
        f"fix the file, then {HARDENING_REMEDY}",
        DEVICE_PLUGIN,
        cases=_HARDENING_CASES,
    ),
    Kind(
        ENVVAR_ACCEPTED,
        WARNING,
        "The toolkit accepts NVIDIA_VISIBLE_DEVICES from unprivileged pods",
        f"{{path}}: {ENVVAR_KEY} is not false, so unprivileged pods can take any GPU through "
        "NVIDIA_VISIBLE_DEVICES, outside the scheduler",
        HARDENING_REMEDY,
        DEVICE_PLUGIN,
        cases=_HARDENING_CASES,
    ),
    Kind(
        VOLUME_MOUNTS_OFF,
        WARNING,
        "The toolkit does not take GPUs as volume mounts",
        f"{{path}}: {VOLUME_MOUNTS_KEY} is not true, so the device plugin cannot hand out GPUs as volume mounts",
        HARDENING_REMEDY,
        DEVICE_PLUGIN,
        cases=_HARDENING_CASES,
    ),
)

KINDS = _CLUSTER + _DAEMONSETS + _NODES + _DRA + _HOSTS
