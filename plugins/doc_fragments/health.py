# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)


class ModuleDocFragment:
    """The health view's option and its built-in signals (gpu/health_table.py BUILTIN_SIGNALS)."""

    DOCUMENTATION = r"""
options:
  health:
    description:
      - What the health view (RV(ansible_facts.gpu_fleet.nodes[].health)) judges by, besides the withdrawn GPUs, the
        plugin pods and the DRA device taints it always reads.
    type: dict
    default: {}
    suboptions:
      builtin_signals:
        description:
          - Judge by the built-in table of node conditions and taints that GPU health producers set (EKS node
            monitoring agent, GKE, NVIDIA NVSentinel; listed in the notes).
        type: bool
        default: true
      signals:
        description:
          - More rows of the table, each a dictionary with C(condition) (a node condition type) or C(taint) (a node
            taint key); for a condition C(bad_status) (V(True), V(False) or V(Unknown); default V(True)), the
            status that means bad; C(severity), V(failed) (the default) or V(degraded); and optionally C(producer)
            and C(source), shown with each problem.
          - A row for a condition type or taint key the built-in table holds replaces that row.
          - A taint row is bad whenever the node carries that key, whatever its value and effect.
          - "node-problem-detector's GPU conditions are named by the configuration of its custom plugins: add them
            here, for example C({condition: GPUXIDProblem, producer: node-problem-detector})."
        type: list
        elements: dict
        default: []
      expected_gpus:
        description:
          - "GPUs a node of a model should have, keyed by the model as the facts name it (C(model) or
            C(model_label_value)), for example C({NVIDIA-H100-80GB-HBM3: 8}). A node with fewer (capacity of both
            sources) is degraded, failed with none. Without an entry for its model, the node's own count label
            (C(nvidia.com/gpu.count) from GPU Feature Discovery, or ACK's C(aliyun.accelerator/nvidia_count)) is
            the expectation."
        type: dict
        default: {}
notes:
  - "B(Health.) Each GPU node has a C(health) entry, V(healthy), V(degraded) or V(failed) (the worst of its health
    problems), judged from the same lists, with no other request. A node is failed by a node condition or taint of
    a health producer (the table below, extended by O(health.signals)), by a device-plugin or DRA kubelet-plugin pod
    that is there but not Ready, by all the GPUs of a resource withdrawn (allocatable 0 below capacity), by no GPU
    where some are expected, or by every DRA GPU tainted; degraded by some GPUs withdrawn (capacity above
    allocatable for a GPU resource: the device plugin marked them unhealthy), by fewer GPUs than expected
    (O(health.expected_gpus), else the node's count label), or by some DRA devices tainted in their ResourceSlice or
    by a DeviceTaintRule (a taint with effect V(None), which only reports, degrades too). Each DRA device listed in
    C(dra.devices) has its own C(health)."
  - "Health: the built-in signals, each checked against its producer's source: the taints the Kubernetes node
    lifecycle controller sets on a node whose Ready condition is False or Unknown, C(node.kubernetes.io/not-ready)
    and C(node.kubernetes.io/unreachable); the EKS node monitoring agent's
    C(AcceleratedHardwareReady=False); GKE's C(XidCriticalError=True) (set by its NVIDIA device plugin's health
    checker); NVIDIA NVSentinel's conditions at V(True): C(GpuMemWatch), C(GpuPcieWatch), C(GpuThermalWatch),
    C(GpuPowerWatch), C(GpuInforomWatch), C(GpuSmWatch), C(GpuNvlinkWatch), C(GpuMcuWatch), C(GpuPmuWatch),
    C(GpuDriverWatch), C(GpuCpusetWatch), C(GpuNvswitchFatalWatch), C(GpuAllWatch), C(SysLogsXIDError),
    C(SysLogsSXIDError), C(SysLogsGPUFallenOff), and the taints its integration guide lists,
    C(nvidia.com/gpu-xid-error), C(nvidia.com/gpu-nvlink-error), C(nvidia.com/syslog-xid-error),
    C(nvidia.com/gpu-error). All are V(failed)."
"""
