# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The option groups of module_utils/options/groups.py, one fragment a group:
kubegpu.scheduling.options.gpu_resources, .node_selection, .sources, .fail_on, .parallelism,
.page_size, .waiting, .eviction, .system_components (the model_labels group is documented by
kubegpu.scheduling.model_labels)."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options: {}
"""

    GPU_RESOURCES = r"""
options:
  resource_names:
    description:
      - Extended resources that count as whole GPUs. MIG resources C(nvidia.com/mig-*) always count too.
      - The first name is the one findings speak of.
    type: list
    elements: str
    default: [nvidia.com/gpu]
"""

    NODE_SELECTION = r"""
options:
  names:
    description:
      - Only these nodes. A name that matches no node is reported.
    type: list
    elements: str
  label_selectors:
    description:
      - Only the nodes that match all of these label selectors, for example V(nvidia.com/gpu.present=true),
        as C(kubectl get nodes -l) takes them. Joined with C(,) into one selector.
    type: list
    elements: str
    default: []
"""

    SOURCES = r"""
options:
  src:
    description:
      - Files, directories (searched for C(.yaml), C(.yml) and C(.json) files, hidden ones skipped) or
        globs to read. One path may be given as a string.
    type: list
    elements: path
  definition:
    description:
      - The same given inline, as one object, a list of objects, or a YAML string (which may hold
        several documents).
    type: raw
"""

    FAIL_ON = r"""
options:
  fail_on:
    description:
      - The lowest severity of finding that fails the task. With V(never) the task only reports.
    type: str
    choices: [error, warning, never]
    default: error
"""

    PARALLELISM = r"""
options:
  parallelism:
    description:
      - How many nodes are worked on at once, from 1 to 256.
    type: int
    default: 16
"""

    PAGE_SIZE = r"""
options:
  page_size:
    description:
      - Items per page of each list call, at least 1.
    type: int
    default: 500
"""

    WAITING = r"""
options:
  wait:
    description:
      - Wait until what the task made is ready.
    type: bool
    default: true
  wait_timeout:
    description:
      - How long to wait, in seconds.
    type: int
    default: 300
"""

    EVICTION = r"""
options:
  evict:
    description:
      - Evict the pods that hold the GPUs taken out of service, through the Eviction API, so that
        PodDisruptionBudgets hold.
      - Without it the GPUs are only kept from new pods; the running pods stay.
    type: bool
    default: false
  eviction_timeout:
    description:
      - Seconds to keep trying the evictions a PodDisruptionBudget refuses, from the first eviction on.
    type: int
    default: 300
  force_delete:
    description:
      - Delete a pod its budget still keeps after O(eviction_timeout), past the budget.
    type: bool
    default: false
"""

    SYSTEM_COMPONENTS = r"""
options:
  system_components:
    description:
      - >-
        The GPU system components (device plugins, GPU Feature Discovery, the GPU Operator's operands, GKE's
        device plugin, driver installer and device injector, Alibaba's gpushare, Volcano's and HAMi's device
        plugins, the AMD and Intel GPU plugins, NVIDIA's DRA kubelet plugin) whose access to GPUs is on purpose.
        M(kubegpu.scheduling.gpu_pod_validate) allows their findings, each with the reason
        C(known GPU system component: <name>); M(kubegpu.scheduling.gpu_node_facts) does not count them as
        GPU use outside the scheduler.
      - A pod spec is a component by what it runs, not by its name, labels or namespace. Every container, init
        and ephemeral ones included, must run one of the component's images (matched by the tail of the image's
        repository path, so a private mirror of the same path matches; tag and digest ignored) with the image's
        own entrypoint or one of the component's published command lines. The same image run with another
        command is judged as any workload.
      - Quantity findings (V(KGPU4xx)) stay findings, as with the allow annotation, whose reason wins when an
        object carries both.
    type: dict
    default: {}
    suboptions:
      builtin:
        description:
          - Use the built-in catalogue. V(false) judges every pod, components included.
        type: bool
        default: true
      extra:
        description:
          - More components, each a dictionary with C(name), C(images) (repository paths such as
            V(acme/gpu-agent), matched at the tail), optionally C(commands) (each a list, the command then its args,
            as the component's manifest sets them; a last element V(...) lets any further arguments follow),
            C(entrypoint_args) (V(true) when the image's entrypoint is the component's binary, so args set without
            a command are its flags) and C(namespaces) (where it usually runs; information only).
        type: list
        elements: dict
        default: []
"""
