# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The option groups of module_utils/options/groups.py, one fragment a group:
kubegpu.scheduling.options.gpu_resources, .node_selection, .sources, .fail_on, .parallelism,
.page_size, .waiting, .eviction."""

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
